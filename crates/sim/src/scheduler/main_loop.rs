//! The main loop: sets the world up, then takes events in order until the script is done and
//! the world has settled (or a script wait times out), and judges the end state.

use serde_json::Value;

use super::{CHAOS_MAX_MS, Ev, QUIET_MS, Sim, WAIT_TIMEOUT_MS};
use crate::api_model::Kind;

impl Sim {
    pub(super) fn run(&mut self) {
        let rollout = self.setup.rollout.clone();
        // A Rollout given with a status was left so by an earlier controller (a takeover).
        let status = rollout.get("status").cloned();
        let now = self.now();
        let uid = match self.api.create(Kind::Rollout, rollout, now) {
            Ok(created) => created["metadata"]["uid"].clone(),
            Err(e) => {
                self.checker
                    .stalled(0, format!("cannot create the Rollout: {e:?}"));
                return;
            }
        };
        if let Some(status) = status {
            self.api.put_status(Kind::Rollout, "demo", status);
        }
        for (kind, mut obj) in self.setup.objects.clone() {
            crate::scenarios::own_by_rollout(&mut obj, &uid);
            let _ = self.api.create(kind, obj, now);
        }
        self.log("user: create rollout/demo".into());
        for i in 0..self.replicas.len() {
            self.boot(i);
        }
        self.at(CHAOS_MAX_MS, Ev::Calm);
        let f = self.setup.faults.clone();
        if let Some(every) = f.meddle_every_ms {
            self.after(every, Ev::Meddle);
        }
        if let Some(every) = f.crash_every_ms {
            self.after(every, Ev::RandomCrash);
        }
        if let Some(every) = f.partition_every_ms {
            self.after(every, Ev::RandomPartition);
        }
        if self.notify.is_some() {
            for replica in 0..self.replicas.len() {
                self.after((1_000, 5_000), Ev::NotifyRecover { replica });
            }
        }
        self.fan_out();
        self.check_script();

        let mut stalled = false;
        while let Some(((t, _), ev)) = self.events.pop_first() {
            if t > self.end_ms {
                break;
            }
            self.now_ms = t;
            self.stats.events += 1;
            self.handle(ev);
            self.fan_out();
            self.check_script();
            if self.script_pos < self.setup.script.len()
                && !self.script_armed
                && self.now_ms > self.wait_since + WAIT_TIMEOUT_MS
            {
                let wait = self.setup.script[self.script_pos].wait.clone();
                let detail = format!(
                    "waited {WAIT_TIMEOUT_MS} ms for {wait:?}: {}",
                    self.rollout_summary()
                );
                self.checker.stalled(self.now_ms, detail);
                stalled = true;
                break;
            }
        }
        self.stats.sim_ms = self.now_ms;
        // The end state is judged whenever the run got there, even after earlier violations.
        if !stalled {
            let quiet_from = self.end_ms.saturating_sub(QUIET_MS);
            let expect = self.setup.expect.clone();
            let last = self.last_write.clone();
            let now = self.now();
            self.checker
                .at_quiescence(&self.api, &expect, self.now_ms, now, last, quiet_from);
            self.notify_at_end();
            self.log(format!("end: {}", self.rollout_summary()));
        }
    }

    fn rollout_summary(&self) -> String {
        let Some(ro) = self.api.get(Kind::Rollout, "demo") else {
            return "no rollout".into();
        };
        let s = |p: &str| ro.pointer(p).map(Value::to_string).unwrap_or_default();
        format!(
            "phase {} message {} step {} stable {} current {} gen {} observed {}",
            s("/status/phase"),
            s("/status/message"),
            s("/status/currentStepIndex"),
            s("/status/stableRS"),
            s("/status/currentPodHash"),
            s("/metadata/generation"),
            s("/status/observedGeneration"),
        )
    }

    /// A controller process starts: list the kinds it watches, then run for the lease.
    pub(super) fn boot(&mut self, i: usize) {
        let to = self.replicas[i].addr();
        for kind in [Kind::Rollout, Kind::ReplicaSet] {
            self.after((0, 1_000), Ev::Relist { to, kind });
        }
        if self.replicas[i].elector.is_some() {
            self.after((0, 500), Ev::LeaseTick { to });
        }
    }
}
