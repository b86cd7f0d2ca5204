//! One measured phase: everything read before, the work, everything read after, and the
//! differences as a [`PhaseResult`].

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::{Api, Client};
use serde::Serialize;

use crate::controller::Controller;
use crate::pods::NewPods;
use crate::procs::{self, CpuSpent, Processes, RssSampler};
use crate::progress::{Changes, EventTrail, NewReplicaSetTimes, NewReplicaSets, percentile_ms};
use crate::prom;

/// What one phase cost.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseResult {
    /// `rollouts/plain`, `rollouts/steps`, `rollouts/blue-green` or `deployments`.
    pub workload: String,
    /// `create` or `update`.
    pub phase: String,
    pub objects: usize,
    /// From the phase's start until every object settled and their events were posted (the
    /// namespace three seconds without a new event): the phase's cost is measured over it.
    pub wall_seconds: f64,
    /// How long after every object had settled its last event came.
    pub events_after_settled_seconds: f64,
    pub cpu: CpuSpent,
    /// The controller's CPU per object, in milliseconds (none for Deployments).
    pub controller_ms_per_object: Option<f64>,
    /// Every control-plane process's CPU per object, in milliseconds.
    pub control_plane_ms_per_object: f64,
    /// The controller's CPU and the control plane's, per object, in milliseconds.
    pub all_ms_per_object: f64,
    pub controller_rss_peak_mib: Option<f64>,
    pub controller_rss_end_mib: Option<f64>,
    /// The controller's live heap at the phase's end (`go_memstats_heap_alloc_bytes`: Go's
    /// for Argo, jemalloc's allocated bytes for Sluice), so that the RSS can be told apart
    /// into what is live and what the allocator keeps.
    pub controller_heap_end_mib: Option<f64>,
    /// Requests the API server served in the phase, by `VERB resource[/subresource]`.
    pub apiserver_requests: BTreeMap<String, u64>,
    pub apiserver_requests_per_object: f64,
    /// Requests the controller made, by `Verb kind`.
    pub controller_requests: BTreeMap<String, u64>,
    pub controller_requests_per_object: Option<f64>,
    /// The controller's writes of Rollouts (status and metadata), per object.
    pub rollout_writes_per_object: Option<f64>,
    /// From the bench's change to the first sight of the new ReplicaSet, in milliseconds.
    pub new_replica_set_ms: Percentiles,
    /// From the bench's change to the first sight of the new ReplicaSet with all its pods
    /// available, in milliseconds.
    pub new_replica_set_available_ms: Percentiles,
    /// Each object's wait told apart, in milliseconds: from the first sight of its new
    /// ReplicaSet to that ReplicaSet's pods all available (the ReplicaSet controller, the
    /// scheduler, the kubelet)...
    pub pods_ms: Percentiles,
    /// The pods' wait told apart in turn: from the new ReplicaSet to its first pod seen (the
    /// ReplicaSet controller's creating)...
    pub pod_created_ms: Percentiles,
    /// ...from there to a new pod Ready (binding and starting it: the fake kubelet)...
    pub pod_ready_ms: Percentiles,
    /// ...and from there to the ReplicaSet's status counting its pods available (the
    /// ReplicaSet controller's reporting).
    pub pod_reported_ms: Percentiles,
    /// ...and from there to the object settled (the controller's finish: the old version
    /// scaled down, the status written). The start is `new_replica_set_ms`.
    pub finish_ms: Percentiles,
    /// With `--kubectl-apply`: how long the one `kubectl apply` of the phase took, in seconds...
    pub apply_seconds: Option<f64>,
    /// ...and how long after its end every object had settled (what a user who applied
    /// them waits), in seconds.
    pub settled_after_apply_seconds: Option<f64>,
    /// From the bench's change to the first sight of the object settled (a Rollout Healthy
    /// on the new revision with its generation observed, a Deployment as `kubectl rollout
    /// status` has it), in milliseconds: what a user waits.
    pub settled_ms: Percentiles,
    /// The controller's reconcile durations, in milliseconds.
    pub reconcile_ms: Percentiles,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

