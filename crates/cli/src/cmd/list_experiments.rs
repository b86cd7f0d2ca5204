//! `list experiments`: one line per Experiment, with Argo's columns (NAME, STATUS, DURATION,
//! REMAINING, AGE; NAMESPACE first with `-A`) and Argo's layout: each column padded to at least
//! Argo's width, then two spaces.

use anyhow::Context as _;
use jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use sluice_api::duration::parse_go_duration_nanos;
use sluice_api::experiment::Experiment;

use super::{emit, explain};
use crate::cli::ListExperimentsArgs;
use crate::kube_target::Target;
use crate::render::age::{age, human_duration};

/// The narrowest each column is: (NAMESPACE,) NAME, STATUS, DURATION, REMAINING, AGE.
const NAMESPACE_WIDTH: usize = 9;
const WIDTHS: [usize; 5] = [10, 6, 8, 9, 3];
/// Spaces after each column but the last.
const GAP: usize = 2;

pub async fn run(target: &Target, args: &ListExperimentsArgs) -> anyhow::Result<()> {
    let api: Api<Experiment> = if args.all_namespaces {
        Api::all(target.client.clone())
    } else {
        Api::namespaced(target.client.clone(), &target.namespace)
    };
    let mut items = api
        .list(&ListParams::default())
        .await
        .map_err(explain)
        .context("listing experiments")?
        .items;
    if items.is_empty() {
        super::warn_plain("No resources found.");
        return Ok(());
    }
    items.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    emit(&render_table(&items, args.all_namespaces, Timestamp::now()))
}

/// The table as seen at `now`.
pub fn render_table(experiments: &[Experiment], with_namespace: bool, now: Timestamp) -> String {
    let mut header = vec!["NAME", "STATUS", "DURATION", "REMAINING", "AGE"];
    let mut widths = WIDTHS.to_vec();
    if with_namespace {
        header.insert(0, "NAMESPACE");
        widths.insert(0, NAMESPACE_WIDTH);
    }
    let header: Vec<String> = header.into_iter().map(String::from).collect();
    let mut rows = Vec::new();
    for exp in experiments {
        let mut row = columns(exp, now);
        if with_namespace {
            row.insert(0, exp.metadata.namespace.clone().unwrap_or_default());
        }
        // A cell is at least its column's width; the header is not padded.
        let row: Vec<String> = row
            .into_iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        rows.push(row);
    }
    let last = widths.len() - 1;
    let column_widths: Vec<usize> = (0..last)
        .map(|i| {
            std::iter::once(&header)
                .chain(&rows)
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
                + GAP
        })
        .collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        for (i, cell) in row.iter().enumerate() {
            out.push_str(cell);
            if i < last {
                let pad = column_widths[i] - cell.chars().count();
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push('\n');
    }
    out
}

/// NAME, STATUS, DURATION, REMAINING and AGE of one Experiment. DURATION is `-` without a
/// (readable) `spec.duration`; REMAINING is shown only while the Experiment runs with all its
/// templates available and some of its duration is left.
fn columns(exp: &Experiment, now: Timestamp) -> Vec<String> {
    let status = exp.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_ref());
    let mut duration = "-".to_string();
    let mut remaining = "-".to_string();
    if let Some(Ok(nanos)) = exp.spec.duration.as_deref().map(parse_go_duration_nanos) {
        duration = human_duration(nanos / 1_000_000_000);
        let completed = phase.is_some_and(|p| p.is_completed());
        if !completed && let Some(available) = status.and_then(|s| s.available_at.as_ref()) {
            let passed = now.as_nanosecond() - available.0.as_nanosecond();
            let left = i128::from(nanos) - passed;
            if left > 0 {
                remaining = human_duration((left / 1_000_000_000) as i64);
            }
        }
    }
    vec![
        exp.metadata.name.clone().unwrap_or_default(),
        phase.map(|p| p.to_string()).unwrap_or_default(),
        duration,
        remaining,
        age(exp.metadata.creation_timestamp.as_ref().map(|t| t.0), now),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    const NOW: &str = "2026-01-01T12:00:00Z";

    fn experiment(name: &str, namespace: &str, spec: Value, status: Value) -> Experiment {
        let mut spec = spec;
        spec["templates"] = json!([]);
        serde_json::from_value(json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Experiment",
            "metadata": {"name": name, "namespace": namespace,
                         "creationTimestamp": "2026-01-01T11:55:00Z"},
            "spec": spec,
            "status": status,
        }))
        .expect("an Experiment")
    }

    fn now() -> Timestamp {
        NOW.parse().expect("a time")
    }

    #[test]
    fn running_completed_unbounded_and_new_experiments() {
        let rows = [
            // Available for 10m30s of its hour: 49m30s left, shown as kubectl shows it.
            experiment(
                "canary-vs-baseline",
                "web",
                json!({"duration": "1h"}),
                json!({"phase": "Running", "availableAt": "2026-01-01T11:49:30Z"}),
            ),
            // Done: no time remains, whatever the clock says.
            experiment(
                "done",
                "web",
                json!({"duration": "30m"}),
                json!({"phase": "Successful", "availableAt": "2026-01-01T11:56:00Z"}),
            ),
            // No duration: runs until stopped.
            experiment("open", "web", json!({}), json!({"phase": "Running"})),
            // Not seen by a controller yet: no phase.
            experiment("new", "web", json!({"duration": "90s"}), json!({})),
        ];
        // Argo pads the last column too (AGE to 3): rows end in a space where the age is short.
        let expected = concat!(
            "NAME                STATUS      DURATION  REMAINING  AGE\n",
            "canary-vs-baseline  Running     60m       49m        5m \n",
            "done                Successful  30m       -          5m \n",
            "open                Running     -         -          5m \n",
            "new                             90s       -          5m \n",
        );
        assert_eq!(render_table(&rows, false, now()), expected);
    }

    #[test]
    fn short_names_keep_argos_minimum_widths_and_all_namespaces_adds_a_column() {
        let rows = [experiment(
            "e",
            "ns",
            json!({"duration": "5s"}),
            json!({"phase": "Running", "availableAt": "2026-01-01T11:59:58Z"}),
        )];
        let expected = concat!(
            "NAMESPACE  NAME        STATUS   DURATION  REMAINING  AGE\n",
            "ns         e           Running  5s        3s         5m \n",
        );
        assert_eq!(render_table(&rows, true, now()), expected);
    }

    #[test]
    fn a_duration_that_is_not_a_go_duration_shows_a_dash() {
        let rows = [experiment(
            "bad",
            "web",
            json!({"duration": "soon"}),
            json!({"phase": "Running", "availableAt": "2026-01-01T11:59:00Z"}),
        )];
        let table = render_table(&rows, false, now());
        assert_eq!(
            table.lines().nth(1),
            Some("bad         Running  -         -          5m ")
        );
    }
}
