//! The `NAME KIND STATUS AGE INFO` trees of `get rollout` (Rollout, then each revision with its
//! ReplicaSets and their pods, Experiments and AnalysisRuns) and `get experiment` (Experiment,
//! then its ReplicaSets and their pods, then its AnalysisRuns).

use jiff::Timestamp;

use super::age::age;
use super::columns::{Cell, align};
use super::style::{
    Color, ICON_ANALYSIS_RUN, ICON_BAD, ICON_EXPERIMENT, ICON_OK, ICON_POD, ICON_REPLICA_SET,
    ICON_ROLLOUT, ICON_WARNING, Style, phase_with_icon, status_with_icon,
};
use crate::info::experiment::ExperimentInfo;
use crate::info::{AnalysisRunInfo, PodInfo, ReplicaSetInfo, RolloutInfo};

/// One line of the tree before it is laid out.
struct Node {
    name: String,
    kind: &'static str,
    status: Option<String>,
    /// The icon and colour of the status: an object's ([`status_with_icon`]) or an analysis
    /// phase's ([`phase_with_icon`]).
    icon: fn(&str) -> (String, Color),
    created: Option<Timestamp>,
    info: String,
    children: Vec<Node>,
}

/// The tree as aligned text.
pub fn render_tree(info: &RolloutInfo, now: Timestamp, style: &Style) -> String {
    render_nodes(&rollout_node(info), now, style)
}

/// The tree of `get experiment` as aligned text.
pub fn render_experiment_tree(info: &ExperimentInfo, now: Timestamp, style: &Style) -> String {
    render_nodes(&experiment_node(info), now, style)
}

fn render_nodes(root: &Node, now: Timestamp, style: &Style) -> String {
    let mut rows = vec![
        ["NAME", "KIND", "STATUS", "AGE", "INFO"]
            .into_iter()
            .map(Cell::plain)
            .collect(),
    ];
    push_rows(root, "", "", now, &mut rows);
    align(&rows, style)
}

fn rollout_node(info: &RolloutInfo) -> Node {
    Node {
        name: format!("{ICON_ROLLOUT} {}", info.name),
        kind: "Rollout",
        status: Some(info.phase.as_str().to_owned()),
        icon: status_with_icon,
        created: info.created,
        info: String::new(),
        children: info
            .revisions
            .iter()
            .map(|revision| Node {
                name: format!("# revision:{}", revision.revision),
                kind: "",
                status: None,
                icon: status_with_icon,
                created: None,
                info: String::new(),
                children: revision
                    .replica_sets
                    .iter()
                    .map(replica_set_node)
                    .chain(revision.experiments.iter().map(experiment_node))
                    .chain(revision.analysis_runs.iter().map(analysis_run_node))
                    .collect(),
            })
            .collect(),
    }
}

/// An Experiment with its ReplicaSets (and their pods), then its AnalysisRuns.
fn experiment_node(info: &ExperimentInfo) -> Node {
    Node {
        name: format!("{ICON_EXPERIMENT} {}", info.name),
        kind: "Experiment",
        status: Some(info.phase.clone()),
        icon: phase_with_icon,
        created: info.created,
        info: String::new(),
        children: info
            .replica_sets
            .iter()
            .map(replica_set_node)
            .chain(info.analysis_runs.iter().map(analysis_run_node))
            .collect(),
    }
}

fn replica_set_node(rs: &ReplicaSetInfo) -> Node {
    Node {
        name: format!("{ICON_REPLICA_SET} {}", rs.name),
        kind: "ReplicaSet",
        status: Some(rs.status.to_owned()),
        icon: status_with_icon,
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
        icon: phase_with_icon,
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
        icon: status_with_icon,
        created: pod.created,
        info,
        children: Vec::new(),
    }
}

