use super::argo::tests::{req, rollout};
use super::*;
use kube::runtime::reflector;
use kube::runtime::watcher::Event;
use serde_json::json;
use sluice_api::Rollout;

fn cached(ro: Rollout) -> CachedRollout {
    CachedRollout::new(ro).unwrap()
}

fn series_lines(text: &str, metric: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.starts_with(metric))
        .map(str::to_string)
        .collect()
}

#[test]
fn exposition_has_argo_names_and_drops_deleted_rollouts() {
    let m = Metrics::new("v0.1.0");
    let (reader, mut writer) = reflector::store::<CachedRollout>();
    let web = rollout(
        "a",
        "web",
        json!({"status": {"replicas": 4, "availableReplicas": 3, "updatedReplicas": 1,
            "conditions": [{"type": "Progressing", "status": "True", "reason": "RolloutPaused"}]}}),
    );
    let api = rollout("a", "web-api", json!({}));
    writer.apply_watcher_event(&Event::Apply(cached(web.clone())));
    writer.apply_watcher_event(&Event::Apply(cached(api.clone())));
    m.use_rollout_cache(reader);
    m.observe_reconcile("a", "web", Duration::from_millis(20), false);
    m.observe_reconcile("a", "web", Duration::from_millis(300), true);
    m.observe_reconcile("a", "web-api", Duration::from_millis(1), false);
    m.count_event("a", "web", "Normal", "RolloutPaused");
    m.count_notification("a", "web", "Normal", "RolloutPaused", true);
    m.observe_notification_send("a", "web", Duration::from_millis(200));
    m.count_notification("a", "web", "Normal", "RolloutCompleted", false);
    m.count_notification("a", "web", "Normal", "RolloutCompleted", false);
    m.count_request(req("replicasets", "a", "web-6d4f", "Patch"), "200");
    m.count_request(req("replicasets", "a", "web-api-77aa", "Patch"), "200");
    m.count_request(req("rollouts", "a", "web", "Patch"), "409");
    m.set_leader(true);

    let text = m.render();
    assert!(text.contains(
        r#"rollout_info{namespace="a",name="web",strategy="canary",traffic_router="",phase="Paused"} 1"#
    ), "{text}");
    assert!(text.contains(r#"rollout_info_replicas_available{namespace="a",name="web"} 3"#));
    assert!(text.contains(r#"rollout_info_replicas_unavailable{namespace="a",name="web"} 1"#));
    assert!(text.contains(r#"rollout_info_replicas_desired{namespace="a",name="web"} 3"#));
    assert!(text.contains(r#"rollout_info_replicas_updated{namespace="a",name="web"} 1"#));
    assert!(text.contains(r#"rollout_reconcile_count{namespace="a",name="web"} 2"#));
    assert!(
        text.contains(r#"rollout_reconcile_bucket{le="0.01",namespace="a",name="web"} 0"#)
            || text.contains(r#"rollout_reconcile_bucket{namespace="a",name="web",le="0.01"} 0"#),
        "{text}"
    );
    assert!(text.contains(r#"rollout_reconcile_error{namespace="a",name="web"} 1"#));
    assert!(text.contains(
        r#"rollout_events_total{namespace="a",name="web",type="Normal",reason="RolloutPaused"} 1"#
    ));
    assert!(text.contains(
        r#"notification_send_success{namespace="a",name="web",type="Normal",reason="RolloutPaused"} 1"#
    ), "{text}");
    assert!(text.contains(
        r#"notification_send_error{namespace="a",name="web",type="Normal",reason="RolloutCompleted"} 2"#
    ), "{text}");
    assert!(
        text.contains(r#"notification_send_count{namespace="a",name="web"} 1"#),
        "{text}"
    );
    assert!(
        !text.contains(r#"notification_send_count{namespace="a",name="web-api"}"#),
        "{text}"
    );
    assert!(text.contains(
        r#"controller_clientset_k8s_request_total{kind="rollouts",namespace="a",name="web",verb="Patch",status_code="409"} 1"#
    ));
    assert!(text.contains(r#"argo_rollouts_controller_info{version="v0.1.0"} 1"#));
    assert!(text.contains("sluice_leader 1"));
    assert!(text.ends_with("# EOF\n"));

    // `web` is deleted: its series go, those of `web-api` (a longer name) stay.
    writer.apply_watcher_event(&Event::Delete(cached(web)));
    let text = m.render();
    for metric in [
        "rollout_info",
        "rollout_reconcile",
        "rollout_events",
        "controller_clientset",
    ] {
        assert!(
            series_lines(&text, metric)
                .iter()
                .all(|l| !l.contains(r#"name="web""#) && !l.contains("web-6d4f")),
            "{metric} still has web: {text}"
        );
    }
    assert!(text.contains(r#"rollout_reconcile_count{namespace="a",name="web-api"} 1"#));
    assert!(text.contains(r#"name="web-api-77aa""#));
    assert_eq!(series_lines(&text, "rollout_info{").len(), 1);
    // The totals keep what the deleted Rollout's series counted.
    assert!(
        text.contains(r#"sluice_rollout_reconcile_seconds_count 3"#),
        "{text}"
    );
    assert!(text.contains(r#"sluice_rollout_reconcile_seconds_bucket{le="0.001"} 1"#));
    assert!(text.contains(
        r#"sluice_k8s_requests_total{kind="replicasets",verb="Patch",status_code="200"} 2"#
    ));
    assert!(text.contains(
        r#"sluice_k8s_requests_total{kind="rollouts",verb="Patch",status_code="409"} 1"#
    ));
}

#[test]
fn experiments_are_exposed_with_argo_names_until_deleted() {
    let m = Metrics::new("v");
    let text = m.render();
    assert!(series_lines(&text, "experiment_").is_empty(), "{text}");

    let (reader, mut writer) = reflector::store::<Experiment>();
    let exp = |name: &str, status: serde_json::Value| -> Experiment {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "a"},
            "spec": {"templates": [{"name": "baseline"}]},
            "status": status
        }))
        .unwrap()
    };
    let running = exp("exp-1", json!({"phase": "Running"}));
    writer.apply_watcher_event(&Event::Apply(running.clone()));
    writer.apply_watcher_event(&Event::Apply(exp("exp-2", json!({}))));
    m.use_experiment_cache(reader);
    m.observe_experiment_reconcile("a", "exp-1", Duration::from_millis(20), false);
    m.observe_experiment_reconcile("a", "exp-1", Duration::from_millis(30), true);

    let text = m.render();
    assert!(
        text.contains(r#"experiment_info{namespace="a",name="exp-1",phase="Running"} 1"#),
        "{text}"
    );
    assert!(text.contains(r#"experiment_info{namespace="a",name="exp-2",phase="Pending"} 1"#));
    assert!(text.contains("# TYPE experiment_info gauge"));
    assert!(text.contains("# TYPE experiment_phase gauge"));
    assert!(text.contains(r#"experiment_phase{namespace="a",name="exp-1",phase="Running"} 1"#));
    assert!(text.contains(r#"experiment_phase{namespace="a",name="exp-1",phase="Successful"} 0"#));
    assert_eq!(
        series_lines(&text, "experiment_phase{").len(),
        12,
        "six phases per Experiment: {text}"
    );
    assert!(text.contains(r#"experiment_reconcile_count{namespace="a",name="exp-1"} 2"#));
    assert!(text.contains(r#"experiment_reconcile_error{namespace="a",name="exp-1"} 1"#));

    writer.apply_watcher_event(&Event::Delete(running));
    let text = m.render();
    assert!(
        series_lines(&text, "experiment_")
            .iter()
            .all(|l| !l.contains(r#"name="exp-1""#)),
        "{text}"
    );
    assert_eq!(series_lines(&text, "experiment_info{").len(), 1);
}

#[test]
fn request_series_are_bounded() {
    let m = Metrics::new("v");
    for i in 0..(MAX_REQUEST_SERIES + 10) {
        m.count_request(req("pods", "a", &format!("p{i}"), "Get"), "200");
    }
    assert_eq!(lock(&m.requests).len(), MAX_REQUEST_SERIES);
    assert_eq!(
        m.requests_matching(|i, _| i.name == "p0"),
        0,
        "oldest evicted"
    );
    // A series used again is the newest: the next evictions take the ones after it.
    m.count_request(req("pods", "a", "p10", "Get"), "200");
    for i in 0..5 {
        m.count_request(req("pods", "b", &format!("q{i}"), "Get"), "200");
    }
    assert_eq!(lock(&m.requests).len(), MAX_REQUEST_SERIES);
    assert_eq!(m.requests_matching(|i, _| i.name == "p10"), 2);
    for i in 11..16 {
        assert_eq!(
            m.requests_matching(|i2, _| i2.name == format!("p{i}")),
            0,
            "p{i}"
        );
    }
    assert_eq!(m.requests_matching(|i, _| i.name == "p16"), 1);
}

#[test]
fn argo_families_of_a_fresh_controller_are_served() {
    let m = Metrics::new("v1.2.3");
    let (reader, mut writer) = reflector::store::<AnalysisTemplate>();
    let template: AnalysisTemplate = serde_json::from_value(json!({
        "metadata": {"name": "rate", "namespace": "shop"},
        "spec": {"metrics": [{"name": "ok", "provider": {"web": {"url": "http://x"}}}]}
    }))
    .unwrap();
    writer.apply_watcher_event(&Event::Apply(template));
    m.use_template_caches(reader, None);
    let (ro_reader, mut ro_writer) = reflector::store::<CachedRollout>();
    ro_writer.apply_watcher_event(&Event::Apply(cached(rollout(
        "a",
        "web",
        json!({"status": {"conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}}),
    ))));
    m.use_rollout_cache(ro_reader);
    let work = m.begin_work(Queue::Rollouts);
    m.observe_reconcile("a", "web", Duration::from_millis(2), true);
    let text = m.render();
    for line in [
        r#"analysis_template_info{namespace="shop",name="rate"} 1"#,
        r#"analysis_template_metric_info{namespace="shop",name="rate",type="Web",metric="ok"} 1"#,
        r#"rollout_phase{namespace="a",name="web",strategy="canary",phase="Completed"} 1"#,
        r#"rollout_phase{namespace="a",name="web",strategy="canary",phase="Paused"} 0"#,
        r#"workqueue_adds_total{name="Rollouts"} 1"#,
        r#"workqueue_retries_total{name="Rollouts"} 1"#,
        r#"workqueue_adds_total{name="Ingresses"} 0"#,
        r#"workqueue_work_duration_seconds_count{name="Rollouts"} 1"#,
        r#"workqueue_work_duration_seconds_bucket{le="0.01",name="Rollouts"} 1"#,
        r#"workqueue_work_duration_seconds_count{name="Services"} 0"#,
    ] {
        assert!(text.contains(line), "{line} missing:\n{text}");
    }
    assert!(text.contains(r#"build_info{version="v1.2.3",goversion="",goarch=""#));
    for name in [
        "workqueue_unfinished_work_seconds{name=\"Rollouts\"}",
        "workqueue_longest_running_processor_seconds{name=\"Rollouts\"}",
        "process_cpu_seconds_total ",
        "process_start_time_seconds ",
        "process_resident_memory_bytes ",
        "process_virtual_memory_bytes ",
        "process_virtual_memory_max_bytes ",
        "process_open_fds ",
        "process_max_fds ",
        "go_memstats_heap_alloc_bytes ",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    drop(work);
}

#[test]
fn request_durations_are_exposed_by_verb() {
    let m = Metrics::new("v0.1.0");
    m.observe_request_duration("Patch", Duration::from_millis(3));
    m.observe_request_duration("Patch", Duration::from_secs(20));
    m.observe_request_duration("Watch", Duration::from_millis(40));
    let text = m.render();
    assert!(
        text.contains(r#"sluice_k8s_request_duration_seconds_count{verb="Patch"} 2"#),
        "{text}"
    );
    let bucket = |le: &str, verb: &str, n: u32| {
        text.contains(&format!(
            r#"sluice_k8s_request_duration_seconds_bucket{{le="{le}",verb="{verb}"}} {n}"#
        )) || text.contains(&format!(
            r#"sluice_k8s_request_duration_seconds_bucket{{verb="{verb}",le="{le}"}} {n}"#
        ))
    };
    // The 20 s one is above 10 s, where only a stalled or throttled API server lands.
    assert!(bucket("0.005", "Patch", 1), "{text}");
    assert!(bucket("10.0", "Patch", 1), "{text}");
    assert!(bucket("30.0", "Patch", 2), "{text}");
    assert!(bucket("0.1", "Watch", 1), "{text}");
}
