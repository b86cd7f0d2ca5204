//! The AnalysisRun a Rollout starts: its templates merged, its arguments filled from the
//! Rollout and its ReplicaSets, and Argo's name, labels, annotations and owner reference.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use sluice_api::Rollout;
use sluice_api::analysis::{AnalysisRun, AnalysisRunSpec, AnalysisTemplateSpec, Metric};
use sluice_api::common::{
    AnalysisRunArgument, AnalysisTemplateRef, Argument, DryRun, MeasurementRetention,
    PodTemplateHashValue,
};
use sluice_api::rollout::RolloutAnalysis;

use super::field_ref::rollout_field;
use super::{
    ROLLOUT_TYPE, STEP_INDEX, TYPE_BACKGROUND, TYPE_POST_PROMOTION, TYPE_PRE_PROMOTION, TYPE_STEP,
};
use crate::labels::{CONTROLLER_INSTANCE_ID, POD_TEMPLATE_HASH, REVISION};

/// A template a Rollout refers to, fetched, with its scope and name for ordering and messages.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedTemplate {
    pub name: String,
    pub cluster_scope: bool,
    pub spec: AnalysisTemplateSpec,
}

/// Argo's words for a template it cannot find.
pub fn not_found(cluster_scope: bool, name: &str) -> String {
    let kind = if cluster_scope {
        "ClusterAnalysisTemplate"
    } else {
        "AnalysisTemplate"
    };
    format!("{kind} '{name}' not found")
}

/// Fetches the referenced templates and, depth first, the templates they nest in
/// `spec.templates`. Each template appears once, at its first reference; a template that
/// (directly or not) nests itself is an error, as is one `lookup` cannot find.
pub fn resolve_nested(
    refs: &[AnalysisTemplateRef],
    lookup: impl Fn(&AnalysisTemplateRef) -> Option<AnalysisTemplateSpec>,
) -> Result<Vec<ResolvedTemplate>, String> {
    let mut out = Vec::new();
    let mut path = Vec::new();
    for r in refs {
        visit(r, &lookup, &mut path, &mut out)?;
    }
    Ok(out)
}

fn visit(
    r: &AnalysisTemplateRef,
    lookup: &impl Fn(&AnalysisTemplateRef) -> Option<AnalysisTemplateSpec>,
    path: &mut Vec<(bool, String)>,
    out: &mut Vec<ResolvedTemplate>,
) -> Result<(), String> {
    let name = r
        .template_name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or("an analysis template reference has no templateName")?;
    let key = (r.is_cluster_scoped(), name.to_owned());
    if path.contains(&key) {
        let chain: Vec<&str> = path.iter().map(|(_, n)| n.as_str()).chain([name]).collect();
        return Err(format!(
            "analysis templates nest each other in a cycle: {}",
            chain.join(" -> ")
        ));
    }
    if out
        .iter()
        .any(|t| t.cluster_scope == key.0 && t.name == key.1)
    {
        return Ok(());
    }
    let spec = lookup(r).ok_or_else(|| not_found(r.is_cluster_scoped(), name))?;
    let nested = spec.templates.clone().unwrap_or_default();
    out.push(ResolvedTemplate {
        name: name.to_owned(),
        cluster_scope: key.0,
        spec,
    });
    path.push(key);
    for n in &nested {
        visit(n, lookup, path, out)?;
    }
    path.pop();
    Ok(())
}

/// Merges templates into one spec, namespaced templates before cluster ones: metrics and
/// dry-run and retention rules are concatenated (a name used twice is an error), and
/// arguments of the same name are combined, a value winning over none; two different values
/// are an error.
pub fn merge_templates(templates: &[ResolvedTemplate]) -> Result<AnalysisTemplateSpec, String> {
    let ordered: Vec<&AnalysisTemplateSpec> = templates
        .iter()
        .filter(|t| !t.cluster_scope)
        .chain(templates.iter().filter(|t| t.cluster_scope))
        .map(|t| &t.spec)
        .collect();

    let mut metrics: Vec<Metric> = Vec::new();
    for metric in ordered.iter().flat_map(|s| s.metrics.iter().flatten()) {
        if metrics.iter().any(|m| m.name == metric.name) {
            return Err(format!(
                "two metrics have the same name '{}'",
                metric.name.as_deref().unwrap_or_default()
            ));
        }
        metrics.push(metric.clone());
    }

    let mut args: Vec<Argument> = Vec::new();
    for arg in ordered.iter().flat_map(|s| s.args.iter().flatten()) {
        match args.iter_mut().find(|a| a.name == arg.name) {
            None => args.push(arg.clone()),
            Some(prev) => match (&prev.value, &arg.value) {
                (Some(a), Some(b)) if a != b => {
                    return Err(format!(
                        "Argument `{}` specified multiple times with different values: '{a}', '{b}'",
                        arg.name.as_deref().unwrap_or_default()
                    ));
                }
                (None, _) => *prev = arg.clone(),
                _ => {}
            },
        }
    }

    let dry_run = unique_rules(
        ordered
            .iter()
            .flat_map(|s| s.dry_run.iter().flatten())
            .cloned(),
        |r: &DryRun| r.metric_name.clone(),
        "Dry-Run",
    )?;
    let retention = unique_rules(
        ordered
            .iter()
            .flat_map(|s| s.measurement_retention.iter().flatten())
            .cloned(),
        |r: &MeasurementRetention| r.metric_name.clone(),
        "Measurement Retention",
    )?;

    Ok(AnalysisTemplateSpec {
        metrics: non_empty(metrics),
        args: non_empty(args),
        dry_run: non_empty(dry_run),
        measurement_retention: non_empty(retention),
        templates: None,
    })
}

