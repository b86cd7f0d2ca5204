//! Datadog and New Relic metrics measured by the controller against local servers that speak
//! each service's documented request and response format, credentials read from Secrets as
//! Argo names them; Graphite metrics against a real graphite-web.

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde_json::json;
use sluice_api::analysis::AnalysisRun;
use sluice_api::common::AnalysisPhase;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};
use sluice_testenv::http_stub::HttpStub;

/// Where the providers look for profile Secrets: the controller's namespace (`POD_NAMESPACE`,
/// else Argo's default).
const CONTROLLER_NAMESPACE: &str = "argo-rollouts";

async fn put_secret(client: kube::Client, ns: &str, name: &str, data: &[(&str, &str)]) {
    let api: Api<Secret> = Api::namespaced(client, ns);
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        string_data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..Default::default()
    };
    let _ = api.delete(name, &Default::default()).await;
    api.create(&PostParams::default(), &secret).await.unwrap();
}

async fn wait_run(ns: &TestNamespace, name: &str) -> AnalysisRun {
    let api = ns.api::<AnalysisRun>();
    wait_for(
        &format!("analysis run {name} to finish"),
        TIMEOUT,
        || async {
            let run = api.get(name).await?;
            match run.status.as_ref().and_then(|s| s.phase.clone()) {
                Some(p) if p.is_completed() => Ok(run),
                other => anyhow::bail!("{other:?}"),
            }
        },
    )
    .await
    .unwrap()
}

fn phase(run: &AnalysisRun) -> Option<AnalysisPhase> {
    run.status.as_ref().and_then(|s| s.phase.clone())
}

