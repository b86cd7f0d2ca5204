//! `list rollouts`: one line per rollout.

use std::collections::BTreeMap;

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
    let mut params = ListParams::default();
    if let Some(name) = &args.name {
        params = params.fields(&format!("metadata.name={name}"));
    }
    let mut items = api
        .list(&params)
        .await
        .map_err(explain)
        .context("listing rollouts")?
        .items;
    let columns = Columns {
        namespace: args.all_namespaces,
        timestamp: args.timestamps.then(|| timestamp(Timestamp::now())),
    };
    if items.is_empty() && !args.watch {
        super::warn_plain("No resources found.");
        return Ok(());
    }
    items.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    let table = render_rows(&items, &columns);
    emit(&table)?;
    if args.watch {
        watch(api, args, items, table).await?;
    }
    Ok(())
}

/// `--watch`: after the table, one line each time a rollout's row changes, as Argo prints them
/// (a new rollout's row too). The lines are aligned with the table shown first.
async fn watch(
    api: Api<Rollout>,
    args: &ListRolloutsArgs,
    items: Vec<Rollout>,
    table: String,
) -> anyhow::Result<()> {
    use futures::TryStreamExt as _;
    use kube::runtime::watcher;

    let mut config = watcher::Config::default();
    if let Some(name) = &args.name {
        config = config.fields(&format!("metadata.name={name}"));
    }
    let plain = Columns {
        namespace: args.all_namespaces,
        timestamp: None,
    };
    let mut shown: BTreeMap<(String, String), Vec<String>> = items
        .iter()
        .map(|ro| (key(ro), cells(ro, &plain)))
        .collect();
    let mut widths = widths_of(&table);
    let mut events = std::pin::pin!(watcher(api, config));
    while let Some(event) = events.try_next().await.context("watching rollouts")? {
        let (watcher::Event::Apply(rollout) | watcher::Event::InitApply(rollout)) = event else {
            continue;
        };
        let row = cells(&rollout, &plain);
        if shown.get(&key(&rollout)) == Some(&row) {
            continue;
        }
        shown.insert(key(&rollout), row);
        let columns = Columns {
            namespace: args.all_namespaces,
            timestamp: args.timestamps.then(|| timestamp(Timestamp::now())),
        };
        emit(&padded(&cells(&rollout, &columns), &mut widths))?;
    }
    Ok(())
}

fn key(rollout: &Rollout) -> (String, String) {
    (
        rollout.metadata.namespace.clone().unwrap_or_default(),
        rollout.metadata.name.clone().unwrap_or_default(),
    )
}

/// Argo's timestamp column: UTC, to the second.
fn timestamp(now: Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The optional columns.
#[derive(Debug, Clone, Default)]
pub struct Columns {
    /// NAMESPACE, with -A.
    pub namespace: bool,
    /// TIMESTAMP (the time the line is printed), with --timestamps.
    pub timestamp: Option<String>,
}

/// The table, with a NAMESPACE column first when listing all namespaces.
#[cfg(test)]
pub fn render_table(rollouts: &[Rollout], with_namespace: bool) -> String {
    render_rows(
        rollouts,
        &Columns {
            namespace: with_namespace,
            timestamp: None,
        },
    )
}

/// The table with the optional columns: TIMESTAMP first, then NAMESPACE.
pub fn render_rows(rollouts: &[Rollout], columns: &Columns) -> String {
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
    if columns.namespace {
        header.insert(0, "NAMESPACE");
    }
    if columns.timestamp.is_some() {
        header.insert(0, "TIMESTAMP");
    }
    let mut rows: Vec<Vec<Cell>> = vec![header.into_iter().map(Cell::plain).collect()];
    for rollout in rollouts {
        rows.push(
            cells(rollout, columns)
                .into_iter()
                .map(Cell::plain)
                .collect(),
        );
    }
    align(&rows, &Style::PLAIN)
}

/// One rollout's cells.
fn cells(rollout: &Rollout, columns: &Columns) -> Vec<String> {
    // Rows use only the Rollout itself; the clock does not matter for these columns.
    let info = RolloutInfo::alone(rollout, Timestamp::UNIX_EPOCH);
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
    if columns.namespace {
        row.insert(0, info.namespace.clone());
    }
    if let Some(time) = &columns.timestamp {
        row.insert(0, time.clone());
    }
    row
}

/// The column widths of a table already printed (from its header line: each column ends
/// where the next header starts).
fn widths_of(table: &str) -> Vec<usize> {
    let header = table.lines().next().unwrap_or_default();
    let mut widths = Vec::new();
    let mut start = 0;
    let mut in_gap = false;
    for (i, c) in header.char_indices() {
        if c == ' ' {
            in_gap = true;
        } else if in_gap {
            widths.push(i - start - 2);
            start = i;
            in_gap = false;
        }
    }
    widths.push(header.len() - start);
    widths
}

/// One line in the columns of the table above it, widening a column when a cell needs it.
fn padded(cells: &[String], widths: &mut Vec<usize>) -> String {
    let mut line = String::new();
    for (i, cell) in cells.iter().enumerate() {
        if widths.len() <= i {
            widths.push(0);
        }
        widths[i] = widths[i].max(cell.chars().count());
        if i + 1 == cells.len() {
            line.push_str(cell);
        } else {
            line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
        }
    }
    line.push('\n');
    line
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

    #[test]
    fn timestamps_come_first_and_watch_lines_keep_the_columns() {
        let columns = Columns {
            namespace: true,
            timestamp: Some(timestamp(Timestamp::from_second(1_800_000_000).unwrap())),
        };
        let table = render_rows(&[blue_green()], &columns);
        assert_eq!(
            table,
            "\
TIMESTAMP             NAMESPACE  NAME      STRATEGY   STATUS   STEP  SET-WEIGHT  READY  DESIRED  UP-TO-DATE  AVAILABLE
2027-01-15T08:00:00Z  web        checkout  BlueGreen  Healthy  -     -           3/3    3        3           3
"
        );
        let mut widths = widths_of(&table);
        assert_eq!(widths, [20, 9, 8, 9, 7, 4, 10, 5, 7, 10, 9]);
        let line = padded(&cells(&blue_green(), &columns), &mut widths);
        assert_eq!(line, table.lines().nth(1).unwrap().to_owned() + "\n");
    }
}
