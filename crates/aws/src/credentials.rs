//! Credentials other than the default chain's, for requests signed with [`crate::sign_request`]:
//! a named profile of the shared files, and a role assumed through STS. Prometheus' SigV4
//! settings (`profile`, `roleArn`) name them.

use aws_config::SdkConfig;
use aws_config::profile::ProfileFileCredentialsProvider;
use aws_config::provider_config::ProviderConfig;
use aws_config::sts::AssumeRoleProvider;
use aws_credential_types::provider::SharedCredentialsProvider;

/// The credentials of `profile` in the shared files (`~/.aws/credentials` and `~/.aws/config`,
/// or the files `AWS_SHARED_CREDENTIALS_FILE` and `AWS_CONFIG_FILE` name), and of nothing else:
/// a profile named explicitly wins over the environment's keys, as in the Go SDK Argo uses.
/// Profiles that assume roles or use SSO reach AWS through `base`'s HTTP client.
pub fn profile_credentials(base: &SdkConfig, profile: &str) -> SharedCredentialsProvider {
    let mut config = ProviderConfig::without_region().with_region(base.region().cloned());
    if let Some(http) = base.http_client() {
        config = config.with_http_client(http);
    }
    if let Some(sleep) = base.sleep_impl() {
        config = config.with_sleep_impl(sleep);
    }
    SharedCredentialsProvider::new(
        ProfileFileCredentialsProvider::builder()
            .configure(&config)
            .profile_name(profile)
            .build(),
    )
}

/// `role_arn` assumed through STS in `region` with the credentials of `source`, for a session
/// named as Go's SDK names it (the time in nanoseconds). STS is reached as `base` says (its
/// endpoint override, HTTP client and retries). Each call of the provider asks STS anew.
pub async fn assume_role(
    base: &SdkConfig,
    source: SharedCredentialsProvider,
    role_arn: &str,
    region: &str,
) -> Result<SharedCredentialsProvider, String> {
    // The SDK's builder panics on a configuration without a clock; a loaded one has it.
    if base.time_source().is_none() {
        return Err("the AWS configuration has no time source to assume a role with".into());
    }
    let session = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos().to_string())
        .unwrap_or_else(|_| "0".to_string());
    Ok(SharedCredentialsProvider::new(
        AssumeRoleProvider::builder(role_arn)
            .configure(base)
            .region(aws_config::Region::new(region.to_string()))
            .session_name(session)
            .build_from_provider(source)
            .await,
    ))
}

/// `base` signing with `credentials` instead of its own.
pub fn with_credentials(base: &SdkConfig, credentials: SharedCredentialsProvider) -> SdkConfig {
    base.to_builder().credentials_provider(credentials).build()
}