/// Appends `node` drawn after `branch` (its own connector) and its children indented by
/// `indent` plus a vertical bar while more siblings follow.
fn push_rows(node: &Node, branch: &str, indent: &str, now: Timestamp, rows: &mut Vec<Vec<Cell>>) {
    let (status, color) = match &node.status {
        Some(status) => (node.icon)(status),
        None => (String::new(), Color::Plain),
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
    fn experiment_tree() {
        use crate::info::experiment::fixtures::experiment_world;
        let (exp, rss, pods, runs) = experiment_world();
        let info = ExperimentInfo::new(&exp, &rss, &pods, &runs, now());
        let expected = "\
NAME                             KIND         STATUS         AGE   INFO
Σ demo-exp                       Experiment   ◌ Running      2m
├──⧉ demo-exp-baseline           ReplicaSet   ✔ Healthy      119s
│  └──□ demo-exp-baseline-aaaaa  Pod          ✔ Running      118s  ready:1/1
├──⧉ demo-exp-canary             ReplicaSet   ◌ Progressing  119s
│  └──□ demo-exp-canary-bbbbb    Pod          ✔ Running      118s  ready:1/1
└──α demo-exp-rate               AnalysisRun  ◌ Running      60s   ✔ 2
";
        assert_eq!(
            render_experiment_tree(&info, now(), &Style::PLAIN),
            expected
        );
    }

    #[test]
    fn rollout_tree_shows_its_experiments_under_their_revision() {
        use crate::info::experiment::fixtures::experiment_world;
        let (ro, mut rss, mut pods) = canary_world();
        let (mut exp, exp_rss, exp_pods, runs) = experiment_world();
        exp.metadata.annotations =
            Some([("rollout.argoproj.io/revision".to_string(), "3".to_string())].into());
        exp.metadata.owner_references = Some(vec![
            serde_json::from_value(serde_json::json!({
                "apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "demo",
                "uid": "ro-uid", "controller": true
            }))
            .unwrap(),
        ]);
        rss.extend(exp_rss);
        pods.extend(exp_pods);
        let info = RolloutInfo::new(&ro, &rss, &pods, now()).with_experiments(
            &ro,
            &[exp],
            &rss,
            &pods,
            &runs,
            now(),
        );
        let text = render_tree(&info, now(), &Style::PLAIN);
        // The Experiment's ReplicaSets are not the Rollout's: they show only under it.
        let expected = "\
NAME                                   KIND         STATUS         AGE   INFO
⟳ demo                                 Rollout      ॥ Paused       60m
├──# revision:3
│  ├──⧉ demo-h2                        ReplicaSet   ✔ Healthy      90s   canary
│  │  └──□ demo-h2-eeeee               Pod          ✔ Running      80s   ready:1/1
│  └──Σ demo-exp                       Experiment   ◌ Running      2m
│     ├──⧉ demo-exp-baseline           ReplicaSet   ✔ Healthy      119s
│     │  └──□ demo-exp-baseline-aaaaa  Pod          ✔ Running      118s  ready:1/1
│     ├──⧉ demo-exp-canary             ReplicaSet   ◌ Progressing  119s
│     │  └──□ demo-exp-canary-bbbbb    Pod          ✔ Running      118s  ready:1/1
│     └──α demo-exp-rate               AnalysisRun  ◌ Running      60s   ✔ 2
├──# revision:2
│  └──⧉ demo-h1                        ReplicaSet   ✔ Healthy      60m   stable
│     ├──□ demo-h1-aaaaa               Pod          ✔ Running      59m   ready:1/1
│     ├──□ demo-h1-bbbbb               Pod          ✔ Running      59m   ready:1/1,restarts:2
│     ├──□ demo-h1-ccccc               Pod          ✔ Running      59m   ready:1/1
│     └──□ demo-h1-ddddd               Pod          ✔ Running      59m   ready:1/1
└──# revision:1
   └──⧉ demo-h0                        ReplicaSet   • ScaledDown   24h
";
        assert_eq!(text, expected);
    }

    #[test]
    fn rollout_without_replica_sets_is_one_line() {
        let (ro, _, _) = canary_world();
        let info = RolloutInfo::alone(&ro, now());
        assert_eq!(
            render_tree(&info, now(), &Style::PLAIN),
            "NAME    KIND     STATUS    AGE  INFO\n⟳ demo  Rollout  ॥ Paused  60m\n"
        );
    }
}
