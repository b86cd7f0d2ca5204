//! The AnalysisRun and Experiment controllers as the scheduler runs them: each reconcile is
//! started on its wake-up, polled, and its requests carried to the API server and back with
//! the network's latency.

use super::{Ev, Sim};
use crate::analysis_runs::Polled;
use crate::api_model::Kind;
use crate::experiments;
use crate::net::{Request, Response, serve};

impl Sim {
    pub(super) fn sync_analysis_run(&mut self, name: &str) {
        let now = self.now();
        if self
            .runs
            .start(&self.api, name, self.now_ms, now, &self.setup.analysis)
        {
            self.drive_run(name);
        }
    }

    /// A request of the AnalysisRun controller's reconcile of `name` reaches the API server.
    pub(super) fn run_arrive(&mut self, name: String, request: Request) {
        let now = self.now();
        let response = serve(&mut self.api, request, now);
        if let Err(e) = &response {
            self.log(format!("analysis: write of run {name} -> {e}"));
        }
        let latency = self.setup.faults.net_latency_ms;
        self.after(latency, Ev::RunReply { name, response });
    }

    pub(super) fn run_reply(&mut self, name: &str, response: Response) {
        self.runs.deliver(name, response);
        self.drive_run(name);
    }

    /// Polls the AnalysisRun controller's reconcile of `name`; sends its next request (with the
    /// network's latency) or books its requeue.
    fn drive_run(&mut self, name: &str) {
        match self.runs.poll(name, self.now_ms) {
            Polled::Waiting => {}
            Polled::Send(request) => {
                let latency = self.setup.faults.net_latency_ms;
                let name = name.to_string();
                self.after(latency, Ev::RunArrive { name, request });
            }
            Polled::Done {
                phase_change,
                error,
                next_ms,
            } => {
                if let Some((phase, message)) = phase_change {
                    self.log(format!("analysis: run {name} is {phase} {message}"));
                }
                if let Some(e) = error {
                    self.log(format!("analysis: reconcile of run {name} failed: {e}"));
                }
                if let Some(at) = next_ms {
                    let name = name.to_string();
                    self.at(at, Ev::SyncAnalysisRun { name });
                }
            }
        }
    }

    pub(super) fn sync_experiment(&mut self, name: &str) {
        let now = self.now();
        if self.experiments.start(&self.api, name, self.now_ms, now) {
            self.drive_experiment(name);
        }
    }

    pub(super) fn experiment_reply(&mut self, name: &str, response: Response) {
        self.experiments.deliver(name, response);
        self.drive_experiment(name);
    }

    /// Polls the Experiment controller's reconcile of `name`; sends its next request (with the
    /// network's latency) or books its requeue.
    fn drive_experiment(&mut self, name: &str) {
        match self.experiments.poll(name, self.now_ms) {
            experiments::Polled::Waiting => {}
            experiments::Polled::Send(request) => {
                let latency = self.setup.faults.net_latency_ms;
                let name = name.to_string();
                self.after(latency, Ev::ExperimentArrive { name, request });
            }
            experiments::Polled::Done {
                phase_change,
                failed_writes,
                error,
                next_ms,
            } => {
                if let Some(phase) = phase_change {
                    self.log(format!("experiments: experiment/{name} is {phase}"));
                }
                for w in failed_writes {
                    self.log(format!("experiments: experiment/{name}: write failed: {w}"));
                }
                if let Some(e) = error {
                    self.log(format!(
                        "experiments: reconcile of experiment/{name} failed: {e}"
                    ));
                }
                if let Some(at) = next_ms {
                    let name = name.to_string();
                    self.at(at, Ev::SyncExperiment { name });
                }
            }
        }
    }

    /// A request of the Experiment controller reaches the API server. A ReplicaSet it patches
    /// may have been written by someone else just before, as the Rollout controller's may.
    pub(super) fn experiment_arrive(&mut self, name: String, request: Request) {
        if let Request::PatchReplicaSet { name: rs, .. } = &request
            && self.rng.chance(self.setup.faults.conflict_before_patch)
            && !self.calm
        {
            let rs = rs.clone();
            self.meddle(Kind::ReplicaSet, &rs);
        }
        let what = request.describe();
        let is_write = request.is_write();
        let rv_before = self.api.resource_version();
        let now = self.now();
        let response = serve(&mut self.api, request, now);
        if is_write && self.api.resource_version() != rv_before {
            self.last_write = Some((self.now_ms, format!("experiment controller: {what}")));
            self.log(format!("experiments: {what}"));
        } else if let Err(e) = &response {
            self.log(format!("experiments: {what} -> {e}"));
        }
        let latency = self.setup.faults.net_latency_ms;
        self.after(latency, Ev::ExperimentReply { name, response });
    }
}
