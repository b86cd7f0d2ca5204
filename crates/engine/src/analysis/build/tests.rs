use std::path::PathBuf;

use jiff::Timestamp;
use serde_json::{Value, json};
use sluice_api::common::{AnalysisPhase, SecretKeyRef, ValueFrom};

use super::*;
use crate::analysis::{TaskKind, assess, next_tasks};

fn corpus_file(name: &str) -> PathBuf {
    sluice_api::corpus::require_argo_corpus_dir()
        .unwrap_or_else(|e| panic!("{e}"))
        .join("test/e2e/functional")
        .join(name)
}

/// The objects of the given kind in corpus files.
fn corpus(files: &[&str], kind: &str) -> Vec<Value> {
    files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(corpus_file(f)).unwrap();
            sluice_api::yaml::from_multi_doc_str(&text).unwrap()
        })
        .filter(|doc| doc["kind"] == kind)
        .collect()
}

/// The corpus Rollout with the fields the API server would have set.
fn corpus_rollout(file: &str) -> Rollout {
    let mut value = corpus(&[file], "Rollout").remove(0);
    value["metadata"]["namespace"] = json!("e2e");
    value["metadata"]["uid"] = json!("0f1e2d3c");
    serde_json::from_value(value).unwrap()
}

/// A lookup over the AnalysisTemplates of corpus files.
fn corpus_lookup(files: &[&str]) -> impl Fn(&AnalysisTemplateRef) -> Option<AnalysisTemplateSpec> {
    let templates = corpus(files, "AnalysisTemplate");
    move |r: &AnalysisTemplateRef| {
        templates
            .iter()
            .find(|t| t["metadata"]["name"] == json!(r.template_name) && !r.is_cluster_scoped())
            .map(|t| serde_json::from_value(t["spec"].clone()).unwrap())
    }
}

fn arg(name: &str, value: &str) -> Argument {
    Argument {
        name: Some(name.into()),
        value: Some(value.into()),
        value_from: None,
    }
}

fn secret_arg(name: &str, secret: &str, key: &str) -> Argument {
    Argument {
        name: Some(name.into()),
        value: None,
        value_from: Some(ValueFrom {
            secret_key_ref: Some(SecretKeyRef {
                name: Some(secret.into()),
                key: Some(key.into()),
            }),
            field_ref: None,
        }),
    }
}

fn request<'a>(
    rollout: &'a Rollout,
    analysis: &'a RolloutAnalysis,
    template: AnalysisTemplateSpec,
    kind: RunKind,
) -> RunRequest<'a> {
    RunRequest {
        rollout,
        analysis,
        template,
        kind,
        latest_pod_hash: "5b9d8c7f6",
        stable_pod_hash: Some("7c4f9b8d5"),
        revision: "2",
    }
}

