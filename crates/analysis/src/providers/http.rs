//! HTTP plumbing shared by the providers: clients, headers, OAuth2 tokens, bounded bodies and
//! readable error texts.

use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use reqwest::{RequestBuilder, Response};
use sluice_api::analysis::{Authentication, OAuth2Config, WebMetricHeader};

use super::ProviderError;

/// Responses larger than this are refused; measurements only need a small document.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

pub(crate) fn build_client(insecure: bool) -> Result<reqwest::Client, ProviderError> {
    // reqwest is built without a crypto provider of its own and panics when none is
    // installed; report that instead.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        return Err(ProviderError::new(
            "no rustls crypto provider is installed for the process",
        ));
    }
    reqwest::Client::builder()
        .user_agent(concat!("sluice/", env!("CARGO_PKG_VERSION")))
        .tls_danger_accept_invalid_certs(insecure)
        .build()
        .map_err(|err| ProviderError(format!("failed to build HTTP client: {}", chain(&err))))
}

/// Sets each header (a later key replaces an earlier one, as Go's `Header.Set`).
pub(crate) fn with_headers(
    mut request: RequestBuilder,
    headers: &[WebMetricHeader],
) -> Result<RequestBuilder, ProviderError> {
    let mut map = reqwest::header::HeaderMap::new();
    for header in headers {
        let key = header.key.as_deref().unwrap_or_default();
        let name = HeaderName::from_bytes(key.as_bytes())
            .map_err(|_| ProviderError(format!("invalid header name {key:?}")))?;
        let value = HeaderValue::from_str(header.value.as_deref().unwrap_or_default())
            .map_err(|_| ProviderError(format!("invalid value for header {key:?}")))?;
        map.insert(name, value);
    }
    request = request.headers(map);
    Ok(request)
}

/// Adds the credentials `authentication` asks for: OAuth2 client credentials are exchanged for
/// a bearer token; without them, `basicAuth` is sent as HTTP basic authentication. SigV4 is Prometheus' own (it signs the finished request); the web provider
/// ignores it, as Argo's does.
pub(crate) async fn authenticate(
    client: &reqwest::Client,
    request: RequestBuilder,
    authentication: Option<&Authentication>,
    timeout: Duration,
) -> Result<RequestBuilder, ProviderError> {
    let Some(auth) = authentication else {
        return Ok(request);
    };
    match (&auth.oauth2, &auth.basic_auth) {
        (Some(oauth2), _) if oauth2.token_url.as_deref().is_some_and(|u| !u.is_empty()) => {
            let token = oauth2_token(client, oauth2, timeout).await?;
            Ok(request.bearer_auth(token))
        }
        (_, Some(basic)) if basic.username.as_deref().is_some_and(|u| !u.is_empty()) => {
            let username = basic.username.as_deref().unwrap_or_default();
            Ok(request.basic_auth(username, basic.password.as_deref()))
        }
        _ => Ok(request),
    }
}

/// The OAuth2 client-credentials grant. Like Go's `clientcredentials` it first sends the
/// client's credentials as HTTP Basic auth and, if the server refuses, in the form body.
async fn oauth2_token(
    client: &reqwest::Client,
    config: &OAuth2Config,
    timeout: Duration,
) -> Result<String, ProviderError> {
    let url = config.token_url.as_deref().unwrap_or_default();
    let id = config.client_id.as_deref().unwrap_or_default();
    let secret = config.client_secret.as_deref().unwrap_or_default();
    let scopes = config.scopes.clone().unwrap_or_default().join(" ");
    let mut form = vec![("grant_type", "client_credentials")];
    if !scopes.is_empty() {
        form.push(("scope", scopes.as_str()));
    }
    let basic = client
        .post(url)
        .basic_auth(id, Some(secret))
        .form(&form)
        .timeout(timeout);
    let response = basic.send().await.map_err(|e| request_error(&e, timeout))?;
    let response = if matches!(response.status().as_u16(), 400 | 401) {
        let mut in_body = form.clone();
        in_body.push(("client_id", id));
        in_body.push(("client_secret", secret));
        client
            .post(url)
            .form(&in_body)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| request_error(&e, timeout))?
    } else {
        response
    };
    let status = response.status();
    let body = read_body(response).await?;
    if !status.is_success() {
        return Err(ProviderError(format!(
            "oauth2 token request returned {}: {}",
            status.as_u16(),
            snippet(&body)
        )));
    }
    let json: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| ProviderError(format!("oauth2 token response is not JSON: {e}")))?;
    json.get("access_token")
        .and_then(|t| t.as_str())
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| ProviderError::new("oauth2 token response has no access_token"))
}

/// Reads a response body, refusing overly large ones.
pub(crate) async fn read_body(mut response: Response) -> Result<Vec<u8>, ProviderError> {
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_BODY_BYTES {
                    return Err(ProviderError(format!(
                        "response body exceeds {} MiB",
                        MAX_BODY_BYTES / (1024 * 1024)
                    )));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(err) => {
                return Err(ProviderError(format!(
                    "failed to read response: {}",
                    chain(&err)
                )));
            }
        }
    }
}

/// A request error as one line, e.g. `request to http://h/x timed out after 10s` or
/// `error sending request for url (http://h/x): client error (Connect): tcp connect error: ...`.
pub(crate) fn request_error(err: &reqwest::Error, timeout: Duration) -> ProviderError {
    if err.is_timeout() {
        let url = err.url().map(|u| u.as_str()).unwrap_or("the server");
        return ProviderError(format!(
            "request to {url} timed out after {}",
            format_duration(timeout)
        ));
    }
    ProviderError(chain(err))
}

/// An error and its sources, joined with `: `, without repeating a source already quoted.
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// The start of a body for an error message, on one line.
pub(crate) fn snippet(body: &[u8]) -> String {
    const MAX: usize = 512;
    let text = String::from_utf8_lossy(body);
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.chars().count() > MAX {
        format!("{}...", text.chars().take(MAX).collect::<String>())
    } else {
        text
    }
}

pub(crate) fn format_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// `address` + `path`, with one slash between them.
pub(crate) fn join_url(address: &str, path: &str) -> String {
    format!(
        "{}/{}",
        address.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_and_snippets() {
        assert_eq!(
            join_url("http://h:9090/", "/api/v1/query"),
            "http://h:9090/api/v1/query"
        );
        assert_eq!(
            join_url("http://h/prom", "api/v1/query"),
            "http://h/prom/api/v1/query"
        );
        assert_eq!(snippet(b"a\n  b"), "a b");
        assert_eq!(snippet(&[b'x'; 600]).len(), 515);
        assert_eq!(format_duration(Duration::from_secs(10)), "10s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn bad_headers_are_errors() {
        super::super::test_support::install_crypto();
        let client = build_client(false).unwrap();
        let header = |k: &str, v: &str| WebMetricHeader {
            key: Some(k.into()),
            value: Some(v.into()),
        };
        let err = with_headers(client.get("http://x"), &[header("bad key", "v")]).unwrap_err();
        assert_eq!(err.0, "invalid header name \"bad key\"");
        let err = with_headers(client.get("http://x"), &[header("k", "a\nb")]).unwrap_err();
        assert_eq!(err.0, "invalid value for header \"k\"");
        assert!(with_headers(client.get("http://x"), &[header("X-Scope-OrgID", "t")]).is_ok());
    }
}