fn run(name: &str, metric: serde_json::Value) -> String {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisRun",
        "metadata": {"name": name},
        "spec": {"metrics": [metric]}
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn datadog_v2_metric_uses_the_namespaced_secret_and_judges_the_scalar() {
    let (env, ns, _controller) = setup("datadog").await;
    let datadog = HttpStub::start().await.unwrap();
    put_secret(
        env.client(),
        ns.name(),
        "dd-creds",
        &[
            ("address", &datadog.url("")),
            ("api-key", "dd-api-123"),
            ("app-key", "dd-app-456"),
        ],
    )
    .await;
    let metric = |name: &str| {
        json!({
            "name": name,
            "successCondition": "result < 0.05",
            "failureCondition": "result >= 0.05",
            "provider": {"datadog": {
                "apiVersion": "v2",
                "interval": "5m",
                "queries": {"a": "sum:requests.error{service:demo}.as_count()"},
                "formula": "a",
                "secretRef": {"name": "dd-creds", "namespaced": true}
            }}
        })
    };
    let scalar = |v: f64| {
        json!({"data": {"type": "scalar_response", "attributes": {"columns": [
            {"name": "a", "type": "number", "values": [v], "meta": {"unit": null}}
        ]}}})
    };
    datadog.respond_json(200, &scalar(0.01));
    ns.apply_yaml(&run("dd-good", metric("error-rate")))
        .await
        .unwrap();
    let good = wait_run(&ns, "dd-good").await;
    assert_eq!(
        phase(&good),
        Some(AnalysisPhase::Successful),
        "{:?}",
        good.status
    );

    datadog.respond_json(200, &scalar(0.5));
    ns.apply_yaml(&run("dd-bad", metric("error-rate")))
        .await
        .unwrap();
    let bad = wait_run(&ns, "dd-bad").await;
    assert_eq!(phase(&bad), Some(AnalysisPhase::Failed), "{:?}", bad.status);

    let requests = datadog.requests();
    let first = requests.first().expect("datadog was asked");
    assert_eq!(first.method, "POST");
    assert!(
        first.uri.starts_with("/api/v2/query/scalar"),
        "{}",
        first.uri
    );
    let header = |k: &str| {
        first
            .headers
            .iter()
            .find(|(name, _)| name == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(header("dd-api-key").as_deref(), Some("dd-api-123"));
    assert_eq!(header("dd-application-key").as_deref(), Some("dd-app-456"));
    let body: serde_json::Value = serde_json::from_str(&first.body).unwrap();
    assert_eq!(body["data"]["type"], "scalar_request");
    assert_eq!(
        body["data"]["attributes"]["queries"][0]["query"],
        "sum:requests.error{service:demo}.as_count()"
    );
    // The keys are credentials: never in the stored run.
    let stored =
        serde_json::to_string(&ns.api::<AnalysisRun>().get("dd-good").await.unwrap()).unwrap();
    assert!(!stored.contains("dd-api-123") && !stored.contains("dd-app-456"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_relic_nrql_metric_uses_the_profile_secret_and_judges_the_first_row() {
    let (env, ns, _controller) = setup("newrelic").await;
    let nerdgraph = HttpStub::start().await.unwrap();
    let namespaces: Api<Namespace> = Api::all(env.client());
    let _ = namespaces
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(CONTROLLER_NAMESPACE.into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await;
    // A profile of this test's own, so that other tests' Secrets do not matter.
    let profile = format!("newrelic-{}", ns.name());
    put_secret(
        env.client(),
        CONTROLLER_NAMESPACE,
        &profile,
        &[
            ("personal-api-key", "nr-key-789"),
            ("account-id", "1234567"),
            ("base-url-nerdgraph", &nerdgraph.url("/graphql")),
        ],
    )
    .await;
    let metric = json!({
        "name": "success-rate",
        "successCondition": "result.successRate >= 0.95",
        "failureCondition": "result.successRate < 0.95",
        "provider": {"newRelic": {
            "profile": profile,
            "query": "FROM Transaction SELECT percentage(count(*), WHERE httpResponseCode != 500) as successRate WHERE appName = 'demo'"
        }}
    });
    let answer = |rate: f64| json!({"data": {"actor": {"account": {"nrql": {"results": [{"successRate": rate}]}}}}});
    nerdgraph.respond_json(200, &answer(0.99));
    ns.apply_yaml(&run("nr-good", metric.clone()))
        .await
        .unwrap();
    let good = wait_run(&ns, "nr-good").await;
    assert_eq!(
        phase(&good),
        Some(AnalysisPhase::Successful),
        "{:?}",
        good.status
    );

    nerdgraph.respond_json(200, &answer(0.5));
    ns.apply_yaml(&run("nr-bad", metric)).await.unwrap();
    let bad = wait_run(&ns, "nr-bad").await;
    assert_eq!(phase(&bad), Some(AnalysisPhase::Failed), "{:?}", bad.status);

    let requests = nerdgraph.requests();
    let first = requests.first().expect("NerdGraph was asked");
    assert_eq!(first.method, "POST");
    assert_eq!(first.uri, "/graphql");
    assert!(
        first
            .headers
            .iter()
            .any(|(k, v)| k == "api-key" && v == "nr-key-789")
    );
    let body: serde_json::Value = serde_json::from_str(&first.body).unwrap();
    assert_eq!(body["variables"]["accountId"], 1234567);
    assert!(body["query"].as_str().unwrap().contains("nrql"));
    let _ = Api::<Secret>::namespaced(env.client(), CONTROLLER_NAMESPACE)
        .delete(&profile, &Default::default())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphite_metrics_measured_against_a_real_graphite_web() {
    let (_env, ns, _controller) = setup("graphite").await;
    let graphite = sluice_testenv::graphite::Graphite::start()
        .await
        .expect("graphite-web");
    let now = jiff::Timestamp::now().as_second();
    let at = now - now % 10 - 20;
    graphite
        .write(
            "shop.checkout.success_rate",
            &[(99.5, at - 10), (98.25, at)],
        )
        .unwrap();
    graphite
        .write("shop.checkout.degraded", &[(91.0, at)])
        .unwrap();
    let metric = |query: &str| {
        json!({
            "name": "graphite",
            "successCondition": "all(result, # >= 98)",
            "failureCondition": "any(result, # < 98)",
            "provider": {"graphite": {"address": graphite.address(), "query": query}}
        })
    };
    let cases = [
        (
            "graphite-good",
            "target=shop.checkout.success_rate&from=-2min",
            AnalysisPhase::Successful,
            Some("[99.500000,98.250000]"),
        ),
        (
            "graphite-bad",
            "target=shop.checkout.degraded&from=-2min",
            AnalysisPhase::Failed,
            Some("[91.000000]"),
        ),
        // A function graphite-web does not have: its error answer.
        (
            "graphite-error",
            "target=noSuchFunction(shop.checkout.degraded)",
            AnalysisPhase::Error,
            None,
        ),
    ];
    for (name, query, want, value) in cases {
        ns.apply_yaml(&run(name, metric(query))).await.unwrap();
        let done = wait_run(&ns, name).await;
        assert_eq!(
            phase(&done),
            Some(want.clone()),
            "{name}: {:?}",
            done.status
        );
        let status = done.status.unwrap();
        let measured = &status.metric_results.as_ref().unwrap()[0]
            .measurements
            .as_ref()
            .unwrap()[0];
        assert_eq!(measured.value.as_deref(), value, "{name}");
        if want == AnalysisPhase::Error {
            assert!(measured.message.is_some(), "{name}: {measured:?}");
        }
    }
}