fn labels(run: &AnalysisRun) -> Vec<(&str, &str)> {
    run.metadata
        .labels
        .iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

#[test]
fn step_run_from_corpus_rollout_with_args_and_secret() {
    let file = "rollout-secret-withArgs.yaml";
    let rollout = corpus_rollout(file);
    let steps = rollout
        .spec
        .strategy
        .as_ref()
        .unwrap()
        .canary
        .as_ref()
        .unwrap()
        .steps
        .as_ref()
        .unwrap();
    let analysis = steps[1].analysis.as_ref().unwrap();
    let templates = resolve_nested(
        analysis.templates.as_deref().unwrap(),
        corpus_lookup(&[file]),
    )
    .unwrap();
    let merged = merge_templates(&templates).unwrap();
    let run = build_analysis_run(request(
        &rollout,
        analysis,
        merged,
        RunKind::Step { index: 1 },
    ))
    .unwrap();

    assert_eq!(
        run.metadata.name.as_deref(),
        Some("rollout-secret-5b9d8c7f6-2-1")
    );
    assert_eq!(run.metadata.namespace.as_deref(), Some("e2e"));
    assert_eq!(
        labels(&run),
        [
            ("app", "rollout-secret"),
            ("rollout-type", "Step"),
            ("rollouts-pod-template-hash", "5b9d8c7f6"),
            ("step-index", "1"),
        ]
    );
    assert_eq!(
        run.metadata.annotations,
        Some([("rollout.argoproj.io/revision".to_owned(), "2".to_owned())].into())
    );
    assert_eq!(
        serde_json::to_value(&run.metadata.owner_references).unwrap(),
        json!([{
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "name": "rollout-secret",
            "uid": "0f1e2d3c",
            "controller": true,
            "blockOwnerDeletion": true
        }])
    );
    // Template order, template-declared args only, the secret left for run time.
    assert_eq!(
        run.spec.args.as_deref().unwrap(),
        [
            arg("analysis-interval", "5s"),
            arg("analysis-runs", "3"),
            arg("failure-limit", "2"),
            arg("inconclusive-limit", "2"),
            arg("success-condition", "It worked!"),
            secret_arg("secret-url", "example-secret", "secretUrl"),
        ]
    );
    let metrics = run.spec.metrics.as_deref().unwrap();
    assert_eq!(metrics.len(), 1);
    assert_eq!(
        metrics[0].interval.as_deref(),
        Some("{{args.analysis-interval}}")
    );
    assert_eq!(run.status, None);
}

#[test]
fn built_run_schedules_from_its_args() {
    let file = "rollout-secret-withArgs.yaml";
    let rollout = corpus_rollout(file);
    let steps = rollout
        .spec
        .strategy
        .as_ref()
        .unwrap()
        .canary
        .as_ref()
        .unwrap()
        .steps
        .as_ref()
        .unwrap();
    let analysis = steps[1].analysis.as_ref().unwrap();
    let merged = merge_templates(
        &resolve_nested(
            analysis.templates.as_deref().unwrap(),
            corpus_lookup(&[file]),
        )
        .unwrap(),
    )
    .unwrap();
    let mut run = build_analysis_run(request(
        &rollout,
        analysis,
        merged,
        RunKind::Step { index: 1 },
    ))
    .unwrap();

    // initialDelay and interval are "{{args.analysis-interval}}" = 5s, count 3.
    let t = |s: i64| Timestamp::from_second(1_700_000_000 + s).unwrap();
    assert!(next_tasks(&run, t(0)).is_empty());
    let a = assess(&run, vec![], t(0));
    assert_eq!(a.requeue_after, Some(std::time::Duration::from_secs(5)));
    run.status = Some(a.status);
    for (i, at) in [5, 10, 15].into_iter().enumerate() {
        assert_eq!(next_tasks(&run, t(at)).len(), 1, "measurement {i}");
        let m = sluice_api::analysis::Measurement {
            phase: Some(AnalysisPhase::Successful),
            ..Default::default()
        };
        let a = assess(&run, vec![("webmetric".into(), TaskKind::Start, m)], t(at));
        assert_eq!(a.completed, i == 2);
        run.status = Some(a.status);
    }
    assert_eq!(run.status.unwrap().phase, Some(AnalysisPhase::Successful));
}

#[test]
fn background_run_from_corpus_overrides_template_defaults() {
    let file = "rollout-bg-analysis-withArgs.yaml";
    let rollout = corpus_rollout(file);
    let background = &rollout
        .spec
        .strategy
        .as_ref()
        .unwrap()
        .canary
        .as_ref()
        .unwrap()
        .analysis
        .as_ref()
        .unwrap()
        .analysis;
    let merged = merge_templates(
        &resolve_nested(
            background.templates.as_deref().unwrap(),
            corpus_lookup(&[file]),
        )
        .unwrap(),
    )
    .unwrap();
    let run =
        build_analysis_run(request(&rollout, background, merged, RunKind::Background)).unwrap();
    assert_eq!(
        run.metadata.name.as_deref(),
        Some("rollout-bg-analysis-5b9d8c7f6-2")
    );
    assert_eq!(
        labels(&run),
        [
            ("app", "rollout-bg-analysis"),
            ("rollout-type", "Background"),
            ("rollouts-pod-template-hash", "5b9d8c7f6"),
        ]
    );
    let args = run.spec.args.unwrap();
    assert!(args.contains(&arg("success-condition", "It worked!")));
    assert!(args.contains(&arg("analysis-interval", "10s")));
}

#[test]
fn field_ref_arg_from_corpus_rollout() {
    let files = [
        "rollout-rollback-window.yaml",
        "analysistemplate-sleep-job.yaml",
    ];
    let mut rollout = corpus_rollout(files[0]);
    let steps = rollout
        .spec
        .strategy
        .as_ref()
        .unwrap()
        .canary
        .as_ref()
        .unwrap()
        .steps
        .clone()
        .unwrap();
    let analysis = steps[1].analysis.as_ref().unwrap();
    let merged = merge_templates(
        &resolve_nested(
            analysis.templates.as_deref().unwrap(),
            corpus_lookup(&files),
        )
        .unwrap(),
    )
    .unwrap();

    // The Rollout has no `rev` label: the argument is passed empty, over the template's default.
    let run = build_analysis_run(request(
        &rollout,
        analysis,
        merged.clone(),
        RunKind::Step { index: 1 },
    ))
    .unwrap();
    assert!(run.spec.args.as_ref().unwrap().contains(&arg("rev", "")));

    rollout.metadata.labels = Some([("rev".to_owned(), "blue".to_owned())].into());
    let run = build_analysis_run(request(
        &rollout,
        analysis,
        merged,
        RunKind::Step { index: 1 },
    ))
    .unwrap();
    let args = run.spec.args.unwrap();
    assert!(args.contains(&arg("rev", "blue")));
    assert!(args.contains(&arg("count", "1")));
}

fn rollout(extra_labels: Value) -> Rollout {
    serde_json::from_value(json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Rollout",
        "metadata": {"name": "shop", "namespace": "prod", "uid": "u-9", "labels": extra_labels},
        "spec": {
            "selector": {"matchLabels": {"app": "shop", "tier": "web"}},
            "template": {"spec": {"containers": [{"name": "app", "image": "shop:2.1"}]}},
            "strategy": {"blueGreen": {"activeService": "shop"}}
        }
    }))
    .unwrap()
}

