//! The replicas' notifications loops as the scheduler runs them (only in scenarios with
//! notifications): the events of a leader's reconciles go to its notifier, each call of the
//! driver is polled and its requests carried to the API server like the reconciles' (lost
//! when partitioned, fenced when not leading, met by a third party's write, replies lost),
//! and every delivery of the recording service is checked as it is made.

use std::sync::Arc;

use serde_json::Value;
use sluice_api::Rollout;
use sluice_controller::cluster::WriteError;
use sluice_controller::loops::notification_driver::Fired;
use sluice_engine::EventType;
use sluice_notifications::state::NOTIFIED;
use sluice_notifications::{Config, NotifiedState};

use super::{Ev, Sim};
use crate::api_model::Kind;
use crate::invariants::NotificationChecks;
use crate::net::{Request, Response};
use crate::notifications::{Life, Notifier, Notify, Polled, RECOVER_EVERY_MS, RecordingService};

/// The notifications part of the world.
pub(super) struct NotifyWorld {
    config: Arc<Config>,
    send_failure: f64,
    service: RecordingService,
    notifiers: Vec<Notifier>,
    /// Deliveries checked so far.
    seen: usize,
    pub(super) checks: NotificationChecks,
    /// When each replica's wake-up is booked for.
    wake: Vec<Option<u64>>,
}

impl NotifyWorld {
    pub(super) fn new(notify: &Notify, replicas: usize) -> Self {
        let service = RecordingService::default();
        Self {
            config: Arc::new(notify.config()),
            send_failure: notify.send_failure,
            notifiers: (0..replicas)
                .map(|_| Notifier::new(service.handle()))
                .collect(),
            service,
            seen: 0,
            checks: NotificationChecks::default(),
            wake: vec![None; replicas],
        }
    }
}

impl Sim {
    /// The term replica `i` leads in now, as a notifier's life.
    fn life_of(&self, i: usize) -> Option<Life> {
        let r = self.replicas.get(i)?;
        let term = r.gate.term().filter(|_| r.up)?;
        Some(Life {
            replica: i,
            incarnation: r.incarnation,
            term,
        })
    }

    /// A reconcile of replica `i` that started from `seen` published `events`.
    pub(super) fn notify_fired(
        &mut self,
        i: usize,
        seen: &Rollout,
        events: &[sluice_engine::Event],
    ) {
        if self.notify.is_none() || events.is_empty() {
            return;
        }
        let life = self.life_of(i);
        let rollout = serde_json::to_value(seen).unwrap_or(Value::Null);
        let now_ms = self.now_ms;
        let at = self.now();
        self.sync_notifier(i);
        let Some(world) = self.notify.as_mut() else {
            return;
        };
        for ev in events {
            world
                .checks
                .published(now_ms, at, life, rollout.clone(), ev.reason, &ev.message);
            if life.is_some() {
                world.notifiers[i].fire(Fired {
                    rollout: seen.clone(),
                    at,
                    type_: match ev.type_ {
                        EventType::Normal => "Normal",
                        EventType::Warning => "Warning",
                    },
                    reason: ev.reason.to_string(),
                    message: ev.message.clone(),
                });
            }
        }
        self.notify_kick(i);
    }

    /// Drops what a notifier holds when its process or term is over.
    fn sync_notifier(&mut self, i: usize) {
        let life = self.life_of(i);
        if let Some(world) = self.notify.as_mut()
            && world.notifiers[i].life != life
        {
            world.notifiers[i].reset(life);
        }
    }

    /// The periodic look for pending notifications nobody queued.
    pub(super) fn notify_recover(&mut self, i: usize) {
        self.sync_notifier(i);
        if let Some(world) = self.notify.as_mut() {
            world.notifiers[i].recover_later();
        }
        self.notify_kick(i);
        self.after(
            (RECOVER_EVERY_MS, RECOVER_EVERY_MS),
            Ev::NotifyRecover { replica: i },
        );
    }

    /// A booked retry is due.
    pub(super) fn notify_wake(&mut self, i: usize) {
        if let Some(world) = self.notify.as_mut()
            && world.wake[i].is_some_and(|at| at <= self.now_ms)
        {
            world.wake[i] = None;
        }
        self.notify_kick(i);
    }

    /// Starts the notifier's next call of the driver if it is idle and has work, and runs it.
    pub(super) fn notify_kick(&mut self, i: usize) {
        self.sync_notifier(i);
        loop {
            let now_ms = self.now_ms;
            let now_unix = self.now().as_second();
            let calm = self.calm;
            let Some(world) = self.notify.as_mut() else {
                return;
            };
            let replica = &self.replicas[i];
            if world.notifiers[i].busy() || !replica.synced() {
                return;
            }
            let p = world.send_failure;
            let rng = &mut self.rng;
            let mut fail = || !calm && p > 0.0 && rng.chance(p);
            let started = world.notifiers[i].start(
                now_ms,
                now_unix,
                &world.config,
                &replica.rollouts,
                &replica.gate,
                &mut fail,
            );
            if !started {
                if let Some(due) = world.notifiers[i].next_due()
                    && due > now_ms
                    && world.wake[i].is_none_or(|at| at > due || at < now_ms)
                {
                    world.wake[i] = Some(due);
                    self.at(due, Ev::NotifyWake { replica: i });
                }
                return;
            }
            if !self.notify_drive(i) {
                return;
            }
        }
    }

