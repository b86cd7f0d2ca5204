//! The traffic-router plugins of `argo-rollouts-config`, behind the router objects of kind
//! `RpcPlugin` (`sluice_routers::rpc_plugin`): reading one gives what its plugin was last
//! told for the Rollout and accepted; writing one makes the plugin's calls for what changed,
//! in Argo's order, and keeps the object only when every call succeeded.
//!
//! What a plugin was told lives in this process: after a restart (or a change of leader) the
//! object reads empty, so the first reconcile tells the plugin everything again, as Argo's
//! controller does on every reconcile. Until then nothing is read back, and the engine keeps
//! every ReplicaSet the Rollout's Services select.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use sluice_plugins::{PluginHost, PluginKind};
use sluice_routers::kinds::ObjectRef;
use sluice_routers::rpc_plugin::plugin_of;

use super::WriteError;

/// What each plugin object was last told, by object.
#[derive(Default)]
pub struct RouterPlugins {
    host: Option<Arc<PluginHost>>,
    told: Mutex<BTreeMap<ObjectRef, Value>>,
}

impl RouterPlugins {
    /// The plugins of `host` (none: every plugin is "not configured").
    pub fn new(host: Option<Arc<PluginHost>>) -> Self {
        Self {
            host,
            told: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<ObjectRef, Value>> {
        self.told.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The object: what the plugin was told, with its `VerifyWeight` of the weight it was
    /// told (`verified`: null when it does not verify, false when the call fails), or why it
    /// cannot be called.
    pub async fn read(&self, target: &ObjectRef) -> Value {
        let plugin = plugin_of(target).unwrap_or_default();
        let host = match &self.host {
            Some(host) if host.has(PluginKind::TrafficRouter, plugin) => host,
            _ => return json!({ "error": format!("plugin {plugin} not configured in configmap") }),
        };
        if let Some(error) = host.install_error(PluginKind::TrafficRouter, plugin) {
            return json!({ "error": error });
        }
        let Some(mut told) = self.lock().get(target).cloned() else {
            return json!({});
        };
        let args = json!({
            "rollout": told.get("rollout").cloned().unwrap_or(Value::Null),
            "desiredWeight": told.get("weight").cloned().unwrap_or(json!(0)),
            "additionalDestinations": told.get("additional").cloned().unwrap_or(json!([])),
        });
        let answer = host
            .call(PluginKind::TrafficRouter, plugin, "VerifyWeight", args)
            .await;
        let verified = match answer {
            Ok(a)
                if a.get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty() =>
            {
                a.get("verified").cloned().unwrap_or(Value::Null)
            }
            // Not known to be verified: the step waits, and the weight is asked again.
            _ => Value::Bool(false),
        };
        if let Some(object) = told.as_object_mut() {
            object.insert("verified".to_owned(), verified);
        }
        told
    }

    /// Tells the plugin what changed from what it was told; the object is kept once every
    /// call succeeded (a failed call leaves it as it was, so the next reconcile tries again).
    pub async fn write(&self, target: &ObjectRef, object: &Value) -> Result<(), WriteError> {
        let plugin = plugin_of(target).unwrap_or_default();
        let Some(host) = &self.host else {
            return Err(WriteError::Api(format!(
                "plugin {plugin} not configured in configmap"
            )));
        };
        let before = self
            .lock()
            .get(target)
            .cloned()
            .unwrap_or_else(|| json!({}));
        for (method, args) in calls(&before, object) {
            let answer = host
                .call(PluginKind::TrafficRouter, plugin, method, args)
                .await
                .map_err(|e| WriteError::Api(e.to_string()))?;
            if let Some(error) = answer
                .get("error")
                .and_then(Value::as_str)
                .filter(|e| !e.is_empty())
            {
                return Err(WriteError::Api(format!(
                    "{method} of plugin {plugin} failed: {error}"
                )));
            }
        }
        self.lock().insert(target.clone(), object.clone());
        Ok(())
    }
}

/// The calls that bring the plugin from `before` to `after`, in Argo's order: managed routes
/// removed, the header route, the mirror route, the pod hashes, the weight.
fn calls(before: &Value, after: &Value) -> Vec<(&'static str, Value)> {
    let changed = |k: &str| before.get(k) != after.get(k);
    let is_set = |v: &Value, k: &str| v.get(k).is_some_and(|r| !r.is_null());
    let args = |extra: Value| {
        let mut a = json!({
            "rollout": after.get("rollout").cloned().unwrap_or(Value::Null),
            "additionalDestinations": after.get("additional").cloned().unwrap_or(json!([])),
        });
        if let (Some(a), Value::Object(extra)) = (a.as_object_mut(), extra) {
            a.extend(extra);
        }
        a
    };
    let mut out = Vec::new();
    let removed = |k: &str| is_set(before, k) && !is_set(after, k);
    if removed("headerRoute") || removed("mirrorRoute") {
        out.push(("RemoveManagedRoutes", args(json!({}))));
    }
    if changed("headerRoute") && is_set(after, "headerRoute") {
        out.push((
            "SetHeaderRoute",
            args(json!({"setHeaderRoute": after["headerRoute"]})),
        ));
    }
    if changed("mirrorRoute") && is_set(after, "mirrorRoute") {
        out.push((
            "SetMirrorRoute",
            args(json!({"setMirrorRoute": after["mirrorRoute"]})),
        ));
    }
    if changed("hashes") || changed("additional") {
        let hash = |k: &str| after.pointer(&format!("/hashes/{k}")).cloned();
        out.push((
            "UpdateHash",
            args(json!({"canaryHash": hash("canary"), "stableHash": hash("stable")})),
        ));
    }
    if changed("weight") || changed("additional") {
        out.push((
            "SetWeight",
            args(json!({"desiredWeight": after.get("weight").cloned().unwrap_or(json!(0))})),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(weight: i32, header: Value) -> Value {
        json!({
            "weight": weight, "stableWeight": 100 - weight, "additional": [],
            "hashes": {"canary": "c1", "stable": "s1"}, "headerRoute": header,
            "mirrorRoute": null, "rollout": {"metadata": {"name": "web"}},
        })
    }

    fn methods(before: &Value, after: &Value) -> Vec<&'static str> {
        calls(before, after).into_iter().map(|(m, _)| m).collect()
    }

    #[test]
    fn what_changed_is_told_in_argos_order() {
        let header = json!({"name": "beta"});
        assert_eq!(
            methods(&json!({}), &object(20, header.clone())),
            ["SetHeaderRoute", "UpdateHash", "SetWeight"]
        );
        assert_eq!(
            methods(&object(20, header.clone()), &object(40, header.clone())),
            ["SetWeight"]
        );
        assert_eq!(
            methods(&object(40, header), &object(40, Value::Null)),
            ["RemoveManagedRoutes"]
        );
        assert!(methods(&object(40, Value::Null), &object(40, Value::Null)).is_empty());
        let (_, args) = calls(&json!({}), &object(20, Value::Null)).pop().unwrap();
        assert_eq!(args["desiredWeight"], 20);
        assert_eq!(args["rollout"]["metadata"]["name"], "web");
        assert_eq!(args["additionalDestinations"], json!([]));
    }

    #[test]
    fn a_plugin_not_configured_reads_as_that_error() {
        let plugins = RouterPlugins::new(None);
        let target = sluice_routers::rpc_plugin::object_ref("shop", "web", "acme/router");
        assert_eq!(
            futures::executor::block_on(plugins.read(&target)),
            json!({"error": "plugin acme/router not configured in configmap"})
        );
        let err = futures::executor::block_on(plugins.write(&target, &object(1, Value::Null)));
        assert!(matches!(err, Err(WriteError::Api(_))));
    }
}
