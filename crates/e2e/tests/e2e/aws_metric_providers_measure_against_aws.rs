//! The AWS metric providers measured by the controller on the local control plane: the
//! `cloudWatch` provider against moto's CloudWatch API (every request's SigV4 signature checked
//! by moto's IAM), and Prometheus with `authentication.sigv4` against a real Prometheus behind a
//! proxy that checks signatures with botocore, as Amazon Managed Service for Prometheus does.
//! Each gives a Successful, a Failed and an Error measurement, read from the AnalysisRuns.
//!
//! The controller finds AWS as a deployed one does: the SDK's default chain, from the
//! environment (`AWS_ENDPOINT_URL`, `AWS_REGION`, the keys) and the shared credentials file,
//! whose `stale` profile has the right access key id with a wrong secret. Those are the
//! process's environment, so the controller runs in a child process of this test binary
//! started with it; the parent starts the servers, and checks what the proxy saw.

use std::collections::BTreeMap;
use std::time::{Instant, SystemTime};

use serde_json::{Value, json};
use sluice_api::analysis::{AnalysisRun, Measurement};
use sluice_api::common::AnalysisPhase;
use sluice_e2e::harness::{TestNamespace, wait_for};
use sluice_e2e::{TIMEOUT, setup};
use sluice_testenv::moto::{Moto, REGION};
use sluice_testenv::prometheus::Prometheus;
use sluice_testenv::sigv4_proxy::{Sigv4Proxy, Sigv4ProxyConfig};