/// Collects rules, refusing two for the same metric name pattern.
pub(crate) fn unique_rules<T>(
    rules: impl IntoIterator<Item = T>,
    name: impl Fn(&T) -> Option<String>,
    what: &str,
) -> Result<Vec<T>, String> {
    let mut out: Vec<T> = Vec::new();
    for rule in rules {
        let n = name(&rule);
        if out.iter().any(|r| name(r) == n) {
            return Err(format!(
                "two {what} metric rules have the same name '{}'",
                n.unwrap_or_default()
            ));
        }
        out.push(rule);
    }
    Ok(out)
}

fn non_empty<T>(v: Vec<T>) -> Option<Vec<T>> {
    (!v.is_empty()).then_some(v)
}

/// The role of a run for its Rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// An `analysis` canary step.
    Step { index: i32 },
    /// `canary.analysis`, running alongside the steps.
    Background,
    /// Blue-green analysis before the active Service switches.
    PrePromotion,
    /// Blue-green analysis after the active Service switched.
    PostPromotion,
}

impl RunKind {
    /// The `rollout-type` label value.
    pub fn label(self) -> &'static str {
        match self {
            RunKind::Step { .. } => TYPE_STEP,
            RunKind::Background => TYPE_BACKGROUND,
            RunKind::PrePromotion => TYPE_PRE_PROMOTION,
            RunKind::PostPromotion => TYPE_POST_PROMOTION,
        }
    }
}

/// `<rollout>-<podHash>-<revision>`, plus `-<stepIndex>`, `-pre` or `-post` by kind.
pub fn run_name(rollout: &str, pod_hash: &str, revision: &str, kind: RunKind) -> String {
    let base = format!("{rollout}-{pod_hash}-{revision}");
    match kind {
        RunKind::Step { index } => format!("{base}-{index}"),
        RunKind::Background => base,
        RunKind::PrePromotion => format!("{base}-pre"),
        RunKind::PostPromotion => format!("{base}-post"),
    }
}

/// The name to try after `attempt` collisions with runs that are not this one (`<name>.<n>`).
pub fn collision_name(base: &str, attempt: u32) -> String {
    format!("{base}.{attempt}")
}

/// Whether `name` is `base` or one of its [`collision_name`]s.
pub fn is_named_after(name: &str, base: &str) -> bool {
    name == base
        || name
            .strip_prefix(base)
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|n| n.parse::<u32>().is_ok())
}

/// Everything needed to build one run.
#[derive(Debug, Clone)]
pub struct RunRequest<'a> {
    pub rollout: &'a Rollout,
    /// The step, background or promotion analysis: its args, dryRun, measurementRetention
    /// and analysisRunMetadata are used (its template references are already in `template`).
    pub analysis: &'a RolloutAnalysis,
    /// The referenced templates, merged by [`merge_templates`].
    pub template: AnalysisTemplateSpec,
    pub kind: RunKind,
    /// Pod-template hash of the newest ReplicaSet.
    pub latest_pod_hash: &'a str,
    /// Pod-template hash of the stable ReplicaSet, if there is one.
    pub stable_pod_hash: Option<&'a str>,
    /// The Rollout's revision (`rollout.argoproj.io/revision`).
    pub revision: &'a str,
}

