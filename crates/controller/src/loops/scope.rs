//! What this instance watches, the same for every loop: one namespace with `--namespaced`
//! (`--namespace`, else the client's), else all; and, of the kinds that carry it, the objects
//! labelled for its `--instance-id`.

use kube::{Api, Client, Resource};
use sluice_engine::labels::CONTROLLER_INSTANCE_ID;

use crate::args::Args;

/// The namespace watched with `--namespaced`; `None` for all.
pub fn watched_namespace(client: &Client, args: &Args) -> Option<String> {
    args.namespaced.then(|| {
        args.namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string())
    })
}

/// An `Api` of one namespace, or of all.
pub fn api_in<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// Label selector for the objects this instance manages (Argo's rule: without an instance id,
/// objects that carry one belong to somebody else).
pub fn instance_selector(instance_id: &str) -> String {
    if instance_id.is_empty() {
        format!("!{CONTROLLER_INSTANCE_ID}")
    } else {
        format!("{CONTROLLER_INSTANCE_ID}={instance_id}")
    }
}
