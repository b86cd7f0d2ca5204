//! The dispatcher: hands each event to the part of the world it concerns. It decides nothing
//! itself, so that what an event does is read in one place, beside its kind's other events.

use super::{Ev, Sim};

impl Sim {
    pub(super) fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver { to, kind } => self.deliver(to, kind),
            Ev::Relist { to, kind } => self.relist(to, kind),
            Ev::Wake { to } => self.wake(to),
            Ev::Arrive {
                from,
                identity,
                request,
            } => self.arrive(from, identity, request),
            Ev::Reply { to, response } => self.reply(to, response),
            Ev::LeaseTick { to } => self.lease_tick(to),
            Ev::LeaseGetArrive { from } => self.lease_get_arrive(from),
            Ev::LeaseGot { to, lease } => self.lease_got(to, lease),
            Ev::LeaseWriteArrive {
                from,
                lease,
                create,
                at_ms,
            } => self.lease_write_arrive(from, *lease, create, at_ms),
            Ev::LeaseWritten { to, at_ms, stored } => self.lease_written(to, at_ms, stored),
            Ev::LeaseDeadline { to } => self.lease_deadline(to),
            Ev::Restart { replica } => self.restart(replica),
            Ev::Heal { replica } => self.heal(replica),
            Ev::SyncReplicaSet { name } => self.sync_replica_set(&name),
            Ev::PodReady { pod } => self.pod_ready(&pod),
            Ev::SyncStatefulSet { name } => self.sync_stateful_set(&name),
            Ev::OrdinalReady {
                stateful_set,
                ordinal,
                revision,
            } => self.ordinal_ready(&stateful_set, ordinal, &revision),
            Ev::SyncDaemonSet { name } => self.sync_daemon_set(&name),
            Ev::SyncAnalysisRun { name } => self.sync_analysis_run(&name),
            Ev::RunArrive { name, request } => self.run_arrive(name, request),
            Ev::RunReply { name, response } => self.run_reply(&name, response),
            Ev::SyncExperiment { name } => self.sync_experiment(&name),
            Ev::ExperimentArrive { name, request } => self.experiment_arrive(name, request),
            Ev::ExperimentReply { name, response } => self.experiment_reply(&name, response),
            Ev::NotifyRecover { replica } => self.notify_recover(replica),
            Ev::NotifyWake { replica } => self.notify_wake(replica),
            Ev::NotifyArrive { from, request } => self.notify_arrive(from, request),
            Ev::NotifyReply { to, response } => self.notify_reply(to, response),
            Ev::CollectGarbage => self.collect_garbage(),
            Ev::CheckDeadlines => self.check_deadlines(),
            Ev::Script => self.fire_script(),
            Ev::Calm => self.calm_down(),
            Ev::Meddle => self.random_meddle(),
            Ev::RandomCrash => self.random_crash(),
            Ev::RandomPartition => self.random_partition(),
        }
    }
}
