use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sluice_notifications::Config;
use sluice_notifications::due::{Subject, render};
use sluice_notifications::services::SlackThreads;
use sluice_notifications::subscriptions::Destination;

use crate::routes::Routes;
use crate::support::{config, notification, sender, server};

const KEY: &str = include_str!("github-app-key.pem");
const TOKEN: &str = "ghs_installationtoken0123456789";
const SHA: &str = "0c4d1e5f3ab5e3d8c2a7e9d5f1b2c3d4e5f6a7b8";

/// The GitHub API: an installation token for installation 77, the rest as the test says.
async fn start() -> (String, Routes) {
    let (url, gh) = Routes::start().await;
    gh.answer(
        "POST",
        "/api/v3/app/installations/77/access_tokens",
        201,
        json!({"token": TOKEN, "expires_at": "2099-01-01T00:00:00Z"}),
    );
    (url, gh)
}

fn github_config(url: &str, extra: &[(&str, String)]) -> Config {
    let mut data = vec![(
        "service.github",
        format!(
            "appID: 12345\ninstallationID: $github-installationID\nprivateKey: $github-privateKey\nenterpriseBaseURL: {url}/api/v3\n"
        ),
    )];
    data.extend(extra.iter().cloned());
    config(
        &data,
        &[("github-privateKey", KEY), ("github-installationID", "77")],
    )
}

/// The template a Rollouts user writes: the repository and commit come from the Rollout (an
/// annotation and a pod template label), as a Rollout has no Argo CD source.
const TEMPLATE: &str = r#"
message: Rollout {{.rollout.metadata.name}} is now running revision {{index .rollout.metadata.annotations "rollout.argoproj.io/revision"}}.
github:
  repoURLPath: '{{index .rollout.metadata.annotations "example.com/repo-url"}}'
  revisionPath: '{{.rollout.spec.template.metadata.labels.commit}}'
  status:
    state: success
    label: continuous-delivery/{{.rollout.metadata.name}}
    targetURL: https://rollouts.example.com/{{.rollout.metadata.name}}
  deployment:
    state: success
    environment: production
    environmentURL: https://{{.rollout.metadata.name}}.example.com
    logURL: https://logs.example.com/{{.rollout.metadata.name}}
    requiredContexts: []
  pullRequestComment:
    content: Rollout {{.rollout.metadata.name}} is out.
    commentTag: continuous-delivery/{{.app.metadata.name}}
  checkRun:
    name: continuous-delivery/{{.rollout.metadata.name}}
    details_url: https://rollouts.example.com/{{.rollout.metadata.name}}
    conclusion: success
    completed_at: "2026-05-01T10:00:00Z"
    output:
      title: Deployment of {{.rollout.metadata.name}}
      summary: All steps done.
  repositoryDispatch:
    event_type: rollout-completed
    client_payload: '{"rollout": "{{.rollout.metadata.name}}"}'
"#;

fn rollout() -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "annotations": {
                "rollout.argoproj.io/revision": "2",
                "example.com/repo-url": "https://github.com/shop/web.git"
            }
        },
        "spec": {"template": {"metadata": {"labels": {"commit": SHA}}}},
        "status": {}
    })
}

fn verify_jwt(authorization: &str) -> Value {
    let jwt = authorization.strip_prefix("Bearer ").expect("a bearer JWT");
    let parts: Vec<&str> = jwt.split('.').collect();
    let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
    assert_eq!(header, json!({"alg": "RS256", "typ": "JWT"}));
    let der = rustls::pki_types::pem::from_buf(&mut KEY.as_bytes())
        .unwrap()
        .unwrap()
        .1;
    let key = ring::signature::RsaKeyPair::from_der(&der).unwrap();
    ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        key.public().as_ref(),
    )
    .verify(
        format!("{}.{}", parts[0], parts[1]).as_bytes(),
        &URL_SAFE_NO_PAD.decode(parts[2]).unwrap(),
    )
    .expect("signed with the App's key");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap()
}

