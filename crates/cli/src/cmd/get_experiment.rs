//! `get experiment`: the header and tree of one Experiment, once or (`-w`) each time it
//! changes.

use anyhow::{Context as _, bail};
use futures::stream::BoxStream;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use kube::runtime::watcher;
use sluice_api::analysis::AnalysisRun;
use sluice_api::experiment::Experiment;
use sluice_engine::labels::POD_TEMPLATE_HASH;
use std::io::IsTerminal as _;

use super::get::{Change, Mirror, View, events, show_changes};
use super::{emit, explain};
use crate::cli::GetExperimentArgs;
use crate::info::experiment::ExperimentInfo;
use crate::kube_target::Target;
use crate::render::header::render_experiment_header;
use crate::render::style::Style;
use crate::render::tree::render_experiment_tree;

pub async fn run(target: &Target, args: &GetExperimentArgs) -> anyhow::Result<()> {
    let api: Api<Experiment> = Api::namespaced(target.client.clone(), &target.namespace);
    let exp = api
        .get(&args.name)
        .await
        .map_err(explain)
        .with_context(|| format!("reading experiment {:?}", args.name))?;
    let terminal = std::io::stdout().is_terminal();
    let style = Style {
        color: terminal && !args.no_color,
    };
    if args.watch {
        return watch(target, &args.name, style, terminal).await;
    }
    // An Experiment's ReplicaSets and their pods carry a pod-template hash; its runs carry no
    // label of their own. Ownership picks the Experiment's among them.
    let by_hash = ListParams::default().labels(POD_TEMPLATE_HASH);
    let replica_sets = Api::<ReplicaSet>::namespaced(target.client.clone(), &target.namespace)
        .list(&by_hash)
        .await
        .map_err(explain)
        .context("listing ReplicaSets")?
        .items;
    let pods = Api::<Pod>::namespaced(target.client.clone(), &target.namespace)
        .list(&by_hash)
        .await
        .map_err(explain)
        .context("listing pods")?
        .items;
    let runs = Api::<AnalysisRun>::namespaced(target.client.clone(), &target.namespace)
        .list(&ListParams::default())
        .await
        .map_err(explain)
        .context("listing AnalysisRuns")?
        .items;
    emit(&render(
        &exp,
        &replica_sets,
        &pods,
        &runs,
        Timestamp::now(),
        &style,
    ))
}

/// Header, a blank line, then the tree.
pub fn render(
    exp: &Experiment,
    replica_sets: &[ReplicaSet],
    pods: &[Pod],
    runs: &[AnalysisRun],
    now: Timestamp,
    style: &Style,
) -> String {
    let info = ExperimentInfo::new(exp, replica_sets, pods, runs, now);
    format!(
        "{}\n{}",
        render_experiment_header(&info, style),
        render_experiment_tree(&info, now, style)
    )
}

/// Watches the Experiment, the ReplicaSets and pods with a pod-template hash and the
/// AnalysisRuns, and shows the Experiment again after each burst of changes.
async fn watch(target: &Target, name: &str, style: Style, terminal: bool) -> anyhow::Result<()> {
    let client = &target.client;
    let namespace = &target.namespace;
    let by_hash = || watcher::Config::default().labels(POD_TEMPLATE_HASH);
    let streams: Vec<BoxStream<'static, Change>> = vec![
        events(
            Api::<Experiment>::namespaced(client.clone(), namespace),
            watcher::Config::default().fields(&format!("metadata.name={name}")),
            Change::Experiment,
        ),
        events(
            Api::namespaced(client.clone(), namespace),
            by_hash(),
            Change::ReplicaSet,
        ),
        events(
            Api::namespaced(client.clone(), namespace),
            by_hash(),
            Change::Pod,
        ),
        events(
            Api::namespaced(client.clone(), namespace),
            watcher::Config::default(),
            Change::AnalysisRun,
        ),
    ];
    let mut view = ExperimentView {
        name: name.to_owned(),
        style,
        experiments: Mirror::default(),
        replica_sets: Mirror::default(),
        pods: Mirror::default(),
        runs: Mirror::default(),
    };
    show_changes(streams, &mut view, terminal).await?;
    bail!("the watch of experiment {name:?} ended")
}