/// This test's name as libtest lists it, `<module>::<function>` (the binary holds every
/// end-to-end test): the child process runs it alone, in its other role.
fn test_name() -> String {
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    format!("{module}::cloud_watch_and_signed_prometheus_measure_against_aws")
}
/// Set in the child's environment to the Prometheus address (AMP's path, through the proxy).
const CHILD_AMP_ADDRESS: &str = "SLUICE_E2E_AWS_CHILD_AMP_ADDRESS";
/// The path AMP's addresses have here (Sluice signs only for an `aps-workspaces` address, as
/// Argo); the proxy takes it off before Prometheus sees the query.
const WORKSPACE: &str = "/aps-workspaces/workspaces/ws-e2e";
/// The profile in the shared credentials file with a secret AWS does not know.
const STALE_PROFILE: &str = "stale";
const WRONG_SECRET: &str = "not-the-secret-of-this-key";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloud_watch_and_signed_prometheus_measure_against_aws() {
    if let Ok(amp) = std::env::var(CHILD_AMP_ADDRESS) {
        return child(&amp).await;
    }
    let started = Instant::now();
    let moto = Moto::start_checking_signatures().await.expect("moto");
    let (key_id, secret) = moto.key();
    let prometheus = Prometheus::start(&[]).await.expect("prometheus");
    let proxy = Sigv4Proxy::start(&Sigv4ProxyConfig {
        upstream: prometheus.address(),
        strip: WORKSPACE.to_owned(),
        service: "aps".to_owned(),
        region: REGION.to_owned(),
        // AMP knows the same IAM user moto does.
        keys: BTreeMap::from([(key_id.to_owned(), secret.to_owned())]),
        role: None,
    })
    .await
    .expect("SigV4 proxy");
    let dir = std::env::temp_dir().join(format!("sluice-e2e-aws-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let credentials = dir.join("credentials");
    std::fs::write(
        &credentials,
        format!(
            "[{STALE_PROFILE}]\naws_access_key_id = {key_id}\naws_secret_access_key = {WRONG_SECRET}\n"
        ),
    )
    .unwrap();

    let mut command = tokio::process::Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", &test_name(), "--nocapture"])
        .envs(moto.env())
        .env("AWS_SHARED_CREDENTIALS_FILE", &credentials)
        .env(CHILD_AMP_ADDRESS, format!("{}{WORKSPACE}", proxy.url()))
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_DEFAULT_REGION")
        .kill_on_drop(true);
    let out = command.output().await.expect("the child test ran");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("--- child test ---\n{stdout}\n{stderr}--- end of child test ---");
    assert!(out.status.success(), "the child test failed");
    assert!(stdout.contains("1 passed"), "{stdout}");

    // What AMP saw: the controller's queries, all signed with the IAM user's key; the
    // default chain's secret accepted, the stale profile's refused by botocore.
    let log = proxy.log().await.expect("the proxy's log");
    assert_eq!(log.len(), 3, "{log:#?}");
    for (seen, refused) in log.iter().zip([false, false, true]) {
        assert_eq!(seen["service"], "aps", "{seen}");
        assert_eq!(seen["key"], key_id, "{seen}");
        assert_eq!(seen["path"], format!("{WORKSPACE}/api/v1/query"), "{seen}");
        assert_eq!(!seen["refused"].is_null(), refused, "{seen}");
    }
    assert!(
        log[2]["refused"]
            .as_str()
            .is_some_and(|why| why.contains("SignatureDoesNotMatch")),
        "{}",
        log[2]
    );
    eprintln!("AWS metric providers end to end: {:?}", started.elapsed());
}

/// In the child, whose environment points the SDK's default chain at moto: the controller,
/// and the runs it measures.
async fn child(amp: &str) {
    let (_env, ns, _controller) = setup("aws-metrics").await;
    let aws = sluice_aws::sdk_config().await;
    assert!(
        aws.endpoint_url()
            .is_some_and(|url| url.starts_with("http://127.0.0.1:")),
        "the default chain reads AWS_ENDPOINT_URL: {:?}",
        aws.endpoint_url()
    );
    put_metric(aws, "errors", 0.25).await;

    // cloudWatch: Argo's documented condition, true then false; then a query CloudWatch
    // refuses (a query needs a metricStat or an expression).
    let errors = json!([{"id": "errors", "metricStat": {
        "metric": {"namespace": "Sluice/E2E", "metricName": "errors"},
        "period": 60, "stat": "Maximum"}}]);
    let cloud_watch = |queries: &Value| json!({"cloudWatch": {"metricDataQueries": queries}});
    let cases = [
        (
            "cw-good",
            cloud_watch(&errors),
            "all(result[0].Values, {# <= 0.5})",
        ),
        (
            "cw-bad",
            cloud_watch(&errors),
            "all(result[0].Values, {# <= 0.1})",
        ),
        (
            "cw-refused",
            cloud_watch(&json!([{"id": "nothing"}])),
            "true",
        ),
    ];
    for (name, provider, condition) in &cases {
        ns.apply_yaml(&run(name, provider.clone(), condition))
            .await
            .unwrap();
    }
    let (phase, m) = finished(&ns, "cw-good").await;
    assert_eq!(phase, AnalysisPhase::Successful, "{m:?}");
    assert_eq!(m.phase, Some(AnalysisPhase::Successful));
    assert_eq!(m.value.as_deref(), Some("[[0.25]]"));
    assert_eq!(m.message, None);
    let (phase, m) = finished(&ns, "cw-bad").await;
    assert_eq!(phase, AnalysisPhase::Failed, "{m:?}");
    assert_eq!(m.phase, Some(AnalysisPhase::Failed));
    assert_eq!(m.value.as_deref(), Some("[[0.25]]"));
    let (phase, m) = finished(&ns, "cw-refused").await;
    assert_eq!(phase, AnalysisPhase::Error, "{m:?}");
    assert_eq!(m.phase, Some(AnalysisPhase::Error));
    assert_eq!(m.value, None);
    let message = m.message.unwrap_or_default();
    assert!(
        message.starts_with(
            "operation error CloudWatch: GetMetricData, https response error StatusCode: 400, \
             RequestID: "
        ) && message.ends_with(
            "api error ValidationError: The parameter MetricDataQueries.member.1.MetricStat \
             is required."
        ),
        "{message}"
    );

    // Prometheus through AMP's signature check: the chain's credentials, a true then a false
    // condition; then the stale profile's, which AMP refuses. One at a time, so that the
    // proxy's log is in this order.
    let prometheus = |query: &str, sigv4: Value| {
        json!({"prometheus": {"address": amp, "query": query,
            "authentication": {"sigv4": sigv4}}})
    };
    let region = json!({"region": REGION});
    let stale = json!({"region": REGION, "profile": STALE_PROFILE});
    let condition = "result[0] >= 0.95";
    ns.apply_yaml(&run(
        "amp-good",
        prometheus("vector(0.99)", region.clone()),
        condition,
    ))
    .await
    .unwrap();
    let (phase, m) = finished(&ns, "amp-good").await;
    assert_eq!(phase, AnalysisPhase::Successful, "{m:?}");
    assert_eq!(m.value.as_deref(), Some("[0.99]"));
    assert_eq!(m.message, None);
    ns.apply_yaml(&run(
        "amp-bad",
        prometheus("vector(0.5)", region),
        condition,
    ))
    .await
    .unwrap();
    let (phase, m) = finished(&ns, "amp-bad").await;
    assert_eq!(phase, AnalysisPhase::Failed, "{m:?}");
    assert_eq!(m.value.as_deref(), Some("[0.5]"));
    ns.apply_yaml(&run(
        "amp-stale-key",
        prometheus("vector(0.99)", stale),
        condition,
    ))
    .await
    .unwrap();
    let (phase, m) = finished(&ns, "amp-stale-key").await;
    assert_eq!(phase, AnalysisPhase::Error, "{m:?}");
    assert_eq!(m.value, None);
    assert_eq!(
        m.message.as_deref(),
        Some(
            "prometheus returned 403 Forbidden: {\"message\": \"SignatureDoesNotMatch: the \
             signature botocore calculates differs\"}"
        )
    );
}

/// An AnalysisRun of one metric measured once; its first Error ends it (rather than Argo's
/// retries every 10 s).
fn run(name: &str, provider: Value, success: &str) -> String {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisRun",
        "metadata": {"name": name},
        "spec": {"metrics": [{
            "name": "m",
            "successCondition": success,
            "consecutiveErrorLimit": 0,
            "provider": provider
        }]}
    })
    .to_string()
}

