use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sluice_notifications::services::SlackThreads;
use sluice_notifications::{Config, Problem};

use crate::support::{config, notification, sender, server};

const KEY: &str = "eb243592-faa2-4ba2-a551q-1afdf565c889";

#[tokio::test]
async fn opsgenie_creates_an_alert_for_the_team_with_its_key() {
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::ACCEPTED);
    *rec.answer.lock().unwrap() = Some(
        json!({"result": "Request will be processed", "took": 0.302, "requestId": "43a29c5c"})
            .to_string(),
    );
    let host = url.trim_start_matches("http://");
    // The keys as the documentation writes them: `Id`, `Type`, `Name`, `Username`.
    let cfg = config(
        &[(
            "service.opsgenie",
            format!("apiUrl: {host}\napiKeys:\n  ops-team: $opsgenie-key\n"),
        )],
        &[("opsgenie-key", KEY)],
    );
    let content = json!({
        "message": "Rollout web has been aborted.",
        "opsgenie": {
            "description": "Rollout: web\nPhase: Degraded\n",
            "priority": "P1",
            "alias": "web",
            "note": "Error from Sluice!",
            "actions": ["Restart"],
            "tags": ["Critical"],
            "visibleTo": [{"Id": "team-id", "Type": "team"}, {"Username": "trinity@example.com", "Type": "user"}],
            "details": {"environment": "production", "replicas": 3},
            "entity": "Rollout",
            "user": "John Doe",
        }
    });
    sender()
        .send(
            &cfg,
            &notification("opsgenie", "ops-team", content),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].method, "POST");
    assert_eq!(got[0].path, "/v2/alerts");
    assert_eq!(got[0].headers["authorization"], format!("GenieKey {KEY}"));
    assert_eq!(
        got[0].headers["content-type"],
        "application/json; charset=utf-8"
    );
    assert_eq!(got[0].headers["accept"], "application/json");
    let body: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(
        body,
        json!({
            "message": "Rollout web has been aborted.",
            "description": "Rollout: web\nPhase: Degraded\n",
            "priority": "P1",
            "alias": "web",
            "note": "Error from Sluice!",
            "actions": ["Restart"],
            "tags": ["Critical"],
            "visibleTo": [
                {"type": "team", "id": "team-id", "username": ""},
                {"type": "user", "username": "trinity@example.com"}
            ],
            "details": {"environment": "production", "replicas": "3"},
            "entity": "Rollout",
            "user": "John Doe",
            "responders": [{"type": "team", "id": "ops-team", "username": ""}],
            "source": "Argo CD",
        })
    );
}

#[tokio::test]
async fn opsgenie_reports_its_error_answer_and_a_team_without_a_key() {
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::UNPROCESSABLE_ENTITY);
    *rec.answer.lock().unwrap() = Some(
        json!({"message": "Request body is not processable. Please check the errors.",
            "errors": {"message": "Message can not be empty."}, "took": 0.001, "requestId": "r-1"})
        .to_string(),
    );
    let host = url.trim_start_matches("http://");
    let cfg = config(
        &[(
            "service.opsgenie",
            format!("apiUrl: {host}\napiKeys: {{ops-team: {KEY}}}\n"),
        )],
        &[],
    );
    let send = |recipient: &'static str, content: Value| {
        let cfg: Config = cfg.clone();
        async move {
            sender()
                .send(
                    &cfg,
                    &notification("opsgenie", recipient, content),
                    &SlackThreads::new(),
                )
                .await
        }
    };
    let e = send("ops-team", json!({"message": "m"})).await.unwrap_err();
    assert_eq!(
        e.message,
        "opsgenie 'opsgenie': Error occurred with Status code: 422, Message: Request body is not processable. Please check the errors., Took: 0.001000, RequestId: r-1, Error Detail: map[message:Message can not be empty.]"
    );
    assert!(!e.permanent);
    assert!(!e.message.contains(KEY));
    assert!(!format!("{cfg:?}").contains(KEY));

    let e = send("dev-team", json!({"message": "m"})).await.unwrap_err();
    assert_eq!(
        e.message,
        "opsgenie 'opsgenie': no API key configured for recipient dev-team"
    );
    assert!(e.permanent);
    let e = send(
        "ops-team",
        json!({"message": "m", "opsgenie": {"priority": "P2"}}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        e.message,
        "opsgenie 'opsgenie': opsgenie notification description is missing"
    );
    assert!(e.permanent);
    assert_eq!(
        rec.received.lock().unwrap().len(),
        1,
        "only the first was sent"
    );
}

#[tokio::test]
async fn opsgenie_keys_that_are_not_a_map_are_a_problem_and_the_rest_still_sends() {
    let (url, rec) = server().await;
    let data: BTreeMap<String, String> = [
        (
            "service.opsgenie",
            "apiUrl: api.opsgenie.com\napiKeys: [$key]\n".to_owned(),
        ),
        ("service.webhook.hook", format!("url: {url}/hook\n")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let secret = BTreeMap::from([("key".to_owned(), KEY.to_owned())]);
    let cfg = Config::parse(&data, &secret);
    assert_eq!(
        cfg.problems,
        [Problem {
            key: "service.opsgenie".into(),
            message: "bad opsgenie service settings: a field has the wrong type".into(),
        }]
    );
    assert!(!cfg.services.contains_key("opsgenie"));
    sender()
        .send(
            &cfg,
            &notification("hook", "", json!({"message": "still here"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, "/hook");
    assert_eq!(got[0].body, "still here");
}
