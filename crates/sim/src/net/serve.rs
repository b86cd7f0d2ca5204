//! The API server side: one request applied to the API model.

use jiff::Timestamp;
use serde_json::Value;
use sluice_controller::cluster::WriteError;
use sluice_routers::kinds::ObjectRef;

use crate::api_model::{ApiError, ApiServer, Endpoint, Kind};

use super::{Reply, Request, Response, to_write_error};
/// The API server handling one request. Deleting or evicting something already gone
/// succeeds, as the real writer treats it.
pub fn serve(api: &mut ApiServer, request: Request, now: Timestamp) -> Response {
    match request {
        Request::CreateReplicaSet(rs) => {
            let v = serde_json::to_value(&*rs).map_err(|e| WriteError::Api(e.to_string()))?;
            api.create(Kind::ReplicaSet, v, now)
                .map(|_| Reply::Done)
                .map_err(to_write_error)
        }
        Request::PatchReplicaSet { name, patch } => api
            .patch(Kind::ReplicaSet, &name, &patch, Endpoint::Main)
            .map(|_| Reply::Done)
            .map_err(to_write_error),
        Request::DeleteReplicaSet { name, uid } => {
            match api.delete(Kind::ReplicaSet, &name, uid.as_deref()) {
                Ok(_) | Err(ApiError::NotFound) => Ok(Reply::Done),
                Err(e) => Err(to_write_error(e)),
            }
        }
        Request::EvictPod { name, uid } => match api.delete(Kind::Pod, &name, uid.as_deref()) {
            Ok(_) | Err(ApiError::NotFound) => Ok(Reply::Done),
            Err(e) => Err(to_write_error(e)),
        },
        Request::PatchPod { name, patch } => api
            .patch(Kind::Pod, &name, &patch, Endpoint::Main)
            .map(|_| Reply::Done)
            .map_err(to_write_error),
        Request::ListPods { selector } => Ok(Reply::Pods(
            api.list(Kind::Pod)
                .into_iter()
                .filter(|p| matches_selector(p.pointer("/metadata/labels"), &selector))
                .filter_map(|p| serde_json::from_value(p).ok())
                .collect(),
        )),
        Request::GetService { name } => Ok(Reply::Service(
            api.get(Kind::Service, &name)
                .and_then(|v| serde_json::from_value(v.clone()).ok())
                .map(Box::new),
        )),
        Request::ListServices => Ok(Reply::Services(
            api.list(Kind::Service)
                .into_iter()
                .filter_map(|v| serde_json::from_value(v).ok())
                .collect(),
        )),
        Request::PatchService { name, patch } => api
            .patch(Kind::Service, &name, &patch, Endpoint::Main)
            .map(|_| Reply::Done)
            .map_err(to_write_error),
        Request::GetRollout { name } => Ok(Reply::Rollout(
            api.get(Kind::Rollout, &name)
                .and_then(|v| serde_json::from_value(v.clone()).ok())
                .map(Box::new),
        )),
        Request::PatchRollout { name, patch } => api
            .patch(Kind::Rollout, &name, &patch, Endpoint::Main)
            .map(|v| rv_reply(&v))
            .map_err(to_write_error),
        Request::PatchRolloutStatus { name, patch } => api
            .patch(Kind::Rollout, &name, &patch, Endpoint::Status)
            .map(|v| rv_reply(&v))
            .map_err(to_write_error),
        Request::ListAnalysisRuns => Ok(Reply::AnalysisRuns(
            api.list(Kind::AnalysisRun)
                .into_iter()
                .filter_map(|v| serde_json::from_value(v).ok())
                .collect(),
        )),
        Request::GetAnalysisTemplate { key } => {
            let (kind, spec) = if key.cluster_scope {
                (Kind::ClusterAnalysisTemplate, "/spec")
            } else {
                (Kind::AnalysisTemplate, "/spec")
            };
            Ok(Reply::Template(
                api.get(kind, &key.name)
                    .and_then(|v| v.pointer(spec))
                    .and_then(|v| serde_json::from_value(v.clone()).ok())
                    .map(Box::new),
            ))
        }
        Request::CreateAnalysisRun(run) => {
            let v = serde_json::to_value(&*run).map_err(|e| WriteError::Api(e.to_string()))?;
            api.create(Kind::AnalysisRun, v, now)
                .map(|_| Reply::Done)
                .map_err(to_write_error)
        }
        Request::PatchAnalysisRun { name, patch } => api
            .patch(Kind::AnalysisRun, &name, &patch, Endpoint::Main)
            .map(|_| Reply::Done)
            .map_err(to_write_error),
        Request::DeleteAnalysisRun { name, uid } => {
            match api.delete(Kind::AnalysisRun, &name, uid.as_deref()) {
                Ok(_) | Err(ApiError::NotFound) => Ok(Reply::Done),
                Err(e) => Err(to_write_error(e)),
            }
        }
        Request::GetRouterObject { target } => Ok(Reply::RouterObject(
            (target.namespace == NAMESPACE)
                .then(|| api.get(Kind::Router(target.kind), &target.name).cloned())
                .flatten()
                .map(Box::new),
        )),
        // The object is created or replaced under the name the request is addressed to.
        Request::CreateRouterObject { target, object } => {
            let object = addressed(&target, object)?;
            api.create(Kind::Router(target.kind), object, now)
                .map(|_| Reply::Done)
                .map_err(to_write_error)
        }
        Request::ReplaceRouterObject { target, object } => {
            let object = addressed(&target, object)?;
            api.replace(Kind::Router(target.kind), &object)
                .map(|_| Reply::Done)
                .map_err(to_write_error)
        }
        Request::DeleteRouterObject { target, uid } => {
            if target.namespace != NAMESPACE {
                return Ok(Reply::Done);
            }
            match api.delete(Kind::Router(target.kind), &target.name, uid.as_deref()) {
                Ok(_) | Err(ApiError::NotFound) => Ok(Reply::Done),
                Err(e) => Err(to_write_error(e)),
            }
        }
        Request::ListExperiments => Ok(Reply::Experiments(list_typed(api, Kind::Experiment))),
        Request::CreateExperiment(e) => create(api, Kind::Experiment, &*e, now),
        Request::PatchExperiment { name, patch } => api
            .patch(Kind::Experiment, &name, &patch, Endpoint::Main)
            .map(|_| Reply::Done)
            .map_err(to_write_error),
        Request::DeleteExperiment { name, uid } => {
            delete(api, Kind::Experiment, &name, uid.as_deref())
        }
        Request::ListReplicaSets => Ok(Reply::ReplicaSets(list_typed(api, Kind::ReplicaSet))),
        Request::CreateService(svc) => create(api, Kind::Service, &*svc, now),
        Request::DeleteService { name, uid } => delete(api, Kind::Service, &name, uid.as_deref()),
        Request::GetStatefulSet { name } => {
            let revisions = api
                .list(Kind::ControllerRevision)
                .into_iter()
                .filter(|r| crate::stateful_sets::owner(r) == Some(name.as_str()))
                .collect();
            Ok(Reply::StatefulSet(Box::new(
                sluice_engine::observed::StatefulSetObserved {
                    stateful_set: api.get(Kind::StatefulSet, &name).cloned(),
                    revisions,
                },
            )))
        }
        Request::ReplaceStatefulSet { object, .. } => api
            .replace(Kind::StatefulSet, &object)
            .map(|_| Reply::Done)
            .map_err(to_write_error),
        Request::GetDaemonSet { name } => {
            let daemon_set = api.get(Kind::DaemonSet, &name).cloned();
            let revisions = daemon_set
                .as_ref()
                .map(|ds| crate::daemon_sets::revisions_of(api, ds))
                .unwrap_or_default();
            Ok(Reply::DaemonSet(Box::new(
                sluice_engine::observed::DaemonSetObserved {
                    daemon_set,
                    revisions,
                },
            )))
        }
        Request::ReplaceDaemonSet { object, .. } => api
            .replace(Kind::DaemonSet, &object)
            .map(|_| Reply::Done)
            .map_err(to_write_error),
        Request::ListConfigCopies { uid } => super::config::list_copies(api, &uid),
        Request::GetConfigHash { source } => super::config::hash_of(api, &source),
        Request::CopyConfig {
            kind,
            source,
            hash,
            object,
        } => super::config::copy(api, kind, &source, &hash, object, now),
        Request::SetConfigOwners { kind, name, patch } => {
            super::config::set_owners(api, kind, &name, &patch)
        }
    }
}