/// An Experiment and the objects around it, as the watches have shown them.
struct ExperimentView {
    name: String,
    style: Style,
    experiments: Mirror<Experiment>,
    replica_sets: Mirror<ReplicaSet>,
    pods: Mirror<Pod>,
    runs: Mirror<AnalysisRun>,
}

impl View for ExperimentView {
    fn apply(&mut self, change: Change) {
        match change {
            Change::Experiment(event) => self.experiments.apply(*event),
            Change::ReplicaSet(event) => self.replica_sets.apply(*event),
            Change::Pod(event) => self.pods.apply(*event),
            Change::AnalysisRun(event) => self.runs.apply(*event),
            Change::Rollout(_) | Change::Tick | Change::Resized | Change::Failed(_) => {}
        }
    }

    fn render(&self) -> anyhow::Result<Option<String>> {
        if !(self.experiments.ready
            && self.replica_sets.ready
            && self.pods.ready
            && self.runs.ready)
        {
            return Ok(None);
        }
        let Some(current) = self.experiments.objects.get(&self.name) else {
            bail!("experiment {:?} was deleted", self.name);
        };
        let replica_sets: Vec<ReplicaSet> = self.replica_sets.objects.values().cloned().collect();
        let pods: Vec<Pod> = self.pods.objects.values().cloned().collect();
        let runs: Vec<AnalysisRun> = self.runs.objects.values().cloned().collect();
        Ok(Some(render(
            current,
            &replica_sets,
            &pods,
            &runs,
            Timestamp::now(),
            &self.style,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::experiment::fixtures::experiment_world;
    use crate::info::fixtures::now;

    #[test]
    fn get_experiment_output_is_header_blank_line_tree() {
        let (exp, rss, pods, runs) = experiment_world();
        let text = render(&exp, &rss, &pods, &runs, now(), &Style::PLAIN);
        assert!(text.starts_with("Name:         demo-exp\n"), "{text}");
        assert!(
            text.contains("demo-exp-canary    waiting for 1 pod\n\nNAME "),
            "{text}"
        );
        assert!(
            text.ends_with(
                "└──α demo-exp-rate               AnalysisRun  ◌ Running      60s   ✔ 2\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn view_waits_for_every_watch_then_renders() {
        let (exp, rss, pods, runs) = experiment_world();
        let mut view = ExperimentView {
            name: "demo-exp".into(),
            style: Style::PLAIN,
            experiments: Mirror::default(),
            replica_sets: Mirror::default(),
            pods: Mirror::default(),
            runs: Mirror::default(),
        };
        view.apply(Change::Experiment(Box::new(watcher::Event::Init)));
        view.apply(Change::Experiment(Box::new(watcher::Event::InitApply(exp))));
        view.apply(Change::Experiment(Box::new(watcher::Event::InitDone)));
        assert!(view.render().unwrap().is_none());
        for rs in rss {
            view.replica_sets
                .objects
                .insert(rs.metadata.name.clone().unwrap(), rs);
        }
        for pod in pods {
            view.pods
                .objects
                .insert(pod.metadata.name.clone().unwrap(), pod);
        }
        for run in runs {
            view.runs
                .objects
                .insert(run.metadata.name.clone().unwrap(), run);
        }
        view.replica_sets.ready = true;
        view.pods.ready = true;
        view.runs.ready = true;
        let text = view.render().unwrap().unwrap();
        assert!(text.contains("Σ demo-exp"), "{text}");
        view.apply(Change::Experiment(Box::new(watcher::Event::Delete(
            crate::info::experiment::fixtures::experiment(),
        ))));
        assert!(view.render().is_err());
    }
}
