//! The Microsoft Teams service (`service.teams`): a POST of a MessageCard to the incoming
//! webhook of the recipient (`recipientUrls.<recipient>`, usually `$teams-url` from the Secret).
//!
//! The card is built as the notifications engine builds it: `@type` MessageCard, `context`,
//! `title`, `summary`, `text` (the template's `teams.text`, else its `message`), `themeColor`,
//! `sections` (JSON) followed by a section of the `facts` (JSON), and `potentialAction`
//! (JSON). A template's `teams.template` is sent as the whole body instead. Teams answers `1`
//! to a card it took; any other answer is a failure.

use serde_json::{Map, Value as Json, json};

use super::SendError;
use crate::config::TeamsOptions;

/// Sends one Teams notification to `recipient`.
pub async fn send(
    client: &reqwest::Client,
    service: &str,
    opts: &TeamsOptions,
    recipient: &str,
    content: &Json,
) -> Result<(), SendError> {
    let Some(url) = opts.recipient_urls.get(recipient) else {
        return Err(SendError::permanent(format!(
            "teams '{service}': no teams webhook configured for recipient {recipient}"
        )));
    };
    let body = body(service, content)?;
    let response = client
        .post(url)
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| {
            SendError::transient(format!(
                "teams '{service}': request failed: {}",
                crate::more_services::kind(&e)
            ))
        })?;
    let status = response.status().as_u16();
    let answer = response.text().await.unwrap_or_default();
    if answer != "1" {
        let answer: String = answer.chars().take(200).collect();
        return Err(SendError::transient(format!(
            "teams '{service}': webhook post error (status {status}): {answer}"
        )));
    }
    Ok(())
}

/// The request's body: the template's `teams.template` as it is, or the card.
pub fn body(service: &str, content: &Json) -> Result<String, SendError> {
    let teams = content.get("teams");
    let text = |k: &str| {
        teams
            .and_then(|t| t.get(k))
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let whole = text("template");
    if !whole.is_empty() {
        return Ok(whole);
    }
    let parse = |field: &str| -> Result<Option<Json>, SendError> {
        let raw = text(field);
        if raw.is_empty() {
            return Ok(None);
        }
        serde_json::from_str::<Json>(&raw).map(Some).map_err(|e| {
            SendError::permanent(format!(
                "teams '{service}': teams {field} unmarshalling error: {e}"
            ))
        })
    };
    let message = content
        .get("message")
        .and_then(Json::as_str)
        .unwrap_or_default();
    let or = |field: &str, fallback: &str| {
        Some(text(field))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| fallback.to_owned())
    };
    let mut card = Map::new();
    card.insert("@type".into(), json!("MessageCard"));
    card.insert("context".into(), json!("https://schema.org/extensions"));
    card.insert("title".into(), json!(text("title")));
    card.insert("summary".into(), json!(text("summary")));
    card.insert("text".into(), json!(or("text", message)));
    let color = text("themeColor");
    if !color.is_empty() {
        card.insert("themeColor".into(), json!(color));
    }
    let mut sections: Vec<Json> = match parse("sections")? {
        Some(Json::Array(items)) => items,
        Some(_) => return Err(not_a_list(service, "sections")),
        None => Vec::new(),
    };
    match parse("facts")? {
        Some(facts @ Json::Array(_)) => sections.push(json!({ "facts": facts })),
        Some(_) => return Err(not_a_list(service, "facts")),
        None => {}
    }
    if let Some(actions) = parse("potentialAction")? {
        if !actions.is_array() {
            return Err(not_a_list(service, "potentialAction"));
        }
        if actions.as_array().is_some_and(|a| !a.is_empty()) {
            card.insert("potentialAction".into(), actions);
        }
    }
    if !sections.is_empty() {
        card.insert("sections".into(), Json::Array(sections));
    }
    Ok(Json::Object(card).to_string())
}

fn not_a_list(service: &str, field: &str) -> SendError {
    SendError::permanent(format!(
        "teams '{service}': teams {field} unmarshalling error: not a JSON list"
    ))
}

#[cfg(test)]
mod tests {
    use super::body;
    use serde_json::{Value, json};

    #[test]
    fn the_card_has_the_engines_fields() {
        let content = json!({
            "message": "Rollout web has been completed.",
            "teams": {
                "title": "Rollout web",
                "themeColor": "#000080",
                "sections": "[{\"activityTitle\": \"web\"}]",
                "facts": "[{\"name\": \"Strategy\", \"value\": \"Canary\"}]",
                "potentialAction": "[{\"@type\": \"OpenUri\", \"name\": \"Open\", \"targets\": [{\"os\": \"default\", \"uri\": \"http://x\"}]}]"
            }
        });
        let card: Value = serde_json::from_str(&body("teams", &content).unwrap()).unwrap();
        assert_eq!(
            card,
            json!({
                "@type": "MessageCard",
                "context": "https://schema.org/extensions",
                "title": "Rollout web",
                "summary": "",
                "text": "Rollout web has been completed.",
                "themeColor": "#000080",
                "sections": [
                    {"activityTitle": "web"},
                    {"facts": [{"name": "Strategy", "value": "Canary"}]}
                ],
                "potentialAction": [
                    {"@type": "OpenUri", "name": "Open", "targets": [{"os": "default", "uri": "http://x"}]}
                ]
            })
        );
    }

    #[test]
    fn teams_text_wins_over_the_message_and_a_whole_template_is_sent_as_is() {
        let card: Value = serde_json::from_str(
            &body("t", &json!({"message": "m", "teams": {"text": "t"}})).unwrap(),
        )
        .unwrap();
        assert_eq!(card["text"], "t");
        assert_eq!(card.get("sections"), None);
        assert_eq!(card.get("themeColor"), None);
        let raw = body(
            "t",
            &json!({"message": "m", "teams": {"template": "{\"x\":1}"}}),
        )
        .unwrap();
        assert_eq!(raw, "{\"x\":1}");
    }

    #[test]
    fn facts_that_are_not_json_are_a_permanent_failure() {
        let err = body("t", &json!({"teams": {"facts": "[{"}})).unwrap_err();
        assert!(err.permanent);
        assert!(err.message.contains("facts unmarshalling error"), "{err}");
    }
}