fn template(args: Value, metrics: &[&str]) -> AnalysisTemplateSpec {
    let metrics: Vec<Value> = metrics
        .iter()
        .map(|m| json!({"name": m, "provider": {"web": {"url": "http://x"}}}))
        .collect();
    serde_json::from_value(json!({"args": args, "metrics": metrics})).unwrap()
}

fn analysis(value: Value) -> RolloutAnalysis {
    serde_json::from_value(value).unwrap()
}

#[test]
fn promotion_run_names_metadata_and_instance_id() {
    let ro = rollout(json!({"argo-rollouts.argoproj.io/controller-instance-id": "east"}));
    let a = analysis(json!({
        "templates": [{"templateName": "smoke"}],
        "analysisRunMetadata": {
            "labels": {"team": "payments", "app": "overridden-by-selector"},
            "annotations": {"note": "pre", "rollout.argoproj.io/revision": "overridden"}
        }
    }));
    let pre = build_analysis_run(request(
        &ro,
        &a,
        template(json!([]), &["smoke"]),
        RunKind::PrePromotion,
    ))
    .unwrap();
    assert_eq!(pre.metadata.name.as_deref(), Some("shop-5b9d8c7f6-2-pre"));
    assert_eq!(
        labels(&pre),
        [
            ("app", "shop"),
            ("argo-rollouts.argoproj.io/controller-instance-id", "east"),
            ("rollout-type", "PrePromotion"),
            ("rollouts-pod-template-hash", "5b9d8c7f6"),
            ("team", "payments"),
            ("tier", "web"),
        ]
    );
    assert_eq!(
        pre.metadata.annotations,
        Some(
            [
                ("note".to_owned(), "pre".to_owned()),
                (
                    "rollout.argoproj.io/revision".to_owned(),
                    "overridden".to_owned()
                )
            ]
            .into()
        )
    );
    assert_eq!(pre.spec.args, None);

    let post = build_analysis_run(request(
        &ro,
        &a,
        template(json!([]), &["smoke"]),
        RunKind::PostPromotion,
    ))
    .unwrap();
    assert_eq!(post.metadata.name.as_deref(), Some("shop-5b9d8c7f6-2-post"));
    assert_eq!(
        post.metadata.labels.as_ref().unwrap()["rollout-type"],
        "PostPromotion"
    );
    assert_eq!(
        collision_name("shop-5b9d8c7f6-2-post", 1),
        "shop-5b9d8c7f6-2-post.1"
    );
}

#[test]
fn rollout_argument_sources() {
    let ro = rollout(json!({}));
    let a = analysis(json!({
        "templates": [{"templateName": "t"}],
        "args": [
            {"name": "stable", "valueFrom": {"podTemplateHashValue": "Stable"}},
            {"name": "latest", "valueFrom": {"podTemplateHashValue": "Latest"}},
            {"name": "image", "valueFrom": {"fieldRef": {"fieldPath": "spec.template.spec.containers[0].image"}}},
            {"name": "ns", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "plain", "value": "v"},
            {"name": "undeclared", "value": "dropped"}
        ]
    }));
    let t = template(
        json!([{"name": "stable"}, {"name": "latest"}, {"name": "image"}, {"name": "ns"}, {"name": "plain", "value": "default"}]),
        &["m"],
    );
    let run = build_analysis_run(request(&ro, &a, t.clone(), RunKind::Background)).unwrap();
    assert_eq!(
        run.spec.args.unwrap(),
        [
            arg("stable", "7c4f9b8d5"),
            arg("latest", "5b9d8c7f6"),
            arg("image", "shop:2.1"),
            arg("ns", "prod"),
            arg("plain", "v"),
        ]
    );

    let mut no_stable = request(&ro, &a, t, RunKind::Background);
    no_stable.stable_pod_hash = None;
    let run = build_analysis_run(no_stable).unwrap();
    assert_eq!(run.spec.args.unwrap()[0], arg("stable", ""));
}

