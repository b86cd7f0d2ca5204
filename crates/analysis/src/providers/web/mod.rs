//! Web: an HTTP request whose JSON response (or the part `jsonPath` selects) is the result.
//!
//! As in Argo: GET unless `method` says otherwise, a body only with POST/PUT, 10 s timeout by
//! default, a non-2xx status is an Error, and a body that is not JSON is taken as a Successful
//! measurement with the body as value (conditions are not evaluated on it). The value is the
//! selected JSON, e.g. `"It worked!"` with its quotes.

use std::time::Duration;

use jsonpath_rust::JsonPath;
use reqwest::Method;
use sluice_api::analysis::{MetricProvider, ProviderKind, WebMetric};
use sluice_api::common::AnalysisPhase;

use super::ProviderError;
use super::http::{authenticate, read_body, request_error, with_headers};
use super::outcome::Outcome;
use super::provider::{Env, Provider};
use crate::expression::json_to_value;
use crate::redact::Redactor;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The web provider (`provider.web`).
pub(crate) struct Web;

/// A web request, checked.
pub(crate) struct Request<'a> {
    web: &'a WebMetric,
    url: &'a str,
    method: Method,
    body: Option<&'a str>,
    json_body: Option<&'a serde_json::Value>,
    timeout: Duration,
    path: String,
}

impl Provider for Web {
    const KIND: ProviderKind = ProviderKind::Web;
    type Config = WebMetric;
    type Query<'a> = Request<'a>;

    fn config(provider: &MetricProvider) -> Option<&WebMetric> {
        provider.web.as_ref()
    }

    fn parse<'a>(_env: Env<'a>, web: &'a WebMetric) -> Result<Request<'a>, ProviderError> {
        let url = web
            .url
            .as_deref()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| ProviderError::new("web provider has no url"))?;
        let method = method(web.method.as_deref())?;
        let body = web.body.as_deref().filter(|b| !b.is_empty());
        let json_body = web.json_body.as_ref();
        if body.is_some() && json_body.is_some() {
            return Err(ProviderError::new(
                "use either body or jsonBody; both cannot exist for a web metric payload",
            ));
        }
        if (body.is_some() || json_body.is_some()) && method == Method::GET {
            return Err(ProviderError::new(
                "body/jsonBody can only be used with POST or PUT web metric methods",
            ));
        }
        let timeout = match web.timeout_seconds {
            Some(t) if t > 0 => Duration::from_secs(t.unsigned_abs()),
            _ => DEFAULT_TIMEOUT,
        };
        let path = json_path(web.json_path.as_deref());
        Ok(Request {
            web,
            url,
            method,
            body,
            json_body,
            timeout,
            path,
        })
    }

    async fn measure<'a>(
        env: Env<'a>,
        request: Request<'a>,
        _redactor: &'a mut Redactor,
    ) -> Result<Outcome, ProviderError> {
        measure(env, request).await
    }
}

async fn measure(env: Env<'_>, request: Request<'_>) -> Result<Outcome, ProviderError> {
    let Request {
        web,
        url,
        method,
        body,
        json_body,
        timeout,
        path,
    } = request;
    let client = env.providers.http(web.insecure.unwrap_or(false));
    let mut request = with_headers(
        client.request(method, url),
        web.headers.as_deref().unwrap_or_default(),
    )?;
    if let Some(body) = body {
        request = request.body(body.to_owned());
    } else if let Some(json) = json_body {
        // `json` also sets Content-Type: application/json, as Argo does for jsonBody.
        request = request.json(json);
    }
    let request = authenticate(client, request, web.authentication.as_ref(), timeout).await?;
    let response = request
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| request_error(&e, timeout))?;
    let status = response.status();
    if !status.is_success() {
        return Err(ProviderError(format!(
            "received non 2xx response code: {}",
            status.as_u16()
        )));
    }
    let bytes = read_body(response).await?;
    let Ok(document) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        return Ok(Outcome {
            phase: Some(AnalysisPhase::Successful),
            value: Some(text),
            ..Default::default()
        });
    };
    let found = document.query(&path).map_err(|err| {
        ProviderError(format!(
            "invalid jsonPath {:?}: {err}",
            web.json_path.as_deref().unwrap_or("{$}")
        ))
    })?;
    let selected = found.first().ok_or_else(|| {
        ProviderError(format!(
            "could not find jsonPath {:?} in the response",
            web.json_path.as_deref().unwrap_or("{$}")
        ))
    })?;
    let value = serde_json::to_string(selected)
        .map_err(|e| ProviderError(format!("could not encode the selected value: {e}")))?;
    Ok(Outcome::judged(env.metric, value, &json_to_value(selected)))
}

fn method(method: Option<&str>) -> Result<Method, ProviderError> {
    match method.filter(|m| !m.is_empty()) {
        None => Ok(Method::GET),
        Some(m) => Method::from_bytes(m.to_ascii_uppercase().as_bytes())
            .map_err(|_| ProviderError(format!("invalid web metric method {m:?}"))),
    }
}

/// A Kubernetes-style JSONPath (`{$.data.ok}`, `{.data.ok}`) as an RFC 9535 query (`$.data.ok`).
fn json_path(path: Option<&str>) -> String {
    let path = path
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .unwrap_or("{$}");
    let inner = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path)
        .trim();
    if inner.starts_with('$') {
        inner.to_owned()
    } else if inner.starts_with('.') || inner.starts_with('[') {
        format!("${inner}")
    } else {
        format!("$.{inner}")
    }
}

#[cfg(test)]
mod tests;
