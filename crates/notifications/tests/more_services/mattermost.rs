use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sluice_notifications::Config;
use sluice_notifications::services::SlackThreads;

use crate::support::{config, notification, sender, server};

const TOKEN: &str = "mm-bot-token-5up3r53cr3t";

#[tokio::test]
async fn mattermost_posts_the_message_and_attachments_to_the_channel() {
    let (url, rec) = server().await;
    let cfg = config(
        &[(
            "service.mattermost",
            format!("apiURL: {url}\ntoken: $mattermost-token\n"),
        )],
        &[("mattermost-token", TOKEN)],
    );
    let content = json!({
        "message": "Rollout web has been completed.",
        "mattermost": {"attachments": "[{\"title\": \"web\", \"color\": \"#18be52\"}]"}
    });
    sender()
        .send(
            &cfg,
            &notification("mattermost", "ch4nn3l1d", content),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].method, "POST");
    assert_eq!(got[0].path, "/api/v4/posts");
    assert_eq!(got[0].headers["authorization"], format!("Bearer {TOKEN}"));
    assert_eq!(got[0].headers["content-type"], "application/json");
    let body: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(
        body,
        json!({
            "channel_id": "ch4nn3l1d",
            "message": "Rollout web has been completed.",
            "props": {"attachments": [{"title": "web", "color": "#18be52"}]}
        })
    );
}

#[tokio::test]
async fn mattermost_reports_an_error_answer_and_bad_attachments_without_the_token() {
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::FORBIDDEN);
    *rec.answer.lock().unwrap() =
        Some(json!({"id": "api.context.permissions.app_error", "status_code": 403}).to_string());
    let cfg = config(
        &[(
            "service.mattermost",
            format!("apiURL: {url}\ntoken: {TOKEN}\n"),
        )],
        &[],
    );
    let send = |content: Value| {
        let cfg = cfg.clone();
        async move {
            sender()
                .send(
                    &cfg,
                    &notification("mattermost", "ch", content),
                    &SlackThreads::new(),
                )
                .await
        }
    };
    let e = send(json!({"message": "m"})).await.unwrap_err();
    assert!(
        e.message
            .starts_with("mattermost 'mattermost': request to ")
            && e.message.contains("has failed with error code 403 : ")
            && e.message.contains("api.context.permissions.app_error"),
        "{}",
        e.message
    );
    assert!(!e.permanent);
    assert!(!e.message.contains(TOKEN));
    let e = send(json!({"message": "m", "mattermost": {"attachments": "not json"}}))
        .await
        .unwrap_err();
    assert!(
        e.message
            .starts_with("mattermost 'mattermost': failed to unmarshal attachments 'not json' : "),
        "{}",
        e.message
    );
    assert!(e.permanent);
    assert_eq!(
        rec.received.lock().unwrap().len(),
        1,
        "bad attachments are not sent"
    );
}

#[tokio::test]
async fn a_mattermost_setting_of_the_wrong_type_is_a_problem_and_others_still_send() {
    let (url, rec) = server().await;
    let data = BTreeMap::from([
        (
            "service.mattermost".to_owned(),
            format!("apiURL: {url}\ntoken: t\ninsecureSkipVerify: maybe\n"),
        ),
        (
            "service.webhook.hook".to_owned(),
            format!("url: {url}/hook\n"),
        ),
    ]);
    let cfg = Config::parse(&data, &BTreeMap::new());
    let problems: Vec<String> = cfg.problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        problems,
        ["service.mattermost: bad mattermost service settings: a field has the wrong type"]
    );
    sender()
        .send(
            &cfg,
            &notification("hook", "", json!({"message": "still sent"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    assert_eq!(rec.received.lock().unwrap()[0].path, "/hook");
}
