//! What `get experiment` (and the Experiments in `get rollout`'s tree) show about an
//! Experiment, distilled from it, its ReplicaSets, their pods and its AnalysisRuns. Pure: the
//! objects and the current time go in, plain values come out.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::{Experiment, ExperimentStatus};
use sluice_engine::labels::EXPERIMENT_TEMPLATE_NAME;

use super::{
    AnalysisRunInfo, ReplicaSetFacts, ReplicaSetInfo, analysis_run_info, container_images, created,
    is_controlled_by_kind, replica_set_summary,
};

/// The phase of an Experiment the controller has not picked up yet.
const PENDING: &str = "Pending";

/// An Experiment as shown to a user.
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentInfo {
    pub name: String,
    pub namespace: String,
    pub created: Option<Timestamp>,
    /// `status.phase` (`Pending` before the controller has seen the Experiment).
    pub phase: String,
    pub message: String,
    /// When all templates first became available.
    pub available_at: Option<Timestamp>,
    /// Images of the templates, each with the templates running it, in template order.
    pub images: Vec<TemplateImage>,
    /// In the order of the spec.
    pub templates: Vec<TemplateInfo>,
    /// The ReplicaSets the Experiment controls, in template order, with their pods.
    pub replica_sets: Vec<ReplicaSetInfo>,
    /// The AnalysisRuns the Experiment controls, oldest first.
    pub analysis_runs: Vec<AnalysisRunInfo>,
}

/// An image and the templates whose pods run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateImage {
    pub image: String,
    pub templates: Vec<String>,
}

/// One template: what it asks for and what its status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateInfo {
    pub name: String,
    /// `Progressing`, `Running`, `Successful`, `Failed` or `Error`; empty before the
    /// controller has reported on the template.
    pub status: String,
    pub message: String,
    /// `replicas` of the template (1 when unset).
    pub desired: i32,
    pub current: i32,
    pub updated: i32,
    pub ready: i32,
    pub available: i32,
    /// The template's ReplicaSet, once there is one.
    pub replica_set: Option<String>,
}

