//! The `gcppubsub` service against a local server speaking Pub/Sub's REST API, with a service
//! account key made for these tests (`gcppubsub-test-key.pem`, an RSA key granting nothing
//! anywhere): the self-signed token checked with the key's public half.

use std::path::PathBuf;

use axum::http::StatusCode;
use base64::Engine as _;
use serde_json::{Value, json};
use sluice_notifications::Config;
use sluice_notifications::services::SlackThreads;

use crate::support::{config, notification, sender, server};

const KEY: &str = include_str!("gcppubsub-test-key.pem");
const EMAIL: &str = "rollouts@my-gcp-project.iam.gserviceaccount.com";
const KEY_ID: &str = "0a1b2c3d4e5f";

/// A service account key file as Google issues them, in a directory of its own.
fn key_file(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-pubsub-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("key.json");
    let key = json!({
        "type": "service_account",
        "project_id": "my-gcp-project",
        "private_key_id": KEY_ID,
        "private_key": KEY,
        "client_email": EMAIL,
        "client_id": "1234567890",
        "token_uri": "https://oauth2.googleapis.com/token",
    });
    std::fs::write(&file, key.to_string()).unwrap();
    file
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(s)
        .unwrap()
}

/// The claims of `token` once its signature is checked with the test key's public half.
fn verified_claims(token: &str) -> (Value, Value) {
    let der = base64::engine::general_purpose::STANDARD
        .decode(
            KEY.lines()
                .filter(|l| !l.starts_with("-----"))
                .collect::<String>(),
        )
        .unwrap();
    let key = ring::rsa::KeyPair::from_pkcs8(&der).unwrap();
    let (input, signature) = token.rsplit_once('.').unwrap();
    ring::signature::UnparsedPublicKey::new(
        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
        key.public().as_ref(),
    )
    .verify(input.as_bytes(), &b64(signature))
    .expect("the token is signed with the service account's key");
    let (header, claims) = input.split_once('.').unwrap();
    (
        serde_json::from_slice(&b64(header)).unwrap(),
        serde_json::from_slice(&b64(claims)).unwrap(),
    )
}

async fn send(cfg: &Config, topic: &str, content: Value) -> Result<(), (String, bool)> {
    sender()
        .send(
            cfg,
            &notification("gcppubsub", topic, content),
            &SlackThreads::new(),
        )
        .await
        .map(drop)
        .map_err(|e| (e.message, e.permanent))
}

#[tokio::test]
async fn gcppubsub_publishes_with_the_attributes_and_a_token_signed_by_the_key() {
    let (url, rec) = server().await;
    *rec.answer.lock().unwrap() = Some(json!({"messageIds": ["7"]}).to_string());
    let key = key_file("publish");
    let cfg = config(
        &[(
            "service.gcppubsub",
            format!(
                "project: my-gcp-project\ntopic: rollouts\nkeyFile: {}\napiURL: {url}/\n",
                key.display()
            ),
        )],
        &[],
    );
    let content = json!({
        "message": "Deployment web is ready!\n",
        "gcppubsub": {"attributes": {"app": "web", "environment": "production"}},
    });
    let before = jiff::Timestamp::now().as_second();
    send(&cfg, "", content.clone()).await.unwrap();
    // The recipient names the topic instead of the settings.
    send(&cfg, "override-topic", content).await.unwrap();
    let got = rec.received.lock().unwrap().clone();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].method, "POST");
    assert_eq!(
        got[0].path,
        "/v1/projects/my-gcp-project/topics/rollouts:publish"
    );
    assert_eq!(
        got[1].path,
        "/v1/projects/my-gcp-project/topics/override-topic:publish"
    );
    assert_eq!(got[0].headers["content-type"], "application/json");
    let body: Value = serde_json::from_str(&got[0].body).unwrap();
    let message = &body["messages"][0];
    assert_eq!(body["messages"].as_array().unwrap().len(), 1);
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(message["data"].as_str().unwrap())
            .unwrap(),
        b"Deployment web is ready!\n"
    );
    assert_eq!(
        message["attributes"],
        json!({"app": "web", "environment": "production"})
    );

    let auth = got[0].headers["authorization"].to_str().unwrap();
    let token = auth.strip_prefix("Bearer ").unwrap();
    let (header, claims) = verified_claims(token);
    assert_eq!(header, json!({"alg": "RS256", "typ": "JWT", "kid": KEY_ID}));
    assert_eq!(claims["iss"], EMAIL);
    assert_eq!(claims["sub"], EMAIL);
    assert_eq!(
        claims["scope"],
        "https://www.googleapis.com/auth/cloud-platform https://www.googleapis.com/auth/pubsub"
    );
    let iat = claims["iat"].as_i64().unwrap();
    assert!((before..=before + 5).contains(&iat), "{claims}");
    assert_eq!(claims["exp"].as_i64().unwrap() - iat, 3600);
    std::fs::remove_dir_all(key.parent().unwrap()).unwrap();
}

