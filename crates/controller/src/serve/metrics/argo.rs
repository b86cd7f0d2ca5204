//! Argo Rollouts' label rules: how a request, a Rollout and an AnalysisRun are labelled, so
//! that dashboards built for Argo read Sluice's series unchanged.

use std::collections::BTreeSet;

use http::{Method, Uri};
use kube::ResourceExt;
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::Experiment;
use sluice_api::rollout::{RolloutConditionType, RolloutStatus};

/// One API request, as labelled by `controller_clientset_k8s_request_total`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestInfo {
    /// The resource (plural), e.g. `replicasets`.
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `Get`, `List`, `Watch`, `Create`, `Update`, `Patch`, `Delete`, `DeleteCollection`.
    pub verb: String,
}

impl RequestInfo {
    /// Labels for a request to `uri` (API paths `/api/v1/...` and `/apis/<group>/<version>/...`).
    pub fn parse(method: &Method, uri: &Uri) -> RequestInfo {
        let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
        let rest: &[&str] = match segments.as_slice() {
            ["api", _version, rest @ ..] => rest,
            ["apis", _group, _version, rest @ ..] => rest,
            _ => &[],
        };
        // namespaces/<ns>/<resource>/... is namespaced; namespaces/<ns> is the namespace itself.
        let (namespace, rest) = match rest {
            ["namespaces", ns, resource, tail @ ..] => (*ns, [&[*resource][..], tail].concat()),
            other => ("", other.to_vec()),
        };
        let (kind, name) = match rest.as_slice() {
            [resource] => (*resource, None),
            [resource, name, ..] => (*resource, Some(*name)),
            _ => ("Unknown", None),
        };
        let watch = uri
            .query()
            .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
        let verb = match (method, name) {
            (&Method::GET, _) if watch => "Watch",
            (&Method::GET, Some(_)) => "Get",
            (&Method::GET, None) => "List",
            (&Method::POST, _) => "Create",
            (&Method::PUT, _) => "Update",
            (&Method::PATCH, _) => "Patch",
            (&Method::DELETE, Some(_)) => "Delete",
            (&Method::DELETE, None) => "DeleteCollection",
            _ => "Unknown",
        };
        // Argo labels collection requests "N/A" and watches "".
        let name = match (verb, name) {
            ("Watch", _) => String::new(),
            // POST to a subresource (an eviction) names its object; a plain create does not.
            (_, Some(n)) => n.to_string(),
            (_, None) => "N/A".to_string(),
        };
        RequestInfo {
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name,
            verb: verb.to_string(),
        }
    }
}

/// Whether an object name is the Rollout's own or one made from it.
pub(super) fn derives_from(object: &str, rollout: &str) -> bool {
    object == rollout
        || object
            .strip_prefix(rollout)
            .is_some_and(|rest| rest.starts_with('-') || rest.starts_with('.'))
}

/// Argo's `rollout_info` phase: from the Progressing and InvalidSpec conditions.
pub fn info_phase(status: Option<&RolloutStatus>) -> &'static str {
    let conditions = status
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let reason_of = |t: RolloutConditionType| {
        conditions
            .iter()
            .find(|c| c.type_.as_ref() == Some(&t))
            .map(|c| c.reason.as_deref().unwrap_or_default())
    };
    if reason_of(RolloutConditionType::InvalidSpec).is_some() {
        return "InvalidSpec";
    }
    match reason_of(RolloutConditionType::Progressing) {
        Some("NewReplicaSetAvailable") => "Completed",
        Some("RolloutPaused") => "Paused",
        Some("ReplicaSetCreateError") => "Error",
        Some("ProgressDeadlineExceeded") => "Timeout",
        Some("RolloutAborted") => "Abort",
        _ => "Progressing",
    }
}