#[test]
fn build_errors() {
    let ro = rollout(json!({}));
    let a = analysis(json!({"templates": [{"templateName": "t"}]}));
    let err = build_analysis_run(request(
        &ro,
        &a,
        template(json!([{"name": "service"}]), &["m"]),
        RunKind::Background,
    ))
    .unwrap_err();
    assert_eq!(err, "args.service was not resolved");

    let bad_path = analysis(json!({
        "templates": [{"templateName": "t"}],
        "args": [{"name": "x", "valueFrom": {"fieldRef": {"fieldPath": "spec.nope"}}}]
    }));
    let err = build_analysis_run(request(
        &ro,
        &bad_path,
        template(json!([{"name": "x"}]), &["m"]),
        RunKind::Background,
    ))
    .unwrap_err();
    assert_eq!(err, "args.x: invalid path spec.nope in rollout");

    let mut no_uid = ro.clone();
    no_uid.metadata.uid = None;
    assert!(
        build_analysis_run(request(
            &no_uid,
            &a,
            template(json!([]), &["m"]),
            RunKind::Background
        ))
        .is_err()
    );

    let mut no_hash = request(&ro, &a, template(json!([]), &["m"]), RunKind::Background);
    no_hash.latest_pod_hash = "";
    assert!(build_analysis_run(no_hash).is_err());

    let dup =
        analysis(json!({"templates": [{"templateName": "t"}], "dryRun": [{"metricName": "m"}]}));
    let mut t = template(json!([]), &["m"]);
    t.dry_run = dup.dry_run.clone();
    assert_eq!(
        build_analysis_run(request(&ro, &dup, t, RunKind::Background)).unwrap_err(),
        "two Dry-Run metric rules have the same name 'm'"
    );
}

