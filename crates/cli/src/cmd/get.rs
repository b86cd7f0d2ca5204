//! `get rollout`: the header and tree of one rollout, once or (`-w`) each time it changes;
//! and the watch machinery `get experiment` shares.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::stream::{self, BoxStream};
use futures::{Stream, StreamExt as _};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Resource, ResourceExt as _};
use sluice_api::Rollout;
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::Experiment;
use sluice_engine::analysis::ROLLOUT_TYPE;

use super::{emit, explain, get_rollout, label_selector, rollouts, warn};
use crate::cli::GetRolloutArgs;
use crate::info::RolloutInfo;
use crate::info::is_controlled_by;
use crate::kube_target::Target;
use crate::render::header::render_header;
use crate::render::style::Style;
use crate::render::tree::render_tree;

/// How long to wait for more events before showing a burst of changes once.
pub(super) const SETTLE: Duration = Duration::from_millis(150);
/// Upper bound on that wait while events keep coming.
pub(super) const MAX_SETTLE: Duration = Duration::from_secs(1);
/// How often a terminal view is redrawn to keep ages current.
pub(super) const REFRESH: Duration = Duration::from_secs(2);
/// Clears a terminal and moves the cursor to its top left corner.
pub(super) const CLEAR_SCREEN: &str = "\x1b[2J\x1b[H";

pub async fn run(target: &Target, args: &GetRolloutArgs) -> anyhow::Result<()> {
    let api = rollouts(target);
    let rollout = get_rollout(&api, &args.name).await?;
    let terminal = std::io::stdout().is_terminal();
    let style = Style {
        color: terminal && !args.no_color,
    };
    if args.watch {
        return watch(target, &rollout, style, terminal).await;
    }
    let params = match label_selector(&rollout) {
        Some(selector) => ListParams::default().labels(&selector),
        None => ListParams::default(),
    };
    let replica_sets = Api::<ReplicaSet>::namespaced(target.client.clone(), &target.namespace)
        .list(&params)
        .await
        .map_err(explain)
        .context("listing ReplicaSets")?
        .items;
    let pods = Api::<Pod>::namespaced(target.client.clone(), &target.namespace)
        .list(&params)
        .await
        .map_err(explain)
        .context("listing pods")?
        .items;
    let experiments: Vec<Experiment> = list_experiments(target)
        .await
        .into_iter()
        .flatten()
        .filter(|e| is_controlled_by(&e.metadata, &rollout.metadata))
        .collect();
    // The Rollout's own runs carry the rollout-type label; its Experiments' runs do not.
    let runs_params = if experiments.is_empty() {
        ListParams::default().labels(ROLLOUT_TYPE)
    } else {
        ListParams::default()
    };
    let runs = Api::<AnalysisRun>::namespaced(target.client.clone(), &target.namespace)
        .list(&runs_params)
        .await
        .map_err(explain)
        .context("listing AnalysisRuns")?
        .items;
    emit(&render(
        &rollout,
        &World {
            replica_sets: &replica_sets,
            pods: &pods,
            runs: &runs,
            experiments: &experiments,
        },
        Timestamp::now(),
        &style,
    ))
}

/// The Experiments of the namespace; `None` (after a warning) when they cannot be listed, so
/// that the rollout is still shown where Experiments are not served or not readable.
async fn list_experiments(target: &Target) -> Option<Vec<Experiment>> {
    match Api::<Experiment>::namespaced(target.client.clone(), &target.namespace)
        .list(&ListParams::default())
        .await
    {
        Ok(list) => Some(list.items),
        Err(e) => {
            warn(&format!("experiments are not shown: {}", explain(e)));
            None
        }
    }
}

/// The objects around a Rollout that its tree shows.
pub struct World<'a> {
    pub replica_sets: &'a [ReplicaSet],
    pub pods: &'a [Pod],
    pub runs: &'a [AnalysisRun],
    pub experiments: &'a [Experiment],
}

