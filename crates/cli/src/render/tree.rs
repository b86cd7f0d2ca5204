//! The `NAME KIND STATUS AGE INFO` tree of `get rollout`: Rollout, then each revision with its
//! ReplicaSets and their pods.

use jiff::Timestamp;

use super::age::age;
use super::columns::{Cell, align};
use super::style::{
    ICON_ANALYSIS_RUN, ICON_BAD, ICON_OK, ICON_POD, ICON_REPLICA_SET, ICON_ROLLOUT, ICON_WARNING,
    Style, status_with_icon,
};
use crate::info::{AnalysisRunInfo, PodInfo, ReplicaSetInfo, RolloutInfo};

/// One line of the tree before it is laid out.
struct Node {
    name: String,
    kind: &'static str,
    status: Option<String>,
    created: Option<Timestamp>,
    info: String,
    children: Vec<Node>,
}

/// The tree as aligned text.
pub fn render_tree(info: &RolloutInfo, now: Timestamp, style: &Style) -> String {
    let root = rollout_node(info);
    let mut rows = vec![
        ["NAME", "KIND", "STATUS", "AGE", "INFO"]
            .into_iter()
            .map(Cell::plain)
            .collect(),
    ];
    push_rows(&root, "", "", now, &mut rows);
    align(&rows, style)
}

fn rollout_node(info: &RolloutInfo) -> Node {
    Node {
        name: format!("{ICON_ROLLOUT} {}", info.name),
        kind: "Rollout",
        status: Some(info.phase.as_str().to_owned()),
        created: info.created,
        info: String::new(),
        children: info
            .revisions
            .iter()
            .map(|revision| Node {
                name: format!("# revision:{}", revision.revision),
                kind: "",
                status: None,
                created: None,
                info: String::new(),
                children: revision
                    .replica_sets
                    .iter()
                    .map(replica_set_node)
                    .chain(revision.analysis_runs.iter().map(analysis_run_node))
                    .collect(),
            })
            .collect(),
    }
}

fn replica_set_node(rs: &ReplicaSetInfo) -> Node {
    Node {
        name: format!("{ICON_REPLICA_SET} {}", rs.name),
        kind: "ReplicaSet",
        status: Some(rs.status.to_owned()),
        created: rs.created,
        info: rs.tags.join(","),
        children: rs.pods.iter().map(pod_node).collect(),
    }
}

/// A run with its measurement counts, e.g. `✔ 3,✖ 1`.
fn analysis_run_node(run: &AnalysisRunInfo) -> Node {
    let counts: Vec<String> = [
        (ICON_OK, run.successful),
        (ICON_BAD, run.failed + run.error),
        (ICON_WARNING, run.inconclusive),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(icon, n)| format!("{icon} {n}"))
    .collect();
    Node {
        name: format!("{ICON_ANALYSIS_RUN} {}", run.name),
        kind: "AnalysisRun",
        status: Some(run.status.clone()),
        created: run.created,
        info: counts.join(","),
        children: Vec::new(),
    }
}

fn pod_node(pod: &PodInfo) -> Node {
    let mut info = format!("ready:{}/{}", pod.ready_containers, pod.containers);
    if pod.restarts > 0 {
        info.push_str(&format!(",restarts:{}", pod.restarts));
    }
    Node {
        name: format!("{ICON_POD} {}", pod.name),
        kind: "Pod",
        status: Some(pod.status.clone()),
        created: pod.created,
        info,
        children: Vec::new(),
    }
}

/// Appends `node` drawn after `branch` (its own connector) and its children indented by
/// `indent` plus a vertical bar while more siblings follow.
fn push_rows(node: &Node, branch: &str, indent: &str, now: Timestamp, rows: &mut Vec<Vec<Cell>>) {
    let (status, color) = match &node.status {
        Some(status) => status_with_icon(status),
        None => (String::new(), super::style::Color::Plain),
    };
    rows.push(vec![
        Cell::plain(format!("{branch}{}", node.name)),
        Cell::plain(node.kind),
        Cell::colored(status, color),
        Cell::plain(age(node.created, now)),
        Cell::plain(node.info.clone()),
    ]);
    let count = node.children.len();
    for (i, child) in node.children.iter().enumerate() {
        let last = i + 1 == count;
        let branch = format!("{indent}{}", if last { "└──" } else { "├──" });
        let indent = format!("{indent}{}", if last { "   " } else { "│  " });
        push_rows(child, &branch, &indent, now, rows);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::fixtures::{canary_world, now};

    #[test]
    fn canary_tree() {
        let (ro, rss, pods) = canary_world();
        let info = RolloutInfo::new(&ro, &rss, &pods, now());
        let expected = "\
NAME                      KIND        STATUS        AGE  INFO
⟳ demo                    Rollout     ॥ Paused      60m
├──# revision:3
│  └──⧉ demo-h2           ReplicaSet  ✔ Healthy     90s  canary
│     └──□ demo-h2-eeeee  Pod         ✔ Running     80s  ready:1/1
├──# revision:2
│  └──⧉ demo-h1           ReplicaSet  ✔ Healthy     60m  stable
│     ├──□ demo-h1-aaaaa  Pod         ✔ Running     59m  ready:1/1
│     ├──□ demo-h1-bbbbb  Pod         ✔ Running     59m  ready:1/1,restarts:2
│     ├──□ demo-h1-ccccc  Pod         ✔ Running     59m  ready:1/1
│     └──□ demo-h1-ddddd  Pod         ✔ Running     59m  ready:1/1
└──# revision:1
   └──⧉ demo-h0           ReplicaSet  • ScaledDown  24h
";
        assert_eq!(render_tree(&info, now(), &Style::PLAIN), expected);
    }

    #[test]
    fn rollout_without_replica_sets_is_one_line() {
        let (ro, _, _) = canary_world();
        let info = RolloutInfo::new(&ro, &[], &[], now());
        assert_eq!(
            render_tree(&info, now(), &Style::PLAIN),
            "NAME    KIND     STATUS    AGE  INFO\n⟳ demo  Rollout  ॥ Paused  60m\n"
        );
    }
}
