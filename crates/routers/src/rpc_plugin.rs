//! Traffic-router plugins of `argo-rollouts-config` (Contour, Gloo, Consul, OpenShift routes,
//! Kong, Argo's samples, ...) as one more [`TrafficRouter`]: every name under
//! `trafficRouting.plugins` that no built-in router answers to.
//!
//! A plugin keeps its routes itself, out of sight. What it was last told for a Rollout is
//! kept as a router object of kind [`RouterKind::RpcPlugin`], which the controller holds (never
//! the API server): reading it gives what the plugin was told and confirmed, writing it makes
//! the plugin's calls for what changed, in Argo's order (`RemoveManagedRoutes`,
//! `SetHeaderRoute`, `SetMirrorRoute`, `UpdateHash`, `SetWeight`). So the engine decides for a
//! plugin exactly as for a built-in router, and the scale-down safety rule trusts the weight
//! the plugin last accepted.
//!
//! The object: `plugin` (its name), `config` (the Rollout's settings for it), `weight`,
//! `stableWeight` and `additional` (the weights last set), `hashes` (`canary`, `stable`),
//! `headerRoute` and `mirrorRoute` (the managed routes in place, or null), `rollout` (the
//! Rollout the calls pass); the controller adds `error` when the plugin cannot be called
//! (not configured, not installed) and `verified`, the plugin's `VerifyWeight` of the weight
//! it was told (null when the plugin does not verify).

use serde_json::{Value, json};
use sluice_api::rollout::RolloutTrafficRouting;

use crate::edits::Edits;
use crate::kinds::{ApiVersions, ObjectRef, RouterKind};
use crate::router::{Calls, PATH, Report, TrafficRouter, View, widest};
use crate::{Desired, ObservedWeight, REGISTRY};

pub struct RpcPlugins;

/// The plugin names of the Rollout that no built-in router serves: those no built-in router
/// answers to, and those `argo-rollouts-config` points at a binary.
fn plugins<'a>(
    routing: &'a RolloutTrafficRouting,
    versions: &'a ApiVersions,
) -> impl Iterator<Item = (&'a String, &'a Value)> {
    routing
        .plugins
        .iter()
        .flatten()
        .filter(|(name, _)| {
            versions.plugin_binaries.contains(name.as_str())
                || !REGISTRY
                    .iter()
                    .any(|r| r.is_plugin() && r.key() == name.as_str())
        })
}

/// The object of `plugin` for the Rollout.
pub fn object_ref(namespace: &str, rollout: &str, plugin: &str) -> ObjectRef {
    ObjectRef::new(RouterKind::RpcPlugin, namespace, format!("{rollout}/{plugin}"))
}

/// The plugin an object of kind [`RouterKind::RpcPlugin`] is of (its name after the Rollout's).
pub fn plugin_of(target: &ObjectRef) -> Option<&str> {
    (target.kind == RouterKind::RpcPlugin)
        .then(|| target.name.split_once('/').map(|(_, plugin)| plugin))
        .flatten()
}

fn each<'a>(view: &'a View<'a>) -> impl Iterator<Item = (ObjectRef, &'a String, &'a Value)> {
    plugins(view.routing, view.versions).map(|(name, config)| {
        (
            object_ref(view.namespace, view.name, name),
            name,
            config,
        )
    })
}

impl TrafficRouter for RpcPlugins {
    /// Not one key: every foreign name under `plugins`.
    fn key(&self) -> &'static str {
        "plugins"
    }

    fn configured(&self, routing: &RolloutTrafficRouting) -> bool {
        plugins(routing, &ApiVersions::default()).next().is_some()
    }

    fn serves(&self, routing: &RolloutTrafficRouting, versions: &ApiVersions) -> bool {
        plugins(routing, versions).next().is_some()
    }

    fn references(&self, view: &View<'_>) -> Vec<ObjectRef> {
        each(view).map(|(key, _, _)| key).collect()
    }

    fn check(&self, view: &View<'_>, _desired: &Desired) -> Result<(), String> {
        for (key, name, _) in each(view) {
            let at = format!("plugins.{name}");
            let object = view
                .objects
                .get(&key)
                .ok_or_else(|| format!("{PATH}.{at}: plugin {name} not configured in configmap"))?;
            if let Some(error) = object.get("error").and_then(Value::as_str) {
                return Err(format!("{PATH}.{at}: {error}"));
            }
        }
        Ok(())
    }

    /// The weights the plugin last accepted; nothing before it was told any.
    fn observed_weight(&self, view: &View<'_>, _desired: &Desired) -> Option<ObservedWeight> {
        widest(each(view).map(|(key, _, _)| {
            let object = view.objects.get(&key)?;
            let weight = |k: &str| object.get(k)?.as_i64().and_then(|w| i32::try_from(w).ok());
            Some(ObservedWeight {
                canary: weight("weight")?,
                stable: weight("stableWeight")?,
            })
        }))
    }

    /// What the plugins' `VerifyWeight` said of the weight they were last told (the controller
    /// asks when it reads the object): not verified while a plugin that verifies has not been
    /// told the weight wanted, or says no; nothing from a plugin that does not verify.
    fn weight_verified(
        &self,
        view: &View<'_>,
        desired: &Desired,
        _report: &mut Report<'_>,
    ) -> Option<bool> {
        let mut out = None;
        for (key, _, _) in each(view) {
            let Some(object) = view.objects.get(&key) else {
                continue;
            };
            let Some(verified) = object.get("verified").and_then(Value::as_bool) else {
                continue;
            };
            let told = object.get("weight").and_then(Value::as_i64) == Some(desired.weight.into());
            let this = verified && told;
            out = Some(out.unwrap_or(true) && this);
        }
        out
    }

    fn edit(&self, view: &View<'_>, calls: &Calls<'_>, edits: &mut Edits) -> Result<(), String> {
        let d = calls.desired;
        for (key, name, config) in each(view) {
            let empty = json!({});
            let observed = view.objects.get(&key).unwrap_or(&empty);
            let current = edits.current(&key, observed).clone();
            let kept = |k: &str| current.get(k).cloned().unwrap_or(Value::Null);
            let route = |step: Option<Value>, k: &str| {
                if calls.remove_managed_routes {
                    Value::Null
                } else {
                    step.unwrap_or_else(|| kept(k))
                }
            };
            let header = route(
                calls
                    .header_route
                    .and_then(|r| serde_json::to_value(r).ok()),
                "headerRoute",
            );
            let mirror = route(
                calls
                    .mirror_route
                    .and_then(|r| serde_json::to_value(r).ok()),
                "mirrorRoute",
            );
            let additional: Vec<Value> = d
                .additional
                .iter()
                .map(|a| {
                    json!({
                        "serviceName": a.service_name,
                        "podTemplateHash": a.pod_template_hash,
                        "weight": a.weight,
                    })
                })
                .collect();
            let wanted = json!({
                "plugin": name,
                "config": config,
                "weight": d.weight,
                "stableWeight": d.stable_weight(),
                "additional": additional,
                "hashes": {"canary": d.canary_hash, "stable": d.stable_hash},
                "headerRoute": header,
                "mirrorRoute": mirror,
            });
            let unchanged = wanted
                .as_object()
                .into_iter()
                .flatten()
                .all(|(k, v)| current.get(k) == Some(v));
            if unchanged {
                continue;
            }
            let mut object = wanted;
            object["rollout"] = serde_json::to_value(view.rollout).map_err(|e| e.to_string())?;
            edits.stamp(&key, object);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
