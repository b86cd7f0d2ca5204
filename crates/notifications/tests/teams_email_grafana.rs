//! Microsoft Teams, email and Grafana annotations, each against a local server speaking its
//! protocol, with the secrets of their settings kept out of every error.

mod support;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sluice_notifications::services::SlackThreads;
use support::{config, notification, sender, server, smtp};

#[tokio::test]
async fn teams_posts_a_message_card_to_the_recipients_webhook() {
    let (url, rec) = server().await;
    *rec.answer.lock().unwrap() = Some("1".into());
    let cfg = config(
        &[(
            "service.teams",
            "recipientUrls:\n  releases: $teams-releases\n".to_owned(),
        )],
        &[("teams-releases", &format!("{url}/webhookb2/s3cr3t"))],
    );
    let content = json!({
        "message": "Rollout web has been completed.",
        "teams": {
            "title": "Rollout web completed",
            "themeColor": "#000080",
            "facts": "[{\"name\": \"Strategy\", \"value\": \"Canary\"}]",
            "potentialAction": "[{\"@type\": \"OpenUri\", \"name\": \"Open\", \"targets\": [{\"os\": \"default\", \"uri\": \"http://x\"}]}]"
        }
    });
    sender()
        .send(
            &cfg,
            &notification("teams", "releases", content),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].method, "POST");
    assert_eq!(got[0].path, "/webhookb2/s3cr3t");
    assert_eq!(got[0].headers["content-type"], "application/json");
    let card: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(card["@type"], "MessageCard");
    assert_eq!(card["title"], "Rollout web completed");
    assert_eq!(card["text"], "Rollout web has been completed.");
    assert_eq!(card["themeColor"], "#000080");
    assert_eq!(card["sections"][0]["facts"][0]["value"], "Canary");
    assert_eq!(card["potentialAction"][0]["name"], "Open");
}