impl Percentiles {
    /// The nearest-rank figures of sorted latencies.
    fn of(sorted: &[std::time::Duration]) -> Percentiles {
        Percentiles {
            count: sorted.len() as u64,
            p50: percentile_ms(sorted, 0.5),
            p99: percentile_ms(sorted, 0.99),
            max: percentile_ms(sorted, 1.0),
        }
    }

    /// `p50 / p99 / max`, dashes where there is nothing.
    pub fn figures(&self) -> String {
        format!(
            "{} / {} / {}",
            opt(self.p50, 0),
            opt(self.p99, 0),
            opt(self.max, 0)
        )
    }
}

/// How long no event may come before a phase's events count as posted, and how long a phase
/// waits for that at most after its objects settled.
const EVENTS_QUIET: Duration = Duration::from_secs(3);
const EVENTS_DRAIN_LIMIT: Duration = Duration::from_secs(180);

/// What is read at a phase's start and end.
struct Snapshot {
    at: Instant,
    cpu: BTreeMap<String, f64>,
    apiserver: BTreeMap<String, f64>,
    controller: BTreeMap<String, f64>,
    reconcile: Vec<(f64, f64)>,
    heap_mib: Option<f64>,
}

/// Everything a phase is measured with.
pub struct Meters<'a> {
    pub client: &'a Client,
    pub processes: &'a Processes,
    pub controller: Option<&'a Controller>,
    pub rss: Option<&'a RssSampler>,
}

