//! The observed world of one Experiment, gathered by the controller before the engine runs,
//! and the rules by which the Experiment claims what it finds there.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::Experiment;

use crate::labels::{EXPERIMENT_NAME, EXPERIMENT_TEMPLATE_NAME};
use crate::observed::{AnalysisTemplates, TemplateKey};

/// One Experiment and the objects around it, as seen at `now`.
#[derive(Debug, Clone)]
pub struct ExperimentObserved {
    pub experiment: Experiment,
    /// ReplicaSets controlled by the Experiment, plus any ReplicaSet named like one of its
    /// templates' (`<experiment>-<template>`), so that a name taken by someone else is seen.
    pub replica_sets: Vec<ReplicaSet>,
    /// Services controlled by the Experiment, plus any Service bearing the name one of its
    /// templates' Services would have, so that a name taken by someone else is seen.
    pub services: Vec<Service>,
    /// AnalysisRuns controlled by the Experiment, plus any run bearing a name one of its
    /// analyses would use (`<experiment>-<analysis>`, then `.1`, `.2`, ...).
    pub analysis_runs: Vec<AnalysisRun>,
    /// The templates its analyses name ([`analysis_template_refs`]) and the ones those nest,
    /// as found; a missing one is simply absent and the engine reports it.
    pub analysis_templates: AnalysisTemplates,
    /// The time of the pass, read to the whole second (as the times it is compared with are
    /// recorded): a deadline counts as passed from its own second on ([`super::state::reached`]).
    pub now: Timestamp,
}

/// The templates the Experiment's analyses name directly. Nested ones are found by following
/// [`crate::observed::nested_template_refs`].
pub fn analysis_template_refs(experiment: &Experiment) -> Vec<TemplateKey> {
    let mut keys: Vec<TemplateKey> = experiment
        .spec
        .analyses
        .iter()
        .flatten()
        .map(|a| TemplateKey {
            cluster_scope: a.cluster_scope.unwrap_or(false),
            name: a.template_name.clone().unwrap_or_default(),
        })
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The Experiment's name (empty if unset).
pub(crate) fn experiment_name(e: &Experiment) -> &str {
    e.metadata.name.as_deref().unwrap_or_default()
}

/// Owner reference making the Experiment the controller of a child object.
pub(crate) fn controller_ref(e: &Experiment, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: sluice_api::API_VERSION.into(),
        kind: "Experiment".into(),
        name: experiment_name(e).into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether `meta`'s controller reference names the object with `uid`.
pub(crate) fn controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

fn annotation<'m>(meta: &'m ObjectMeta, key: &str) -> Option<&'m str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The template an object of the Experiment serves, if the Experiment claims it: its
/// controller reference names the Experiment and its experiment-name annotation too.
pub(crate) fn claimed_template<'m>(meta: &'m ObjectMeta, name: &str, uid: &str) -> Option<&'m str> {
    (controlled_by(meta, uid) && annotation(meta, EXPERIMENT_NAME) == Some(name))
        .then(|| annotation(meta, EXPERIMENT_TEMPLATE_NAME))
        .flatten()
}

/// The claimed ReplicaSet of each template. Two for one template is Argo's error.
pub(crate) fn claim_replica_sets<'a>(
    o: &'a ExperimentObserved,
    uid: &str,
) -> Result<BTreeMap<&'a str, &'a ReplicaSet>, String> {
    let name = experiment_name(&o.experiment);
    let mut out: BTreeMap<&str, &ReplicaSet> = BTreeMap::new();
    for rs in &o.replica_sets {
        if let Some(template) = claimed_template(&rs.metadata, name, uid)
            && out.insert(template, rs).is_some()
        {
            return Err(format!(
                "multiple ReplicaSets match single experiment template: {template}"
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(name: &str, uid: &str, exp: &str, template: &str) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": name,
                "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Experiment",
                    "name": exp, "uid": uid, "controller": true}],
                "annotations": {EXPERIMENT_NAME: exp, EXPERIMENT_TEMPLATE_NAME: template}}
        }))
        .unwrap()
    }

    fn observed(replica_sets: Vec<ReplicaSet>) -> ExperimentObserved {
        ExperimentObserved {
            experiment: serde_json::from_value(json!({
                "metadata": {"name": "e", "uid": "u"},
                "spec": {"templates": [], "analyses": [
                    {"name": "a", "templateName": "t"},
                    {"name": "b", "templateName": "t"},
                    {"name": "c", "templateName": "t", "clusterScope": true}]}
            }))
            .unwrap(),
            replica_sets,
            services: vec![],
            analysis_runs: vec![],
            analysis_templates: Default::default(),
            now: Timestamp::UNIX_EPOCH,
        }
    }

    #[test]
    fn claims_need_both_the_owner_and_the_name_annotation() {
        let o = observed(vec![
            rs("e-x", "u", "e", "x"),
            rs("e-y", "other", "e", "y"),
            rs("e-z", "u", "f", "z"),
        ]);
        let claimed = claim_replica_sets(&o, "u").unwrap();
        assert_eq!(claimed.keys().copied().collect::<Vec<_>>(), ["x"]);
    }

    #[test]
    fn two_replica_sets_for_one_template_is_an_error() {
        let o = observed(vec![rs("e-x", "u", "e", "x"), rs("e-x2", "u", "e", "x")]);
        assert_eq!(
            claim_replica_sets(&o, "u").unwrap_err(),
            "multiple ReplicaSets match single experiment template: x"
        );
    }

    #[test]
    fn template_refs_are_deduplicated() {
        let keys = analysis_template_refs(&observed(vec![]).experiment);
        assert_eq!(keys.len(), 2);
        assert!(keys.iter().any(|k| k.cluster_scope && k.name == "t"));
    }
}
