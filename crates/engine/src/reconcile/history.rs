//! Revisions: the revision number of the current ReplicaSet (a re-used one, on rollback,
//! gets the next number and remembers its old ones) and of the Rollout, and the deletion of
//! scaled-down ReplicaSets beyond `revisionHistoryLimit`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::World;
use crate::labels::{REVISION, REVISION_HISTORY};
use crate::observed::ReplicaSetExt;
use crate::plan::{Action, Plan};

impl World<'_> {
    /// The revision of the current ReplicaSet: its own; the next one when another ReplicaSet
    /// has a revision as high (a rollback re-used it), recording its old number in its
    /// revision history; the next one for a ReplicaSet yet to be created.
    ///
    /// The Rollout's own revision annotation counts as another ReplicaSet's when it is not
    /// this one's: the ReplicaSet it names may not be in the cache yet (a watch behind the
    /// last update's create), and a revision given twice would name this update's
    /// AnalysisRuns and Experiments after the last one's, then rename them once the cache
    /// caught up.
    pub(super) fn revision(&self, plan: &mut Plan) -> i64 {
        let recorded = self
            .rollout_revision()
            .and_then(|r| r.parse::<i64>().ok())
            .unwrap_or(0);
        match self.new_rs {
            Some(rs) => {
                let current = rs.revision().unwrap_or(0);
                let recorded = if recorded == current { 0 } else { recorded };
                let max_other = self.max_revision(true).max(recorded);
                if current <= max_other {
                    let next = max_other + 1;
                    let mut history: Vec<String> = rs
                        .annotation(REVISION_HISTORY)
                        .map(|h| h.split(',').map(str::to_string).collect())
                        .unwrap_or_default();
                    if current > 0 {
                        history.push(current.to_string());
                    }
                    let mut annotations = BTreeMap::new();
                    annotations.insert(REVISION.to_string(), Some(next.to_string()));
                    annotations.insert(REVISION_HISTORY.to_string(), Some(history.join(",")));
                    plan.actions.push(Action::AnnotateReplicaSet {
                        name: rs.name().to_string(),
                        resource_version: rs.metadata.resource_version.clone(),
                        annotations,
                    });
                    next
                } else {
                    current
                }
            }
            None => self.max_revision(false).max(recorded) + 1,
        }
    }

    /// The revision the Rollout's annotation records.
    fn rollout_revision(&self) -> Option<&str> {
        self.ro
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION))
            .map(String::as_str)
    }

    /// Records `revision` on the Rollout; returns whether it was another one before.
    pub(super) fn annotate_rollout_revision(&self, revision: i64, plan: &mut Plan) -> bool {
        if self.rollout_revision() == Some(revision.to_string().as_str()) {
            return false;
        }
        plan.annotate_rollout(
            self.ro.metadata.resource_version.clone(),
            REVISION,
            Some(revision.to_string()),
        );
        true
    }

    /// Deletes scaled-down older ReplicaSets beyond `revisionHistoryLimit`, oldest first.
    pub(super) fn clean_up_history(&self, plan: &mut Plan) {
        let limit = self
            .ro
            .spec
            .revision_history_limit
            .unwrap_or(sluice_api::rollout::DEFAULT_REVISION_HISTORY_LIMIT)
            .max(0) as usize;
        let idle: Vec<&&ReplicaSet> = self
            .older
            .iter()
            .filter(|rs| rs.spec_replicas() == 0 && rs.status_replicas() == 0)
            .collect();
        if idle.len() <= limit {
            return;
        }
        for rs in &idle[..idle.len() - limit] {
            plan.actions.push(Action::DeleteReplicaSet {
                name: rs.name().to_string(),
                uid: rs.metadata.uid.clone(),
            });
        }
    }
}
