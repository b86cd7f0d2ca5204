use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::json;
use sluice_notifications::Config;
use sluice_notifications::services::SlackThreads;

use crate::support::{config, notification, sender, server};

const TOKEN: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";

fn form(body: &str) -> BTreeMap<String, String> {
    url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

#[tokio::test]
async fn telegram_sends_markdown_to_a_chat_a_topic_or_a_channel() {
    let (url, rec) = server().await;
    *rec.answer.lock().unwrap() =
        Some(json!({"ok": true, "result": {"message_id": 7}}).to_string());
    let cfg = config(
        &[
            (
                "service.telegram",
                format!("token: $telegram-token\napiURL: {url}/\n"),
            ),
            (
                "template.rollout-completed",
                "message: Rollout *{{.rollout.metadata.name}}* has been completed.\n".to_owned(),
            ),
        ],
        &[("telegram-token", TOKEN)],
    );
    let vars = json!({"rollout": {"metadata": {"name": "web"}}});
    let content = cfg.templates["rollout-completed"]
        .render(&vars, jiff::Timestamp::UNIX_EPOCH)
        .unwrap();
    for recipient in ["-1000000000000", "-1000000000000|2", "releases"] {
        sender()
            .send(
                &cfg,
                &notification("telegram", recipient, content.clone()),
                &SlackThreads::new(),
            )
            .await
            .unwrap();
    }
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 3);
    for r in &got {
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, format!("/bot{TOKEN}/sendMessage"));
        assert_eq!(
            r.headers["content-type"],
            "application/x-www-form-urlencoded"
        );
        let form = form(&r.body);
        assert_eq!(form["text"], "Rollout *web* has been completed.");
        assert_eq!(form["parse_mode"], "Markdown");
    }
    let chat = |i: usize| {
        let f = form(&got[i].body);
        (
            f.get("chat_id").cloned(),
            f.get("message_thread_id").cloned(),
        )
    };
    assert_eq!(chat(0), (Some("-1000000000000".into()), None));
    assert_eq!(chat(1), (Some("-1000000000000".into()), Some("2".into())));
    assert_eq!(chat(2), (Some("@releases".into()), None));
}

#[tokio::test]
async fn telegram_reports_its_description_and_a_bad_chat_id_without_the_token() {
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::BAD_REQUEST);
    *rec.answer.lock().unwrap() = Some(
        json!({"ok": false, "error_code": 400, "description": "Bad Request: chat not found"})
            .to_string(),
    );
    let cfg = config(
        &[
            (
                "service.telegram",
                format!("token: {TOKEN}\napiURL: {url}\n"),
            ),
            ("service.telegram.tokenless", format!("apiURL: {url}\n")),
        ],
        &[],
    );
    let send = |service: &'static str, recipient: &'static str| {
        let cfg = cfg.clone();
        async move {
            sender()
                .send(
                    &cfg,
                    &notification(service, recipient, json!({"message": "m"})),
                    &SlackThreads::new(),
                )
                .await
                .unwrap_err()
        }
    };
    let e = send("telegram", "-1000000000000").await;
    assert_eq!(
        e.message,
        "telegram 'telegram': Bad Request: chat not found"
    );
    assert!(!e.permanent);
    *rec.status.lock().unwrap() = Some(StatusCode::BAD_GATEWAY);
    *rec.answer.lock().unwrap() = Some("<html>bad gateway</html>".into());
    let e = send("telegram", "-1000000000000").await;
    assert_eq!(
        e.message,
        "telegram 'telegram': unreadable answer (status 502)"
    );
    assert!(!e.message.contains(TOKEN));
    let e = send("telegram", "-100abc|2").await;
    assert_eq!(
        e.message,
        r#"telegram 'telegram': strconv.ParseInt: parsing "-100abc": invalid syntax"#
    );
    assert!(e.permanent);
    let e = send("telegram", "-100|topic").await;
    assert_eq!(
        e.message,
        r#"telegram 'telegram': strconv.Atoi: parsing "topic": invalid syntax"#
    );
    let e = send("tokenless", "-100").await;
    assert_eq!(e.message, "telegram 'tokenless': no token is configured");
    assert!(e.permanent);
    assert_eq!(
        rec.received.lock().unwrap().len(),
        2,
        "what is refused is never sent"
    );
    // No server: the failure names neither the URL nor the token in it.
    let cfg = config(
        &[(
            "service.telegram",
            format!("token: {TOKEN}\napiURL: http://127.0.0.1:1\n"),
        )],
        &[],
    );
    let e = sender()
        .send(
            &cfg,
            &notification("telegram", "-100", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        "telegram 'telegram': request failed: cannot connect"
    );
}

#[tokio::test]
async fn bad_telegram_settings_are_a_problem_and_the_other_services_still_send() {
    let (url, rec) = server().await;
    *rec.answer.lock().unwrap() = Some(json!({"ok": true}).to_string());
    let data = BTreeMap::from([
        (
            "service.telegram.broken".to_owned(),
            "token:\n  value: $telegram-token\n".to_owned(),
        ),
        (
            "service.telegram.working".to_owned(),
            format!("token: $telegram-token\napiURL: {url}\n"),
        ),
    ]);
    let secret = BTreeMap::from([("telegram-token".to_owned(), TOKEN.to_owned())]);
    let cfg = Config::parse(&data, &secret);
    assert_eq!(cfg.problems.len(), 1, "{:?}", cfg.problems);
    assert_eq!(cfg.problems[0].key, "service.telegram.broken");
    assert_eq!(
        cfg.problems[0].message,
        "bad telegram service settings: a field has the wrong type"
    );
    assert!(!cfg.problems[0].message.contains(TOKEN));
    sender()
        .send(
            &cfg,
            &notification("working", "releases", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        rec.received.lock().unwrap()[0].path,
        format!("/bot{TOKEN}/sendMessage")
    );
}
