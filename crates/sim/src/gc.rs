//! Kubernetes' garbage collector, as far as the controllers rely on it: an object whose owners
//! are all gone (none left with the uid its owner reference names) is deleted, as background
//! propagation does. The Rollout controller deletes an Experiment and leaves its ReplicaSets,
//! Services and AnalysisRuns to it; an Experiment's write that lands after the Experiment was
//! deleted leaves a dangling object that it removes the same way; a config rollout's copy goes
//! with the last ReplicaSet that reads it. Pods are the ReplicaSet
//! controller's (see [`crate::kubelet`]). It writes straight to the API model, like the rest
//! of the cluster side: it is not what is under test.

use serde_json::Value;

use crate::api_model::{ApiServer, Kind, WatchEvent, name_of};

/// The kinds whose objects it collects (ConfigMaps and Secrets: config rollouts' copies,
/// owned by the ReplicaSets that read them).
const COLLECTED: [Kind; 6] = [
    Kind::Experiment,
    Kind::ReplicaSet,
    Kind::Service,
    Kind::AnalysisRun,
    Kind::ConfigMap,
    Kind::Secret,
];

/// The simulated kind an owner reference's `kind` names, for the owners objects have here.
fn owner_kind(kind: &str) -> Option<Kind> {
    match kind {
        "Rollout" => Some(Kind::Rollout),
        "Experiment" => Some(Kind::Experiment),
        "ReplicaSet" => Some(Kind::ReplicaSet),
        _ => None,
    }
}

fn uid(v: &Value) -> Option<&str> {
    v.pointer("/metadata/uid").and_then(Value::as_str)
}

fn owners(obj: &Value) -> &[Value] {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Whether the owner a reference names exists (an owner of a kind the simulation does not
/// have is taken to exist: nothing here deletes one).
fn owner_exists(api: &ApiServer, owner: &Value) -> bool {
    let Some(kind) = owner
        .get("kind")
        .and_then(Value::as_str)
        .and_then(owner_kind)
    else {
        return true;
    };
    let name = owner
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    api.get(kind, name)
        .is_some_and(|o| uid(o) == owner.get("uid").and_then(Value::as_str))
}

/// Whether every owner of `obj` is gone (an object without owners is nobody's garbage).
pub fn dangling(api: &ApiServer, obj: &Value) -> bool {
    let owners = owners(obj);
    !owners.is_empty() && owners.iter().all(|o| !owner_exists(api, o))
}

/// Whether a committed change leaves something to collect: an owner deleted with dependents
/// left, or an object created or changed whose owners are gone.
pub fn interested_in(api: &ApiServer, kind: Kind, event: &WatchEvent) -> bool {
    match event {
        WatchEvent::Deleted(owner) => {
            let Some(gone) = uid(owner) else {
                return false;
            };
            COLLECTED.iter().any(|k| {
                api.list(*k).iter().any(|o| {
                    owners(o)
                        .iter()
                        .any(|r| r.get("uid").and_then(Value::as_str) == Some(gone))
                })
            })
        }
        WatchEvent::Applied(obj) => COLLECTED.contains(&kind) && dangling(api, obj),
    }
}

/// Deletes every dangling object, and then whatever that left dangling. Returns what it
/// deleted, by kind and name.
pub fn collect(api: &mut ApiServer) -> Vec<(Kind, String)> {
    let mut deleted = Vec::new();
    loop {
        let garbage: Vec<(Kind, String)> = COLLECTED
            .iter()
            .flat_map(|k| {
                api.list(*k)
                    .into_iter()
                    .filter(|o| dangling(api, o))
                    .map(|o| (*k, name_of(&o).to_string()))
                    .collect::<Vec<_>>()
            })
            .collect();
        if garbage.is_empty() {
            return deleted;
        }
        for (kind, name) in garbage {
            if api.delete(kind, &name, None).is_ok() {
                deleted.push((kind, name));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;
    use serde_json::json;

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).unwrap()
    }

    fn owned(name: &str, kind: &str, owner: &str, owner_uid: &str) -> Value {
        json!({"metadata": {"name": name, "ownerReferences": [
            {"kind": kind, "name": owner, "uid": owner_uid, "controller": true}
        ]}})
    }

    #[test]
    fn dependents_of_a_deleted_owner_go_transitively_and_nothing_else() {
        let mut api = ApiServer::new();
        let ro = api
            .create(Kind::Rollout, json!({"metadata": {"name": "demo"}}), now())
            .unwrap();
        let ro_uid = uid(&ro).unwrap().to_string();
        let exp = api
            .create(
                Kind::Experiment,
                owned("e", "Rollout", "demo", &ro_uid),
                now(),
            )
            .unwrap();
        let exp_uid = uid(&exp).unwrap().to_string();
        api.create(
            Kind::ReplicaSet,
            owned("e-a", "Experiment", "e", &exp_uid),
            now(),
        )
        .unwrap();
        api.create(
            Kind::Service,
            owned("e-a", "Experiment", "e", &exp_uid),
            now(),
        )
        .unwrap();
        api.create(
            Kind::ReplicaSet,
            owned("demo-1", "Rollout", "demo", &ro_uid),
            now(),
        )
        .unwrap();
        // Owned by an earlier Experiment of the same name.
        api.create(
            Kind::AnalysisRun,
            owned("e-x", "Experiment", "e", "old"),
            now(),
        )
        .unwrap();
        api.create(
            Kind::ReplicaSet,
            json!({"metadata": {"name": "plain"}}),
            now(),
        )
        .unwrap();
        api.take_changes();

        assert_eq!(
            collect(&mut api),
            vec![(Kind::AnalysisRun, "e-x".to_string())]
        );
        let deleted = api.delete(Kind::Rollout, "demo", None).unwrap();
        assert!(interested_in(
            &api,
            Kind::Rollout,
            &WatchEvent::Deleted(deleted)
        ));
        let mut gone = collect(&mut api);
        gone.sort();
        let want = [
            (Kind::ReplicaSet, "demo-1"),
            (Kind::ReplicaSet, "e-a"),
            (Kind::Service, "e-a"),
            (Kind::Experiment, "e"),
        ];
        assert_eq!(gone, want.map(|(k, n)| (k, n.to_string())));
        assert!(api.get(Kind::ReplicaSet, "plain").is_some());
    }
}
