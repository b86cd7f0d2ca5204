//! The ReplicaSet of each template: built as Argo builds it (so either controller recognises
//! the other's), and scaled, with the scale-down delay that keeps a finished template's pods
//! (and their Service) up for a while after the Experiment no longer needs them.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sluice_api::experiment::{DEFAULT_SCALE_DOWN_DELAY_SECONDS, Experiment, TemplateSpec};

use super::observed::{controller_ref, experiment_name};
use super::plan::ExperimentAction;
use crate::labels::{
    EXPERIMENT_NAME, EXPERIMENT_TEMPLATE_NAME, POD_TEMPLATE_HASH, SCALE_DOWN_DEADLINE,
};
use crate::observed::ReplicaSetExt;
use crate::plan::Event;

/// `<experiment>-<template>`: unlike a Rollout's, the hash is not part of the name.
pub fn replica_set_name(experiment: &str, template: &str) -> String {
    format!("{experiment}-{template}")
}

/// The pod-template hash of a template: its pod template without any hash label, hashed as a
/// Rollout's is, seeded with the template's collision count.
pub fn template_hash(
    template: &TemplateSpec,
    collision_count: Option<i32>,
) -> Result<String, String> {
    let mut pod = template.template.clone().unwrap_or_default();
    if let Some(labels) = pod.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    sluice_api::pod_template_hash::compute_pod_template_hash(&pod, collision_count)
        .map_err(|e| format!("cannot hash the pod template: {e}"))
}

/// The ReplicaSet to create for `template`, at 0 replicas.
pub fn build_replica_set(
    experiment: &Experiment,
    uid: &str,
    template: &TemplateSpec,
    collision_count: Option<i32>,
) -> Result<ReplicaSet, String> {
    let exp_name = experiment_name(experiment);
    let template_name = template.name.clone().unwrap_or_default();
    let hash = template_hash(template, collision_count)?;

    let mut pod = template.template.clone().unwrap_or_default();
    let labels = {
        let meta = pod.metadata.get_or_insert_with(Default::default);
        let labels = meta.labels.get_or_insert_with(Default::default);
        labels.insert(POD_TEMPLATE_HASH.into(), hash.clone());
        labels.clone()
    };
    let mut selector = template.selector.clone().unwrap_or_default();
    selector
        .match_labels
        .get_or_insert_with(Default::default)
        .insert(POD_TEMPLATE_HASH.into(), hash);

    Ok(ReplicaSet {
        metadata: ObjectMeta {
            name: Some(replica_set_name(exp_name, &template_name)),
            namespace: experiment.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(experiment_annotations(exp_name, &template_name)),
            owner_references: Some(vec![controller_ref(experiment, uid)]),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: template.min_ready_seconds,
            selector,
            template: Some(pod),
        }),
        status: None,
    })
}

/// The two annotations by which the Experiment claims its ReplicaSets and Services.
pub(crate) fn experiment_annotations(experiment: &str, template: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (EXPERIMENT_NAME.to_owned(), experiment.to_owned()),
        (EXPERIMENT_TEMPLATE_NAME.to_owned(), template.to_owned()),
    ])
}

/// What scaling a template's ReplicaSet decided.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Scaling {
    pub actions: Vec<ExperimentAction>,
    pub events: Vec<Event>,
    /// The ReplicaSet was scaled, or its scale-down deadline recorded: the template's
    /// `lastTransitionTime` moves.
    pub touched: bool,
    /// The ReplicaSet is kept at its size until its scale-down deadline: its pods are going,
    /// not coming, so no progress deadline applies.
    pub held: bool,
    /// Come back when the scale-down deadline passes.
    pub requeue: Option<Duration>,
}

