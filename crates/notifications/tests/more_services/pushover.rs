use axum::http::StatusCode;
use serde_json::json;
use sluice_notifications::Config;
use sluice_notifications::services::SlackThreads;

use crate::support::{config, notification, sender, server};

const TOKEN: &str = "azGDORePK8gMaC0QOYAMyEEuzJnyUi";
const USER: &str = "uQiRzpo4DXghDmr9QzzfQu27cmVRsG";

#[tokio::test]
async fn pushover_posts_the_message_for_the_users_key() {
    let (url, rec) = server().await;
    *rec.answer.lock().unwrap() = Some(json!({"status": 1, "request": "5042853c"}).to_string());
    let cfg = config(
        &[(
            "service.pushover",
            format!("token: $pushover-token\napiURL: {url}/1\n"),
        )],
        &[("pushover-token", TOKEN)],
    );
    let content = json!({"message": "Rollout web has been completed."});
    sender()
        .send(
            &cfg,
            &notification("pushover", USER, content),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].method, "POST");
    assert_eq!(got[0].path, "/1/messages.json");
    assert_eq!(
        got[0].headers["content-type"],
        "application/x-www-form-urlencoded"
    );
    let form: Vec<(String, String)> = url::form_urlencoded::parse(got[0].body.as_bytes())
        .into_owned()
        .collect();
    assert!(form.contains(&("token".into(), TOKEN.into())), "{form:?}");
    assert!(form.contains(&("user".into(), USER.into())));
    assert!(form.contains(&("message".into(), "Rollout web has been completed.".into())));
}

#[tokio::test]
async fn pushover_reports_its_errors_and_a_bad_key_without_sending() {
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::BAD_REQUEST);
    *rec.answer.lock().unwrap() =
        Some(json!({"status": 0, "errors": ["user identifier is invalid"]}).to_string());
    let cfg = config(
        &[(
            "service.pushover",
            format!("token: {TOKEN}\napiURL: {url}\n"),
        )],
        &[],
    );
    let send = |recipient: &'static str| {
        let cfg: Config = cfg.clone();
        async move {
            sender()
                .send(
                    &cfg,
                    &notification("pushover", recipient, json!({"message": "m"})),
                    &SlackThreads::new(),
                )
                .await
        }
    };
    let e = send(USER).await.unwrap_err();
    assert_eq!(
        e.message,
        "pushover 'pushover': Errors:\nuser identifier is invalid"
    );
    assert!(!e.permanent);
    let e = send("not-a-key").await.unwrap_err();
    assert_eq!(
        e.message,
        "pushover 'pushover': pushover: invalid recipient token"
    );
    assert!(e.permanent);
    assert_eq!(
        rec.received.lock().unwrap().len(),
        1,
        "a bad key is never sent"
    );
    assert!(!e.message.contains(TOKEN));
}
