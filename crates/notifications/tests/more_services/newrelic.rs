use std::collections::BTreeMap;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sluice_notifications::Config;
use sluice_notifications::services::SlackThreads;

use crate::support::{config, notification, sender, server};

const KEY: &str = "NRAK-0123456789ABCDEFGHIJKLMNOP";

#[tokio::test]
async fn newrelic_posts_a_deployment_marker_for_the_application() {
    let (url, rec) = server().await;
    let cfg = config(
        &[(
            "service.newrelic",
            format!("apiURL: {url}/\napiKey: $newrelic-apiKey\n"),
        )],
        &[("newrelic-apiKey", KEY)],
    );
    let content = json!({
        "message": "Rollout web has been completed.",
        "newrelic": {"revision": "shop/web:2", "changelog": "canary of web", "user": "argo-rollouts"}
    });
    sender()
        .send(
            &cfg,
            &notification("newrelic", "123456789", content),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].method, "POST");
    assert_eq!(got[0].path, "/v2/applications/123456789/deployments.json");
    assert_eq!(got[0].headers["x-api-key"], KEY);
    assert_eq!(got[0].headers["content-type"], "application/json");
    let body: Value = serde_json::from_str(&got[0].body).unwrap();
    assert_eq!(
        body,
        json!({"deployment": {
            "revision": "shop/web:2",
            "changelog": "canary of web",
            "description": "Rollout web has been completed.",
            "user": "argo-rollouts"
        }})
    );
}

#[tokio::test]
async fn newrelic_reports_a_refusal_and_the_engines_template_failure_without_the_key() {
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::UNAUTHORIZED);
    *rec.answer.lock().unwrap() =
        Some(json!({"error": {"title": "Invalid credentials"}}).to_string());
    let cfg = config(
        &[(
            "service.newrelic",
            format!("apiURL: {url}\napiKey: {KEY}\n"),
        )],
        &[],
    );
    let send = |content: Value| {
        let cfg = cfg.clone();
        async move {
            sender()
                .send(
                    &cfg,
                    &notification("newrelic", "42", content),
                    &SlackThreads::new(),
                )
                .await
        }
    };
    let e = send(json!({"message": "m", "newrelic": {"changelog": "c", "user": "u"}}))
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        "newrelic 'newrelic': deployment marker refused with status 401: {\"error\":{\"title\":\"Invalid credentials\"}}"
    );
    assert!(!e.permanent);
    assert!(!e.message.contains(KEY));
    // Without changelog and user, the engine's defaults call .repo, which a Rollout has not.
    let e = send(json!({"message": "m", "newrelic": {"revision": "r"}}))
        .await
        .unwrap_err();
    assert!(e.permanent);
    assert!(
        e.message.contains("error calling call: call of nil"),
        "{}",
        e.message
    );
    let e = send(json!({"message": "m"})).await.unwrap_err();
    assert_eq!(e.message, "newrelic 'newrelic': config is missing");
    assert_eq!(rec.received.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_newrelic_setting_of_the_wrong_type_is_a_problem_and_a_missing_key_is_the_engines_error()
{
    let (url, rec) = server().await;
    let data = BTreeMap::from([
        ("service.newrelic".to_owned(), "apiKey: [a, b]\n".to_owned()),
        (
            "service.newrelic.keyless".to_owned(),
            format!("apiURL: {url}\n"),
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
        ["service.newrelic: bad newrelic service settings: a field has the wrong type"]
    );
    let e = sender()
        .send(
            &cfg,
            &notification(
                "keyless",
                "1",
                json!({"newrelic": {"changelog": "c", "user": "u"}}),
            ),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.message, "newrelic 'keyless': apiKey is missing");
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

#[tokio::test]
async fn the_documented_rollout_template_renders_a_full_marker() {
    use sluice_notifications::due::{Subject, render};
    use sluice_notifications::subscriptions::Destination;
    let (url, rec) = server().await;
    let template = r#"
message: Rollout {{.rollout.metadata.name}} is completed.
newrelic:
  revision: '{{(index .rollout.spec.template.spec.containers 0).image}}'
  changelog: Rollout {{.rollout.metadata.name}} revision {{index .rollout.metadata.annotations "rollout.argoproj.io/revision"}}
  user: argo-rollouts
"#;
    let cfg = config(
        &[
            (
                "service.newrelic",
                format!("apiURL: {url}\napiKey: {KEY}\n"),
            ),
            ("template.rollout-completed", template.to_owned()),
        ],
        &[],
    );
    let rollout = json!({
        "metadata": {"name": "web", "annotations": {"rollout.argoproj.io/revision": "3"}},
        "spec": {"template": {"spec": {"containers": [{"name": "app", "image": "shop/web:3"}]}}}
    });
    let dest = Destination {
        service: "newrelic".into(),
        recipient: "42".into(),
    };
    let subject = Subject {
        rollout: &rollout,
        analysis_runs: &json!([]),
        now: jiff::Timestamp::now(),
    };
    let content = render(&cfg, &["rollout-completed".into()], subject, &dest).unwrap();
    sender()
        .send(
            &cfg,
            &notification("newrelic", "42", content),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    let body: Value = serde_json::from_str(&rec.received.lock().unwrap()[0].body).unwrap();
    assert_eq!(
        body,
        json!({"deployment": {
            "revision": "shop/web:3",
            "changelog": "Rollout web revision 3",
            "description": "Rollout web is completed.",
            "user": "argo-rollouts"
        }})
    );
}
