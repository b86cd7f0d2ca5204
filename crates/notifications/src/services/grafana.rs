//! The Grafana service (`service.grafana`): an annotation, `POST <apiUrl>/annotations` with the
//! API key as a bearer token (usually `$grafana-api-key` from the Secret). The recipient is the
//! annotation's tags separated by `|` (`grafana:web|prod` tags it `web` and `prod`); its text is
//! the message, its time the send's (milliseconds). Only a 200 answer is a success.

use serde_json::{Value as Json, json};

use super::SendError;
use crate::config::GrafanaOptions;

/// The annotation Grafana is sent for `recipient` at `unix_millis`.
pub fn annotation(recipient: &str, content: &Json, unix_millis: i64) -> Json {
    let text = content
        .get("message")
        .and_then(Json::as_str)
        .unwrap_or_default();
    json!({
        "time": unix_millis,
        "isRegion": false,
        "tags": recipient.split('|').collect::<Vec<_>>(),
        "text": text,
    })
}

/// Sends one annotation.
pub async fn send(
    client: &reqwest::Client,
    service: &str,
    opts: &GrafanaOptions,
    recipient: &str,
    content: &Json,
) -> Result<(), SendError> {
    let body = annotation(recipient, content, jiff::Timestamp::now().as_millisecond());
    let url = reqwest::Url::parse(&opts.api_url)
        .map_err(|_| SendError::permanent(format!("grafana '{service}': apiUrl is not a URL")))?;
    let mut url = url;
    let path = format!("{}/annotations", url.path().trim_end_matches('/'));
    url.set_path(&path);
    let response = client
        .post(url)
        .bearer_auth(&opts.api_key)
        .json(&body)
        .send()
        .await
        .map_err(|e| {
            SendError::transient(format!(
                "grafana '{service}': request failed: {}",
                crate::more_services::kind(&e)
            ))
        })?;
    let status = response.status().as_u16();
    if status != 200 {
        let answer = response.text().await.unwrap_or_default();
        let answer: String = answer.chars().take(200).collect();
        return Err(SendError::transient(format!(
            "grafana '{service}': request failed with status {status}: {answer}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn the_recipient_is_the_tags_and_the_message_the_text() {
        assert_eq!(
            super::annotation("web|prod", &json!({"message": "done"}), 1_700_000_000_000),
            json!({"time": 1_700_000_000_000_i64, "isRegion": false, "tags": ["web", "prod"], "text": "done"})
        );
    }
}