/// Header, a blank line, then the tree.
pub fn render(rollout: &Rollout, world: &World<'_>, now: Timestamp, style: &Style) -> String {
    let info = RolloutInfo::new(rollout, world.replica_sets, world.pods, now)
        .with_experiments(
            rollout,
            world.experiments,
            world.replica_sets,
            world.pods,
            world.runs,
            now,
        )
        .with_analysis_runs(rollout, world.runs);
    format!(
        "{}\n{}",
        render_header(&info, style),
        render_tree(&info, now, style)
    )
}

/// A change seen by one of the watches.
pub(super) enum Change {
    Rollout(Box<watcher::Event<Rollout>>),
    Experiment(Box<watcher::Event<Experiment>>),
    ReplicaSet(Box<watcher::Event<ReplicaSet>>),
    Pod(Box<watcher::Event<Pod>>),
    AnalysisRun(Box<watcher::Event<AnalysisRun>>),
    /// Time to redraw (ages move on).
    Tick,
    /// The terminal was resized: drawn again even when nothing changed, since the terminal
    /// rewrapped what was on it.
    Resized,
    /// A watch failed; it is retried with a backoff.
    Failed(watcher::Error),
}

/// Watches the rollout, its ReplicaSets and pods, its Experiments and AnalysisRuns, and shows
/// the rollout again after each burst of changes: redrawn in place on a terminal, appended as a
/// new block otherwise.
async fn watch(
    target: &Target,
    rollout: &Rollout,
    style: Style,
    terminal: bool,
) -> anyhow::Result<()> {
    let name = rollout.name_any();
    let selector = label_selector(rollout);
    let by_labels = || match &selector {
        Some(selector) => watcher::Config::default().labels(selector),
        None => watcher::Config::default(),
    };
    let client = &target.client;
    let namespace = &target.namespace;
    let rollout_events = events(
        Api::<Rollout>::namespaced(client.clone(), namespace),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
        Change::Rollout,
    );
    let rs_events = events(
        Api::namespaced(client.clone(), namespace),
        by_labels(),
        Change::ReplicaSet,
    );
    let pod_events = events(
        Api::namespaced(client.clone(), namespace),
        by_labels(),
        Change::Pod,
    );
    let mut view = RolloutView {
        name: name.clone(),
        style,
        rollouts: Mirror::default(),
        replica_sets: Mirror::default(),
        pods: Mirror::default(),
        runs: Mirror::default(),
        experiments: Mirror::default(),
    };
    let mut streams: Vec<BoxStream<'static, Change>> = vec![rollout_events, rs_events, pod_events];
    // Experiments are watched when they can be listed; their runs carry no rollout-type label.
    if list_experiments(target).await.is_some() {
        streams.push(events(
            Api::namespaced(client.clone(), namespace),
            watcher::Config::default(),
            Change::Experiment,
        ));
        streams.push(events(
            Api::namespaced(client.clone(), namespace),
            watcher::Config::default(),
            Change::AnalysisRun,
        ));
    } else {
        view.experiments.ready = true;
        streams.push(events(
            Api::namespaced(client.clone(), namespace),
            watcher::Config::default().labels(ROLLOUT_TYPE),
            Change::AnalysisRun,
        ));
    }
    show_changes(streams, &mut view, terminal).await?;
    bail!("the watch of rollout {name:?} ended")
}

/// What a watching `get` shows, kept up to date from the watch events.
pub(super) trait View {
    fn apply(&mut self, change: Change);
    /// The text to show; `None` until every watch has listed once.
    fn render(&self) -> anyhow::Result<Option<String>>;
}