#[tokio::test]
async fn github_acts_on_the_rollouts_commit_as_its_app_in_the_engines_order() {
    let (url, gh) = start().await;
    let repo = "/api/v3/repos/shop/web";
    gh.answer(
        "POST",
        &format!("{repo}/statuses/{SHA}"),
        201,
        json!({"id": 1}),
    );
    gh.answer("GET", &format!("{repo}/deployments"), 200, json!([]));
    gh.answer(
        "POST",
        &format!("{repo}/deployments"),
        201,
        json!({"id": 9001}),
    );
    gh.answer(
        "POST",
        &format!("{repo}/deployments/9001/statuses"),
        201,
        json!({"id": 2}),
    );
    gh.answer(
        "GET",
        &format!("{repo}/commits/{SHA}/pulls"),
        200,
        json!([{"number": 5}, {"number": 6}]),
    );
    let tag = "<!-- argocd-notifications continuous-delivery/{{.app.metadata.name}} -->";
    gh.answer("GET", &format!("{repo}/issues/5/comments"), 200,
        json!([{"id": 41, "body": "other"}, {"id": 42, "body": format!("old\n{tag}"), "user": {"login": "bot"}}]));
    gh.answer("GET", &format!("{repo}/issues/6/comments"), 200, json!([]));
    gh.answer(
        "PATCH",
        &format!("{repo}/issues/comments/42"),
        200,
        json!({"id": 42}),
    );
    gh.answer(
        "POST",
        &format!("{repo}/issues/6/comments"),
        201,
        json!({"id": 43}),
    );
    gh.answer("POST", &format!("{repo}/check-runs"), 201, json!({"id": 3}));
    gh.answer("POST", &format!("{repo}/dispatches"), 204, Value::Null);
    let cfg = github_config(&url, &[("template.deployed", TEMPLATE.to_owned())]);
    let ro = rollout();
    let dest = Destination {
        service: "github".into(),
        recipient: String::new(),
    };
    let subject = Subject {
        rollout: &ro,
        analysis_runs: &json!([]),
        now: jiff::Timestamp::now(),
    };
    let content = render(&cfg, &["deployed".into()], subject, &dest).unwrap();
    let n = notification("github", "", content);
    sender().send(&cfg, &n, &SlackThreads::new()).await.unwrap();

    let hits = gh.hits();
    let calls: Vec<String> = hits
        .iter()
        .map(|h| format!("{} {}", h.method, h.path))
        .collect();
    assert_eq!(
        calls,
        [
            "POST /api/v3/app/installations/77/access_tokens".to_owned(),
            format!("POST {repo}/statuses/{SHA}"),
            format!("GET {repo}/deployments"),
            format!("POST {repo}/deployments"),
            format!("POST {repo}/deployments/9001/statuses"),
            format!("GET {repo}/commits/{SHA}/pulls"),
            format!("GET {repo}/issues/5/comments"),
            format!("PATCH {repo}/issues/comments/42"),
            format!("GET {repo}/issues/6/comments"),
            format!("POST {repo}/issues/6/comments"),
            format!("POST {repo}/check-runs"),
            format!("POST {repo}/dispatches"),
        ]
    );
    // The App's JWT, signed with its key, buys the installation token the calls carry.
    let claims = verify_jwt(hits[0].headers["authorization"].to_str().unwrap());
    assert_eq!(claims["iss"], "12345");
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        120
    );
    for h in &hits[1..] {
        assert_eq!(
            h.headers["authorization"],
            format!("token {TOKEN}"),
            "{}",
            h.path
        );
        assert_eq!(h.headers["x-github-api-version"], "2022-11-28");
    }
    let message = "Rollout web is now running revision 2.";
    assert_eq!(
        hits[1].body,
        json!({"state": "success", "target_url": "https://rollouts.example.com/web",
               "description": message, "context": "continuous-delivery/web"})
    );
    assert_eq!(
        hits[2].query,
        "environment=production&ref=".to_owned() + SHA
    );
    assert_eq!(
        hits[3].body,
        json!({"ref": SHA, "auto_merge": true, "required_contexts": [],
               "environment": "production", "transient_environment": false})
    );
    assert!(
        hits[3].headers["accept"]
            .to_str()
            .unwrap()
            .contains("ant-man-preview")
    );
    assert_eq!(
        hits[4].body,
        json!({"state": "success", "log_url": "https://logs.example.com/web",
               "description": message, "environment": "production",
               "environment_url": "https://web.example.com"})
    );
    // The tag is the template's text, and the engine puts it after the content twice.
    let body = format!("Rollout web is out.\n{tag}\n{tag}");
    assert_eq!(hits[7].body["body"], body);
    assert_eq!(hits[7].body["user"], json!({"login": "bot"}));
    assert_eq!(hits[9].body, json!({"body": body}));
    assert_eq!(
        hits[10].body,
        json!({"name": "continuous-delivery/web", "head_sha": SHA,
               "details_url": "https://rollouts.example.com/web",
               "external_id": "argocd-notifications", "status": "completed",
               "conclusion": "success", "completed_at": "2026-05-01T10:00:00Z",
               "output": {"title": "Deployment of web", "summary": "All steps done.", "text": ""}})
    );
    assert_eq!(
        hits[11].body,
        json!({"event_type": "rollout-completed", "client_payload": {"rollout": "web"}})
    );

    // The installation token is kept for the next send.
    let n = notification(
        "github",
        "",
        json!({"message": "m", "github": {
        "repoURLPath": "git@github.com:shop/web.git", "revisionPath": SHA,
        "status": {"state": "pending", "label": "cd"}}}),
    );
    sender().send(&cfg, &n, &SlackThreads::new()).await.unwrap();
    let hits = gh.hits();
    assert_eq!(hits.len(), 13);
    assert_eq!(hits[12].path, format!("{repo}/statuses/{SHA}"));
}