impl Meters<'_> {
    async fn snapshot(&self) -> anyhow::Result<Snapshot> {
        let apiserver = apiserver_requests(self.client).await?;
        let (controller, reconcile, heap_mib) = match self.controller {
            Some(c) => {
                let samples = prom::parse(&c.metrics().await?);
                let heap = samples
                    .iter()
                    .find(|s| s.name == "go_memstats_heap_alloc_bytes")
                    .map(|s| s.value / (1024.0 * 1024.0));
                (
                    prom::sum_by(&samples, c.kind().requests_metric(), |l| {
                        let kind = l.get("kind")?;
                        // Argo's counter names some requests' kind by the object's name, or
                        // not at all (its URL parsing: a status write of Rollout `bench-00001`
                        // is kind `bench-00001`, name `status`); those are counted together.
                        let kind = if kind.is_empty()
                            || l.get("name") == Some(kind)
                            || kind.starts_with(crate::workload::NAME_PREFIX)
                        {
                            "(kind not labelled)"
                        } else {
                            kind.as_str()
                        };
                        let request = format!("{} {kind}", l.get("verb")?);
                        // Answers other than success are counted apart (a 409 is a write
                        // to do again).
                        Some(match l.get("status_code").map(String::as_str) {
                            Some(code) if !code.starts_with('2') => format!("{request} {code}"),
                            _ => request,
                        })
                    }),
                    prom::histogram(&samples, c.kind().reconcile_metric()),
                    heap,
                )
            }
            None => Default::default(),
        };
        Ok(Snapshot {
            at: Instant::now(),
            cpu: self.processes.cpu(),
            apiserver,
            controller,
            reconcile,
            heap_mib,
        })
    }

    /// Runs `work` (which marks each object it changes in `changes`) and measures it.
    pub async fn phase<F, Fut>(
        &self,
        workload: &str,
        phase: &str,
        objects: usize,
        replica_sets: Api<ReplicaSet>,
        work: F,
    ) -> anyhow::Result<PhaseResult>
    where
        F: FnOnce(Changes) -> Fut,
        Fut: Future<Output = anyhow::Result<()>>,
    {
        println!("{workload}: {phase} {objects}");
        let changes = Changes::default();
        let namespace = replica_sets.namespace().map(str::to_owned);
        let new_pods = namespace
            .as_deref()
            .map(|ns| NewPods::watch(Api::namespaced(self.client.clone(), ns), changes.clone()));
        let new_rs = NewReplicaSets::watch(replica_sets, changes.clone());
        new_rs.ready().await;
        if let Some(pods) = &new_pods {
            pods.ready().await;
        }
        let rss_before = self
            .processes
            .controller_pid()
            .and_then(procs::rss_mib)
            .unwrap_or(0.0);
        if let Some(rss) = self.rss {
            rss.reset_peak(rss_before);
        }
        let trail = namespace
            .as_deref()
            .map(|ns| EventTrail::watch(Api::namespaced(self.client.clone(), ns)));
        let before = self.snapshot().await?;
        work(changes.clone())
            .await
            .with_context(|| format!("{workload}: {phase}"))?;
        // The phase's cost includes the events still being posted once its objects settled;
        // the latencies are each object's own and do not wait for them.
        let events_after_settled = match trail {
            Some(trail) => trail.drained(EVENTS_QUIET, EVENTS_DRAIN_LIMIT).await,
            None => Duration::ZERO,
        };
        let after = self.snapshot().await?;
        let new_rs = new_rs.finish();
        let new_pods = new_pods.map(NewPods::finish).unwrap_or_default();
        let settled_by_name = changes.settled_by_name();
        let settled = NewReplicaSetTimes::sorted(&settled_by_name);
        let after_the_apply = changes.after_the_apply();
        let n = objects.max(1) as f64;
        let cpu = procs::cpu_between(&before.cpu, &after.cpu);
        let controller_cpu = cpu.per_process.get(procs::CONTROLLER).copied();
        let apiserver_requests = prom::diff(&before.apiserver, &after.apiserver);
        let controller_requests = prom::diff(&before.controller, &after.controller);
        // Counted at the API server (the controllers label their requests differently), less
        // the bench's own change of each object in an update.
        let rollout_writes = apiserver_requests
            .iter()
            .filter(|(k, _)| {
                matches!(
                    k.as_str(),
                    "PATCH rollouts"
                        | "PUT rollouts"
                        | "PATCH rollouts/status"
                        | "PUT rollouts/status"
                )
            })
            .map(|(_, v)| *v)
            .sum::<u64>()
            .saturating_sub(if phase == "update" { objects as u64 } else { 0 });
        let reconciles = prom::histogram_diff(&before.reconcile, &after.reconcile);
        let has_controller = self.controller.is_some();
        let result = PhaseResult {
            workload: workload.to_string(),
            phase: phase.to_string(),
            objects,
            wall_seconds: after.at.duration_since(before.at).as_secs_f64(),
            events_after_settled_seconds: events_after_settled.as_secs_f64(),
            controller_ms_per_object: controller_cpu.map(|s| s * 1000.0 / n),
            control_plane_ms_per_object: cpu.control_plane * 1000.0 / n,
            all_ms_per_object: cpu.all * 1000.0 / n,
            cpu,
            controller_rss_peak_mib: self.rss.map(RssSampler::peak),
            controller_rss_end_mib: self.processes.controller_pid().and_then(procs::rss_mib),
            controller_heap_end_mib: after.heap_mib,
            apiserver_requests_per_object: apiserver_requests.values().sum::<u64>() as f64 / n,
            apiserver_requests,
            controller_requests_per_object: has_controller
                .then(|| controller_requests.values().sum::<u64>() as f64 / n),
            controller_requests,
            rollout_writes_per_object: has_controller.then(|| rollout_writes as f64 / n),
            new_replica_set_ms: Percentiles::of(&NewReplicaSetTimes::sorted(&new_rs.seen)),
            new_replica_set_available_ms: Percentiles::of(&NewReplicaSetTimes::sorted(
                &new_rs.available,
            )),
            pods_ms: Percentiles::of(&NewReplicaSetTimes::between(
                &new_rs.seen,
                &new_rs.available,
            )),
            pod_created_ms: Percentiles::of(&NewReplicaSetTimes::between(
                &new_rs.seen,
                &new_pods.created,
            )),
            pod_ready_ms: Percentiles::of(&NewReplicaSetTimes::between(
                &new_pods.created,
                &new_pods.ready,
            )),
            pod_reported_ms: Percentiles::of(&NewReplicaSetTimes::between(
                &new_pods.ready,
                &new_rs.available,
            )),
            finish_ms: Percentiles::of(&NewReplicaSetTimes::between(
                &new_rs.available,
                &settled_by_name,
            )),
            apply_seconds: after_the_apply.map(|(apply, _)| apply.as_secs_f64()),
            settled_after_apply_seconds: after_the_apply.map(|(_, after)| after.as_secs_f64()),
            settled_ms: Percentiles::of(&settled),
            reconcile_ms: Percentiles {
                count: reconciles.last().map_or(0, |(_, n)| *n as u64),
                p50: prom::quantile(&reconciles, 0.5).map(|s| s * 1000.0),
                p99: prom::quantile(&reconciles, 0.99).map(|s| s * 1000.0),
                max: None,
            },
        };
        println!("{}", phase_line(&result));
        if let (Some(apply), Some(after)) =
            (result.apply_seconds, result.settled_after_apply_seconds)
        {
            println!(
                "  {workload} {phase}: the kubectl apply took {apply:.1}s; every object settled {after:.1}s after it ended"
            );
        }
        Ok(result)
    }
}

