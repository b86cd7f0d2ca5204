//! The `InvalidSpec` message of a Rollout Argo cannot act on is Argo CD's health message, so
//! Sluice must write it byte for byte as Argo Rollouts 1.9.1 does. Each Rollout here trips one
//! of Argo's field errors, chosen for the Go type of the offending value, which Kubernetes'
//! field errors render by type: strings quoted (`%q`), numbers and booleans bare, anything
//! else as Go's `encoding/json` writes it (a `map[string]string` of labels as `{"app":"other"}`,
//! an `IntOrString` as `0` or `"0%"`, a nil pointer as `null`, a slice of structs as a JSON
//! array; Argo's older test fixtures show `map[string]string{...}`, Go's `%#v`, which is what
//! apimachinery printed before it used JSON). The same Rollouts go to Argo's own controller
//! (built from its Go module) in one namespace and to Sluice in another, and the two
//! controllers' conditions are compared. Three of them use Istio routing where the Istio CRDs
//! are not installed: Argo checks the spec before it looks for the VirtualService, so the spec
//! error is reported all the same.

use std::collections::BTreeMap;

use kube::Api;
use sluice_api::Rollout;
use sluice_api::rollout::RolloutConditionType;
use sluice_e2e::harness::{ArgoController, TestEnv, TestNamespace, wait_for};
use sluice_e2e::*;

/// A Rollout named `name` with the given spec fields over a valid canary (one replica,
/// selector and template labels `app: <name>`, one step).
fn rollout(name: &str, spec: &str) -> String {
    let base = format!(
        r#"apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: {name}
spec:
  replicas: 1
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      containers:
      - name: web
        image: nginx:1.0
  strategy:
    canary:
      steps: [{{setWeight: 10}}]
"#
    );
    if spec.is_empty() {
        return base;
    }
    // Later keys of a YAML mapping may not repeat earlier ones, so `spec` replaces the
    // sections it names.
    let mut doc = sluice_api::yaml::from_multi_doc_str(&base)
        .unwrap()
        .remove(0);
    let extra: serde_json::Value = serde_json::from_str(spec).unwrap();
    for (k, v) in extra.as_object().unwrap() {
        doc["spec"][k] = v.clone();
    }
    serde_json::to_string(&doc).unwrap()
}

/// (name, spec fields): each trips one field error of Argo's validator, by value type.
fn cases() -> Vec<(&'static str, String)> {
    let cases: Vec<(&str, &str)> = vec![
        // map[string]string, two keys (sorted by encoding/json).
        (
            "labels-mismatch",
            r#"{"selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "other", "tier": "a"}},
                             "spec": {"containers": [{"name": "web", "image": "nginx:1.0"}]}}}"#,
        ),
        // *metav1.LabelSelector, empty.
        (
            "empty-selector",
            r#"{"selector": {},
                "template": {"metadata": {"labels": {"app": "x"}},
                             "spec": {"containers": [{"name": "web", "image": "nginx:1.0"}]}}}"#,
        ),
        // intstr.IntOrString, an int and a string.
        (
            "surge-int",
            r#"{"strategy": {"canary": {"maxSurge": 0, "maxUnavailable": 0,
                                        "steps": [{"setWeight": 10}]}}}"#,
        ),
        (
            "surge-percent",
            r#"{"strategy": {"canary": {"maxSurge": "0%", "maxUnavailable": "0%",
                                        "steps": [{"setWeight": 10}]}}}"#,
        ),
        // string.
        (
            "same-services",
            r#"{"strategy": {"canary": {"stableService": "web", "canaryService": "web",
                                        "steps": [{"setWeight": 10}]}}}"#,
        ),
        // int32.
        (
            "weight-too-high",
            r#"{"strategy": {"canary": {"steps": [{"setWeight": 101}]}}}"#,
        ),
        // bool.
        (
            "dynamic-stable-scale",
            r#"{"strategy": {"canary": {"dynamicStableScale": true,
                                        "steps": [{"setWeight": 10}]}}}"#,
        ),
        // A nil *ALBTrafficRouting.
        (
            "ping-pong-without-alb",
            r#"{"strategy": {"canary": {
                  "pingPong": {"pingService": "ping", "pongService": "pong"},
                  "trafficRouting": {"nginx": {"stableIngress": "web"}},
                  "steps": [{"setWeight": 10}]}}}"#,
        ),
        // []AnalysisRunArgument.
        (
            "analysis-args",
            r#"{"strategy": {"canary": {"steps": [{"analysis": {
                  "templates": [{"templateName": "t"}],
                  "args": [{"name": "a", "value": "1"},
                           {"name": "b", "valueFrom": {"fieldRef": {"fieldPath": "metadata.nothing"}}}]}}]}}}"#,
        ),
        // A *StringMatch with no value (the CRD requires one), and one with two values.
        (
            "header-route-empty-match",
            r#"{"strategy": {"canary": {
                  "stableService": "stable", "canaryService": "canary",
                  "trafficRouting": {"istio": {"virtualService": {"name": "vs"}},
                                     "managedRoutes": [{"name": "r"}]},
                  "steps": [{"setHeaderRoute": {"name": "r",
                              "match": [{"headerName": "h", "headerValue": {}}]}}]}}}"#,
        ),
        (
            "header-route-two-values",
            r#"{"strategy": {"canary": {
                  "stableService": "stable", "canaryService": "canary",
                  "trafficRouting": {"istio": {"virtualService": {"name": "vs"}},
                                     "managedRoutes": [{"name": "r"}]},
                  "steps": [{"setHeaderRoute": {"name": "r",
                              "match": [{"headerName": "h",
                                         "headerValue": {"exact": "a", "prefix": "b"}}]}}]}}}"#,
        ),
        // A step naming a route that is not managed: string.
        (
            "unmanaged-route",
            r#"{"strategy": {"canary": {
                  "stableService": "stable", "canaryService": "canary",
                  "trafficRouting": {"istio": {"virtualService": {"name": "vs"}},
                                     "managedRoutes": [{"name": "r"}]},
                  "steps": [{"setHeaderRoute": {"name": "other",
                              "match": [{"headerName": "h", "headerValue": {"exact": "a"}}]}}]}}}"#,
        ),
        // int32 of the soft anti-affinity weight; the strategy's own string value.
        (
            "anti-affinity-weight",
            r#"{"strategy": {"canary": {
                  "antiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": {"weight": 0}},
                  "steps": [{"setWeight": 10}]}}}"#,
        ),
        (
            "two-strategies",
            r#"{"strategy": {"canary": {"steps": [{"setWeight": 10}]},
                             "blueGreen": {"activeService": "active"}}}"#,
        ),
    ];
    cases
        .into_iter()
        .map(|(name, spec)| (name, rollout(name, spec)))
        .collect()
}

