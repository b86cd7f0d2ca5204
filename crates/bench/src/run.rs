//! The runs: N Rollouts of a scenario through create and update with the controller running,
//! then N Deployments through the same with only kube-controller-manager, each in a namespace
//! of its own that is deleted (and waited for) before the next, so no run pays for another's
//! objects.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use sluice_api::Rollout;
use sluice_testenv::harness::TestEnv;

use crate::cli::CliTiming;
use crate::controller::{Controller, Kind};
use crate::measure::{Meters, PhaseResult};
use crate::procs::{Processes, RssSampler};
use crate::progress::{Changes, wait_all_done};
use crate::workload::{self, Scenario};

/// Requests the bench itself keeps in flight while creating or changing objects.
const IN_FLIGHT: usize = 32;

/// How a run is set up.
#[derive(Clone)]
pub struct Setup {
    pub env: TestEnv,
    pub client: Client,
    pub processes: Processes,
    pub kubeconfig: PathBuf,
    pub controller_binary: PathBuf,
    /// Further arguments for Sluice's controller (`--controller-arg`).
    pub controller_args: Vec<String>,
    pub work_dir: PathBuf,
    pub objects: usize,
    pub qps: u32,
    pub burst: u32,
    /// How long a phase may take before the run fails.
    pub phase_timeout: Duration,
    /// The `kubectl-sluice` to time after each Rollout scenario (none: not timed).
    pub cli: Option<PathBuf>,
    /// The kubectl that makes each phase's changes in one `kubectl apply` (`--kubectl-apply`;
    /// none: the bench's own requests, [`IN_FLIGHT`] at a time).
    pub kubectl_apply: Option<PathBuf>,
}

impl Setup {
    fn namespace(&self, workload: &str) -> String {
        format!("sluice-bench-{workload}")
    }

