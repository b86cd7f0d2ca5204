//! SigV4 signatures for requests Sluice sends with its own HTTP client (CloudWatch's JSON API,
//! Prometheus on Amazon Managed Prometheus), with the credentials of the default chain.

use std::time::SystemTime;

use aws_config::SdkConfig;
use aws_credential_types::provider::ProvideCredentials as _;
use aws_credential_types::provider::error::CredentialsError;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;

/// One request to sign.
pub struct Request<'a> {
    pub method: &'a str,
    pub url: &'a str,
    /// The headers sent besides the signature's (their names lower-case or not).
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
}

/// The headers to add to `request` (`authorization`, `x-amz-date`, the session token when
/// the credentials have one) for `service` in `region` (the configuration's region when
/// `None`), at `time`.
pub async fn sign_request(
    config: &SdkConfig,
    service: &str,
    region: Option<&str>,
    request: &Request<'_>,
    time: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    let region = match region {
        Some(r) if !r.is_empty() => r.to_string(),
        _ => config
            .region()
            .map(|r| r.to_string())
            .ok_or("no AWS region configured (set AWS_REGION)")?,
    };
    let provider = config
        .credentials_provider()
        .ok_or("no AWS credentials provider configured")?;
    let credentials = provider.provide_credentials().await.map_err(|e| match e {
        // Its own words are "the credential provider was not enabled".
        CredentialsError::CredentialsNotLoaded(_) => "no AWS credentials found (environment, \
            shared files, web identity, container or instance credentials)"
            .to_string(),
        e => format!("AWS credentials: {}", crate::error_message(&e)),
    })?;
    let identity = credentials.into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(&region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| format!("signing {service} request: {e}"))?
        .into();
    let signable = SignableRequest::new(
        request.method,
        request.url,
        request.headers.iter().copied(),
        SignableBody::Bytes(request.body),
    )
    .map_err(|e| format!("signing {service} request: {e}"))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| format!("signing {service} request: {e}"))?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect())
}

/// The endpoint of `service` (its host prefix, `monitoring` for CloudWatch) in `region`:
/// `AWS_ENDPOINT_URL` when the configuration has one, else AWS's public address (China's
/// regions have a domain of their own).
pub fn endpoint(config: &SdkConfig, host_prefix: &str, region: &str) -> String {
    match config.endpoint_url() {
        Some(url) => url.trim_end_matches('/').to_string(),
        None if region.starts_with("cn-") => {
            format!("https://{host_prefix}.{region}.amazonaws.com.cn")
        }
        None => format!("https://{host_prefix}.{region}.amazonaws.com"),
    }
}