#[test]
fn dry_run_and_retention_from_rollout_come_first() {
    let ro = rollout(json!({}));
    let a = analysis(json!({
        "templates": [{"templateName": "t"}],
        "dryRun": [{"metricName": "a"}],
        "measurementRetention": [{"metricName": "a", "limit": 3}]
    }));
    let mut t = template(json!([]), &["a", "b"]);
    t.dry_run = Some(vec![DryRun {
        metric_name: Some("b".into()),
    }]);
    let run = build_analysis_run(request(&ro, &a, t, RunKind::Step { index: 0 })).unwrap();
    let names: Vec<_> = run
        .spec
        .dry_run
        .unwrap()
        .into_iter()
        .map(|d| d.metric_name.unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(run.spec.measurement_retention.unwrap()[0].limit, Some(3));
}

fn resolved(name: &str, cluster: bool, spec: Value) -> ResolvedTemplate {
    ResolvedTemplate {
        name: name.into(),
        cluster_scope: cluster,
        spec: serde_json::from_value(spec).unwrap(),
    }
}

fn web_metric(name: &str) -> Value {
    json!({"name": name, "provider": {"web": {"url": "http://x"}}})
}

#[test]
fn merge_puts_namespaced_templates_first_and_combines_args() {
    let merged = merge_templates(&[
        resolved("shared", true, json!({"metrics": [web_metric("c")], "args": [{"name": "svc", "value": "web"}]})),
        resolved("a", false, json!({"metrics": [web_metric("a")], "args": [{"name": "svc"}, {"name": "env", "value": "prod"}],
                                    "dryRun": [{"metricName": "a"}]})),
        resolved("b", false, json!({"metrics": [web_metric("b")], "args": [{"name": "env", "value": "prod"}],
                                    "measurementRetention": [{"metricName": "b", "limit": 2}],
                                    "templates": [{"templateName": "x"}]})),
    ])
    .unwrap();
    let names: Vec<_> = merged
        .metrics
        .unwrap()
        .into_iter()
        .map(|m| m.name.unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(
        merged.args.unwrap(),
        [arg("svc", "web"), arg("env", "prod")]
    );
    assert_eq!(merged.dry_run.unwrap().len(), 1);
    assert_eq!(merged.measurement_retention.unwrap().len(), 1);
    assert_eq!(merged.templates, None);
}

#[test]
fn merge_conflicts() {
    let err = merge_templates(&[
        resolved("a", false, json!({"metrics": [web_metric("m")]})),
        resolved("b", true, json!({"metrics": [web_metric("m")]})),
    ])
    .unwrap_err();
    assert_eq!(err, "two metrics have the same name 'm'");

    let err = merge_templates(&[
        resolved(
            "a",
            false,
            json!({"metrics": [web_metric("a")], "args": [{"name": "env", "value": "prod"}]}),
        ),
        resolved(
            "b",
            false,
            json!({"metrics": [web_metric("b")], "args": [{"name": "env", "value": "dev"}]}),
        ),
    ])
    .unwrap_err();
    assert_eq!(
        err,
        "Argument `env` specified multiple times with different values: 'prod', 'dev'"
    );

    let err = merge_templates(&[
        resolved("a", false, json!({"metrics": [web_metric("a")], "measurementRetention": [{"metricName": ".*", "limit": 1}]})),
        resolved("b", false, json!({"metrics": [web_metric("b")], "measurementRetention": [{"metricName": ".*", "limit": 2}]})),
    ])
    .unwrap_err();
    assert_eq!(
        err,
        "two Measurement Retention metric rules have the same name '.*'"
    );
}

fn lookup_in(
    templates: Vec<(bool, &'static str, Value)>,
) -> impl Fn(&AnalysisTemplateRef) -> Option<AnalysisTemplateSpec> {
    move |r| {
        templates
            .iter()
            .find(|(cluster, name, _)| {
                *cluster == r.is_cluster_scoped() && Some(*name) == r.template_name.as_deref()
            })
            .map(|(_, _, spec)| serde_json::from_value(spec.clone()).unwrap())
    }
}

fn refs(value: Value) -> Vec<AnalysisTemplateRef> {
    serde_json::from_value(value).unwrap()
}

#[test]
fn nested_templates_resolve_depth_first_once_each() {
    let lookup = lookup_in(vec![
        (
            false,
            "top",
            json!({"metrics": [web_metric("top")],
                              "templates": [{"templateName": "mid"}, {"templateName": "base", "clusterScope": true}]}),
        ),
        (
            false,
            "mid",
            json!({"metrics": [web_metric("mid")], "templates": [{"templateName": "base", "clusterScope": true}]}),
        ),
        (true, "base", json!({"metrics": [web_metric("base")]})),
    ]);
    let found = resolve_nested(&refs(json!([{"templateName": "top"}])), &lookup).unwrap();
    let names: Vec<_> = found
        .iter()
        .map(|t| (t.name.as_str(), t.cluster_scope))
        .collect();
    assert_eq!(names, [("top", false), ("mid", false), ("base", true)]);
    let merged = merge_templates(&found).unwrap();
    assert_eq!(merged.metrics.unwrap().len(), 3);
}

#[test]
fn nested_template_errors() {
    let lookup = lookup_in(vec![
        (
            false,
            "a",
            json!({"metrics": [web_metric("a")], "templates": [{"templateName": "b"}]}),
        ),
        (false, "b", json!({"templates": [{"templateName": "a"}]})),
        (
            false,
            "c",
            json!({"templates": [{"templateName": "gone", "clusterScope": true}]}),
        ),
    ]);
    assert_eq!(
        resolve_nested(&refs(json!([{"templateName": "a"}])), &lookup).unwrap_err(),
        "analysis templates nest each other in a cycle: a -> b -> a"
    );
    assert_eq!(
        resolve_nested(&refs(json!([{"templateName": "c"}])), &lookup).unwrap_err(),
        "ClusterAnalysisTemplate 'gone' not found"
    );
    assert_eq!(
        resolve_nested(&refs(json!([{"templateName": "missing"}])), &lookup).unwrap_err(),
        "AnalysisTemplate 'missing' not found"
    );
    assert!(resolve_nested(&refs(json!([{}])), &lookup).is_err());
}

#[test]
fn a_name_is_named_after_its_base_and_its_collision_names_only() {
    let base = "web-abc-2-1";
    assert!(is_named_after(base, base));
    assert!(is_named_after(&collision_name(base, 3), base));
    assert!(!is_named_after("web-abc-2-10", base));
    assert!(!is_named_after("web-abc-2-1.x", base));
    assert!(!is_named_after("web-abc-2", base));
}
