//! Leader election as the scheduler runs it: each attempt is a read of the Lease and, if the
//! controller's `LeaderElector` decides so, a conditional write, both over the simulated
//! network; the elector's verdict is published to the replica's write gate, as the
//! controller's election loop does.

use k8s_openapi::api::coordination::v1::Lease;
use sluice_controller::leader::lease::Step as LeaseStep;

use super::{Ev, Sim};
use crate::api_model::{ApiError, Kind};
use crate::controller::Addr;
use crate::lease::{LEASE_NAME, RETRY_PERIOD};

impl Sim {
    pub(super) fn lease_reachable(&self, i: usize) -> bool {
        !self.replicas[i].partitioned && self.now_ms >= self.lease_fail_until[i]
    }

    /// Publishes the elector's view to the write gate, as the election loop does; on a new
    /// term the replica reconciles everything it may have missed as a follower.
    pub(super) fn publish(&mut self, i: usize) {
        let at = self.mono.at(self.now_ms);
        let r = &mut self.replicas[i];
        let Some(elector) = r.elector.as_ref() else {
            return;
        };
        let term = elector.term(at);
        let deadline = elector.deadline().map(|d| self.mono.ms(d));
        let before = r.gate.term();
        // Argo #2117, planted only by a test (see `lease::with_leaders_that_never_step_down`).
        if before == term || (term.is_none() && crate::lease::never_step_down()) {
            return;
        }
        r.gate.set(term);
        let (who, to) = (r.identity(), r.addr());
        match term {
            Some(t) => {
                self.log(format!("{who}: leading (term {t})"));
                self.replicas[i].trigger_all(self.now_ms);
                self.at(self.now_ms, Ev::Wake { to });
                if let Some(d) = deadline {
                    self.at(d, Ev::LeaseDeadline { to });
                }
            }
            None => self.log(format!("{who}: renew deadline passed, writes stopped")),
        }
    }

    pub(super) fn next_attempt(&mut self, to: Addr, leading: bool, conflict: bool) {
        let retry = RETRY_PERIOD.as_millis() as u64;
        let at = if conflict {
            self.now_ms
        } else if leading {
            self.now_ms + retry
        } else {
            // client-go's jitter: up to 1.2 times the period on top.
            self.now_ms + retry + self.rng.below(retry * 12 / 10)
        };
        self.at(at, Ev::LeaseTick { to });
    }

    /// The Lease was read (or the read failed): let the elector decide what to write.
    pub(super) fn lease_got(&mut self, to: Addr, lease: Option<Option<Box<Lease>>>) {
        let Some(i) = self.current(to) else {
            return;
        };
        let latency = self.setup.faults.net_latency_ms;
        let Some(current) = lease else {
            self.publish(i);
            let leading = self.may_act(i);
            self.next_attempt(to, leading, false);
            return;
        };
        let at = self.mono.at(self.now_ms);
        let wall = self.now();
        let Some(elector) = self.replicas[i].elector.as_mut() else {
            return;
        };
        let step = elector.observe(at, wall, current.as_deref());
        let (lease, create) = match step {
            // A leader lease is never shared (only a guard is).
            LeaseStep::Wait | LeaseStep::Shared(_) => {
                self.publish(i);
                let leading = self.may_act(i);
                self.next_attempt(to, leading, false);
                return;
            }
            LeaseStep::Create(l) => (l, true),
            LeaseStep::Update(l) => (l, false),
        };
        if self.lease_reachable(i) {
            let at_ms = self.now_ms;
            self.after(
                latency,
                Ev::LeaseWriteArrive {
                    from: to,
                    lease: Box::new(lease),
                    create,
                    at_ms,
                },
            );
        } else {
            let at_ms = self.now_ms;
            self.after(
                latency,
                Ev::LeaseWritten {
                    to,
                    at_ms,
                    stored: Err(false),
                },
            );
        }
    }

    pub(super) fn lease_tick(&mut self, to: Addr) {
        if let Some(i) = self.current(to) {
            let latency = self.setup.faults.net_latency_ms;
            if self.lease_reachable(i) {
                self.after(latency, Ev::LeaseGetArrive { from: to });
            } else {
                self.after(latency, Ev::LeaseGot { to, lease: None });
            }
        }
    }

    pub(super) fn lease_get_arrive(&mut self, from: Addr) {
        let lease = self
            .api
            .get(Kind::Lease, LEASE_NAME)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .map(Box::new);
        let latency = self.setup.faults.net_latency_ms;
        self.after(
            latency,
            Ev::LeaseGot {
                to: from,
                lease: Some(lease),
            },
        );
    }

    /// The API server applies a Lease create or conditional update. The reply says whether it
    /// was refused for a conflict (`Err(true)`), which makes the candidate read again at once.
    pub(super) fn lease_write_arrive(
        &mut self,
        from: Addr,
        lease: Lease,
        create: bool,
        at_ms: u64,
    ) {
        let value = serde_json::to_value(&lease).unwrap_or_default();
        let now = self.now();
        let result = if create {
            self.api.create(Kind::Lease, value, now)
        } else {
            self.api.replace(Kind::Lease, &value)
        };
        let stored = match result {
            Ok(v) => serde_json::from_value::<Lease>(v)
                .map(Box::new)
                .map_err(|_| false),
            Err(ApiError::Conflict | ApiError::AlreadyExists) => Err(true),
            Err(_) => Err(false),
        };
        if let Ok(l) = &stored {
            let holder = l.spec.as_ref().and_then(|s| s.holder_identity.clone());
            let term = l.spec.as_ref().and_then(|s| s.lease_transitions);
            if self.last_holder != holder {
                self.stats.leader_changes += 1;
                self.log(format!("lease: {holder:?} holds it (transitions {term:?})"));
                self.last_holder = holder;
            }
        }
        let latency = self.setup.faults.net_latency_ms;
        self.after(
            latency,
            Ev::LeaseWritten {
                to: from,
                at_ms,
                stored,
            },
        );
    }

    pub(super) fn lease_written(&mut self, to: Addr, at_ms: u64, stored: Result<Box<Lease>, bool>) {
        let Some(i) = self.current(to) else {
            return;
        };
        let conflict = stored.as_ref().err() == Some(&true);
        if let (Ok(lease), Some(elector)) = (&stored, self.replicas[i].elector.as_mut()) {
            elector.written(self.mono.at(at_ms), lease);
        }
        self.publish(i);
        let leading = self.may_act(i);
        self.next_attempt(to, leading, conflict);
    }

    pub(super) fn lease_deadline(&mut self, to: Addr) {
        let Some(i) = self.current(to) else {
            return;
        };
        self.publish(i);
        // Renewed meanwhile: watch the new deadline.
        let deadline = self.replicas[i]
            .elector
            .as_ref()
            .and_then(|e| e.deadline())
            .map(|d| self.mono.ms(d));
        if let Some(d) = deadline
            && d > self.now_ms
            && self.may_act(i)
        {
            self.at(d, Ev::LeaseDeadline { to });
        }
    }
}
