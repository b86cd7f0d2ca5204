//! ALB traffic routing on the real control plane, with the Rollouts of Argo's own AWS
//! end-to-end suite (the Ingress is only an API object here: no load balancer controller runs).
//!
//! Proven, against the text Argo writes:
//! - the Ingress annotation `alb.ingress.kubernetes.io/actions.<rootService>` is Argo's
//!   forward action, byte for byte (canary then stable, `ServicePort` a string), with the
//!   weights 0/100 after the first deploy, the weight of every step of an update, 100 at the
//!   end of the steps and 0/100 on the new stable once promoted; the key is listed in
//!   `rollouts.argoproj.io/managed-alb-annotations`;
//! - `status.canary.weights.verified` is never set and `status.alb`/`status.albs` stay absent
//!   (Argo without `--aws-verify-target-group`);
//! - an abort puts all traffic back on stable while the canary still has its pods, which go
//!   only after the abort scale-down delay;
//! - with `ingresses[]`, every Ingress carries the same weights at every step;
//! - a `rootService` that no Ingress routes to is Argo's reference-validation error;
//! - a `setHeaderRoute` step adds the header route's action, its conditions and a `/*` path
//!   ahead of the weighted one; a later step without `match` removes all three.

use kube::Api;
use kube::api::DynamicObject;
use serde_json::Value;
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::routing::*;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};

const MANAGED: &str = "rollouts.argoproj.io/managed-alb-annotations";

/// Waits until `recorder` has seen the object once, so that no later change is missed.
async fn started<T: Clone + PartialEq + Send + 'static>(recorder: &Recorder<T>) {
    wait_for("the recorder's first observation", TIMEOUT, || async {
        anyhow::ensure!(!recorder.values().await.is_empty(), "nothing yet");
        Ok(())
    })
    .await
    .unwrap();
}

fn action_key(name: &str) -> String {
    format!("alb.ingress.kubernetes.io/actions.{name}")
}

fn condition_key(name: &str) -> String {
    format!("alb.ingress.kubernetes.io/conditions.{name}")
}