impl ExperimentInfo {
    /// Describes `exp` with the ReplicaSets it controls among `replica_sets` (and their pods
    /// among `pods`) and the AnalysisRuns it controls among `runs`.
    pub fn new<R: ReplicaSetFacts>(
        exp: &Experiment,
        replica_sets: &[R],
        pods: &[Pod],
        runs: &[AnalysisRun],
        now: Timestamp,
    ) -> Self {
        let default_status = ExperimentStatus::default();
        let status = exp.status.as_ref().unwrap_or(&default_status);
        let template_specs = exp.spec.templates.as_deref().unwrap_or_default();
        let template_of = |rs: &R| rs.annotation(EXPERIMENT_TEMPLATE_NAME).map(str::to_owned);
        let position = |rs: &R| {
            template_of(rs)
                .and_then(|t| {
                    template_specs
                        .iter()
                        .position(|s| s.name.as_deref() == Some(t.as_str()))
                })
                .unwrap_or(usize::MAX)
        };

        let mut owned: Vec<&R> = replica_sets
            .iter()
            .filter(|rs| is_controlled_by_kind(rs.metadata(), "Experiment", &exp.metadata))
            .collect();
        owned.sort_by(|a, b| {
            position(a)
                .cmp(&position(b))
                .then_with(|| a.name().cmp(b.name()))
        });

        let templates = template_specs
            .iter()
            .map(|spec| {
                let name = spec.name.clone().unwrap_or_default();
                let reported = status.template_status(&name);
                let count = |f: fn(&sluice_api::experiment::TemplateStatus) -> Option<i32>| {
                    reported.and_then(f).unwrap_or(0)
                };
                TemplateInfo {
                    status: reported
                        .and_then(|t| t.status.as_ref())
                        .map(|s| s.as_str().to_owned())
                        .unwrap_or_default(),
                    message: reported.and_then(|t| t.message.clone()).unwrap_or_default(),
                    desired: spec.replicas.unwrap_or(1),
                    current: count(|t| t.replicas),
                    updated: count(|t| t.updated_replicas),
                    ready: count(|t| t.ready_replicas),
                    available: count(|t| t.available_replicas),
                    replica_set: owned
                        .iter()
                        .find(|rs| template_of(rs).as_deref() == Some(name.as_str()))
                        .map(|rs| rs.name().to_owned()),
                    name,
                }
            })
            .collect();

        let mut images: Vec<TemplateImage> = Vec::new();
        for spec in template_specs {
            let name = spec.name.clone().unwrap_or_default();
            for image in spec
                .template
                .as_ref()
                .map(container_images)
                .unwrap_or_default()
            {
                match images.iter_mut().find(|i| i.image == image) {
                    Some(known) if !known.templates.contains(&name) => {
                        known.templates.push(name.clone());
                    }
                    Some(_) => {}
                    None => images.push(TemplateImage {
                        image,
                        templates: vec![name.clone()],
                    }),
                }
            }
        }

        let mut exp_runs: Vec<&AnalysisRun> = runs
            .iter()
            .filter(|r| is_controlled_by_kind(&r.metadata, "Experiment", &exp.metadata))
            .collect();
        exp_runs.sort_by_key(|r| (created(&r.metadata), r.metadata.name.clone()));

        Self {
            name: exp.metadata.name.clone().unwrap_or_default(),
            namespace: exp.metadata.namespace.clone().unwrap_or_default(),
            created: created(&exp.metadata),
            phase: status
                .phase
                .as_ref()
                .map(|p| p.as_str())
                .filter(|p| !p.is_empty())
                .unwrap_or(PENDING)
                .to_owned(),
            message: status.message.clone().unwrap_or_default(),
            available_at: status.available_at.as_ref().map(|t| t.0),
            images,
            templates,
            replica_sets: owned
                .into_iter()
                .map(|rs| replica_set_summary(rs, Vec::new(), pods, now))
                .collect(),
            analysis_runs: exp_runs.into_iter().map(analysis_run_info).collect(),
        }
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! An Experiment with two templates and an analysis, as a controller leaves it running.

    use k8s_openapi::api::apps::v1::ReplicaSet;
    use serde_json::json;

    use super::*;

    pub fn experiment() -> Experiment {
        serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Experiment",
            "metadata": {"name": "demo-exp", "namespace": "shop", "uid": "exp-uid",
                         "creationTimestamp": "2024-05-01T11:58:00Z"},
            "spec": {
                "duration": "5m",
                "templates": [
                    {"name": "baseline", "replicas": 1,
                     "selector": {"matchLabels": {"app": "demo"}},
                     "template": {"metadata": {"labels": {"app": "demo"}},
                                  "spec": {"containers": [{"name": "app", "image": "demo:v1"}]}}},
                    {"name": "canary", "replicas": 2,
                     "selector": {"matchLabels": {"app": "demo"}},
                     "template": {"metadata": {"labels": {"app": "demo"}},
                                  "spec": {"containers": [{"name": "app", "image": "demo:v2"}]}}}
                ],
                "analyses": [{"name": "rate", "templateName": "success-rate"}]
            },
            "status": {
                "phase": "Running",
                "message": "",
                "availableAt": "2024-05-01T11:59:00Z",
                "templateStatuses": [
                    {"name": "baseline", "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
                     "availableReplicas": 1, "status": "Running"},
                    {"name": "canary", "replicas": 2, "updatedReplicas": 2, "readyReplicas": 1,
                     "availableReplicas": 1, "status": "Progressing",
                     "message": "waiting for 1 pod"}
                ],
                "analysisRuns": [{"name": "rate", "analysisRun": "demo-exp-rate", "phase": "Running"}]
            }
        }))
        .unwrap()
    }

    /// A ReplicaSet the Experiment controls for `template`.
    pub fn template_replica_set(
        exp: &Experiment,
        template: &str,
        hash: &str,
        image: &str,
        replicas: i32,
        available: i32,
    ) -> ReplicaSet {
        let exp_name = exp.metadata.name.clone().unwrap_or_default();
        serde_json::from_value(json!({
            "metadata": {
                "name": format!("{exp_name}-{template}"), "namespace": "shop",
                "creationTimestamp": "2024-05-01T11:58:01Z",
                "labels": {"app": "demo", "rollouts-pod-template-hash": hash},
                "annotations": {"experiment.argoproj.io/name": exp_name,
                                "experiment.argoproj.io/template-name": template},
                "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Experiment",
                                     "name": exp_name, "uid": exp.metadata.uid.clone(),
                                     "controller": true}]
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "demo", "rollouts-pod-template-hash": hash}},
                "template": {"metadata": {"labels": {"app": "demo", "rollouts-pod-template-hash": hash}},
                             "spec": {"containers": [{"name": "app", "image": image}]}}
            },
            "status": {"replicas": replicas, "readyReplicas": available,
                       "availableReplicas": available}
        }))
        .unwrap()
    }

    /// An AnalysisRun the Experiment controls.
    pub fn experiment_run(exp: &Experiment, name: &str, status: serde_json::Value) -> AnalysisRun {
        serde_json::from_value(json!({
            "metadata": {
                "name": name, "namespace": "shop", "creationTimestamp": "2024-05-01T11:59:00Z",
                "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Experiment",
                                     "name": exp.metadata.name.clone(),
                                     "uid": exp.metadata.uid.clone(), "controller": true}]
            },
            "spec": {"metrics": []},
            "status": status
        }))
        .unwrap()
    }

    /// The Experiment with its two ReplicaSets (the canary one still missing a pod), their
    /// pods, and a running analysis with two good measurements.
    pub fn experiment_world() -> (Experiment, Vec<ReplicaSet>, Vec<Pod>, Vec<AnalysisRun>) {
        use crate::info::fixtures::running_pod;
        let exp = experiment();
        let rss = vec![
            template_replica_set(&exp, "canary", "c2", "demo:v2", 2, 1),
            template_replica_set(&exp, "baseline", "b1", "demo:v1", 1, 1),
        ];
        let pods = vec![
            running_pod("demo-exp-baseline-aaaaa", "b1", 0, "2024-05-01T11:58:02Z"),
            running_pod("demo-exp-canary-bbbbb", "c2", 0, "2024-05-01T11:58:02Z"),
        ];
        let runs = vec![experiment_run(
            &exp,
            "demo-exp-rate",
            json!({"phase": "Running", "metricResults": [{"name": "rate", "successful": 2}]}),
        )];
        (exp, rss, pods, runs)
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use crate::info::fixtures::now;

    #[test]
    fn running_experiment_summary() {
        let (exp, rss, pods, runs) = experiment_world();
        let info = ExperimentInfo::new(&exp, &rss, &pods, &runs, now());
        assert_eq!(info.phase, "Running");
        assert_eq!(
            info.available_at,
            Some("2024-05-01T11:59:00Z".parse().unwrap())
        );
        // ReplicaSets in template order, whatever order they were listed in.
        let names: Vec<&str> = info.replica_sets.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["demo-exp-baseline", "demo-exp-canary"]);
        assert_eq!(info.replica_sets[1].status, "Progressing");
        assert_eq!(info.replica_sets[0].pods.len(), 1);
        assert_eq!(
            info.templates[1],
            TemplateInfo {
                name: "canary".into(),
                status: "Progressing".into(),
                message: "waiting for 1 pod".into(),
                desired: 2,
                current: 2,
                updated: 2,
                ready: 1,
                available: 1,
                replica_set: Some("demo-exp-canary".into()),
            }
        );
        assert_eq!(
            info.images,
            [
                TemplateImage {
                    image: "demo:v1".into(),
                    templates: vec!["baseline".into()]
                },
                TemplateImage {
                    image: "demo:v2".into(),
                    templates: vec!["canary".into()]
                },
            ]
        );
        assert_eq!(info.analysis_runs.len(), 1);
        assert_eq!(info.analysis_runs[0].status, "Running");
        assert_eq!(info.analysis_runs[0].successful, 2);
    }

    #[test]
    fn new_experiment_is_pending_and_ignores_objects_of_others() {
        let mut exp = experiment();
        exp.status = None;
        let other = {
            let mut o = experiment();
            o.metadata.uid = Some("other-uid".into());
            o.metadata.name = Some("other".into());
            o
        };
        let rss = vec![template_replica_set(
            &other, "baseline", "x", "demo:v1", 1, 1,
        )];
        let runs = vec![experiment_run(&other, "other-rate", serde_json::json!({}))];
        let info = ExperimentInfo::new(&exp, &rss, &[], &runs, now());
        assert_eq!(info.phase, "Pending");
        assert!(info.replica_sets.is_empty() && info.analysis_runs.is_empty());
        assert_eq!(info.templates[0].status, "");
        assert_eq!(info.templates[0].replica_set, None);
        assert_eq!(info.templates[0].desired, 1);
    }
}