/// Shows `view` after each burst of changes from `streams` (and, on a terminal, every
/// [`REFRESH`] to keep ages current). Returns when the streams end.
pub(super) async fn show_changes(
    mut streams: Vec<BoxStream<'static, Change>>,
    view: &mut impl View,
    terminal: bool,
) -> anyhow::Result<()> {
    if terminal {
        streams.push(ticks(REFRESH).map(|()| Change::Tick).boxed());
        streams.push(resizes().map(|()| Change::Resized).boxed());
    }
    let mut changes = stream::select_all(streams);
    let mut shown = String::new();
    while let Some(first) = changes.next().await {
        let mut pending = Some(first);
        let mut resized = false;
        let deadline = tokio::time::Instant::now() + MAX_SETTLE;
        while let Some(change) = pending.take() {
            match change {
                Change::Tick => {}
                Change::Resized => resized = true,
                Change::Failed(e) => warn(&format!("watch failed, retrying: {e}")),
                other => view.apply(other),
            }
            let wait = SETTLE.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
            pending = tokio::time::timeout(wait, changes.next())
                .await
                .ok()
                .flatten();
        }
        let Some(text) = view.render()? else {
            continue;
        };
        if text != shown || resized {
            emit(&frame(&text, !shown.is_empty(), terminal))?;
            shown = text;
        }
    }
    Ok(())
}

/// A Rollout and the objects around it, as the watches have shown them.
struct RolloutView {
    name: String,
    style: Style,
    rollouts: Mirror<Rollout>,
    replica_sets: Mirror<ReplicaSet>,
    pods: Mirror<Pod>,
    runs: Mirror<AnalysisRun>,
    experiments: Mirror<Experiment>,
}

impl View for RolloutView {
    fn apply(&mut self, change: Change) {
        match change {
            Change::Rollout(event) => self.rollouts.apply(*event),
            Change::Experiment(event) => self.experiments.apply(*event),
            Change::ReplicaSet(event) => self.replica_sets.apply(*event),
            Change::Pod(event) => self.pods.apply(*event),
            Change::AnalysisRun(event) => self.runs.apply(*event),
            Change::Tick | Change::Resized | Change::Failed(_) => {}
        }
    }

    fn render(&self) -> anyhow::Result<Option<String>> {
        if !(self.rollouts.ready
            && self.replica_sets.ready
            && self.pods.ready
            && self.runs.ready
            && self.experiments.ready)
        {
            return Ok(None);
        }
        let Some(current) = self.rollouts.objects.get(&self.name) else {
            bail!("rollout {:?} was deleted", self.name);
        };
        let replica_sets: Vec<ReplicaSet> = self.replica_sets.objects.values().cloned().collect();
        let pods: Vec<Pod> = self.pods.objects.values().cloned().collect();
        let runs: Vec<AnalysisRun> = self.runs.objects.values().cloned().collect();
        let experiments: Vec<Experiment> = self.experiments.objects.values().cloned().collect();
        let world = World {
            replica_sets: &replica_sets,
            pods: &pods,
            runs: &runs,
            experiments: &experiments,
        };
        Ok(Some(render(current, &world, Timestamp::now(), &self.style)))
    }
}

/// What to print to show `text`: on a terminal it replaces the screen; in a pipe it follows
/// the previous block after a blank line.
pub(super) fn frame(text: &str, after_another: bool, terminal: bool) -> String {
    if terminal {
        format!("{CLEAR_SCREEN}{text}")
    } else if after_another {
        format!("\n{text}")
    } else {
        text.to_owned()
    }
}

/// The watch events of one kind, retried with a backoff, as changes.
pub(super) fn events<K>(
    api: Api<K>,
    config: watcher::Config,
    wrap: fn(Box<watcher::Event<K>>) -> Change,
) -> BoxStream<'static, Change>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher(api, config)
        .default_backoff()
        .map(move |event| match event {
            Ok(event) => wrap(Box::new(event)),
            Err(e) => Change::Failed(e),
        })
        .boxed()
}

/// A tick every `period`, the first one after a full period.
pub(super) fn ticks(period: Duration) -> impl Stream<Item = ()> {
    stream::unfold(
        tokio::time::interval_at(tokio::time::Instant::now() + period, period),
        |mut interval| async move {
            interval.tick().await;
            Some(((), interval))
        },
    )
}