#[tokio::test]
async fn github_reports_its_errors_in_go_githubs_words_without_a_secret() {
    let (url, gh) = start().await;
    let statuses = format!("/api/v3/repos/shop/web/statuses/{SHA}");
    gh.answer("POST", &statuses, 500, json!({"message": "Server Error"}));
    let cfg = github_config(&url, &[]);
    let send = |content: Value| {
        let cfg = cfg.clone();
        async move {
            sender()
                .send(
                    &cfg,
                    &notification("github", "", content),
                    &SlackThreads::new(),
                )
                .await
        }
    };
    let status = json!({"message": "m", "github": {
        "repoURLPath": "https://github.com/shop/web", "revisionPath": SHA,
        "status": {"state": "success", "label": "cd"},
        "deployment": {"state": "success", "environment": "production"}}});
    let e = send(status.clone()).await.unwrap_err();
    assert_eq!(
        e.message,
        format!("github 'github': POST {statuses}: 500 Server Error []")
    );
    assert!(!e.permanent);
    assert!(!e.message.contains(TOKEN) && !e.message.contains("PRIVATE KEY"));

    // Too many statuses for the commit: counted as sent and not retried, as in the engine; the
    // deployment after it is not made.
    gh.answer(
        "POST",
        &statuses,
        422,
        json!({"message": "Validation Failed"}),
    );
    send(status).await.unwrap();
    assert!(gh.hits().iter().all(|h| !h.path.contains("deployments")));

    // The engine's defaults read an Argo CD Application, which a Rollout is not.
    let e = send(json!({"message": "m", "github": {"status": {"state": "success"}}}))
        .await
        .unwrap_err();
    assert!(
        e.message
            .starts_with("github 'github': GitHub.repoURL (<no value>) does not have a `/`"),
        "{}",
        e.message
    );
    assert!(e.permanent);
    let e = send(json!({"message": "m"})).await.unwrap_err();
    assert_eq!(e.message, "github 'github': config is empty");
    let e = send(
        json!({"message": "m", "github": {"repoURLPath": "https://github.com/shop/web",
        "checkRun": {"name": "cd", "status": "completed"}}}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        e.message,
        "github 'github': github checkrun: conclusion is required when status is completed or completed_at is set"
    );

    // An App the server refuses: no token, and the call is not made.
    let (url, gh) = start().await;
    gh.answer(
        "POST",
        "/api/v3/app/installations/77/access_tokens",
        401,
        json!({"message": "A JSON web token could not be decoded"}),
    );
    let cfg = github_config(&url, &[]);
    let e = sender()
        .send(
            &cfg,
            &notification(
                "github",
                "",
                json!({"message": "m", "github": {
            "repoURLPath": "https://github.com/shop/web", "revisionPath": SHA,
            "status": {"state": "success"}}}),
            ),
            &SlackThreads::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        e.message,
        format!(
            "github 'github': POST {statuses}: could not refresh installation id 77's token: received non 2xx response status \"401 Unauthorized\" when fetching /api/v3/app/installations/77/access_tokens"
        )
    );
    assert_eq!(gh.hits().len(), 1);
}

#[tokio::test]
async fn github_settings_the_engine_refuses_are_problems_and_other_services_still_send() {
    let (hook, rec) = server().await;
    let mut data = BTreeMap::new();
    data.insert(
        "service.github".to_owned(),
        "appID: [1]\ninstallationID: 2\nprivateKey: $key\n".to_owned(),
    );
    data.insert(
        "service.github.bad-key".to_owned(),
        "appID: 1\ninstallationID: 2\nprivateKey: not a key\n".to_owned(),
    );
    data.insert(
        "service.github.ec".to_owned(),
        "appID: 1\ninstallationID: 2\nprivateKey: $ec\n".to_owned(),
    );
    data.insert(
        "service.webhook.hook".to_owned(),
        format!("url: {hook}/hook\n"),
    );
    let ec = rcgen::KeyPair::generate().unwrap().serialize_pem();
    let secret = BTreeMap::from([("key".to_owned(), KEY.to_owned()), ("ec".to_owned(), ec)]);
    let cfg = Config::parse(&data, &secret);
    let problems: Vec<String> = cfg.problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        problems,
        [
            "service.github: bad github service settings: appID: unable to cast a value of type list to int64",
            "service.github.bad-key: bad github service settings: could not parse private key: invalid key: Key must be a PEM encoded PKCS1 or PKCS8 key",
            "service.github.ec: bad github service settings: could not parse private key: key is not a valid RSA private key",
        ]
    );
    assert!(problems.iter().all(|p| !p.contains("BEGIN")));
    sender()
        .send(
            &cfg,
            &notification("hook", "", json!({"message": "still sent"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    assert_eq!(rec.received.lock().unwrap()[0].body, "still sent");
}
