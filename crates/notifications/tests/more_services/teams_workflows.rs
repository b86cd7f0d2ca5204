use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sluice_notifications::Config;
use sluice_notifications::services::SlackThreads;

use crate::support::{config, notification, sender, server};

const TEMPLATE: &str = r#"message: Rollout {{.rollout.metadata.name}} has been completed.
teams-workflows:
  title: Rollout {{.rollout.metadata.name}} completed
  themeColor: Good
  summary: not sent
  facts: |
    [{"name": "Strategy", "value": "{{.rollout.strategy}}"}, {"name": "Replicas", "value": {{.rollout.replicas}}}]
  sections: |
    [{"facts": [{"name": "Namespace", "value": "{{.rollout.metadata.namespace}}"}]}]
  potentialAction: |
    [{"@type": "OpenUri", "name": "Open", "targets": [{"os": "default", "uri": "https://argo/{{.rollout.metadata.name}}"}]}]
"#;

const CARD_TEMPLATE: &str = r#"teams-workflows:
  adaptiveCard: |
    {"type": "AdaptiveCard", "version": "1.4", "body": [{"type": "Container", "items": [{"type": "ColumnSet", "columns": [{"type": "Column", "items": [{"type": "Badge", "text": "{{.rollout.metadata.name}}"}]}]}]}]}
"#;

fn rendered(cfg: &Config, template: &str) -> Value {
    let vars = json!({"rollout": {
        "metadata": {"name": "web", "namespace": "shop"}, "strategy": "Canary", "replicas": 3
    }});
    cfg.templates[template]
        .render(&vars, jiff::Timestamp::UNIX_EPOCH)
        .unwrap()
}

fn workflow(url: &str) -> String {
    format!(
        "{url}/powerautomate/automations/direct/workflows/abc/triggers/manual/paths/invoke?api-version=1&sig=s3cr3t"
    )
}

#[tokio::test]
async fn teams_workflows_posts_an_adaptive_card_to_the_recipients_workflow() {
    let (url, rec) = server().await;
    // Workflows answer 202 Accepted.
    *rec.status.lock().unwrap() = Some(StatusCode::ACCEPTED);
    *rec.answer.lock().unwrap() = Some(String::new());
    let cfg = config(
        &[
            (
                "service.teams-workflows",
                "recipientUrls:\n  releases: $teams-workflows-releases\n".to_owned(),
            ),
            ("template.rollout-completed", TEMPLATE.to_owned()),
            ("template.card", CARD_TEMPLATE.to_owned()),
        ],
        &[("teams-workflows-releases", &workflow(&url))],
    );
    for template in ["rollout-completed", "card"] {
        let content = rendered(&cfg, template);
        sender()
            .send(
                &cfg,
                &notification("teams-workflows", "releases", content),
                &SlackThreads::new(),
            )
            .await
            .unwrap();
    }
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].method, "POST");
    assert_eq!(
        got[0].path,
        "/powerautomate/automations/direct/workflows/abc/triggers/manual/paths/invoke"
    );
    assert_eq!(got[0].headers["content-type"], "application/json");
    let sent: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(sent["type"], "message");
    let attachment = &sent["attachments"][0];
    assert_eq!(
        attachment["contentType"],
        "application/vnd.microsoft.card.adaptive"
    );
    assert_eq!(
        attachment["content"],
        json!({
            "type": "AdaptiveCard",
            "version": "1.4",
            "body": [
                {"type": "TextBlock", "text": "Rollout web completed", "size": "Large",
                 "weight": "Bolder", "color": "Good", "wrap": true},
                {"type": "TextBlock", "text": "Rollout web has been completed.", "wrap": true},
                {"type": "FactSet", "facts": [
                    {"title": "Strategy", "value": "Canary"},
                    {"title": "Replicas", "value": "3"}
                ]},
                {"type": "FactSet", "facts": [{"title": "Namespace", "value": "shop"}]}
            ],
            "actions": [{"type": "Action.OpenUrl", "title": "Open", "url": "https://argo/web"}]
        })
    );
    // The template's own card goes through whole, elements the engine's fields do not know
    // included.
    let sent: Value = serde_json::from_str(&got[1].body).unwrap();
    let card = &sent["attachments"][0]["content"];
    assert_eq!(
        card["body"][0]["items"][0]["columns"][0]["items"][0],
        json!({"type": "Badge", "text": "web"})
    );
}

