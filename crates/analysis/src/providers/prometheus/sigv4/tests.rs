//! Signed queries checked by botocore (AWS's Python signer) in a proxy in front of a real
//! Prometheus: a signature it computes differently is refused with 403, as AMP refuses it.

use std::collections::BTreeMap;

use serde_json::json;
use sluice_api::analysis::Metric;
use sluice_api::common::AnalysisPhase;
use sluice_aws::aws_credential_types::Credentials;
use sluice_testenv::prometheus::Prometheus;
use sluice_testenv::sigv4_proxy::{RoleCredentials, Sigv4Proxy, Sigv4ProxyConfig};

use super::super::super::test_support::{ctx, metric_with, providers};
use super::*;

const REGION: &str = "us-east-1";
const KEY: (&str, &str) = ("AKIASLUICETEST", "the-secret");
/// The path AMP's addresses have in the test: the proxy takes it off.
const WORKSPACE: &str = "/aps-workspaces/workspaces/ws-test";

/// A real Prometheus behind a proxy that checks signatures for `aps` in `REGION`; its STS
/// hands out `role` when given.
async fn start(role: Option<RoleCredentials>) -> (Prometheus, Sigv4Proxy) {
    let prometheus = Prometheus::start(&[]).await.expect("prometheus");
    let proxy = Sigv4Proxy::start(&Sigv4ProxyConfig {
        upstream: prometheus.address(),
        strip: WORKSPACE.to_owned(),
        service: "aps".to_owned(),
        region: REGION.to_owned(),
        keys: BTreeMap::from([(KEY.0.to_owned(), KEY.1.to_owned())]),
        role,
    })
    .await
    .expect("proxy");
    (prometheus, proxy)
}

/// An AWS configuration with `key`, reaching `endpoint` (STS, in these tests) and `region`.
async fn aws(endpoint: &str, region: Option<&str>, key: (&str, &str)) -> SdkConfig {
    let mut loader = sluice_aws::loader()
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new(key.0, key.1, None, None, "test"));
    if let Some(region) = region {
        loader = loader.region(sluice_aws::Region::new(region.to_owned()));
    }
    loader.load().await
}

fn metric(address: &str, sigv4: serde_json::Value) -> Metric {
    metric_with(
        "amp",
        json!({"prometheus": {"address": address, "query": "vector(0.99)",
            "authentication": {"sigv4": sigv4}}}),
        Some("result[0] >= 0.95"),
        None,
    )
}

#[tokio::test]
async fn signed_queries_pass_botocore_and_wrongly_signed_ones_do_not() {
    let (_prometheus, proxy) = start(None).await;
    let address = format!("{}{WORKSPACE}", proxy.url());
    let right = providers(Default::default()).with_aws(aws(&proxy.url(), None, KEY).await);
    let m = right
        .measure(&ctx(), &metric(&address, json!({"region": REGION})))
        .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Successful), "{:?}", m.message);
    assert_eq!(m.value.as_deref(), Some("[0.99]"));
    let log = proxy.log().await.unwrap();
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["key"], KEY.0);
    assert_eq!(log[0]["path"], format!("{WORKSPACE}/api/v1/query"));
    assert_eq!(log[0]["refused"], serde_json::Value::Null);

    let wrong = providers(Default::default())
        .with_aws(aws(&proxy.url(), None, (KEY.0, "not-the-secret")).await);
    let m = wrong
        .measure(&ctx(), &metric(&address, json!({"region": REGION})))
        .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    assert_eq!(
        m.message.as_deref(),
        Some(
            "prometheus returned 403 Forbidden: {\"message\": \"SignatureDoesNotMatch: the \
             signature botocore calculates differs\"}"
        )
    );

    // The region signed for is the one configured, over the chain's.
    let m = right
        .measure(&ctx(), &metric(&address, json!({"region": "eu-west-1"})))
        .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    assert!(
        m.message
            .unwrap()
            .contains("signed for region eu-west-1, not us-east-1")
    );

    // As in Argo, an address that is not AMP's is not signed, whatever sigv4 says.
    let m = right
        .measure(
            &ctx(),
            &metric(&format!("{}/other", proxy.url()), json!({"region": REGION})),
        )
        .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    assert!(m.message.unwrap().contains("no SigV4 Authorization header"));
}

