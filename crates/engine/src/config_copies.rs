//! What config rollouts observe and write (the decisions are `crate::config_rollout`'s): the
//! objects a pod template references, the copies made of them, and the owners a copy is to
//! have. A leaf, so that the observed world and the plan can name them.

use std::collections::{BTreeMap, BTreeSet};

/// Which kind of object a pod template references.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigKind {
    ConfigMap,
    Secret,
}

impl ConfigKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::ConfigMap => "ConfigMap",
            Self::Secret => "Secret",
        }
    }
}

/// A ConfigMap or Secret of the Rollout's namespace, by kind and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConfigRef {
    pub kind: ConfigKind,
    pub name: String,
}

/// A copy made for the Rollout, as read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigCopy {
    pub source: String,
    pub resource_version: Option<String>,
    /// The uids of its owners.
    pub owners: BTreeSet<String>,
}

/// What the controller read for a Rollout that opted in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigObserved {
    /// Each object the template references (that is not itself a copy): the hash of its
    /// content, or `None` when it is absent or is not copied (a service account token).
    pub sources: BTreeMap<ConfigRef, Option<String>>,
    /// The copies made for this Rollout (labelled [`COPY_OF`] with its uid).
    pub copies: BTreeMap<ConfigRef, ConfigCopy>,
}

/// An owner a copy is to have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub kind: OwnerKind,
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerKind {
    Rollout,
    ReplicaSet,
}
