//! `list rollouts`: one line per rollout.

use anyhow::Context as _;
use jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use sluice_api::Rollout;

use super::{emit, explain, rollouts};
use crate::cli::ListRolloutsArgs;
use crate::info::{RolloutInfo, Strategy};
use crate::kube_target::Target;
use crate::render::columns::{Cell, align};
use crate::render::style::Style;

pub async fn run(target: &Target, args: &ListRolloutsArgs) -> anyhow::Result<()> {
    let api = if args.all_namespaces {
        Api::<Rollout>::all(target.client.clone())
    } else {
        rollouts(target)
    };
    let mut items = api
        .list(&ListParams::default())
        .await
        .map_err(explain)
        .context("listing rollouts")?
        .items;
    if items.is_empty() {
        super::warn_plain("No resources found.");
        return Ok(());
    }
    items.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    emit(&render_table(&items, args.all_namespaces))
}

/// The table, with a NAMESPACE column first when listing all namespaces.
pub fn render_table(rollouts: &[Rollout], with_namespace: bool) -> String {
    let mut header = vec![
        "NAME",
        "STRATEGY",
        "STATUS",
        "STEP",
        "SET-WEIGHT",
        "READY",
        "DESIRED",
        "UP-TO-DATE",
        "AVAILABLE",
    ];
    if with_namespace {
        header.insert(0, "NAMESPACE");
    }
    let mut rows: Vec<Vec<Cell>> = vec![header.into_iter().map(Cell::plain).collect()];
    // Rows use only the Rollout itself; the clock does not matter for these columns.
    let now = Timestamp::UNIX_EPOCH;
    for rollout in rollouts {
        let info = RolloutInfo::new(rollout, &[], &[], now);
        let canary = info.strategy == Strategy::Canary;
        let counts = info.replicas;
        let mut row = vec![
            info.name.clone(),
            info.strategy.as_str().to_owned(),
            info.phase.to_string(),
            info.step
                .clone()
                .filter(|_| canary)
                .unwrap_or_else(|| "-".into()),
            info.set_weight
                .filter(|_| canary)
                .map_or_else(|| "-".into(), |w| w.to_string()),
            format!("{}/{}", counts.ready, counts.desired),
            counts.desired.to_string(),
            counts.updated.to_string(),
            counts.available.to_string(),
        ];
        if with_namespace {
            row.insert(0, info.namespace.clone());
        }
        rows.push(row.into_iter().map(Cell::plain).collect());
    }
    align(&rows, &Style::PLAIN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::fixtures::canary_rollout;
    use serde_json::json;

    fn blue_green() -> Rollout {
        serde_json::from_value(json!({
            "metadata": {"name": "checkout", "namespace": "web", "generation": 4},
            "spec": {"replicas": 3, "strategy": {"blueGreen": {"activeService": "a"}}},
            "status": {"observedGeneration": "4", "phase": "Healthy",
                       "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3}
        }))
        .unwrap()
    }

    #[test]
    fn table_of_rollouts() {
        let expected = "\
NAME      STRATEGY   STATUS   STEP  SET-WEIGHT  READY  DESIRED  UP-TO-DATE  AVAILABLE
demo      Canary     Paused   1/3   20          5/4    4        1           5
checkout  BlueGreen  Healthy  -     -           3/3    3        3           3
";
        assert_eq!(
            render_table(&[canary_rollout(), blue_green()], false),
            expected
        );
    }

    #[test]
    fn all_namespaces_adds_a_column() {
        let expected = "\
NAMESPACE  NAME      STRATEGY   STATUS   STEP  SET-WEIGHT  READY  DESIRED  UP-TO-DATE  AVAILABLE
web        checkout  BlueGreen  Healthy  -     -           3/3    3        3           3
";
        assert_eq!(render_table(&[blue_green()], true), expected);
    }
}