    /// Makes a phase's changes as a user does: one `kubectl apply` of `items` (as one List)
    /// into `ns`. Every object is timed from the apply's start, and `changes` learns when it
    /// started and ended.
    async fn apply_all(
        &self,
        kubectl: &Path,
        ns: &str,
        items: Vec<serde_json::Value>,
        changes: &Changes,
    ) -> anyhow::Result<()> {
        let file = self.work_dir.join(format!("apply-{ns}.json"));
        let count = items.len();
        let list = serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": items });
        std::fs::write(&file, serde_json::to_vec(&list)?)
            .with_context(|| format!("writing {}", file.display()))?;
        for name in names(self.objects) {
            changes.mark(&name);
        }
        let start = Instant::now();
        let output = tokio::process::Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(["apply", "--namespace", ns, "--filename"])
            .arg(&file)
            .stdout(std::process::Stdio::null())
            .output()
            .await
            .with_context(|| format!("running {} (--kubectl)", kubectl.display()))?;
        let end = Instant::now();
        if !output.status.success() {
            bail!(
                "kubectl apply of {count} objects failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        changes.applied(start, end);
        println!(
            "  kubectl apply of {count} objects took {:.1}s",
            (end - start).as_secs_f64()
        );
        Ok(())
    }

    /// Starts the controller (cluster-wide) and a sampler of its memory.
    pub async fn start_controller(&self) -> anyhow::Result<(Controller, RssSampler)> {
        self.start_controller_in(None).await
    }

    /// Starts the controller, cluster-wide or in `namespace` only, and a sampler of its memory.
    pub async fn start_controller_in(
        &self,
        namespace: Option<&str>,
    ) -> anyhow::Result<(Controller, RssSampler)> {
        let controller = Controller::start(
            &self.controller_binary,
            &self.kubeconfig,
            &self.work_dir,
            (self.qps, self.burst),
            namespace,
            &self.controller_args,
        )
        .await?;
        sampled(controller)
    }

    /// Argo Rollouts' controller for `namespace`, at the same rate limits, and a sampler of
    /// its memory.
    async fn start_argo(&self, namespace: &str) -> anyhow::Result<(Controller, RssSampler)> {
        sampled(Controller::start_argo(&self.env, namespace, (self.qps, self.burst)).await?)
    }

    /// N Rollouts of `scenario` under the controller `kind`: created, all Healthy, every image
    /// changed, all Healthy again; then, with [`Setup::cli`], the CLI's read commands timed
    /// against them.
    pub async fn rollouts(
        &self,
        scenario: Scenario,
        kind: Kind,
    ) -> anyhow::Result<(Vec<PhaseResult>, Vec<CliTiming>)> {
        let label = format!("{}/{}", kind.label(), scenario.name());
        let ns = self.namespace(&format!("{}-{}", kind.label(), scenario.name()));
        fresh_namespace(&self.client, &ns).await?;
        let (controller, rss) = match kind {
            Kind::Sluice => self.start_controller().await?,
            Kind::Argo => self.start_argo(&ns).await?,
        };
        let processes = self.processes.with_controller(controller.pid());
        println!(
            "{label}: controller ready, RSS {:.1} MiB",
            processes
                .controller_pid()
                .and_then(crate::procs::rss_mib)
                .unwrap_or(0.0)
        );
        let meters = Meters {
            client: &self.client,
            processes: &processes,
            controller: Some(&controller),
            rss: Some(&rss),
        };
        let rollouts: Api<Rollout> = Api::namespaced(self.client.clone(), &ns);
        let services: Api<Service> = Api::namespaced(self.client.clone(), &ns);
        let replica_sets: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &ns);
        let n = self.objects;
        let timeout = self.phase_timeout;

        let create = meters
            .phase(&label, "create", n, replica_sets.clone(), |changes| {
                let (rollouts, services) = (rollouts.clone(), services.clone());
                let ns = ns.clone();
                async move {
                    let settled = wait_all_done(
                        rollouts.clone(),
                        n,
                        "Healthy",
                        timeout,
                        &changes,
                        move |ro| workload::rollout_done(ro, scenario, 1),
                    );
                    let sent = async {
                        if let Some(kubectl) = &self.kubectl_apply {
                            let items = names(n).flat_map(|name| {
                                let mut objects = workload::services(scenario, &name);
                                objects.push(workload::rollout_manifest(scenario, &name, 1));
                                objects
                            });
                            return self
                                .apply_all(kubectl, &ns, items.collect(), &changes)
                                .await;
                        }
                        for_each_object(n, |name| {
                            let (rollouts, services, changes) =
                                (rollouts.clone(), services.clone(), changes.clone());
                            async move {
                                for svc in workload::services(scenario, &name) {
                                    let svc: Service = serde_json::from_value(svc)?;
                                    services.create(&PostParams::default(), &svc).await?;
                                }
                                changes.mark(&name);
                                let ro = workload::rollout(scenario, &name)?;
                                rollouts.create(&PostParams::default(), &ro).await?;
                                Ok(())
                            }
                        })
                        .await
                    };
                    while_watching(sent, settled).await
                }
            })
            .await?;
        let update = meters
            .phase(&label, "update", n, replica_sets, |changes| {
                let ns = ns.clone();
                async move {
                    let wait = move |api: Api<Rollout>, changes: Changes| async move {
                        wait_all_done(api, n, "Healthy", timeout, &changes, move |ro| {
                            workload::rollout_done(ro, scenario, 2)
                        })
                        .await
                    };
                    match &self.kubectl_apply {
                        Some(kubectl) => {
                            let items =
                                names(n).map(|name| workload::rollout_manifest(scenario, &name, 2));
                            let sent = self.apply_all(kubectl, &ns, items.collect(), &changes);
                            while_watching(sent, wait(rollouts.clone(), changes.clone())).await
                        }
                        None => change_images(rollouts.clone(), n, 2, changes, wait).await,
                    }
                }
            })
            .await?;
        let cli = match self.cli.as_ref().filter(|_| kind == Kind::Sluice) {
            Some(binary) => {
                let middle = workload::workload_name(n / 2);
                crate::cli::time_commands(binary, &self.kubeconfig, &label, &ns, &middle).await?
            }
            None => Vec::new(),
        };
        controller.stop().await?;
        delete_namespace(&self.client, &ns).await?;
        Ok((vec![create, update], cli))
    }

    /// N Deployments, the same way, driven by kube-controller-manager alone.
    pub async fn deployments(&self) -> anyhow::Result<Vec<PhaseResult>> {
        let label = "deployments";
        let ns = self.namespace(label);
        fresh_namespace(&self.client, &ns).await?;
        let meters = Meters {
            client: &self.client,
            processes: &self.processes,
            controller: None,
            rss: None,
        };
        let deployments: Api<Deployment> = Api::namespaced(self.client.clone(), &ns);
        let replica_sets: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &ns);
        let n = self.objects;
        let timeout = self.phase_timeout;
        let create = meters
            .phase(label, "create", n, replica_sets.clone(), |changes| {
                let deployments = deployments.clone();
                let ns = ns.clone();
                async move {
                    let settled = wait_all_done(
                        deployments.clone(),
                        n,
                        "available",
                        timeout,
                        &changes,
                        |d| workload::deployment_done(d, 1),
                    );
                    let sent = async {
                        if let Some(kubectl) = &self.kubectl_apply {
                            let items =
                                names(n).map(|name| workload::deployment_manifest(&name, 1));
                            return self
                                .apply_all(kubectl, &ns, items.collect(), &changes)
                                .await;
                        }
                        for_each_object(n, |name| {
                            let (deployments, changes) = (deployments.clone(), changes.clone());
                            async move {
                                changes.mark(&name);
                                let d = workload::deployment(&name)?;
                                deployments.create(&PostParams::default(), &d).await?;
                                Ok(())
                            }
                        })
                        .await
                    };
                    while_watching(sent, settled).await
                }
            })
            .await?;
        let update = meters
            .phase(label, "update", n, replica_sets, |changes| {
                let ns = ns.clone();
                async move {
                    let wait = move |api: Api<Deployment>, changes: Changes| async move {
                        wait_all_done(api, n, "available", timeout, &changes, |d| {
                            workload::deployment_done(d, 2)
                        })
                        .await
                    };
                    match &self.kubectl_apply {
                        Some(kubectl) => {
                            let items =
                                names(n).map(|name| workload::deployment_manifest(&name, 2));
                            let sent = self.apply_all(kubectl, &ns, items.collect(), &changes);
                            while_watching(sent, wait(deployments.clone(), changes.clone())).await
                        }
                        None => change_images(deployments.clone(), n, 2, changes, wait).await,
                    }
                }
            })
            .await?;
        delete_namespace(&self.client, &ns).await?;
        Ok(vec![create, update])
    }
}