#[tokio::test]
async fn teams_fails_without_its_answer_or_a_url_for_the_recipient_and_names_no_secret() {
    let (url, rec) = server().await;
    *rec.answer.lock().unwrap() = Some("Webhook message delivery failed".into());
    *rec.status.lock().unwrap() = Some(StatusCode::BAD_REQUEST);
    let cfg = config(
        &[(
            "service.teams",
            "recipientUrls:\n  releases: $teams-releases\n".to_owned(),
        )],
        &[("teams-releases", &format!("{url}/webhookb2/s3cr3t"))],
    );
    let message = json!({"message": "m"});
    let err = sender()
        .send(
            &cfg,
            &notification("teams", "releases", message.clone()),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert!(err.message.contains("delivery failed"), "{err}");
    assert!(!err.message.contains("s3cr3t"), "{err}");
    assert!(!err.permanent);
    let err = sender()
        .send(
            &cfg,
            &notification("teams", "other", message),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "teams 'teams': no teams webhook configured for recipient other"
    );
    assert!(err.permanent);
}

#[tokio::test]
async fn grafana_posts_an_annotation_tagged_by_the_recipient_with_the_api_key() {
    let (url, rec) = server().await;
    let cfg = config(
        &[(
            "service.grafana",
            format!("apiUrl: {url}/api\napiKey: $grafana-api-key\n"),
        )],
        &[("grafana-api-key", "glsa_k3y")],
    );
    let before = jiff::Timestamp::now().as_millisecond();
    sender()
        .send(
            &cfg,
            &notification(
                "grafana",
                "web|production",
                json!({"message": "Rollout web has been completed."}),
            ),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].method.as_str(), got[0].path.as_str()),
        ("POST", "/api/annotations")
    );
    assert_eq!(got[0].headers["authorization"], "Bearer glsa_k3y");
    assert_eq!(got[0].headers["content-type"], "application/json");
    let annotation: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(annotation["tags"], json!(["web", "production"]));
    assert_eq!(annotation["text"], "Rollout web has been completed.");
    assert_eq!(annotation["isRegion"], false);
    let time = annotation["time"].as_i64().unwrap();
    assert!(time >= before && time <= jiff::Timestamp::now().as_millisecond());

    *rec.status.lock().unwrap() = Some(StatusCode::UNAUTHORIZED);
    let err = sender()
        .send(
            &cfg,
            &notification("grafana", "web", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert!(err.message.contains("status 401"), "{err}");
    assert!(!err.message.contains("glsa_k3y"), "{err}");
}

#[tokio::test]
async fn email_is_sent_over_smtp_with_subject_body_recipients_and_login() {
    let (port, server) = smtp::start().await;
    let cfg = config(
        &[(
            "service.email.gmail",
            format!(
                "host: 127.0.0.1\nport: {port}\nfrom: Rollouts <rollouts@example.com>\nusername: bot@example.com\npassword: $email-password\n"
            ),
        )],
        &[("email-password", "m41lpw")],
    );
    let content = json!({
        "message": "plain message",
        "email": {"subject": "Rollout web has been completed.", "body": "Rollout web is at revision 2."}
    });
    sender()
        .send(
            &cfg,
            &notification("gmail", "dev@example.com, ops@example.com", content),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let mails = server.mails.lock().unwrap().clone();
    assert_eq!(mails.len(), 1);
    let mail = &mails[0];
    assert_eq!(
        mail.login,
        Some(("bot@example.com".to_owned(), "m41lpw".to_owned()))
    );
    assert_eq!(mail.from, "rollouts@example.com");
    assert_eq!(mail.to, ["dev@example.com", "ops@example.com"]);
    assert_eq!(
        mail.header("Subject").as_deref(),
        Some("Rollout web has been completed.")
    );
    assert!(
        mail.header("From")
            .unwrap()
            .contains("rollouts@example.com")
    );
    assert!(mail.header("To").unwrap().contains("ops@example.com"));
    assert!(
        mail.header("Content-Type")
            .unwrap()
            .starts_with("text/plain"),
        "{mail:?}"
    );
    assert_eq!(mail.body().trim_end(), "Rollout web is at revision 2.");
}

#[tokio::test]
async fn email_without_a_body_sends_the_message_as_html_when_asked_and_logs_in_only_with_both_credentials()
 {
    let (port, server) = smtp::start().await;
    let cfg = config(
        &[(
            "service.email",
            format!("host: 127.0.0.1\nport: {port}\nfrom: rollouts@example.com\nhtml: true\n"),
        )],
        &[],
    );
    sender()
        .send(
            &cfg,
            &notification(
                "email",
                "dev@example.com",
                json!({"message": "<b>done</b>"}),
            ),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let mails = server.mails.lock().unwrap().clone();
    assert_eq!(mails[0].login, None);
    assert!(
        mails[0]
            .header("Content-Type")
            .unwrap()
            .starts_with("text/html")
    );
    assert_eq!(mails[0].body().trim_end(), "<b>done</b>");
}

#[tokio::test]
async fn email_refused_by_the_server_or_without_a_server_is_a_failure_that_names_no_secret() {
    let (port, server) = smtp::start().await;
    *server.reject_recipients.lock().unwrap() = true;
    let settings = |port: u16| {
        format!(
            "host: 127.0.0.1\nport: {port}\nfrom: rollouts@example.com\nusername: bot\npassword: $email-password\n"
        )
    };
    let cfg = config(
        &[
            ("service.email", settings(port)),
            ("service.email.down", settings(9)),
        ],
        &[("email-password", "m41lpw")],
    );
    let err = sender()
        .send(
            &cfg,
            &notification("email", "nobody@example.com", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert!(err.message.contains("550"), "{err}");
    assert!(err.permanent, "{err}");
    assert!(server.mails.lock().unwrap().is_empty());
    let err = sender()
        .send(
            &cfg,
            &notification("down", "dev@example.com", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert!(!err.permanent, "{err}");
    let err = sender()
        .send(
            &cfg,
            &notification("email", "not an address", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert!(err.permanent, "{err}");
    assert!(!err.message.contains("m41lpw"), "{err}");
}

#[tokio::test]
async fn email_upgrades_to_tls_with_starttls_before_logging_in_and_checks_the_certificate() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (port, server) = smtp::start_with_starttls().await;
    let settings = |check: bool| {
        format!(
            "host: localhost\nport: {port}\nfrom: rollouts@example.com\nusername: bot\npassword: $email-password\ninsecure_skip_verify: {}\n",
            !check
        )
    };
    let cfg = config(
        &[
            ("service.email", settings(false)),
            ("service.email.checked", settings(true)),
        ],
        &[("email-password", "m41lpw")],
    );
    let content = json!({"message": "m", "email": {"subject": "s"}});
    sender()
        .send(
            &cfg,
            &notification("email", "dev@example.com", content.clone()),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    {
        let mails = server.mails.lock().unwrap();
        assert_eq!(mails.len(), 1);
        assert!(mails[0].secure, "the login and message went in the clear");
        assert_eq!(
            mails[0].login,
            Some(("bot".to_owned(), "m41lpw".to_owned()))
        );
    }
    // The test's certificate is self-signed: checked, it is refused, and nothing is sent.
    let err = sender()
        .send(
            &cfg,
            &notification("checked", "dev@example.com", content),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert!(err.message.contains("TLS"), "{err}");
    assert!(!err.message.contains("m41lpw"), "{err}");
    assert_eq!(server.mails.lock().unwrap().len(), 1);
}