#[tokio::test]
async fn teams_workflows_reports_its_errors_and_refuses_urls_the_engine_refuses() {
    let (url, rec) = server().await;
    let cfg = config(
        &[(
            "service.teams-workflows",
            "recipientUrls:\n  releases: $ok\n  connector: $connector\n  plain: $plain\n"
                .to_owned(),
        )],
        &[
            ("ok", &workflow(&url)),
            // A webhook of the old connectors is not a Workflows URL.
            ("connector", &format!("{url}/webhookb2/s3cr3t")),
            (
                "plain",
                "http://api.powerautomate.com/powerautomate/x?sig=s3cr3t",
            ),
        ],
    );
    let send = |recipient: &'static str| {
        let cfg = cfg.clone();
        async move {
            sender()
                .send(
                    &cfg,
                    &notification("teams-workflows", recipient, json!({"message": "m"})),
                    &SlackThreads::new(),
                )
                .await
                .unwrap_err()
        }
    };
    *rec.status.lock().unwrap() = Some(StatusCode::BAD_REQUEST);
    *rec.answer.lock().unwrap() = Some("error details".into());
    let e = send("releases").await;
    assert_eq!(
        e.message,
        "teams-workflows 'teams-workflows': teams workflows webhook post error (status 400): error details"
    );
    assert!(!e.permanent);
    *rec.status.lock().unwrap() = Some(StatusCode::INTERNAL_SERVER_ERROR);
    *rec.answer.lock().unwrap() = Some(String::new());
    let e = send("releases").await;
    assert_eq!(
        e.message,
        "teams-workflows 'teams-workflows': teams workflows webhook post error (status 500): no error details provided"
    );
    let e = send("connector").await;
    assert!(e.permanent);
    assert!(
        e.message.starts_with("teams-workflows 'teams-workflows': invalid webhook URL for recipient connector: webhook URL does not appear to be a valid Microsoft Teams Workflows URL"),
        "{}",
        e.message
    );
    let e = send("plain").await;
    assert_eq!(
        e.message,
        "teams-workflows 'teams-workflows': invalid webhook URL for recipient plain: webhook URL must use HTTPS scheme"
    );
    let e = send("nobody").await;
    assert_eq!(
        e.message,
        "teams-workflows 'teams-workflows': no teams-workflows webhook configured for recipient nobody"
    );
    assert!(e.permanent);
    assert_eq!(
        rec.received.lock().unwrap().len(),
        2,
        "refused URLs are never called"
    );
    let e = sender()
        .send(
            &cfg,
            &notification(
                "teams-workflows",
                "releases",
                json!({"teams-workflows": {"facts": "[{"}}),
            ),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert!(e.permanent);
    assert!(
        e.message.starts_with("teams-workflows 'teams-workflows': failed to generate message payload for teams-workflows: teams-workflows facts unmarshalling error"),
        "{}",
        e.message
    );
    assert_eq!(rec.received.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn bad_teams_workflows_settings_are_a_problem_and_the_other_services_still_send() {
    let (url, rec) = server().await;
    let data = BTreeMap::from([
        (
            "service.teams-workflows.broken".to_owned(),
            "recipientUrls:\n  - $secret-url\n".to_owned(),
        ),
        (
            "service.teams-workflows.working".to_owned(),
            format!("recipientUrls:\n  releases: {}\n", workflow(&url)),
        ),
    ]);
    let secret = BTreeMap::from([(
        "secret-url".to_owned(),
        "https://api.powerautomate.com/x?sig=s3cr3t".to_owned(),
    )]);
    let cfg = Config::parse(&data, &secret);
    assert_eq!(cfg.problems.len(), 1, "{:?}", cfg.problems);
    assert_eq!(cfg.problems[0].key, "service.teams-workflows.broken");
    assert_eq!(
        cfg.problems[0].message,
        "bad teams-workflows service settings: a field has the wrong type"
    );
    assert!(!cfg.services.contains_key("broken"));
    sender()
        .send(
            &cfg,
            &notification("working", "releases", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    assert_eq!(rec.received.lock().unwrap().len(), 1);
}
