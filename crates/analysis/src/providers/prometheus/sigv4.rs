//! SigV4 signing of Prometheus queries, for Amazon Managed Service for Prometheus, as Argo does
//! it (Prometheus' SigV4 round tripper).
//!
//! As in Argo, queries are signed only when the address contains `aps-workspaces` (AMP's
//! host) and `authentication.sigv4` sets a field; otherwise those settings are ignored. The
//! credentials are the named `profile`'s in the shared files, else the default chain's, and
//! are checked before the query is sent; with `roleArn`, that role is assumed through STS with
//! them. Requests are signed for service `aps` in `region`, else the chain's region. What is
//! signed is the method, URL, body, host and content type: Argo adds custom headers after
//! signing, and the signature replaces an OAuth2 token.

use std::time::SystemTime;

use reqwest::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use sluice_api::analysis::{Authentication, Sigv4Config};
use sluice_aws::SdkConfig;
use sluice_aws::aws_credential_types::provider::error::CredentialsError;
use sluice_aws::aws_credential_types::provider::{
    ProvideCredentials as _, SharedCredentialsProvider,
};

use super::super::ProviderError;

/// AMP's query API, the service its signatures are scoped to.
const SERVICE: &str = "aps";

/// The SigV4 settings to sign with, if Argo would sign for this address.
pub(super) fn wanted<'a>(
    address: &str,
    authentication: Option<&'a Authentication>,
) -> Option<&'a Sigv4Config> {
    let sigv4 = authentication?.sigv4.as_ref()?;
    let set = |field: &Option<String>| field.as_deref().is_some_and(|f| !f.is_empty());
    let any_set = set(&sigv4.region) || set(&sigv4.profile) || set(&sigv4.role_arn);
    (address.contains("aps-workspaces") && any_set).then_some(sigv4)
}

/// Signs requests with credentials found once, when the measurement starts.
pub(super) struct Signer {
    config: SdkConfig,
    region: String,
}

impl Signer {
    /// Finds the credentials and the region, with Argo's messages when they are not there.
    pub(super) async fn new(aws: &SdkConfig, sigv4: &Sigv4Config) -> Result<Self, ProviderError> {
        let non_empty = |field: &Option<String>| field.clone().filter(|f| !f.is_empty());
        let profile = non_empty(&sigv4.profile);
        let source = match &profile {
            Some(profile) => sluice_aws::profile_credentials(aws, profile),
            None => aws.credentials_provider().ok_or_else(|| {
                ProviderError::new(
                    "could not get SigV4 credentials: no AWS credentials provider configured",
                )
            })?,
        };
        let credentials = source.provide_credentials().await.map_err(|e| {
            // "Not loaded" says only "the credential provider was not enabled": name where
            // the credentials were looked for instead.
            let why = match (&e, &profile) {
                (CredentialsError::CredentialsNotLoaded(_), Some(profile)) => format!(
                    "no credentials for profile {profile:?} in the shared credentials and config files"
                ),
                (CredentialsError::CredentialsNotLoaded(_), None) => {
                    "no credentials in the default chain (environment, shared files, web identity, container, instance)".to_owned()
                }
                _ => sluice_aws::error_message(&e),
            };
            ProviderError(format!("could not get SigV4 credentials: {why}"))
        })?;
        let region = non_empty(&sigv4.region)
            .or_else(|| aws.region().map(|r| r.to_string()))
            .ok_or_else(|| {
                ProviderError::new("region not configured in sigv4 or in default credentials chain")
            })?;
        let credentials = SharedCredentialsProvider::new(credentials);
        let credentials = match non_empty(&sigv4.role_arn) {
            Some(role) => sluice_aws::assume_role(aws, credentials, &role, &region)
                .await
                .map_err(|e| ProviderError(format!("could not assume role {role}: {e}")))?,
            None => credentials,
        };
        Ok(Self {
            config: sluice_aws::with_credentials(aws, credentials),
            region,
        })
    }

    /// Adds the signature's headers to `request` (an assumed role's credentials are asked for
    /// here, as Argo asks for them when it signs).
    pub(super) async fn sign(&self, request: &mut reqwest::Request) -> Result<(), ProviderError> {
        let url = request.url().to_string();
        let content_type = request
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let headers: Vec<(&str, &str)> = content_type
            .iter()
            .map(|v| ("content-type", v.as_str()))
            .collect();
        let body = request
            .body()
            .and_then(|b| b.as_bytes())
            .unwrap_or_default();
        let unsigned = sluice_aws::Request {
            method: request.method().as_str(),
            url: &url,
            headers: &headers,
            body,
        };
        let signature = sluice_aws::sign_request(
            &self.config,
            SERVICE,
            Some(&self.region),
            &unsigned,
            SystemTime::now(),
        )
        .await
        .map_err(|e| ProviderError(format!("failed to sign request: {e}")))?;
        for (name, value) in signature {
            let name = HeaderName::from_bytes(name.as_bytes());
            let value = HeaderValue::from_str(&value);
            let (Ok(name), Ok(value)) = (name, value) else {
                return Err(ProviderError::new(
                    "failed to sign request: the signature is not a valid header",
                ));
            };
            request.headers_mut().insert(name, value);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