/// One item each time the terminal is resized (SIGWINCH); none where that cannot be watched.
fn resizes() -> impl Stream<Item = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::window_change()) {
        Ok(sig) => stream::unfold(sig, |mut sig| async move {
            sig.recv().await.map(|()| ((), sig))
        })
        .boxed(),
        Err(_) => stream::empty().boxed(),
    }
}

/// The objects one watch has shown so far, by name. `ready` once the first full list is in.
#[derive(Debug)]
pub struct Mirror<K> {
    pub objects: BTreeMap<String, K>,
    pub ready: bool,
    /// Objects of a relist in progress; they replace `objects` when it completes.
    relisting: Option<BTreeMap<String, K>>,
}

impl<K> Default for Mirror<K> {
    fn default() -> Self {
        Self {
            objects: BTreeMap::new(),
            ready: false,
            relisting: None,
        }
    }
}

impl<K: Resource> Mirror<K> {
    pub fn apply(&mut self, event: watcher::Event<K>) {
        match event {
            watcher::Event::Init => self.relisting = Some(BTreeMap::new()),
            watcher::Event::InitApply(object) => {
                let relisting = self.relisting.get_or_insert_with(BTreeMap::new);
                relisting.insert(object.name_any(), object);
            }
            watcher::Event::InitDone => {
                self.objects = self.relisting.take().unwrap_or_default();
                self.ready = true;
            }
            watcher::Event::Apply(object) => {
                self.objects.insert(object.name_any(), object);
            }
            watcher::Event::Delete(object) => {
                self.objects.remove(&object.name_any());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::fixtures::{
        canary_world, now, record_weights, route_traffic, routed_canary_world, running_pod,
    };

    fn world<'a>(
        replica_sets: &'a [ReplicaSet],
        pods: &'a [Pod],
        runs: &'a [AnalysisRun],
    ) -> World<'a> {
        World {
            replica_sets,
            pods,
            runs,
            experiments: &[],
        }
    }

    #[test]
    fn get_output_is_header_blank_line_tree() {
        let (ro, rss, pods) = canary_world();
        let text = render(&ro, &world(&rss, &pods, &[]), now(), &Style::PLAIN);
        assert!(text.starts_with("Name:            demo\n"));
        assert!(text.contains("  Available:     5\n\nNAME "));
        assert!(text.ends_with("└──⧉ demo-h0           ReplicaSet  • ScaledDown  24h\n"));
    }

    #[test]
    fn routed_rollout_output_shows_weights_in_the_router_scale() {
        let (mut ro, rss, pods) = routed_canary_world();
        route_traffic(
            &mut ro,
            serde_json::json!({"nginx": {"stableIngress": "demo"}, "maxTrafficWeight": 1000}),
        );
        let canary = ro.spec.strategy.as_mut().unwrap().canary.as_mut().unwrap();
        canary.steps = Some(
            serde_json::from_value(
                serde_json::json!([{"setWeight": 200}, {"pause": {}}, {"setWeight": 600}]),
            )
            .unwrap(),
        );
        record_weights(&mut ro, 200, 800);
        let text = render(&ro, &world(&rss, &pods, &[]), now(), &Style::PLAIN);
        let expected = "\
Name:            demo
Namespace:       shop
Status:          ◌ Progressing
Message:         more replicas need to be updated
Strategy:        Canary
  Step:          2/3
  SetWeight:     600
  ActualWeight:  200
Images:          demo:v1 (stable)
                 demo:v2 (canary)
Replicas:
  Desired:       4
  Current:       5
  Updated:       1
  Ready:         5
  Available:     5

NAME                      KIND        STATUS         AGE  INFO
⟳ demo                    Rollout     ◌ Progressing  60m
├──# revision:3
│  └──⧉ demo-h2           ReplicaSet  ✔ Healthy      90s  canary
│     └──□ demo-h2-eeeee  Pod         ✔ Running      80s  ready:1/1
├──# revision:2
│  └──⧉ demo-h1           ReplicaSet  ✔ Healthy      60m  stable
│     ├──□ demo-h1-aaaaa  Pod         ✔ Running      59m  ready:1/1
│     ├──□ demo-h1-bbbbb  Pod         ✔ Running      59m  ready:1/1,restarts:2
│     ├──□ demo-h1-ccccc  Pod         ✔ Running      59m  ready:1/1
│     └──□ demo-h1-ddddd  Pod         ✔ Running      59m  ready:1/1
└──# revision:1
   └──⧉ demo-h0           ReplicaSet  • ScaledDown   24h
";
        assert_eq!(text, expected);
    }

    #[test]
    fn analysis_runs_show_under_their_revision_with_measurement_counts() {
        let (ro, rss, pods) = canary_world();
        let run = |name: &str, revision: &str, status: serde_json::Value| -> AnalysisRun {
            serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": name, "namespace": "default",
                    "creationTimestamp": "2024-05-01T11:59:00Z",
                    "annotations": {"rollout.argoproj.io/revision": revision},
                    "ownerReferences": [{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
                        "name": "demo", "uid": ro.metadata.uid.clone().unwrap_or_default(),
                        "controller": true}]
                },
                "spec": {"metrics": []},
                "status": status
            }))
            .unwrap()
        };
        let runs = [
            run(
                "demo-h2-3",
                "3",
                serde_json::json!({"phase": "Inconclusive", "metricResults": [
                    {"name": "web", "successful": 2, "inconclusive": 1}]}),
            ),
            run("demo-h1-2", "2", serde_json::json!({})),
        ];
        let text = render(&ro, &world(&rss, &pods, &runs), now(), &Style::PLAIN);
        let line = |name: &str| -> Vec<String> {
            text.lines()
                .find(|l| l.contains(name))
                .unwrap_or_else(|| panic!("no line for {name}: {text}"))
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            line("demo-h2-3"),
            [
                "│",
                "└──α",
                "demo-h2-3",
                "AnalysisRun",
                "⚠",
                "Inconclusive",
                "60s",
                "✔",
                "2,⚠",
                "1"
            ]
        );
        assert_eq!(
            line("demo-h1-2")[3..6],
            ["AnalysisRun".to_string(), "◷".into(), "Pending".into()]
        );
        // Each run sits under its own revision, after the ReplicaSets.
        let h2_rs = text.find("⧉ demo-h2 ").unwrap();
        let h2_run = text.find("α demo-h2-3").unwrap();
        let rev2 = text.find("# revision:2").unwrap();
        assert!(h2_rs < h2_run && h2_run < rev2);
    }

    #[test]
    fn frames_redraw_a_terminal_and_append_to_a_pipe() {
        assert_eq!(frame("A\n", false, true), "\x1b[2J\x1b[HA\n");
        assert_eq!(frame("B\n", true, true), "\x1b[2J\x1b[HB\n");
        assert_eq!(frame("A\n", false, false), "A\n");
        assert_eq!(frame("B\n", true, false), "\nB\n");
    }

    #[test]
    fn mirror_follows_lists_and_changes() {
        let pod = |name: &str| running_pod(name, "h1", 0, "2024-05-01T11:00:00Z");
        let mut mirror = Mirror::<Pod>::default();
        mirror.apply(watcher::Event::Init);
        mirror.apply(watcher::Event::InitApply(pod("a")));
        assert!(!mirror.ready);
        assert!(mirror.objects.is_empty());
        mirror.apply(watcher::Event::InitDone);
        assert!(mirror.ready);
        mirror.apply(watcher::Event::Apply(pod("b")));
        mirror.apply(watcher::Event::Delete(pod("a")));
        assert_eq!(mirror.objects.keys().collect::<Vec<_>>(), ["b"]);
        // A relist replaces everything once complete: "b" went away meanwhile.
        mirror.apply(watcher::Event::Init);
        mirror.apply(watcher::Event::InitApply(pod("c")));
        assert_eq!(mirror.objects.keys().collect::<Vec<_>>(), ["b"]);
        mirror.apply(watcher::Event::InitDone);
        assert_eq!(mirror.objects.keys().collect::<Vec<_>>(), ["c"]);
    }
}
