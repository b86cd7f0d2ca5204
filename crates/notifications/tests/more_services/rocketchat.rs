use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sluice_notifications::Config;
use sluice_notifications::services::SlackThreads;

use crate::routes::Routes;
use crate::support::{config, notification, sender, server};

const PASSWORD: &str = "rc-pa55w0rd-53cr3t";

/// A Rocket.Chat server under `/chat` that logs the bot in and answers posts with `post`.
async fn rocket_chat(post: (u16, Value)) -> (String, Routes) {
    let (url, rc) = Routes::start().await;
    rc.answer(
        "POST",
        "/chat/api/v1/login",
        200,
        json!({"status": "success", "data": {"authToken": "auth-t0ken", "userId": "u53r1d"}}),
    );
    rc.answer("POST", "/chat/api/v1/chat.postMessage", post.0, post.1);
    (format!("{url}/chat"), rc)
}

#[tokio::test]
async fn rocketchat_logs_in_then_posts_to_the_channel_with_the_login() {
    let (url, rc) = rocket_chat((200, json!({"success": true, "message": {"_id": "m1"}}))).await;
    let cfg = config(
        &[(
            "service.rocketchat",
            format!(
                "serverUrl: {url}\nemail: $rocketchat-email\npassword: $rocketchat-password\nalias: Argo\nicon: ':rocket:'\navatar: https://example.com/argo.png\n"
            ),
        )],
        &[
            ("rocketchat-email", "bot@example.com"),
            ("rocketchat-password", PASSWORD),
        ],
    );
    let content = json!({
        "message": "Rollout web has been completed.",
        "rocketchat": {"attachments": "[{\"title\": \"web\", \"color\": \"#18be52\"}]"}
    });
    sender()
        .send(
            &cfg,
            &notification("rocketchat", "#releases", content),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let got = rc.hits();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].method, "POST");
    assert_eq!(got[0].path, "/chat/api/v1/login");
    assert_eq!(
        got[0].headers["content-type"],
        "application/x-www-form-urlencoded"
    );
    assert_eq!(got[1].method, "POST");
    assert_eq!(got[1].path, "/chat/api/v1/chat.postMessage");
    assert_eq!(got[1].headers["x-auth-token"], "auth-t0ken");
    assert_eq!(got[1].headers["x-user-id"], "u53r1d");
    assert_eq!(
        got[1].body,
        json!({
            "channel": "#releases",
            "text": "Rollout web has been completed.",
            "alias": "Argo",
            "emoji": ":rocket:",
            "avatar": "https://example.com/argo.png",
            "attachments": [{"color": "#18be52", "collapsed": false, "title": "web"}]
        })
    );
}

#[tokio::test]
async fn rocketchat_sends_the_login_as_a_form() {
    let (url, rec) = server().await;
    *rec.answer.lock().unwrap() =
        Some(json!({"status": "error", "error": "stop here"}).to_string());
    let cfg = config(
        &[(
            "service.rocketchat",
            format!("serverUrl: {url}\nemail: bot@example.com\npassword: {PASSWORD}\n"),
        )],
        &[],
    );
    let e = sender()
        .send(
            &cfg,
            &notification("rocketchat", "GENERAL", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.message, "rocketchat 'rocketchat': stop here");
    let got = rec.received.lock().unwrap().clone();
    let form: Vec<(String, String)> = url::form_urlencoded::parse(got[0].body.as_bytes())
        .into_owned()
        .collect();
    assert_eq!(
        form,
        [
            ("user".to_owned(), "bot@example.com".to_owned()),
            ("password".to_owned(), PASSWORD.to_owned())
        ]
    );
}

#[tokio::test]
async fn rocketchat_reports_a_refused_login_in_the_clients_words_without_the_password() {
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::UNAUTHORIZED);
    *rec.answer.lock().unwrap() = Some(
        json!({"status": "error", "error": "Unauthorized", "message": "You must be logged in to do this."})
            .to_string(),
    );
    let cfg = config(
        &[(
            "service.rocketchat",
            format!("serverUrl: {url}\nemail: bot@example.com\npassword: {PASSWORD}\n"),
        )],
        &[],
    );
    let e = sender()
        .send(
            &cfg,
            &notification("rocketchat", "GENERAL", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.message, "rocketchat 'rocketchat': Unauthorized");
    assert!(!e.permanent);
    assert!(!e.message.contains(PASSWORD));
    assert_eq!(
        rec.received.lock().unwrap().len(),
        1,
        "no post without a login"
    );

    // A post the server refuses after a login.
    let (url, rc) =
        rocket_chat((400, json!({"success": false, "error": "error-not-allowed"}))).await;
    let cfg = config(
        &[(
            "service.rocketchat",
            format!("serverUrl: {url}\nemail: bot@example.com\npassword: {PASSWORD}\n"),
        )],
        &[],
    );
    let e = sender()
        .send(
            &cfg,
            &notification("rocketchat", "GENERAL", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.message, "rocketchat 'rocketchat': error-not-allowed");
    assert_eq!(rc.hits().len(), 2);
}

#[tokio::test]
async fn rocketchat_settings_of_the_wrong_type_are_a_problem_and_others_still_send() {
    let (url, rec) = server().await;
    let data = BTreeMap::from([
        (
            "service.rocketchat".to_owned(),
            "serverUrl: https://chat.example.com\nemail: {a: b}\npassword: p\n".to_owned(),
        ),
        (
            "service.rocketchat.nowhere".to_owned(),
            "email: e\npassword: p\n".to_owned(),
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
        ["service.rocketchat: bad rocketchat service settings: a field has the wrong type"]
    );
    let e = sender()
        .send(
            &cfg,
            &notification("nowhere", "#a", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.message, "rocketchat 'nowhere': serverUrl is not set");
    assert!(e.permanent);
    sender()
        .send(
            &cfg,
            &notification("hook", "", json!({"message": "still sent"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, "/hook");
}
