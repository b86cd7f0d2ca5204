//! The `awssqs` service against moto's SQS (AWS' JSON API as moto emulates it from AWS' own
//! service model, checking every request's SigV4 signature): queues made by the test, the
//! messages read back from them.

use std::time::SystemTime;

use serde_json::{Value, json};
use sluice_aws::aws_credential_types::Credentials;
use sluice_notifications::Config;
use sluice_notifications::services::SlackThreads;
use sluice_testenv::moto::{Moto, REGION};

use crate::support::{config, notification, sender, server};

/// An AWS configuration reaching `moto` as its IAM user.
async fn aws(moto: &Moto) -> sluice_aws::SdkConfig {
    let (key, secret) = moto.key();
    sluice_aws::loader()
        .endpoint_url(moto.endpoint())
        .region(sluice_aws::Region::new(REGION))
        .credentials_provider(Credentials::new(key, secret, None, None, "test"))
        .load()
        .await
}

/// The test's own signed call of SQS' JSON API.
async fn sqs(config: &sluice_aws::SdkConfig, operation: &str, body: Value) -> Value {
    let url = format!("{}/", sluice_aws::endpoint(config, "sqs", REGION));
    let body = body.to_string();
    let target = format!("AmazonSQS.{operation}");
    let headers = [
        ("content-type", "application/x-amz-json-1.0"),
        ("x-amz-target", target.as_str()),
    ];
    let request = sluice_aws::Request {
        method: "POST",
        url: &url,
        headers: &headers,
        body: body.as_bytes(),
    };
    let signed = sluice_aws::sign_request(config, "sqs", None, &request, SystemTime::now())
        .await
        .unwrap();
    let mut req = reqwest::Client::new().post(&url).body(body);
    for (k, v) in headers
        .iter()
        .copied()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .chain(signed)
    {
        req = req.header(k, v);
    }
    let answer = req.send().await.unwrap();
    assert_eq!(answer.status(), 200, "{operation}");
    answer.json().await.unwrap()
}

async fn create_queue(config: &sluice_aws::SdkConfig, name: &str, attributes: Value) -> String {
    let answer = sqs(
        config,
        "CreateQueue",
        json!({"QueueName": name, "Attributes": attributes}),
    )
    .await;
    answer["QueueUrl"].as_str().unwrap().to_owned()
}

/// The messages of the queue, waiting up to `wait` seconds for one.
async fn receive(config: &sluice_aws::SdkConfig, queue_url: &str, wait: u32) -> Vec<Value> {
    let answer = sqs(
        config,
        "ReceiveMessage",
        json!({"QueueUrl": queue_url, "WaitTimeSeconds": wait, "MaxNumberOfMessages": 10,
            "MessageAttributeNames": ["All"], "MessageSystemAttributeNames": ["All"]}),
    )
    .await;
    answer["Messages"].as_array().cloned().unwrap_or_default()
}

async fn send(cfg: &Config, queue: &str, content: Value) -> Result<(), (String, bool)> {
    sender()
        .send(
            cfg,
            &notification("awssqs", queue, content),
            &SlackThreads::new(),
        )
        .await
        .map(drop)
        .map_err(|e| (e.message, e.permanent))
}

#[tokio::test]
async fn awssqs_sends_with_the_settings_key_after_the_engines_delay() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let moto = Moto::start_checking_signatures().await.expect("moto");
    let aws = aws(&moto).await;
    let queue_url = create_queue(&aws, "rollouts", json!({})).await;
    let settings = |secret: &str| {
        format!(
            "region: {REGION}\nqueue: rollouts\naccount: \"123456789012\"\nkey: $aws-key\nsecret: {secret}\nendpointUrl: {}\n",
            moto.endpoint()
        )
    };
    let (key, secret) = moto.key();
    let cfg = config(
        &[("service.awssqs", settings("$aws-secret"))],
        &[("aws-key", key), ("aws-secret", secret)],
    );
    let content = json!({
        "message": "Rollout web has been completed.",
        "awssqs": {"messageAttributes": {"app": "web"}},
    });
    send(&cfg, "", content.clone()).await.unwrap();
    assert_eq!(
        receive(&aws, &queue_url, 0).await,
        Vec::<Value>::new(),
        "the engine delays every message by 10 seconds"
    );
    let got = receive(&aws, &queue_url, 20).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["Body"], "Rollout web has been completed.");
    // As in the engine, the template's attributes are not sent.
    assert_eq!(got[0].get("MessageAttributes"), None, "{got:?}");

    // A wrong secret: moto refuses the signature (the key is known, the signature wrong).
    let cfg = config(
        &[("service.awssqs", settings("wr0ng-secret"))],
        &[("aws-key", key)],
    );
    let (message, permanent) = send(&cfg, "", content).await.unwrap_err();
    assert!(
        message.starts_with(
            "awssqs 'awssqs': operation error SQS: GetQueueUrl, https response error StatusCode: 403, RequestID: "
        ),
        "{message}"
    );
    assert!(
        message.ends_with(", api error SignatureDoesNotMatch: The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."),
        "{message}"
    );
    assert!(!permanent && !message.contains("wr0ng-secret") && !message.contains(secret));
}

#[tokio::test]
async fn awssqs_uses_the_default_chain_and_sends_to_fifo_queues_in_the_templates_group() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let moto = Moto::start_checking_signatures().await.expect("moto");
    let aws = aws(&moto).await;
    // The process's AWS configuration (the default chain's), as the controller loads it once;
    // no other test of this binary loads it.
    assert!(sluice_aws::set_sdk_config(aws.clone()));
    let fifo = create_queue(
        &aws,
        "deploys.fifo",
        json!({"FifoQueue": "true", "ContentBasedDeduplication": "true"}),
    )
    .await;
    let cfg = config(&[("service.awssqs", "queue: rollouts\n".to_owned())], &[]);
    let content = json!({
        "message": "Deployment web is ready!",
        "awssqs": {"messageGroupId": "web-deployment"},
    });
    // The recipient names the queue instead of the settings.
    send(&cfg, "deploys.fifo", content.clone()).await.unwrap();
    let got = receive(&aws, &fifo, 5).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["Body"], "Deployment web is ready!");
    assert_eq!(got[0]["Attributes"]["MessageGroupId"], "web-deployment");

    let (message, permanent) = send(&cfg, "", content.clone()).await.unwrap_err();
    assert!(
        message.ends_with(
            ", AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist."
        ),
        "{message}"
    );
    assert!(
        message.starts_with("awssqs 'awssqs': operation error SQS: GetQueueUrl, https response error StatusCode: 400, RequestID: "),
        "{message}"
    );
    assert!(!permanent);

    let cfg = config(&[("service.awssqs", "region: us-east-1\n".to_owned())], &[]);
    let (message, permanent) = send(&cfg, "", content).await.unwrap_err();
    assert_eq!(
        message,
        "awssqs 'awssqs': no queue: set `queue` or subscribe with the queue's name"
    );
    assert!(permanent);
}

#[tokio::test]
async fn awssqs_settings_of_the_wrong_type_are_a_problem_and_other_services_still_send() {
    let (url, rec) = server().await;
    let data = [
        ("service.awssqs".to_owned(), "queue: {a: b}\n".to_owned()),
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
            "service.awssqs",
            "bad awssqs service settings: a field has the wrong type"
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
