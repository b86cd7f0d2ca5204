//! The webhook and Slack services against a local HTTP server that records what it receives.

mod support;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sluice_notifications::services::{SLACK_THREADS, SlackThreads, slack_threads};
use support::{config, notification, sender, server};

#[tokio::test]
async fn a_webhook_sends_the_templates_method_path_and_body_with_headers_and_basic_auth() {
    let (url, rec) = server().await;
    let cfg = config(
        &[(
            "service.webhook.hook",
            format!(
                "url: {url}/base/\nheaders:\n- name: Content-Type\n  value: application/json\n- name: X-Token\n  value: $hook-token\nbasicAuth:\n  username: bot\n  password: $hook-pass\n"
            ),
        )],
        &[("hook-token", "t0ken"), ("hook-pass", "s3cret")],
    );
    let n = notification(
        "hook",
        "",
        json!({"message": "plain", "webhook": {"hook": {"method": "POST", "path": "/rollouts/web", "body": "{\"name\":\"web\"}"}}}),
    );
    let sent = sender().send(&cfg, &n, &SlackThreads::new()).await.unwrap();
    assert_eq!(sent.slack_thread, None);
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].method, "POST");
    assert_eq!(got[0].path, "/base/rollouts/web");
    assert_eq!(got[0].body, "{\"name\":\"web\"}");
    assert_eq!(got[0].headers["x-token"], "t0ken");
    assert_eq!(got[0].headers["content-type"], "application/json");
    // base64("bot:s3cret")
    assert_eq!(got[0].headers["authorization"], "Basic Ym90OnMzY3JldA==");
}

#[tokio::test]
async fn a_webhook_without_its_own_part_sends_the_message_with_get() {
    let (url, rec) = server().await;
    let cfg = config(&[("service.webhook", format!("url: {url}/plain"))], &[]);
    let n = notification(
        "webhook",
        "",
        json!({"message": "Rollout web has been completed."}),
    );
    sender().send(&cfg, &n, &SlackThreads::new()).await.unwrap();
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got[0].method, "GET");
    assert_eq!(got[0].path, "/plain");
    assert_eq!(got[0].body, "Rollout web has been completed.");
}

#[tokio::test]
async fn a_webhook_error_status_or_no_server_is_a_failure_that_names_no_secret() {
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::SERVICE_UNAVAILABLE);
    let cfg = config(
        &[
            ("service.webhook.hook", format!("url: {url}/$hook-token")),
            (
                "service.webhook.gone",
                "url: http://127.0.0.1:9/$hook-token".to_owned(),
            ),
        ],
        &[("hook-token", "t0ken")],
    );
    let err = sender()
        .send(
            &cfg,
            &notification("hook", "", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert!(err.message.contains("status 503"), "{err}");
    assert!(!err.message.contains("t0ken"), "{err}");
    assert!(!err.permanent);
    let err = sender()
        .send(
            &cfg,
            &notification("gone", "", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert!(err.message.contains("webhook 'gone'"), "{err}");
    assert!(!err.message.contains("t0ken"), "{err}");
    let err = sender()
        .send(
            &cfg,
            &notification("nope", "", json!({})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert!(err.permanent);
}

#[tokio::test]
async fn slack_posts_messages_with_attachments_and_blocks_and_threads_them_by_grouping_key() {
    let (url, rec) = server().await;
    let cfg = config(
        &[(
            "service.slack",
            format!(
                "token: $slack-token\napiURL: {url}/api/\nusername: rollouts\nicon: ':rocket:'\n"
            ),
        )],
        &[("slack-token", "xoxb-123")],
    );
    let content = json!({
        "message": "Rollout web has been paused.",
        "slack": {
            "attachments": "[{\"title\": \"web\", \"color\": \"#18be52\"}]",
            "blocks": "[{\"type\": \"section\", \"text\": {\"type\": \"mrkdwn\", \"text\": \"hi\"}}]",
            "groupingKey": "web-2",
            "notifyBroadcast": true
        }
    });
    let n = notification("slack", "releases", content.clone());
    let sent = sender().send(&cfg, &n, &SlackThreads::new()).await.unwrap();
    let (thread, key, ts) = sent.slack_thread.clone().unwrap();
    assert_eq!((thread.as_str(), key.as_str()), ("slack:releases", "web-2"));
    // The thread is recorded on the Rollout; a later message of the group (after a restart:
    // read back from the annotation) goes into it.
    let mut threads = SlackThreads::new();
    threads.entry(thread).or_default().insert(key, ts.clone());
    let annotations = [(
        SLACK_THREADS.to_string(),
        serde_json::to_string(&threads).unwrap(),
    )]
    .into();
    let threads = slack_threads(&annotations);
    let sent = sender().send(&cfg, &n, &threads).await.unwrap();
    assert_eq!(sent.slack_thread, None);

    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].path, "/api/chat.postMessage");
    assert_eq!(got[0].headers["authorization"], "Bearer xoxb-123");
    let first: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(first["channel"], "releases");
    assert_eq!(first["text"], "Rollout web has been paused.");
    assert_eq!(first["attachments"][0]["title"], "web");
    assert_eq!(first["blocks"][0]["type"], "section");
    assert_eq!(first["username"], "rollouts");
    assert_eq!(first["icon_emoji"], ":rocket:");
    assert_eq!(first.get("thread_ts"), None);
    let second: Value = serde_json::from_str(&got[1].body).unwrap();
    assert_eq!(second["thread_ts"], json!(ts));
    assert_eq!(second["reply_broadcast"], true);
}

#[tokio::test]
async fn slack_update_policy_updates_the_threads_first_message() {
    let (url, rec) = server().await;
    let cfg = config(
        &[("service.slack", format!("token: t\napiURL: {url}/api"))],
        &[],
    );
    let content =
        json!({"message": "m", "slack": {"groupingKey": "g", "deliveryPolicy": "Update"}});
    let threads: SlackThreads = [(
        "slack:c".to_string(),
        [("g".to_string(), "1.5".to_string())].into(),
    )]
    .into();
    sender()
        .send(&cfg, &notification("slack", "c", content), &threads)
        .await
        .unwrap();
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, "/api/chat.update");
    let body: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(body["ts"], "1.5");
}

#[tokio::test]
async fn a_slack_error_answer_is_a_failure() {
    let (url, _rec) = server().await;
    let cfg = config(
        &[(
            "service.slack",
            format!("token: $slack-token\napiURL: {url}/failing/"),
        )],
        &[("slack-token", "xoxb-123")],
    );
    let err = sender()
        .send(
            &cfg,
            &notification("slack", "c", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.message, "slack 'slack': channel_not_found");
    let bad = json!({"message": "m", "slack": {"attachments": "[{not json"}});
    let err = sender()
        .send(&cfg, &notification("slack", "c", bad), &SlackThreads::new())
        .await
        .unwrap_err();
    assert!(err.permanent, "{err}");
}