/// Builds the AnalysisRun to create. Secret-backed template arguments stay as `valueFrom`,
/// to be read when measuring; every other argument must end up with a value.
pub fn build_analysis_run(input: RunRequest) -> Result<AnalysisRun, String> {
    let ro = input.rollout;
    let rollout_name = ro.metadata.name.as_deref().unwrap_or_default();
    if input.latest_pod_hash.is_empty() {
        return Err("the latest ReplicaSet has no pod-template hash".into());
    }
    let uid = ro
        .metadata
        .uid
        .clone()
        .ok_or_else(|| format!("Rollout {rollout_name:?} has no uid to own an AnalysisRun"))?;

    let incoming = rollout_args(&input)?;
    let args = merge_args(
        &incoming,
        input.template.args.as_deref().unwrap_or_default(),
    )?;
    let analysis = input.analysis;
    let dry_run = unique_rules(
        analysis
            .dry_run
            .iter()
            .flatten()
            .chain(input.template.dry_run.iter().flatten())
            .cloned(),
        |r: &DryRun| r.metric_name.clone(),
        "Dry-Run",
    )?;
    let retention = unique_rules(
        analysis
            .measurement_retention
            .iter()
            .flatten()
            .chain(input.template.measurement_retention.iter().flatten())
            .cloned(),
        |r: &MeasurementRetention| r.metric_name.clone(),
        "Measurement Retention",
    )?;

    // Later entries win, as in Argo: run metadata over the built-in labels, and the
    // Rollout's selector over both.
    let mut labels = BTreeMap::from([
        (
            POD_TEMPLATE_HASH.to_owned(),
            input.latest_pod_hash.to_owned(),
        ),
        (ROLLOUT_TYPE.to_owned(), input.kind.label().to_owned()),
    ]);
    if let RunKind::Step { index } = input.kind {
        labels.insert(STEP_INDEX.to_owned(), index.to_string());
    }
    if let Some(id) = ro
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CONTROLLER_INSTANCE_ID))
        .filter(|id| !id.is_empty())
    {
        labels.insert(CONTROLLER_INSTANCE_ID.to_owned(), id.clone());
    }
    let run_metadata = analysis.analysis_run_metadata.as_ref();
    labels.extend(
        run_metadata
            .and_then(|m| m.labels.clone())
            .unwrap_or_default(),
    );
    labels.extend(
        ro.spec
            .selector
            .as_ref()
            .and_then(|s| s.match_labels.clone())
            .unwrap_or_default(),
    );
    let mut annotations = BTreeMap::from([(REVISION.to_owned(), input.revision.to_owned())]);
    annotations.extend(
        run_metadata
            .and_then(|m| m.annotations.clone())
            .unwrap_or_default(),
    );

    Ok(AnalysisRun {
        metadata: ObjectMeta {
            name: Some(run_name(
                rollout_name,
                input.latest_pod_hash,
                input.revision,
                input.kind,
            )),
            namespace: ro.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: sluice_api::API_VERSION.to_owned(),
                kind: "Rollout".to_owned(),
                name: rollout_name.to_owned(),
                uid,
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        spec: AnalysisRunSpec {
            metrics: input.template.metrics,
            args: non_empty(args),
            dry_run: non_empty(dry_run),
            measurement_retention: non_empty(retention),
            ..Default::default()
        },
        status: None,
    })
}

/// The Rollout's arguments with their values worked out. An argument with neither value nor
/// source passes an empty value, as Argo does.
fn rollout_args(input: &RunRequest) -> Result<Vec<Argument>, String> {
    resolve_rollout_args(
        input.rollout,
        input.analysis.args.as_deref().unwrap_or_default(),
        input.latest_pod_hash,
        input.stable_pod_hash,
    )
}

/// A Rollout's analysis arguments (a step analysis, an experiment step's analyses) with their
/// values worked out: pod-template hashes and the Rollout's own fields.
pub(crate) fn resolve_rollout_args(
    rollout: &Rollout,
    args: &[AnalysisRunArgument],
    latest_pod_hash: &str,
    stable_pod_hash: Option<&str>,
) -> Result<Vec<Argument>, String> {
    args.iter()
        .map(|arg| {
            let name = arg.name.clone().unwrap_or_default();
            let from = arg.value_from.as_ref();
            let value = match (
                from.and_then(|f| f.pod_template_hash_value.as_ref()),
                from.and_then(|f| f.field_ref.as_ref()),
            ) {
                (Some(PodTemplateHashValue::Latest), _) => latest_pod_hash.to_owned(),
                (Some(PodTemplateHashValue::Stable), _) => {
                    stable_pod_hash.unwrap_or_default().to_owned()
                }
                (Some(PodTemplateHashValue::Other(other)), _) => {
                    return Err(format!(
                        "args.{name}: podTemplateHashValue must be Stable or Latest, got {other:?}"
                    ));
                }
                (None, Some(field)) => {
                    rollout_field(rollout, field.field_path.as_deref().unwrap_or_default())
                        .map_err(|e| format!("args.{name}: {e}"))?
                }
                (None, None) => arg.value.clone().unwrap_or_default(),
            };
            Ok(Argument {
                name: Some(name),
                value: Some(value),
                value_from: None,
            })
        })
        .collect()
}

/// The template's arguments with the Rollout's values filled in. Arguments the template does
/// not declare are dropped; one left with neither a value nor a source is an error.
pub fn merge_args(incoming: &[Argument], template: &[Argument]) -> Result<Vec<Argument>, String> {
    let mut merged = template.to_vec();
    for arg in incoming {
        if let Some(target) = merged.iter_mut().find(|a| a.name == arg.name) {
            if arg.value.is_some() {
                target.value = arg.value.clone();
            } else if arg.value_from.is_some() {
                target.value_from = arg.value_from.clone();
            }
        }
    }
    if let Some(missing) = merged
        .iter()
        .find(|a| a.value.is_none() && a.value_from.is_none())
    {
        return Err(format!(
            "args.{} was not resolved",
            missing.name.as_deref().unwrap_or_default()
        ));
    }
    Ok(merged)
}

#[cfg(test)]
mod tests;