/// A figure with `digits` decimals, or a dash where there is none (progress lines and the
/// report show missing figures alike).
pub fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
}

/// One line of progress for a finished phase.
fn phase_line(p: &PhaseResult) -> String {
    format!(
        "  {} {}: {:.1}s wall (the last event {:.1}s after settled), control plane {:.1} ms/object, controller {} ms/object, \
         {:.1} API requests/object, new ReplicaSet p50 {} / p99 {} / max {} ms, its pods available p50 {} / p99 {} ms, \
         settled p50 {} / p99 {} / max {} ms (from the pods available p50 {} / p99 {} ms), peak RSS {} MiB, live heap at the end {} MiB",
        p.workload,
        p.phase,
        p.wall_seconds,
        p.events_after_settled_seconds,
        p.control_plane_ms_per_object,
        opt(p.controller_ms_per_object, 2),
        p.apiserver_requests_per_object,
        opt(p.new_replica_set_ms.p50, 0),
        opt(p.new_replica_set_ms.p99, 0),
        opt(p.new_replica_set_ms.max, 0),
        opt(p.new_replica_set_available_ms.p50, 0),
        opt(p.new_replica_set_available_ms.p99, 0),
        opt(p.settled_ms.p50, 0),
        opt(p.settled_ms.p99, 0),
        opt(p.settled_ms.max, 0),
        opt(p.finish_ms.p50, 0),
        opt(p.finish_ms.p99, 0),
        opt(p.controller_rss_peak_mib, 1),
        opt(p.controller_heap_end_mib, 1),
    )
}

/// The API server's request counter, summed by `VERB resource[/subresource]`.
async fn apiserver_requests(client: &Client) -> anyhow::Result<BTreeMap<String, f64>> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .context("building the /metrics request")?;
    let text = client
        .request_text(request)
        .await
        .context("reading the API server's /metrics")?;
    let samples = prom::parse(&text);
    Ok(prom::sum_by(&samples, "apiserver_request_total", |l| {
        let resource = l.get("resource")?;
        let sub = l.get("subresource").filter(|s| !s.is_empty());
        Some(match sub {
            Some(sub) => format!("{} {resource}/{sub}", l.get("verb")?),
            None => format!("{} {resource}", l.get("verb")?),
        })
    }))
}