#[tokio::test]
async fn gcppubsub_reports_refusals_as_the_client_and_unusable_settings_without_sending() {
    let (url, rec) = server().await;
    *rec.status.lock().unwrap() = Some(StatusCode::NOT_FOUND);
    *rec.answer.lock().unwrap() = Some(
        json!({"error": {"code": 404, "message": "Resource not found (resource=gone).",
            "status": "NOT_FOUND"}})
        .to_string(),
    );
    let key = key_file("refusals");
    let settings = |project: &str, key: &str| {
        config(
            &[(
                "service.gcppubsub",
                format!("project: {project}\nkeyFile: {key}\napiURL: {url}\n"),
            )],
            &[],
        )
    };
    let content = json!({"message": "m"});
    let (message, permanent) = send(
        &settings("my-gcp-project", &key.display().to_string()),
        "gone",
        content.clone(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        message,
        "gcppubsub 'gcppubsub': rpc error: code = NotFound desc = Resource not found (resource=gone)."
    );
    assert!(!permanent);
    let sent = rec.received.lock().unwrap()[0].headers["authorization"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(!message.contains(&sent[7..]) && !message.contains("PRIVATE"));

    let (message, permanent) = send(
        &settings("my-gcp-project", "/nonexistent/key.json"),
        "t",
        content.clone(),
    )
    .await
    .unwrap_err();
    assert_eq!(
        (message.as_str(), permanent),
        (
            "gcppubsub 'gcppubsub': open /nonexistent/key.json: no such file or directory",
            true
        )
    );
    let cfg = settings("\"\"", &key.display().to_string());
    let (message, permanent) = send(&cfg, "t", content.clone()).await.unwrap_err();
    assert_eq!(
        (message.as_str(), permanent),
        (
            "gcppubsub 'gcppubsub': pubsub: projectID string is empty",
            true
        )
    );
    let (message, permanent) = send(&settings("p", &key.display().to_string()), "", content)
        .await
        .unwrap_err();
    assert_eq!(
        (message.as_str(), permanent),
        (
            "gcppubsub 'gcppubsub': no topic: set `topic` or subscribe with the topic's name",
            true
        )
    );
    assert_eq!(
        rec.received.lock().unwrap().len(),
        1,
        "only the first was sent"
    );
    std::fs::remove_dir_all(key.parent().unwrap()).unwrap();
}

#[tokio::test]
async fn gcppubsub_settings_of_the_wrong_type_are_a_problem_and_other_services_still_send() {
    let (url, rec) = server().await;
    let data = [
        (
            "service.gcppubsub".to_owned(),
            "project: p\nkeyFile: [a]\n".to_owned(),
        ),
        ("service.webhook".to_owned(), format!("url: {url}/hook")),
    ]
    .into_iter()
    .collect();
    let cfg = Config::parse(&data, &Default::default());
    assert_eq!(cfg.problems.len(), 1, "{:?}", cfg.problems);
    assert_eq!(
        (
            cfg.problems[0].key.as_str(),
            cfg.problems[0].message.as_str()
        ),
        (
            "service.gcppubsub",
            "bad gcppubsub service settings: a field has the wrong type"
        )
    );
    sender()
        .send(
            &cfg,
            &notification("webhook", "", json!({"message": "still sent"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    assert_eq!(rec.received.lock().unwrap()[0].body, "still sent");
}