pub(super) type Labels = Vec<(&'static str, String)>;

/// Every phase an AnalysisRun or metric can be in, for the one-hot `*_phase` gauges.
const ANALYSIS_PHASES: [&str; 6] = [
    "Pending",
    "Running",
    "Successful",
    "Failed",
    "Error",
    "Inconclusive",
];

/// The AnalysisRun series Argo exports: `analysis_run_info`, `analysis_run_phase` (one-hot),
/// `analysis_run_metric_type` and `analysis_run_metric_phase` (one-hot).
#[derive(Debug, Default, PartialEq)]
pub struct AnalysisRunSeries {
    pub info: Vec<(Labels, i64)>,
    pub phase: Vec<(Labels, i64)>,
    pub metric_type: Vec<(Labels, i64)>,
    pub metric_phase: Vec<(Labels, i64)>,
}

impl AnalysisRunSeries {
    pub fn add(&mut self, run: &AnalysisRun) {
        let labels = rollout_labels(&run.namespace().unwrap_or_default(), &run.name_any());
        let status = run.status.as_ref();
        let phase = status
            .and_then(|s| s.phase.as_ref())
            .map_or("Pending", |p| p.as_str());
        let mut info = labels.clone();
        info.push(("phase", phase.to_string()));
        self.info.push((info, 1));
        for p in ANALYSIS_PHASES {
            let mut l = labels.clone();
            l.push(("phase", p.to_string()));
            self.phase.push((l, i64::from(p == phase)));
        }
        let dry_run: BTreeSet<&str> = status
            .and_then(|s| s.metric_results.as_ref())
            .into_iter()
            .flatten()
            .filter(|r| r.dry_run == Some(true))
            .filter_map(|r| r.name.as_deref())
            .collect();
        for metric in run.spec.metrics.iter().flatten() {
            let name = metric.name.clone().unwrap_or_default();
            let type_ = metric
                .provider
                .as_ref()
                .and_then(|p| p.kind())
                .map_or("", |k| k.type_name());
            let mut l = labels.clone();
            l.push(("metric", name.clone()));
            l.push(("type", type_.to_string()));
            self.metric_type.push((l.clone(), 1));
            let metric_phase = status
                .and_then(|s| s.metric_results.as_ref())
                .and_then(|r| r.iter().find(|r| r.name.as_deref() == Some(name.as_str())))
                .and_then(|r| r.phase.as_ref())
                .map_or("Pending", |p| p.as_str());
            l.push(("dry_run", dry_run.contains(name.as_str()).to_string()));
            for p in ANALYSIS_PHASES {
                let mut l = l.clone();
                l.push(("phase", p.to_string()));
                self.metric_phase.push((l, i64::from(p == metric_phase)));
            }
        }
    }
}

/// The Experiment series Argo exports: `experiment_info` (1, with the phase) and
/// `experiment_phase` (one-hot over every phase, deprecated in Argo but still exported).
#[derive(Debug, Default, PartialEq)]
pub struct ExperimentSeries {
    pub info: Vec<(Labels, i64)>,
    pub phase: Vec<(Labels, i64)>,
}

impl ExperimentSeries {
    pub fn add(&mut self, exp: &Experiment) {
        let labels = rollout_labels(&exp.namespace().unwrap_or_default(), &exp.name_any());
        // An Experiment the controller has not seen yet has no phase: Argo counts it Pending.
        let phase = exp
            .status
            .as_ref()
            .and_then(|s| s.phase.as_ref())
            .map(|p| p.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or("Pending");
        let mut info = labels.clone();
        info.push(("phase", phase.to_string()));
        self.info.push((info, 1));
        for p in ANALYSIS_PHASES {
            let mut l = labels.clone();
            l.push(("phase", p.to_string()));
            self.phase.push((l, i64::from(p == phase)));
        }
    }
}

pub(super) fn rollout_labels(namespace: &str, name: &str) -> Labels {
    vec![
        ("namespace", namespace.to_string()),
        ("name", name.to_string()),
    ]
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::cache::CachedRollout;
    use serde_json::json;
    use sluice_api::Rollout;

    fn info(method: Method, uri: &str) -> RequestInfo {
        RequestInfo::parse(&method, &uri.parse().unwrap())
    }

    pub(in crate::serve::metrics) fn req(
        kind: &str,
        ns: &str,
        name: &str,
        verb: &str,
    ) -> RequestInfo {
        RequestInfo {
            kind: kind.into(),
            namespace: ns.into(),
            name: name.into(),
            verb: verb.into(),
        }
    }

    #[test]
    fn requests_get_argo_labels() {
        assert_eq!(
            info(
                Method::GET,
                "/apis/apps/v1/namespaces/a/replicasets?labelSelector=x"
            ),
            req("replicasets", "a", "N/A", "List")
        );
        assert_eq!(
            info(
                Method::GET,
                "/apis/argoproj.io/v1alpha1/rollouts?watch=true&resourceVersion=5"
            ),
            req("rollouts", "", "", "Watch")
        );
        assert_eq!(
            info(
                Method::PATCH,
                "/apis/argoproj.io/v1alpha1/namespaces/a/rollouts/web/status"
            ),
            req("rollouts", "a", "web", "Patch")
        );
        assert_eq!(
            info(Method::POST, "/api/v1/namespaces/a/pods/web-1/eviction"),
            req("pods", "a", "web-1", "Create")
        );
        assert_eq!(
            info(Method::POST, "/apis/apps/v1/namespaces/a/replicasets"),
            req("replicasets", "a", "N/A", "Create")
        );
        assert_eq!(
            info(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/argo-rollouts/leases/argo-rollouts-controller-lock"
            ),
            req(
                "leases",
                "argo-rollouts",
                "argo-rollouts-controller-lock",
                "Update"
            )
        );
        assert_eq!(
            info(
                Method::DELETE,
                "/apis/apps/v1/namespaces/a/replicasets/web-abc"
            ),
            req("replicasets", "a", "web-abc", "Delete")
        );
        assert_eq!(
            info(Method::GET, "/api/v1/namespaces/a"),
            req("namespaces", "", "a", "Get")
        );
        assert_eq!(info(Method::GET, "/version").kind, "Unknown");
    }

    pub(in crate::serve::metrics) fn rollout(
        ns: &str,
        name: &str,
        extra: serde_json::Value,
    ) -> Rollout {
        let mut v = json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Rollout",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 3, "strategy": {"canary": {"steps": []}}},
        });
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            for (k, val) in e {
                o.insert(k.clone(), val.clone());
            }
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn phase_and_strategy_labels_follow_argo() {
        let cached = |status: serde_json::Value, strategy: serde_json::Value| {
            let mut r = rollout("a", "r", json!({"status": status}));
            r.spec.strategy = serde_json::from_value(strategy).unwrap();
            CachedRollout::new(r).unwrap()
        };
        let cond = |t: &str, reason: &str| json!({"conditions": [{"type": t, "status": "True", "reason": reason}]});
        let canary = json!({"canary": {}});
        assert_eq!(
            info_phase(cached(json!({}), canary.clone()).status()),
            "Progressing"
        );
        assert_eq!(
            info_phase(
                cached(
                    cond("Progressing", "NewReplicaSetAvailable"),
                    canary.clone()
                )
                .status()
            ),
            "Completed"
        );
        assert_eq!(
            info_phase(
                cached(
                    cond("Progressing", "ProgressDeadlineExceeded"),
                    canary.clone()
                )
                .status()
            ),
            "Timeout"
        );
        assert_eq!(
            info_phase(cached(cond("Progressing", "RolloutAborted"), canary.clone()).status()),
            "Abort"
        );
        assert_eq!(
            info_phase(cached(cond("InvalidSpec", "InvalidSpec"), canary.clone()).status()),
            "InvalidSpec"
        );
        assert_eq!(cached(json!({}), canary).strategy_labels(), ("canary", ""));
        assert_eq!(
            cached(
                json!({}),
                json!({"canary": {"trafficRouting": {"smi": {}}}})
            )
            .strategy_labels(),
            ("canary", "SMI")
        );
        assert_eq!(
            cached(json!({}), json!({"blueGreen": {"activeService": "x"}})).strategy_labels(),
            ("blueGreen", "")
        );
    }

    #[test]
    fn experiment_series_follow_argo() {
        let exp = |status: serde_json::Value| -> Experiment {
            serde_json::from_value(json!({
                "metadata": {"name": "demo-exp", "namespace": "shop"},
                "spec": {"templates": []},
                "status": status
            }))
            .unwrap()
        };
        let l = |phase: &str| -> Labels {
            vec![
                ("namespace", "shop".to_string()),
                ("name", "demo-exp".to_string()),
                ("phase", phase.to_string()),
            ]
        };
        let mut series = ExperimentSeries::default();
        series.add(&exp(json!({"phase": "Running"})));
        assert_eq!(series.info, vec![(l("Running"), 1)]);
        assert_eq!(
            series.phase,
            ANALYSIS_PHASES
                .iter()
                .map(|p| (l(p), i64::from(*p == "Running")))
                .collect::<Vec<_>>()
        );

        // Not yet seen by the controller: Pending.
        let mut series = ExperimentSeries::default();
        series.add(&exp(json!({})));
        assert_eq!(series.info, vec![(l("Pending"), 1)]);
        let on: Vec<&Labels> = series
            .phase
            .iter()
            .filter(|(_, v)| *v == 1)
            .map(|(l, _)| l)
            .collect();
        assert_eq!(on, vec![&l("Pending")]);
    }

    #[test]
    fn analysis_run_series_follow_argo() {
        let run: AnalysisRun = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "demo-abc-2", "namespace": "shop"},
            "spec": {"metrics": [
                {"name": "rate", "provider": {"prometheus": {"query": "up"}}},
                {"name": "probe", "provider": {"web": {"url": "http://x"}}}
            ]},
            "status": {"phase": "Inconclusive", "metricResults": [
                {"name": "rate", "phase": "Inconclusive"},
                {"name": "probe", "phase": "Successful", "dryRun": true}
            ]}
        }))
        .unwrap();
        let mut series = AnalysisRunSeries::default();
        series.add(&run);
        let l = |pairs: &[(&'static str, &str)]| -> Labels {
            pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
        };
        assert_eq!(
            series.info,
            vec![(
                l(&[
                    ("namespace", "shop"),
                    ("name", "demo-abc-2"),
                    ("phase", "Inconclusive")
                ]),
                1
            )]
        );
        assert_eq!(series.phase.len(), 6);
        assert_eq!(series.phase.iter().map(|(_, v)| v).sum::<i64>(), 1);
        assert_eq!(
            series.metric_type[0].0,
            l(&[
                ("namespace", "shop"),
                ("name", "demo-abc-2"),
                ("metric", "rate"),
                ("type", "Prometheus")
            ])
        );
        let on: Vec<&Labels> = series
            .metric_phase
            .iter()
            .filter(|(_, v)| *v == 1)
            .map(|(l, _)| l)
            .collect();
        assert_eq!(
            on,
            vec![
                &l(&[
                    ("namespace", "shop"),
                    ("name", "demo-abc-2"),
                    ("metric", "rate"),
                    ("type", "Prometheus"),
                    ("dry_run", "false"),
                    ("phase", "Inconclusive")
                ]),
                &l(&[
                    ("namespace", "shop"),
                    ("name", "demo-abc-2"),
                    ("metric", "probe"),
                    ("type", "Web"),
                    ("dry_run", "true"),
                    ("phase", "Successful")
                ]),
            ]
        );
    }
}
