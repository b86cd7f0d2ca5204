//! Requests signed with the shared configuration's credentials reach a real AWS API that
//! checks SigV4 signatures (moto's server with IAM checks on): CloudWatch's JSON API takes a
//! metric and gives it back, and a request signed with a wrong secret is refused.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use serde_json::{Value, json};
use sluice_testenv::moto::{Moto, REGION};

async fn config(endpoint: &str, key: (&str, &str)) -> sluice_aws::SdkConfig {
    sluice_aws::loader()
        .endpoint_url(endpoint)
        .region(aws_config_region())
        .credentials_provider(Credentials::new(key.0, key.1, None, None, "test"))
        .load()
        .await
}

fn aws_config_region() -> sluice_aws::elbv2::config::Region {
    sluice_aws::elbv2::config::Region::new(REGION)
}

/// One CloudWatch JSON call, signed; the status and the answer.
async fn call(config: &sluice_aws::SdkConfig, action: &str, body: Value) -> (u16, String) {
    let url = format!("{}/", sluice_aws::endpoint(config, "monitoring", REGION));
    let body = body.to_string();
    let target = format!("GraniteServiceVersion20100801.{action}");
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
    let signed = sluice_aws::sign_request(config, "monitoring", None, &request, SystemTime::now())
        .await
        .expect("signed");
    let mut req = reqwest::Client::new().post(&url).body(body);
    for (k, v) in headers.iter().copied() {
        req = req.header(k, v);
    }
    for (k, v) in &signed {
        req = req.header(k, v);
    }
    let resp = req.send().await.expect("sent");
    (
        resp.status().as_u16(),
        resp.text().await.unwrap_or_default(),
    )
}

#[tokio::test]
async fn signed_requests_pass_moto_checks_and_wrong_secrets_do_not() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let moto = Moto::start_checking_signatures().await.expect("moto");
    let good = config(&moto.endpoint(), moto.key()).await;
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let put = json!({"Namespace": "Sluice/Test",
        "MetricData": [{"MetricName": "errors", "Value": 0.25, "Timestamp": now}]});
    let (status, body) = call(&good, "PutMetricData", put.clone()).await;
    assert_eq!(status, 200, "{body}");
    let get = json!({"StartTime": now - 300, "EndTime": now + 60, "MetricDataQueries": [{
        "Id": "errors",
        "MetricStat": {"Metric": {"Namespace": "Sluice/Test", "MetricName": "errors"},
            "Period": 60, "Stat": "Average"}}]});
    let (status, body) = call(&good, "GetMetricData", get).await;
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(
        answer["MetricDataResults"][0]["Values"],
        json!([0.25]),
        "{body}"
    );

    let bad = config(&moto.endpoint(), (moto.key().0, "not-the-secret")).await;
    let (status, body) = call(&bad, "PutMetricData", put).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("SignatureDoesNotMatch"), "{body}");
}

#[tokio::test]
async fn a_missing_region_is_a_clear_error() {
    let config = sluice_aws::loader()
        .credentials_provider(Credentials::for_tests())
        .empty_test_environment()
        .load()
        .await;
    let request = sluice_aws::Request {
        method: "GET",
        url: "https://example.invalid/",
        headers: &[],
        body: b"",
    };
    let err = sluice_aws::sign_request(&config, "aps", None, &request, SystemTime::now())
        .await
        .expect_err("no region");
    assert!(err.contains("AWS_REGION"), "{err}");
}
