//! Istio: weights in VirtualService routes (HTTP, TLS and TCP), DestinationRule subsets pointed
//! at pod-template hashes, and the managed header and mirror routes of the
//! `setHeaderRoute`/`setMirrorRoute` steps.
//!
//! Objects are the `networking.istio.io` VirtualService and DestinationRule as read from the
//! API, as JSON. Every function is pure: it returns the object to write (a full update, as Argo
//! sends) and the event to publish, or `Ok(None)` when the object is already as wanted. A
//! malformed object gives a [`RouterError`](crate::RouterError), never a panic.
//!
//! One job per file:
//! - [`namespaced_name`]: where a `virtualService.name` reference points;
//! - `value`: reading the objects without trusting their shape;
//! - `destination`: whether a route destination is canary, stable, an experiment or unknown;
//! - `select`: which routes of a VirtualService the Rollout weights, and their validation;
//! - [`virtual_service`]: `set_weight`; [`observed`]: `observed_weight`; [`check`]: the
//!   reference validation;
//! - [`destination_rule`]: subsets pointed at pod hashes;
//! - [`header_route`], [`mirror_route`], [`remove`]: the managed routes, with what they share
//!   in `managed_route`; `order`: their precedence; `canary_target`: where they send traffic.

mod adapter;
mod canary_target;
pub mod check;
mod destination;
pub mod destination_rule;
pub mod header_route;
mod managed_route;
pub mod mirror_route;
pub mod namespaced_name;
pub mod observed;
mod order;
pub mod remove;
mod select;
mod value;
pub mod virtual_service;

#[cfg(test)]
mod fixtures;

pub use adapter::Istio;
pub use check::check_routes;
pub use destination_rule::{subset_hashes, update_hash};
pub use header_route::set_header_route;
pub use mirror_route::set_mirror_route;
pub use namespaced_name::virtual_service_key;
pub use observed::observed_weight;
pub use remove::{has_http_routes, remove_managed_routes};
pub use virtual_service::set_weight;

/// Label on DestinationRule subsets (and pods) that selects one ReplicaSet's pods.
pub const POD_TEMPLATE_HASH: &str = "rollouts-pod-template-hash";

/// Annotation naming the Rollout that manages a DestinationRule; the cleanup worker looks for it.
pub const MANAGED_BY: &str = "argo-rollouts.argoproj.io/managed-by-rollouts";

/// Event reason of every VirtualService edit (with the space, as Argo spells it).
pub const VIRTUAL_SERVICE_UPDATED: &str = "Updated VirtualService";

/// Event reason of a DestinationRule subset rewrite.
pub const DESTINATION_RULE_UPDATED: &str = "UpdatedDestinationRule";

/// The stable weight of an Istio route is computed from 100: validation forbids
/// `maxTrafficWeight` with Istio, so `Desired::max_weight` is not consulted.
pub const TOTAL_WEIGHT: i64 = 100;