/// Argo's forward action as its e2e suite spells it (`actionTemplate` in
/// `test/e2e/aws_test.go`): target groups in order, the port as a string.
fn forward(port: i64, groups: &[(&str, i64)]) -> String {
    let groups: Vec<String> = groups
        .iter()
        .map(|(svc, w)| format!(r#"{{"ServiceName":"{svc}","ServicePort":"{port}","Weight":{w}}}"#))
        .collect();
    format!(
        r#"{{"Type":"forward","ForwardConfig":{{"TargetGroups":[{}]}}}}"#,
        groups.join(",")
    )
}

fn annotation(ingress: &Value, key: &str) -> Option<String> {
    ingress["metadata"]["annotations"][key]
        .as_str()
        .map(str::to_string)
}

/// `(canary, stable)` weights of a parsed forward action, checking its shape on the way: a
/// forward with exactly these two target groups, each port a string.
fn weights(action: &str, port: &str, canary: &str, stable: &str) -> (i64, i64) {
    let v: Value = serde_json::from_str(action).expect("the action is JSON");
    assert_eq!(v["Type"], "forward", "{action}");
    let groups = v["ForwardConfig"]["TargetGroups"]
        .as_array()
        .expect("target groups");
    let names: Vec<&str> = groups
        .iter()
        .map(|g| g["ServiceName"].as_str().unwrap())
        .collect();
    assert_eq!(names, [canary, stable], "{action}");
    for g in groups {
        assert_eq!(g["ServicePort"].as_str(), Some(port), "{action}");
    }
    (
        groups[0]["Weight"].as_i64().unwrap(),
        groups[1]["Weight"].as_i64().unwrap(),
    )
}

async fn ingress(ns: &TestNamespace, name: &str) -> Value {
    json_of(&ingresses(ns).get(name).await.unwrap())
}

/// Waits until the annotation `key` of Ingress `name` reads `expected` (`None`: absent).
async fn wait_annotation(ns: &TestNamespace, name: &str, key: &str, expected: Option<&str>) {
    wait_for(&format!("{name} {key} = {expected:?}"), TIMEOUT, || async {
        let got = annotation(&json_of(&ingresses(ns).get(name).await?), key);
        anyhow::ensure!(got.as_deref() == expected, "{got:?}");
        Ok(())
    })
    .await
    .unwrap();
}

/// The Rollouts as raw JSON, so that fields the typed client might drop are seen as written.
fn raw_rollouts(ns: &TestNamespace) -> Api<DynamicObject> {
    router_api(ns, "argoproj.io", "v1alpha1", "Rollout", "rollouts")
}

/// What a Rollout says about ALB verification: `weights.verified` and whether `status.alb`
/// and `status.albs` exist.
fn verification(ro: &Value) -> Option<(Value, bool, bool)> {
    let status = ro.get("status")?;
    Some((
        status
            .pointer("/canary/weights/verified")
            .cloned()
            .unwrap_or(Value::Null),
        status.get("alb").is_some(),
        status.get("albs").is_some(),
    ))
}

async fn hashes(api: &Api<sluice_api::Rollout>, name: &str) -> (String, String) {
    let s = api.get(name).await.unwrap().status.unwrap();
    (s.stable_rs.unwrap(), s.current_pod_hash.unwrap())
}

/// Waits until the Rollout is paused at step `index`.
async fn wait_paused_at(api: &Api<sluice_api::Rollout>, name: &str, index: i32) {
    wait_for(
        &format!("{name} paused at step {index}"),
        TIMEOUT,
        || async {
            let ro = api.get(name).await?;
            let s = ro.status.clone().unwrap_or_default();
            anyhow::ensure!(
                s.current_step_index == Some(index)
                    && observed_phase(&ro) == Some(RolloutPhase::Paused),
                "step {:?} phase {:?}",
                s.current_step_index,
                s.phase
            );
            Ok(())
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alb_action_carries_every_step_weight_and_zero_on_the_new_stable() {
    let (_env, ns, _controller) = setup("alb").await;
    // Unchanged: setWeight 10, pause 5 s, setWeight 20, pause 5 s; one replica.
    ns.apply_yaml(&corpus_file("test/e2e/functional/alb-canary-rollout.yaml"))
        .await
        .unwrap();
    let api = rollouts(&ns);
    let name = "alb-canary";
    let (canary_svc, stable_svc) = ("alb-canary-desired", "alb-canary-stable");
    let key = action_key("alb-canary-root");
    let at = |canary: i64| forward(80, &[(canary_svc, canary), (stable_svc, 100 - canary)]);
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;

    // After the first deploy: everything on stable, the key recorded as the Rollout's.
    wait_annotation(&ns, "alb-canary-ingress", &key, Some(&at(0))).await;
    let first = ingress(&ns, "alb-canary-ingress").await;
    assert_eq!(
        weights(
            &annotation(&first, &key).unwrap(),
            "80",
            canary_svc,
            stable_svc
        ),
        (0, 100)
    );
    assert_eq!(
        annotation(&first, MANAGED).as_deref(),
        Some(r#"{"alb-canary":["alb.ingress.kubernetes.io/actions.alb-canary-root"]}"#)
    );
    assert_eq!(
        first["metadata"]["annotations"]["kubernetes.io/ingress.class"],
        "alb"
    );
    let recorder = Recorder::start(ingresses(&ns), "alb-canary-ingress", {
        let key = key.clone();
        move |i| annotation(i, &key)
    });
    let verify = Recorder::start(raw_rollouts(&ns), name, verification);
    started(&recorder).await;
    started(&verify).await;

    let (before, _) = hashes(&api, name).await;
    set_image(&api, name, "nginx:1.20-alpine").await;
    let after = wait_promoted(&api, name, &before).await;
    wait_annotation(&ns, "alb-canary-ingress", &key, Some(&at(0))).await;
    assert_eq!(
        recorder.values().await,
        vec![at(0), at(10), at(20), at(100), at(0)],
        "the ALB action over the update"
    );
    let done = ingress(&ns, "alb-canary-ingress").await;
    assert_eq!(
        annotation(&done, MANAGED).as_deref(),
        Some(r#"{"alb-canary":["alb.ingress.kubernetes.io/actions.alb-canary-root"]}"#)
    );
    // Both Services on the new pods; the weights recorded on the new stable.
    wait_for("both Services on the new pods", TIMEOUT, || async {
        let c = service_hash(&ns, canary_svc).await;
        let s = service_hash(&ns, stable_svc).await;
        anyhow::ensure!(
            c.as_deref() == Some(&after) && s.as_deref() == Some(&after),
            "{c:?} {s:?}"
        );
        Ok(())
    })
    .await
    .unwrap();
    let w = api
        .get(name)
        .await
        .unwrap()
        .status
        .unwrap()
        .canary
        .unwrap()
        .weights
        .unwrap();
    let (c, s) = (w.canary.unwrap(), w.stable.unwrap());
    assert_eq!(
        (c.weight, c.pod_template_hash.as_deref()),
        (Some(0), Some(after.as_str()))
    );
    assert_eq!(
        (s.weight, s.pod_template_hash.as_deref()),
        (Some(100), Some(after.as_str()))
    );
    // The update's events name the Ingress and each weight.
    let events = rollout_events(&ns, name).await;
    for w in [10, 20, 100, 0] {
        let message = format!("Updating Ingress `alb-canary-ingress` to desiredWeight '{w}'");
        assert!(
            events
                .iter()
                .any(|(r, m)| r == "PatchingALBIngress" && *m == message),
            "{message} in {events:?}"
        );
    }
    // No target-group verification without AWS: never verified, no ALB status.
    assert_eq!(verify.values().await, vec![(Value::Null, false, false)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alb_abort_returns_traffic_to_stable_before_the_canary_scales_down() {
    let (_env, ns, _controller) = setup("alb-abort").await;
    // Adapted: the first pause is indefinite, so that the abort lands at 10%.
    let manifest = corpus_file("test/e2e/functional/alb-canary-rollout.yaml").replacen(
        "- pause: {duration: 5s}",
        "- pause: {}",
        1,
    );
    ns.apply_yaml(&manifest).await.unwrap();
    let api = rollouts(&ns);
    let name = "alb-canary";
    let (canary_svc, stable_svc) = ("alb-canary-desired", "alb-canary-stable");
    let key = action_key("alb-canary-root");
    let at = |canary: i64| forward(80, &[(canary_svc, canary), (stable_svc, 100 - canary)]);
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    wait_annotation(&ns, "alb-canary-ingress", &key, Some(&at(0))).await;
    let recorder = Recorder::start(ingresses(&ns), "alb-canary-ingress", {
        let key = key.clone();
        move |i| annotation(i, &key)
    });
    started(&recorder).await;

    set_image(&api, name, "nginx:1.20-alpine").await;
    wait_paused_at(&api, name, 1).await;
    let (stable, canary) = hashes(&api, name).await;
    assert_eq!(
        weights(
            &annotation(&ingress(&ns, "alb-canary-ingress").await, &key).unwrap(),
            "80",
            canary_svc,
            stable_svc
        ),
        (10, 90)
    );
    wait_replicas(
        &ns,
        name,
        &[("nginx:1.19-alpine", 1), ("nginx:1.20-alpine", 1)],
        TIMEOUT,
    )
    .await;

    abort(&api, name).await;
    wait_annotation(&ns, "alb-canary-ingress", &key, Some(&at(0))).await;
    // Traffic is back on stable while the canary still has its pod.
    let canary_rs = replicas_by_image(&ns, name).await["nginx:1.20-alpine"];
    assert_eq!(
        canary_rs.0, 1,
        "the canary keeps its pod while traffic leaves it"
    );
    wait_for("the canary Service back on stable", TIMEOUT, || async {
        let h = service_hash(&ns, canary_svc).await;
        anyhow::ensure!(h.as_deref() == Some(stable.as_str()), "{h:?}");
        Ok(())
    })
    .await
    .unwrap();
    assert_eq!(
        service_hash(&ns, stable_svc).await.as_deref(),
        Some(stable.as_str())
    );
    wait_phase(&api, name, RolloutPhase::Degraded, TIMEOUT).await;
    // abortScaleDownDelaySeconds: 30 s by default with a router; then the canary goes.
    wait_replicas(
        &ns,
        name,
        &[("nginx:1.19-alpine", 1), ("nginx:1.20-alpine", 0)],
        TIMEOUT,
    )
    .await;
    assert_eq!(recorder.values().await, vec![at(0), at(10), at(0)]);
    let w = api
        .get(name)
        .await
        .unwrap()
        .status
        .unwrap()
        .canary
        .unwrap()
        .weights
        .unwrap();
    assert_eq!(w.canary.as_ref().unwrap().weight, Some(0));
    assert_eq!(
        w.canary.as_ref().unwrap().pod_template_hash.as_deref(),
        Some(canary.as_str())
    );
    assert_eq!(w.stable.as_ref().unwrap().weight, Some(100));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alb_weights_reach_every_ingress_of_ingresses_list() {
    let (_env, ns, _controller) = setup("alb-multi").await;
    // Adapted: the corpus file's rootService (`alb-canary-root`) is not the Service its
    // Ingresses route to (see the next test); here it is the one they do.
    let manifest = corpus_file("test/e2e/functional/alb-canary-multi-ingress-rollout.yaml")
        .replace(
            "rootService: alb-canary-root",
            "rootService: alb-canary-multi-ingress-root",
        );
    ns.apply_yaml(&manifest).await.unwrap();
    let api = rollouts(&ns);
    let name = "alb-canary-multi-ingress";
    let (canary_svc, stable_svc) = (
        "alb-canary-multi-ingress-desired",
        "alb-canary-multi-ingress-stable",
    );
    let key = action_key("alb-canary-multi-ingress-root");
    let at = |canary: i64| forward(80, &[(canary_svc, canary), (stable_svc, 100 - canary)]);
    let ingress_names = ["alb-canary-multi-ingress-1", "alb-canary-multi-ingress-2"];
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    let mut recorders = Vec::new();
    for i in ingress_names {
        wait_annotation(&ns, i, &key, Some(&at(0))).await;
        let k = key.clone();
        recorders.push(Recorder::start(ingresses(&ns), i, move |v| {
            annotation(v, &k)
        }));
    }

    for r in &recorders {
        started(r).await;
    }
    let (before, _) = hashes(&api, name).await;
    set_image(&api, name, "nginx:1.20-alpine").await;
    wait_promoted(&api, name, &before).await;
    for i in ingress_names {
        wait_annotation(&ns, i, &key, Some(&at(0))).await;
        let managed = annotation(&ingress(&ns, i).await, MANAGED);
        assert_eq!(
            managed.as_deref(),
            Some(
                r#"{"alb-canary-multi-ingress":["alb.ingress.kubernetes.io/actions.alb-canary-multi-ingress-root"]}"#
            ),
            "{i}"
        );
    }
    for (i, r) in ingress_names.iter().zip(&recorders) {
        assert_eq!(
            r.values().await,
            vec![at(0), at(10), at(20), at(100), at(0)],
            "the ALB action of {i} over the update"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alb_root_service_no_ingress_routes_to_is_an_invalid_spec() {
    let (_env, ns, _controller) = setup("alb-bad-root").await;
    // Unchanged: both Ingresses route to `alb-canary-multi-ingress-root`, the Rollout names
    // `alb-canary-root`.
    ns.apply_yaml(&corpus_file(
        "test/e2e/functional/alb-canary-multi-ingress-rollout.yaml",
    ))
    .await
    .unwrap();
    let name = "alb-canary-multi-ingress";
    // Argo's reference validation (`validateAlbIngress`), first error only: the Rollout is
    // InvalidSpec and nothing is deployed.
    let expected = "The Rollout \"alb-canary-multi-ingress\" is invalid: \
        spec.strategy.canary.trafficRouting.alb.ingresses: Invalid value: \
        \"alb-canary-multi-ingress-1\": ingress `alb-canary-multi-ingress-1` has no rules \
        using service alb-canary-root backend";
    let ro = wait_for("the InvalidSpec condition", TIMEOUT, || async {
        let ro = json_of(&raw_rollouts(&ns).get(name).await?);
        let cond = ro["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "InvalidSpec").cloned());
        anyhow::ensure!(cond.is_some(), "{}", ro["status"]);
        Ok(ro)
    })
    .await
    .unwrap();
    let cond = ro["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "InvalidSpec")
        .unwrap();
    assert_eq!(cond["status"], "True");
    assert_eq!(cond["reason"], "InvalidSpec");
    assert_eq!(cond["message"], expected);
    assert_eq!(ro["status"]["phase"], "Degraded");
    assert_eq!(ro["status"]["message"], format!("InvalidSpec: {expected}"));
    assert!(
        replicas_by_image(&ns, name).await.is_empty(),
        "no ReplicaSet for an invalid Rollout"
    );
    for i in ["alb-canary-multi-ingress-1", "alb-canary-multi-ingress-2"] {
        let ingress = ingress(&ns, i).await;
        assert_eq!(annotation(&ingress, MANAGED), None, "{i}");
        assert_eq!(
            annotation(&ingress, &action_key("alb-canary-root")),
            None,
            "{i}"
        );
    }
}

/// `spec.rules[0].http.paths` as `(path, pathType, backend Service, port)`, the port by name
/// or number.
fn paths(ingress: &Value) -> Vec<(String, String, String, String)> {
    ingress["spec"]["rules"][0]["http"]["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let port = &p["backend"]["service"]["port"];
            let port = port["name"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| port["number"].to_string());
            (
                p["path"].as_str().unwrap_or_default().to_string(),
                p["pathType"].as_str().unwrap_or_default().to_string(),
                p["backend"]["service"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                port,
            )
        })
        .collect()
}

fn path(backend: &str) -> (String, String, String, String) {
    (
        "/*".into(),
        "ImplementationSpecific".into(),
        backend.into(),
        "use-annotation".into(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alb_header_route_step_adds_conditions_and_a_path_and_a_later_step_removes_them() {
    let (_env, ns, _controller) = setup("alb-header").await;
    // Unchanged: setWeight 20, pause, setHeaderRoute (Custom-Header = Mozilla*), pause,
    // setHeaderRoute without match, pause; five replicas.
    ns.apply_yaml(&corpus_file(
        "test/e2e/header-routing/alb-header-route.yaml",
    ))
    .await
    .unwrap();
    let api = rollouts(&ns);
    let name = "rollouts-demo";
    let ing = "alb-rollout-ingress";
    let weighted = action_key("action1");
    let (route_action, route_conditions) =
        (action_key("header-route"), condition_key("header-route"));
    let at = |canary: i64| {
        forward(
            8080,
            &[("canary-service", canary), ("stable-service", 100 - canary)],
        )
    };
    let managed = |keys: &[&str]| {
        let keys: Vec<String> = keys.iter().map(|k| format!("\"{k}\"")).collect();
        format!(r#"{{"rollouts-demo":[{}]}}"#, keys.join(","))
    };
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    wait_annotation(&ns, ing, &weighted, Some(&at(0))).await;
    let first = ingress(&ns, ing).await;
    assert_eq!(annotation(&first, &route_action), None);
    assert_eq!(annotation(&first, &route_conditions), None);
    assert_eq!(paths(&first), vec![path("action1")]);
    assert_eq!(annotation(&first, MANAGED), Some(managed(&[&weighted])));

    set_image(&api, name, "argoproj/rollouts-demo:blue").await;
    wait_paused_at(&api, name, 1).await;
    let at_20 = ingress(&ns, ing).await;
    assert_eq!(annotation(&at_20, &weighted), Some(at(20)));
    assert_eq!(annotation(&at_20, &route_action), None);
    assert_eq!(paths(&at_20), vec![path("action1")]);

    // The setHeaderRoute step: everything matching goes to the canary, ahead of the weights.
    promote(&api, name).await;
    wait_paused_at(&api, name, 3).await;
    let routed = ingress(&ns, ing).await;
    assert_eq!(
        annotation(&routed, &route_action),
        Some(forward(8080, &[("canary-service", 100)]))
    );
    assert_eq!(
        annotation(&routed, &route_conditions).as_deref(),
        Some(
            r#"[{"field":"http-header","httpHeaderConfig":{"httpHeaderName":"Custom-Header","values":["Mozilla*"]}}]"#
        )
    );
    assert_eq!(annotation(&routed, &weighted), Some(at(20)));
    assert_eq!(paths(&routed), vec![path("header-route"), path("action1")]);
    assert_eq!(
        annotation(&routed, MANAGED),
        Some(managed(&[&weighted, &route_action, &route_conditions]))
    );

    // The setHeaderRoute step without match: the route is gone, the weights stay.
    promote(&api, name).await;
    wait_paused_at(&api, name, 5).await;
    let removed = ingress(&ns, ing).await;
    assert_eq!(annotation(&removed, &route_action), None);
    assert_eq!(annotation(&removed, &route_conditions), None);
    assert_eq!(paths(&removed), vec![path("action1")]);
    assert_eq!(annotation(&removed, &weighted), Some(at(20)));
    assert_eq!(annotation(&removed, MANAGED), Some(managed(&[&weighted])));

    promote(&api, name).await;
    wait_phase(&api, name, RolloutPhase::Healthy, TIMEOUT).await;
    wait_annotation(&ns, ing, &weighted, Some(&at(0))).await;
    let done = ingress(&ns, ing).await;
    assert_eq!(annotation(&done, &route_action), None);
    assert_eq!(annotation(&done, &route_conditions), None);
    assert_eq!(paths(&done), vec![path("action1")]);
}
