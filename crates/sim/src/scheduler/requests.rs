//! Request routing for the Rollout controller's replicas: starting a reconcile, carrying each
//! request it sends to the API server over the network (lost when partitioned, fenced when not
//! leading, its reply lost by the seed), serving it and reporting the write to the checks.

use sluice_controller::cluster::WriteError;

use super::{Ev, Sim};
use crate::api_model::Kind;
use crate::controller::Addr;
use crate::net::{Request, Response, serve};

impl Sim {
    /// A booked requeue is due: the replica (if it is still the same process) looks for work.
    pub(super) fn wake(&mut self, to: Addr) {
        if let Some(i) = self.current(to) {
            self.try_start(i);
        }
    }

    /// Starts reconciles while the replica is free, synced, leading and has work due.
    pub(super) fn try_start(&mut self, i: usize) {
        let r = &self.replicas[i];
        if !r.up || !r.synced() || r.inflight.is_some() || !self.may_act(i) {
            return;
        }
        let now = self.now();
        let apply = self.apply;
        if let Some(seen) = self.replicas[i].start(self.now_ms, now, apply) {
            self.stats.reconciles += 1;
            let who = self.replicas[i].identity();
            self.log(format!("{who}: {seen}"));
            self.drive(i);
        } else if let Some(due) = self.replicas[i].next_due()
            && due > self.now_ms
        {
            let to = self.replicas[i].addr();
            self.at(due, Ev::Wake { to });
        }
    }

    /// Polls the reconcile in flight; sends its next request or books its requeue.
    fn drive(&mut self, i: usize) {
        let now_ms = self.now_ms;
        match self.replicas[i].poll(now_ms) {
            None => {
                let Some(inflight) = self.replicas[i].inflight.as_ref() else {
                    return;
                };
                let decided = inflight
                    .take_decision()
                    .map(|d| (inflight.rollout.clone(), d));
                let request = inflight.writer.take_request();
                if let Some((rollout, status)) = decided {
                    self.checker.on_decision(&self.api, &rollout, &status);
                }
                let Some(request) = request else {
                    return;
                };
                self.send(i, request);
            }
            Some(done) => {
                if let Some(status) = &done.decided {
                    self.checker.on_decision(&self.api, &done.rollout, status);
                }
                let who = self.replicas[i].identity();
                match &done.result {
                    Ok(plan) if !plan.actions.is_empty() || !plan.events.is_empty() => {
                        let reasons: Vec<&str> = plan.events.iter().map(|e| e.reason).collect();
                        self.log(format!("{who}: reconciled {} {reasons:?}", done.rollout));
                    }
                    Ok(_) => {}
                    Err(e) => {
                        if matches!(e, WriteError::Conflict) {
                            self.stats.conflicts += 1;
                        }
                        self.log(format!("{who}: reconcile {} failed: {e}", done.rollout));
                    }
                }
                if let Ok(plan) = &done.result {
                    self.notify_fired(i, &done.seen, &plan.events);
                }
                let to = self.replicas[i].addr();
                if let Some(due) = self.replicas[i].next_due() {
                    self.at(due, Ev::Wake { to });
                }
            }
        }
    }

    fn send(&mut self, i: usize, request: Request) {
        let from = self.replicas[i].addr();
        let latency = self.setup.faults.net_latency_ms;
        // A partitioned replica's request never arrives.
        if self.replicas[i].partitioned {
            let response = Err(WriteError::Api("request timed out".into()));
            self.after(latency, Ev::Reply { to: from, response });
            return;
        }
        // The controller's HTTP fence: no mutating request leaves a replica that does not lead.
        if request.is_write() && !self.may_act(i) {
            self.after(
                latency,
                Ev::Reply {
                    to: from,
                    response: Err(WriteError::NotLeader),
                },
            );
            return;
        }
        let identity = self.replicas[i].identity();
        self.after(
            latency,
            Ev::Arrive {
                from,
                identity,
                request,
            },
        );
    }

    pub(super) fn arrive(&mut self, from: Addr, identity: String, request: Request) {
        let mut response = self.serve_controller(&identity, request);
        if !self.calm && self.rng.chance(self.setup.faults.lost_reply) {
            response = Err(WriteError::Api("reply lost: timeout".into()));
        }
        let latency = self.setup.faults.net_latency_ms;
        self.after(latency, Ev::Reply { to: from, response });
    }

    /// A controller replica's request served by the API server, a third party perhaps
    /// writing its target just before, and what it wrote reported to the checks.
    pub(super) fn serve_controller(&mut self, identity: &str, request: Request) -> Response {
        let contested = match &request {
            Request::PatchReplicaSet { .. }
            | Request::ReplaceRouterObject { .. }
            | Request::ReplaceStatefulSet { .. }
            | Request::ReplaceDaemonSet { .. }
            | Request::SetConfigOwners { .. } => request.target(),
            _ => None,
        };
        if let Some((kind, name)) = contested
            && self.rng.chance(self.setup.faults.conflict_before_patch)
            && !self.calm
        {
            self.meddle(kind, &name);
        }
        let what = request.describe();
        let is_write = request.is_write();
        let lists_runs = matches!(request, Request::ListAnalysisRuns);
        let status_of = match &request {
            Request::PatchRolloutStatus { name, .. } => self
                .api
                .get(Kind::Rollout, name)
                .cloned()
                .map(|before| (name.clone(), before)),
            _ => None,
        };
        let rv_before = self.api.resource_version();
        let now = self.now();
        let response = serve(&mut self.api, request, now);
        let committed = self.api.resource_version() != rv_before;
        if lists_runs && response.is_ok() {
            let runs = self.api.list(Kind::AnalysisRun);
            self.checker.on_run_list(identity, runs);
        }
        if committed
            && let Some((name, before)) = status_of
            && let Some(after) = self.api.get(Kind::Rollout, &name)
        {
            self.checker
                .on_status_write(&self.api, self.now_ms, identity, &before, after);
        }
        if is_write && committed {
            self.stats.controller_writes += 1;
            self.last_write = Some((self.now_ms, format!("{identity}: {what}")));
            self.log(format!("{identity}: {what}"));
            if self.setup.leases {
                let lease = crate::lease::view(&self.api);
                self.checker
                    .on_controller_write(self.now_ms, now, identity, &what, lease.as_ref());
            }
        } else if let Err(e) = &response {
            self.log(format!("{identity}: {what} -> {e}"));
        }
        response
    }

    /// The API server's answer reaches the replica that asked, if it is still the same process.
    pub(super) fn reply(&mut self, to: Addr, response: Response) {
        if let Some(i) = self.current(to)
            && let Some(inflight) = &self.replicas[i].inflight
        {
            inflight.writer.deliver(response);
            self.drive(i);
        }
    }
}