/// The names of the `n` workloads of a run.
fn names(n: usize) -> impl Iterator<Item = String> {
    (0..n).map(workload::workload_name)
}

/// `controller` with a sampler of its memory.
fn sampled(controller: Controller) -> anyhow::Result<(Controller, RssSampler)> {
    let pid = controller.pid().context("the controller has no pid")?;
    let sampler = RssSampler::start(pid, Duration::from_millis(250));
    Ok((controller, sampler))
}

/// Runs `make` for the name of every object, [`IN_FLIGHT`] at a time.
pub async fn for_each_object<F, Fut>(n: usize, make: F) -> anyhow::Result<()>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    futures::stream::iter(names(n))
        .map(make)
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<()>()
        .await
}

/// Changes the image of all `n` objects of `api` to `revision`'s, then waits with `wait`.
pub async fn change_images<K, W, WFut>(
    api: Api<K>,
    n: usize,
    revision: u32,
    changes: Changes,
    wait: W,
) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
    W: FnOnce(Api<K>, Changes) -> WFut,
    WFut: std::future::Future<Output = anyhow::Result<()>>,
{
    let patch: json_patch::Patch = serde_json::from_value(workload::image_patch(revision))?;
    let marks = changes.clone();
    let sent = for_each_object(n, |name| {
        let (api, patch, changes) = (api.clone(), patch.clone(), marks.clone());
        async move {
            changes.mark(&name);
            api.patch(&name, &PatchParams::default(), &Patch::<()>::Json(patch))
                .await
                .with_context(|| format!("changing the image of {name}"))
                .map(|_| ())
        }
    });
    while_watching(sent, wait(api.clone(), changes)).await
}

/// Sends a phase's changes while its objects are already watched: an object that settles
/// while later ones are still being sent (a kubectl apply of a thousand takes a minute or
/// two) is seen settled then, not when the sending is over and a watch lists it.
async fn while_watching(
    sent: impl std::future::Future<Output = anyhow::Result<()>>,
    settled: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    tokio::try_join!(sent, settled).map(|_| ())
}

/// Creates `ns`, deleting a namespace of that name left by an earlier run first.
async fn fresh_namespace(client: &Client, ns: &str) -> anyhow::Result<()> {
    delete_namespace(client, ns).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let object: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": { "name": ns, "labels": { "sluice.dev/bench": "true" } }
    }))?;
    namespaces.create(&PostParams::default(), &object).await?;
    Ok(())
}

/// Deletes `ns` and waits until it is gone (its objects are removed by the namespace and
/// garbage collectors, which takes a while at thousands of objects).
pub async fn delete_namespace(client: &Client, ns: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(ns).await?.is_none() {
        return Ok(());
    }
    println!("deleting namespace {ns}");
    let _ = namespaces.delete(ns, &DeleteParams::background()).await;
    let started = Instant::now();
    let mut last_report = Instant::now();
    while namespaces.get_opt(ns).await?.is_some() {
        if started.elapsed() > Duration::from_secs(1800) {
            bail!("namespace {ns} was not deleted within 30 minutes");
        }
        if last_report.elapsed() > Duration::from_secs(10) {
            println!(
                "  still deleting {ns} ({:.0}s)",
                started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(())
}