/// Deletes `name` of `kind`, if it is still the object with `uid`; already gone is done.
fn delete(api: &mut ApiServer, kind: Kind, name: &str, uid: Option<&str>) -> Response {
    match api.delete(kind, name, uid) {
        Ok(_) | Err(ApiError::NotFound) => Ok(Reply::Done),
        Err(e) => Err(to_write_error(e)),
    }
}

/// Creates a typed object as it goes over the wire.
fn create<T: serde::Serialize>(
    api: &mut ApiServer,
    kind: Kind,
    obj: &T,
    now: Timestamp,
) -> Response {
    let v = serde_json::to_value(obj).map_err(|e| WriteError::Api(e.to_string()))?;
    api.create(kind, v, now)
        .map(|_| Reply::Done)
        .map_err(to_write_error)
}

/// Every object of a kind, typed; one that does not parse is left out.
fn list_typed<T: serde::de::DeserializeOwned>(api: &ApiServer, kind: Kind) -> Vec<T> {
    api.list(kind)
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect()
}

/// A router object written to `target`: refused outside the cluster's namespace (404) or when
/// its name is not the target's (the API server's 400 for a body naming another object).
fn addressed(target: &ObjectRef, object: Value) -> Result<Value, WriteError> {
    if target.namespace != NAMESPACE {
        return Err(WriteError::NotFound);
    }
    if crate::api_model::name_of(&object) != target.name {
        return Err(WriteError::Api(format!(
            "{target}: the body names {:?}",
            crate::api_model::name_of(&object)
        )));
    }
    Ok(object)
}

fn rv_reply(v: &Value) -> Reply {
    Reply::ResourceVersion(crate::api_model::rv_of(v).map(str::to_string))
}

/// The one namespace of the simulated cluster: router objects elsewhere do not exist.
pub const NAMESPACE: &str = "default";

/// Whether `labels` satisfy a `k=v,k2=v2` selector (the only form the engine produces here).
fn matches_selector(labels: Option<&Value>, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|term| {
        let Some((k, v)) = term.split_once('=') else {
            return false;
        };
        labels.and_then(|l| l.get(k)).and_then(Value::as_str) == Some(v)
    })
}