/// Brings a template's ReplicaSet to `desired` pods. Going to 0 waits for the scale-down
/// delay (`scaleDownDelaySeconds`, default 30): the first pass records the deadline in the
/// `scale-down-deadline` annotation, later passes scale down once it has passed. A delay of 0
/// scales down at once and removes any deadline left from before.
pub(crate) fn scale(
    rs: &ReplicaSet,
    desired: i32,
    delay_seconds: Option<i32>,
    now: Timestamp,
) -> Scaling {
    let current = rs.spec_replicas();
    let mut out = Scaling::default();
    if current == desired {
        return out;
    }
    let deadline = rs.annotation(SCALE_DOWN_DEADLINE);
    let delay = delay_seconds.unwrap_or(DEFAULT_SCALE_DOWN_DELAY_SECONDS);
    let mut annotations = BTreeMap::new();
    if desired == 0 && delay > 0 {
        out.held = true;
        match deadline {
            None => {
                out.touched = true;
                // Past the end of time (a delay of decades near year 9999) reads as forever.
                let at = sluice_api::time::whole_seconds(now)
                    .checked_add(jiff::SignedDuration::from_secs(delay.into()))
                    .unwrap_or(Timestamp::MAX);
                out.actions.push(ExperimentAction::AnnotateReplicaSet {
                    name: rs.name().to_owned(),
                    resource_version: rs.metadata.resource_version.clone(),
                    annotations: [(SCALE_DOWN_DEADLINE.to_owned(), Some(at.to_string()))].into(),
                });
                out.requeue = Some(Duration::from_secs(delay as u64));
                return out;
            }
            Some(text) => {
                // An unreadable deadline counts as passed.
                if let Ok(at) = text.parse::<Timestamp>()
                    && at > now
                {
                    out.requeue = Some(at.duration_since(now).unsigned_abs());
                    return out;
                }
                out.held = false;
            }
        }
    } else if deadline.is_some() {
        annotations.insert(SCALE_DOWN_DEADLINE.to_owned(), None);
    }
    out.touched = true;
    out.actions.push(ExperimentAction::ScaleReplicaSet {
        name: rs.name().to_owned(),
        resource_version: rs.metadata.resource_version.clone(),
        from: current,
        to: desired,
        annotations,
    });
    let direction = if desired > current { "up" } else { "down" };
    out.events.push(Event::normal(
        "ScalingReplicaSet",
        format!(
            "Scaled {direction} ReplicaSet {} from {current} to {desired}",
            rs.name()
        ),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn experiment() -> Experiment {
        serde_json::from_value(json!({
            "metadata": {"name": "ex", "namespace": "ns", "uid": "u1"},
            "spec": {"templates": []}
        }))
        .unwrap()
    }

    fn template() -> TemplateSpec {
        serde_json::from_value(json!({
            "name": "baseline",
            "minReadySeconds": 7,
            "selector": {"matchLabels": {"app": "demo"}},
            "template": {"metadata": {"labels": {"app": "demo", POD_TEMPLATE_HASH: "stale"}},
                         "spec": {"containers": [{"name": "c", "image": "i"}]}}
        }))
        .unwrap()
    }

    #[test]
    fn replica_set_is_named_labelled_and_owned_as_argo_does() {
        let rs = build_replica_set(&experiment(), "u1", &template(), None).unwrap();
        let hash = template_hash(&template(), None).unwrap();
        assert_ne!(hash, "stale");
        assert_eq!(rs.metadata.name.as_deref(), Some("ex-baseline"));
        assert_eq!(rs.metadata.namespace.as_deref(), Some("ns"));
        let labels = rs.metadata.labels.clone().unwrap();
        assert_eq!(labels["app"], "demo");
        assert_eq!(labels[POD_TEMPLATE_HASH], hash);
        let annotations = rs.metadata.annotations.clone().unwrap();
        assert_eq!(annotations.len(), 2);
        assert_eq!(annotations[EXPERIMENT_NAME], "ex");
        assert_eq!(annotations[EXPERIMENT_TEMPLATE_NAME], "baseline");
        let owner = &rs.metadata.owner_references.clone().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
            ("Experiment", "ex", "u1")
        );
        assert_eq!(owner.controller, Some(true));
        let spec = rs.spec.unwrap();
        assert_eq!(spec.replicas, Some(0));
        assert_eq!(spec.min_ready_seconds, Some(7));
        let selector = spec.selector.match_labels.unwrap();
        assert_eq!(selector["app"], "demo");
        assert_eq!(selector[POD_TEMPLATE_HASH], hash);
        let pod_labels = spec.template.unwrap().metadata.unwrap().labels.unwrap();
        assert_eq!(pod_labels[POD_TEMPLATE_HASH], hash);
    }

    #[test]
    fn hash_ignores_a_hash_label_and_takes_the_collision_count() {
        let mut plain = template();
        plain
            .template
            .as_mut()
            .unwrap()
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .remove(POD_TEMPLATE_HASH);
        assert_eq!(
            template_hash(&plain, None).unwrap(),
            template_hash(&template(), None).unwrap()
        );
        assert_ne!(
            template_hash(&plain, Some(1)).unwrap(),
            template_hash(&plain, None).unwrap()
        );
    }

    fn rs(replicas: i32, deadline: Option<&str>) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": "ex-baseline", "resourceVersion": "9",
                         "annotations": deadline.map(|d| json!({SCALE_DOWN_DEADLINE: d}))},
            "spec": {"replicas": replicas, "selector": {}}
        }))
        .unwrap()
    }

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    fn scaled(
        from: i32,
        to: i32,
        annotations: BTreeMap<String, Option<String>>,
    ) -> ExperimentAction {
        ExperimentAction::ScaleReplicaSet {
            name: "ex-baseline".into(),
            resource_version: Some("9".into()),
            from,
            to,
            annotations,
        }
    }

    #[test]
    fn scaling_up_emits_argo_event() {
        let s = scale(&rs(0, None), 2, None, t(0));
        assert_eq!(s.actions, [scaled(0, 2, BTreeMap::new())]);
        assert_eq!(
            s.events[0].message,
            "Scaled up ReplicaSet ex-baseline from 0 to 2"
        );
        assert!(s.touched);
        assert_eq!(scale(&rs(2, None), 2, None, t(0)), Scaling::default());
    }

    #[test]
    fn scale_down_waits_for_the_deadline() {
        // First pass: the deadline is recorded, the pods stay.
        let s = scale(&rs(2, None), 0, Some(5), t(100));
        assert_eq!(
            s.actions,
            [ExperimentAction::AnnotateReplicaSet {
                name: "ex-baseline".into(),
                resource_version: Some("9".into()),
                annotations: [(
                    SCALE_DOWN_DEADLINE.to_owned(),
                    Some("1970-01-01T00:01:45Z".to_owned())
                )]
                .into(),
            }]
        );
        assert_eq!(s.requeue, Some(Duration::from_secs(5)));
        assert!(s.touched);
        // Before the deadline: nothing but a requeue.
        let s = scale(&rs(2, Some("1970-01-01T00:01:45Z")), 0, Some(5), t(102));
        assert!(s.actions.is_empty());
        assert_eq!(s.requeue, Some(Duration::from_secs(3)));
        assert!(s.held && !s.touched);
        // After it: scaled down.
        let s = scale(&rs(2, Some("1970-01-01T00:01:45Z")), 0, Some(5), t(105));
        assert_eq!(s.actions, [scaled(2, 0, BTreeMap::new())]);
        assert_eq!(
            s.events[0].message,
            "Scaled down ReplicaSet ex-baseline from 2 to 0"
        );
        // Default delay is 30 s.
        let s = scale(&rs(1, None), 0, None, t(0));
        assert_eq!(s.requeue, Some(Duration::from_secs(30)));
    }

    #[test]
    fn zero_delay_scales_down_at_once_and_drops_a_deadline() {
        let s = scale(&rs(2, Some("2999-01-01T00:00:00Z")), 0, Some(0), t(0));
        assert_eq!(
            s.actions,
            [scaled(
                2,
                0,
                [(SCALE_DOWN_DEADLINE.to_owned(), None)].into()
            )]
        );
        let s = scale(&rs(2, None), 0, Some(0), t(0));
        assert_eq!(s.actions, [scaled(2, 0, BTreeMap::new())]);
    }
}