/// The `InvalidSpec` message of every Rollout in `ns`, once each has one.
async fn invalid_spec_messages(ns: &TestNamespace, names: &[&str]) -> BTreeMap<String, String> {
    let api: Api<Rollout> = ns.api();
    wait_for(
        "an InvalidSpec condition on every Rollout",
        TIMEOUT,
        || async {
            let mut found = BTreeMap::new();
            for name in names {
                let ro = api.get(name).await?;
                let message = ro
                    .status
                    .iter()
                    .flat_map(|s| s.conditions.iter().flatten())
                    .find(|c| c.type_ == Some(RolloutConditionType::InvalidSpec))
                    .and_then(|c| c.message.clone())
                    .ok_or_else(|| anyhow::anyhow!("{name} has no InvalidSpec condition yet"))?;
                found.insert(name.to_string(), message);
            }
            Ok(found)
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_spec_messages_match_argo() {
    let env = TestEnv::with_crds().await.expect("local control plane");
    let cases = cases();
    let names: Vec<&str> = cases.iter().map(|(n, _)| *n).collect();

    let argo_ns = TestNamespace::create(&env, "invalid-argo").await.unwrap();
    let argo = ArgoController::start(&env, argo_ns.name(), &[])
        .await
        .unwrap_or_else(|e| panic!("starting Argo Rollouts: {e:#}"));
    let sluice_ns = TestNamespace::create(&env, "invalid-sluice").await.unwrap();
    let _sluice = start_controller(&env, &sluice_ns);
    for (name, manifest) in &cases {
        for ns in [&argo_ns, &sluice_ns] {
            ns.apply_yaml(manifest)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        }
    }

    let mut argos = invalid_spec_messages(&argo_ns, &names).await;
    // Sluice allows ping-pong with the routers Argo 1.10 allows it with, and says so in 1.10's
    // words; the value (a nil pointer, `null`) is compared all the same.
    if let Some(message) = argos.get_mut("ping-pong-without-alb") {
        *message = message.replace(
            "works with the ALB and Istio traffic routers only",
            "works with the ALB, Istio, and plugin-based traffic routers only",
        );
    }
    argo.stop().await.expect("stopping Argo Rollouts");
    let sluices = invalid_spec_messages(&sluice_ns, &names).await;
    let mut differences = Vec::new();
    for name in &names {
        let (a, s) = (&argos[*name], &sluices[*name]);
        eprintln!("{name}:\n  Argo:   {a}");
        if a != s {
            eprintln!("  Sluice: {s}");
            differences.push(*name);
        }
    }
    assert!(
        differences.is_empty(),
        "messages differ for {differences:?}"
    );
    // The labels are printed as encoding/json writes a map, not as Go's %#v.
    assert!(
        argos["labels-mismatch"].contains(r#"Invalid value: {"app":"other","tier":"a"}"#),
        "{}",
        argos["labels-mismatch"]
    );
}