/// The run's phase once completed, and its last measurement.
async fn finished(ns: &TestNamespace, name: &str) -> (AnalysisPhase, Measurement) {
    let api = ns.api::<AnalysisRun>();
    let run = wait_for(&format!("run {name} to finish"), TIMEOUT, || async {
        let run = api.get(name).await?;
        match run.status.as_ref().and_then(|s| s.phase.clone()) {
            Some(p) if p.is_completed() => Ok(run),
            other => anyhow::bail!("{other:?}"),
        }
    })
    .await
    .unwrap();
    let status = run.status.unwrap();
    let results = status.metric_results.unwrap_or_default();
    let measurement = results[0]
        .measurements
        .as_ref()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_else(|| panic!("{name} has no measurement: {results:?}"));
    (status.phase.unwrap(), measurement)
}

/// Puts `value` of `metric` (namespace `Sluice/E2E`, 30 s ago) into CloudWatch with a
/// `PutMetricData` call signed as `config` says.
async fn put_metric(config: &sluice_aws::SdkConfig, metric: &str, value: f64) {
    let at = jiff::Timestamp::now().as_second() - 30;
    let body = json!({"Namespace": "Sluice/E2E",
        "MetricData": [{"MetricName": metric, "Value": value, "Timestamp": at}]})
    .to_string();
    let url = format!("{}/", sluice_aws::endpoint(config, "monitoring", REGION));
    let headers = [
        ("content-type", "application/x-amz-json-1.0"),
        (
            "x-amz-target",
            "GraniteServiceVersion20100801.PutMetricData",
        ),
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
    let mut put = reqwest::Client::new().post(&url).body(body);
    for (name, value) in headers.iter().copied() {
        put = put.header(name, value);
    }
    for (name, value) in &signed {
        put = put.header(name, value);
    }
    let answer = put.send().await.expect("PutMetricData sent");
    let status = answer.status();
    assert_eq!(status, 200, "{:?}", answer.text().await);
}
