//! The webhook service (`service.webhook.<name>`): a request to `url` (plus the template's
//! `path`) with the template's `method` (GET when none) and `body` (the `message` when the
//! template has no `webhook.<name>` part), the service's headers and basic auth. A status
//! outside 2xx is a failure.

use serde_json::Value as Json;

use super::SendError;
use crate::config::WebhookOptions;

/// Sends one webhook notification.
pub async fn send(
    client: &reqwest::Client,
    service: &str,
    opts: &WebhookOptions,
    content: &Json,
) -> Result<(), SendError> {
    let part = content.pointer(&format!(
        "/webhook/{}",
        service.replace('~', "~0").replace('/', "~1")
    ));
    let text = |v: Option<&Json>| v.and_then(Json::as_str).unwrap_or_default().to_owned();
    let (method, body, path) = match part {
        Some(p) => (
            text(p.get("method")),
            text(p.get("body")),
            text(p.get("path")),
        ),
        None => (String::new(), text(content.get("message")), String::new()),
    };
    let method = if method.is_empty() {
        "GET".to_owned()
    } else {
        method
    };
    let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).map_err(|_| {
        SendError::permanent(format!("webhook '{service}': invalid method {method:?}"))
    })?;
    let url = if path.is_empty() {
        opts.url.clone()
    } else {
        format!(
            "{}/{}",
            opts.url.trim_end_matches('/'),
            path.trim_start_matches('/')
        )
    };
    let mut request = client.request(method, &url).body(body);
    for h in &opts.headers {
        request = request.header(h.name.as_str(), h.value.as_str());
    }
    if let Some(auth) = &opts.basic_auth {
        request = request.basic_auth(&auth.username, Some(&auth.password));
    }
    let request = request.build().map_err(|_| {
        SendError::permanent(format!(
            "webhook '{service}': invalid request (url or header)"
        ))
    })?;
    let response = client.execute(request).await.map_err(|e| {
        SendError::transient(format!(
            "webhook '{service}': request failed: {}",
            crate::more_services::kind(&e)
        ))
    })?;
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default();
        let body: String = body.chars().take(200).collect();
        return Err(SendError::transient(format!(
            "webhook '{service}': request failed with status {}: {body}",
            status.as_u16()
        )));
    }
    Ok(())
}
