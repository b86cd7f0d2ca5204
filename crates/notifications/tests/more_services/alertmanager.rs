use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sluice_notifications::due::{Subject, render};
use sluice_notifications::services::SlackThreads;
use sluice_notifications::subscriptions::Destination;
use sluice_notifications::{Config, Problem};

use crate::support::{config, notification, sender, server};

const BEARER: &str = "am-b34rer-t0ken";

const TEMPLATE: &str = r#"message: Rollout {{.rollout.metadata.name}} is aborted.
alertmanager:
  labels:
    severity: critical
    rollout: "{{.rollout.metadata.name}}"
    recipient: "{{.recipient}}"
  annotations:
    summary: "Rollout {{.rollout.metadata.name}} is aborted."
"#;

fn rendered(cfg: &Config, template: &str) -> Result<Value, Problem> {
    let rollout = json!({"metadata": {"name": "web", "namespace": "default"}});
    let subject = Subject {
        rollout: &rollout,
        analysis_runs: &json!([]),
        now: "2026-03-04T05:06:07Z".parse().unwrap(),
    };
    let dest = Destination {
        service: "alertmanager".into(),
        recipient: "ops".into(),
    };
    render(cfg, &[template.to_owned()], subject, &dest)
}

fn target(url: &str) -> &str {
    url.trim_start_matches("http://")
}

#[tokio::test]
async fn alertmanager_posts_the_rendered_alert_to_every_target_one_failing() {
    let (up, up_rec) = server().await;
    let (down, down_rec) = server().await;
    *down_rec.status.lock().unwrap() = Some(StatusCode::INTERNAL_SERVER_ERROR);
    let cfg = config(
        &[
            (
                "service.alertmanager",
                format!(
                    "targets:\n- {}\n- {}\nbearerToken: $am-token\n",
                    target(&down),
                    target(&up)
                ),
            ),
            ("template.rollout-aborted", TEMPLATE.to_owned()),
        ],
        &[("am-token", BEARER)],
    );
    let content = rendered(&cfg, "rollout-aborted").unwrap();
    sender()
        .send(
            &cfg,
            &notification("alertmanager", "ops", content),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    for rec in [&up_rec, &down_rec] {
        let got = rec.received.lock().unwrap().clone();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].method, "POST");
        assert_eq!(got[0].path, "/api/v2/alerts");
        assert_eq!(got[0].headers["content-type"], "application/json");
        assert_eq!(got[0].headers["authorization"], format!("Bearer {BEARER}"));
        let body: Value = serde_json::from_str(&got[0].body).unwrap();
        // The engine's templater: `alertname` is the template's name, and the default
        // generatorURL (`{{.app.spec.source.repoURL}}`) renders `<no value>` for a Rollout.
        assert_eq!(
            body,
            json!([{
                "labels": {"alertname": "rollout-aborted", "severity": "critical",
                    "rollout": "web", "recipient": "ops"},
                "annotations": {"summary": "Rollout web is aborted."},
                "generatorURL": "<no value>",
                "startsAt": "2026-03-04T05:06:07Z",
            }])
        );
    }
}

#[tokio::test]
async fn alertmanager_fails_when_no_target_took_the_alert_naming_no_secret() {
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::UNAUTHORIZED);
    *rec.answer.lock().unwrap() = Some("unauthorized".into());
    let cfg = config(
        &[(
            "service.alertmanager",
            format!(
                "targets: [{}, 127.0.0.1:9]\napiPath: /api/events\nbasicAuth:\n  username: am\n  password: $am-pass\nbearerToken: unused\n",
                target(&url)
            ),
        )],
        &[("am-pass", BEARER)],
    );
    let content = json!({"alertmanager": {"labels": {"alertname": "a"}, "generatorURL": "",
        "startsAt": "2026-03-04T05:06:07Z"}});
    let e = sender()
        .send(
            &cfg,
            &notification("alertmanager", "", content),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        "alertmanager 'alertmanager': no events were successfully received by alertmanager (target 1: failed with error code 401 : unauthorized; target 2: request failed: cannot connect)"
    );
    assert!(!e.permanent);
    assert!(!e.message.contains(BEARER));
    assert!(!format!("{cfg:?}").contains(BEARER));
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got[0].path, "/api/events");
    // basicAuth wins over bearerToken: base64("am:am-b34rer-t0ken").
    assert_eq!(
        got[0].headers["authorization"],
        "Basic YW06YW0tYjM0cmVyLXQwa2Vu"
    );
    let body: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(body[0]["annotations"], Value::Null);

    let e = sender()
        .send(
            &cfg,
            &notification("alertmanager", "", json!({"message": "m"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        "alertmanager 'alertmanager': notification alertmanager no config"
    );
    assert!(e.permanent);
}

#[tokio::test]
async fn alertmanager_targets_that_are_text_and_a_template_without_labels_are_problems() {
    let (url, rec) = server().await;
    let data: BTreeMap<String, String> = [
        (
            "service.alertmanager",
            "targets: 10.5.39.39:9093\n".to_owned(),
        ),
        ("service.webhook.hook", format!("url: {url}/hook\n")),
        (
            "template.no-labels",
            "message: m\nalertmanager:\n  annotations: {a: b}\n".to_owned(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let cfg = Config::parse(&data, &BTreeMap::new());
    assert_eq!(
        cfg.problems,
        [Problem {
            key: "service.alertmanager".into(),
            message: "bad alertmanager service settings: a field has the wrong type".into(),
        }]
    );
    // As in the engine, the template does not render, for any service.
    assert_eq!(
        rendered(&cfg, "no-labels").unwrap_err(),
        Problem {
            key: "template.no-labels".into(),
            message: "cannot render template 'no-labels': at least one label pair required".into(),
        }
    );
    sender()
        .send(
            &cfg,
            &notification("hook", "", json!({"message": "still here"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    assert_eq!(rec.received.lock().unwrap()[0].body, "still here");
}