    /// Polls the notifier's call in flight; true when it finished.
    fn notify_drive(&mut self, i: usize) -> bool {
        let now_ms = self.now_ms;
        let life = self.life_of(i);
        let Some(world) = self.notify.as_mut() else {
            return false;
        };
        let polled = world.notifiers[i].poll(now_ms);
        let busy = world.notifiers[i].busy();
        self.check_deliveries();
        match polled {
            Polled::Send(request) => {
                if let Some(from) = life {
                    self.notify_send(from, request);
                }
                false
            }
            Polled::Stepped(what) => {
                if let Some(life) = life {
                    self.log(format!("notifier {life}: {what}"));
                }
                true
            }
            Polled::Idle => !busy,
        }
    }

    fn notify_send(&mut self, from: Life, request: Request) {
        let latency = self.setup.faults.net_latency_ms;
        let i = from.replica;
        if self.replicas[i].partitioned {
            let response = Err(WriteError::Api("request timed out".into()));
            self.after(latency, Ev::NotifyReply { to: from, response });
            return;
        }
        if request.is_write() && !self.may_act(i) {
            let response = Err(WriteError::NotLeader);
            self.after(latency, Ev::NotifyReply { to: from, response });
            return;
        }
        self.after(latency, Ev::NotifyArrive { from, request });
    }

    /// A notifier's request reaches the API server.
    pub(super) fn notify_arrive(&mut self, from: Life, request: Request) {
        if let Request::PatchRollout { name, .. } = &request
            && self.rng.chance(self.setup.faults.conflict_before_patch)
            && !self.calm
        {
            let name = name.clone();
            self.meddle(Kind::Rollout, &name);
        }
        let written = match &request {
            Request::PatchRollout { name, .. } => Some(name.clone()),
            _ => None,
        };
        let before = written
            .as_ref()
            .and_then(|n| self.api.get(Kind::Rollout, n))
            .and_then(|ro| ro.pointer("/metadata/annotations").cloned());
        let identity = format!("sluice-{}-{}", from.replica, from.incarnation);
        let response = self.serve_controller(&identity, request);
        if let Some(name) = written
            && response.is_ok()
        {
            let after = self
                .api
                .get(Kind::Rollout, &name)
                .and_then(|ro| ro.pointer("/metadata/annotations").cloned());
            if let Some(world) = self.notify.as_mut() {
                world
                    .checks
                    .on_write(&name, from, before.as_ref(), after.as_ref());
            }
        }
        let mut response = response;
        if !self.calm && self.rng.chance(self.setup.faults.lost_reply) {
            response = Err(WriteError::Api("reply lost: timeout".into()));
        }
        let latency = self.setup.faults.net_latency_ms;
        self.after(latency, Ev::NotifyReply { to: from, response });
    }

    /// The API server's answer reaches the notifier that asked, if it is still the same term.
    pub(super) fn notify_reply(&mut self, to: Life, response: Response) {
        self.sync_notifier(to.replica);
        let Some(world) = self.notify.as_mut() else {
            return;
        };
        if world.notifiers[to.replica].life != Some(to) {
            return;
        }
        world.notifiers[to.replica].deliver(response);
        if self.notify_drive(to.replica) {
            self.notify_kick(to.replica);
        }
    }

    /// Checks the deliveries made since the last look.
    fn check_deliveries(&mut self) {
        let Some(world) = self.notify.as_ref() else {
            return;
        };
        let fresh = world.service.since(world.seen);
        let lives: Vec<Option<Life>> = (0..self.replicas.len()).map(|i| self.life_of(i)).collect();
        for d in fresh {
            let recorded = self.api.get(Kind::Rollout, &d.rollout).is_some_and(|ro| {
                ro.pointer("/metadata/annotations")
                    .and_then(|a| a.get(NOTIFIED))
                    .and_then(Value::as_str)
                    .is_some_and(|v| NotifiedState::parse(Some(v)).contains(&d.key))
            });
            self.stats.notifications_delivered += 1;
            self.log(format!(
                "service: {} to {} delivered ({}) by {}",
                d.trigger, d.recipient, d.key, d.life
            ));
            let Some(world) = self.notify.as_mut() else {
                return;
            };
            world.seen += 1;
            let ended = |l: Life| lives[l.replica] != Some(l);
            let violation = world.checks.on_delivery(d, recorded, ended);
            let notes = std::mem::take(&mut world.checks.notes);
            self.checker.violations.extend(violation);
            for note in notes {
                self.log(format!("check: {note}"));
            }
        }
    }

    /// The end: what was due was delivered.
    pub(super) fn notify_at_end(&mut self) {
        let Some(world) = self.notify.as_ref() else {
            return;
        };
        let config = world.config.clone();
        let lives: Vec<Option<Life>> = (0..self.replicas.len()).map(|i| self.life_of(i)).collect();
        let now_ms = self.now_ms;
        let Some(world) = self.notify.as_mut() else {
            return;
        };
        let violations = world
            .checks
            .at_end(&config, now_ms, |l| lives[l.replica] != Some(l));
        self.stats.notification_window_repeats += world.checks.window_repeats;
        self.stats.notifications_lost_unwritten += world.checks.lost_unwritten;
        for note in std::mem::take(&mut world.checks.notes) {
            self.trace.push((now_ms, format!("check: {note}")));
        }
        self.checker.violations.extend(violations);
    }
}