#[tokio::test]
async fn a_role_is_assumed_through_sts_and_its_credentials_sign() {
    let role = RoleCredentials {
        key: "ASIASLUICEROLE".to_owned(),
        secret: "role-secret".to_owned(),
        token: "role-session-token".to_owned(),
    };
    let (_prometheus, proxy) = start(Some(role.clone())).await;
    let address = format!("{}{WORKSPACE}", proxy.url());
    // No region in sigv4: the chain's is used, for STS and for the query.
    let p = providers(Default::default()).with_aws(aws(&proxy.url(), Some(REGION), KEY).await);
    let arn = "arn:aws:iam::123456789012:role/amp-query";
    let m = p
        .measure(&ctx(), &metric(&address, json!({"roleArn": arn})))
        .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Successful), "{:?}", m.message);
    let log = proxy.log().await.unwrap();
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0]["service"], "sts");
    assert_eq!(log[0]["key"], KEY.0);
    assert_eq!(log[0]["role_arn"], arn);
    assert_eq!(log[0]["refused"], serde_json::Value::Null);
    let session = log[0]["session_name"].as_str().unwrap();
    assert!(session.chars().all(|c| c.is_ascii_digit()), "{session}");
    assert_eq!(log[1]["service"], "aps");
    assert_eq!(log[1]["key"], role.key.as_str());
    assert_eq!(log[1]["refused"], serde_json::Value::Null);

    // STS refusing the caller is an Error naming the role.
    let wrong = providers(Default::default())
        .with_aws(aws(&proxy.url(), Some(REGION), (KEY.0, "not-the-secret")).await);
    let m = wrong
        .measure(&ctx(), &metric(&address, json!({"roleArn": arn})))
        .await;
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    let message = m.message.unwrap();
    assert!(
        message.starts_with("failed to sign request: ")
            && message.contains("SignatureDoesNotMatch"),
        "{message}"
    );
}

#[tokio::test]
async fn credentials_and_region_must_be_found() {
    let address = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-1";
    let cases = [
        (
            aws("http://127.0.0.1:1", None, KEY).await,
            json!({"roleArn": "arn:aws:iam::1:role/r"}),
            "region not configured in sigv4 or in default credentials chain",
        ),
        (
            sluice_aws::loader()
                .region(sluice_aws::Region::new(REGION))
                .no_credentials()
                .load()
                .await,
            json!({"region": REGION}),
            "could not get SigV4 credentials: no AWS credentials provider configured",
        ),
        (
            aws("http://127.0.0.1:1", Some(REGION), KEY).await,
            json!({"profile": "sluice-test-no-such-profile"}),
            "could not get SigV4 credentials: no credentials for profile \"sluice-test-no-such-profile\"",
        ),
    ];
    for (config, sigv4, message) in cases {
        let p = providers(Default::default()).with_aws(config);
        let m = p.measure(&ctx(), &metric(address, sigv4.clone())).await;
        assert_eq!(m.phase, Some(AnalysisPhase::Error), "{sigv4}");
        let got = m.message.unwrap();
        assert!(got.starts_with(message), "{sigv4}: {got}");
    }
}

#[test]
fn argo_signs_only_amp_addresses_with_sigv4_set() {
    let auth = |sigv4: serde_json::Value| -> Authentication {
        serde_json::from_value(json!({"sigv4": sigv4})).unwrap()
    };
    let amp = "https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/ws-1";
    assert!(wanted(amp, Some(&auth(json!({"region": "eu-west-1"})))).is_some());
    assert!(wanted(amp, Some(&auth(json!({"profile": "p"})))).is_some());
    assert!(wanted(amp, Some(&auth(json!({"roleArn": "arn"})))).is_some());
    assert!(wanted(amp, Some(&auth(json!({"region": ""})))).is_none());
    assert!(wanted(amp, Some(&auth(json!({})))).is_none());
    assert!(wanted(amp, None).is_none());
    assert!(
        wanted(
            "http://prometheus:9090",
            Some(&auth(json!({"region": "x"})))
        )
        .is_none()
    );
}
