use std::collections::BTreeMap;

use serde_json::json;
use sluice_api::rollout::{Rollout, SetHeaderRoute};

use super::*;
use crate::edits::Write;
use crate::kinds::ApiVersions;

fn rollout(plugins: Value) -> Rollout {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"strategy": {"canary": {
            "canaryService": "web-canary", "stableService": "web-stable",
            "trafficRouting": {"plugins": plugins}
        }}}
    }))
    .unwrap()
}

fn desired(weight: i32) -> Desired {
    Desired {
        rollout: "web".into(),
        namespace: "shop".into(),
        canary_hash: "c1".into(),
        stable_hash: "s1".into(),
        weight,
        max_weight: 100,
        ..Desired::default()
    }
}

/// The writes of one edit.
fn edit(
    ro: &Rollout,
    objects: &BTreeMap<ObjectRef, Value>,
    d: &Desired,
    header: Option<&SetHeaderRoute>,
    remove: bool,
) -> Vec<(ObjectRef, Write)> {
    let versions = ApiVersions::default();
    let view = View::of(ro, &versions, objects, Default::default()).unwrap();
    let calls = Calls {
        desired: d,
        remove_managed_routes: remove,
        step_route_names: Vec::new(),
        header_route: header,
        mirror_route: None,
        previous_additional: Vec::new(),
        versions: &versions,
        rollout_name: "web",
        now: jiff::Timestamp::UNIX_EPOCH,
    };
    let mut edits = Edits::default();
    RpcPlugins.edit(&view, &calls, &mut edits).unwrap();
    edits.into_writes()
}

fn key() -> ObjectRef {
    object_ref("shop", "web", "acme/router")
}

#[test]
fn every_foreign_plugin_name_is_a_plugin_router_and_the_gateway_api_is_not() {
    let ro = rollout(json!({"acme/router": {"x": 1}, "argoproj-labs/gatewayAPI": {}}));
    let versions = ApiVersions::default();
    let empty = BTreeMap::new();
    let view = View::of(&ro, &versions, &empty, Default::default()).unwrap();
    assert!(RpcPlugins.configured(view.routing));
    let gateway_only = rollout(json!({"argoproj-labs/gatewayAPI": {}}));
    let view = View::of(&gateway_only, &versions, &empty, Default::default()).unwrap();
    assert!(!RpcPlugins.configured(view.routing));
    let view = View::of(&ro, &versions, &empty, Default::default()).unwrap();
    assert_eq!(RpcPlugins.references(&view), [key()]);
    assert_eq!(plugin_of(&key()), Some("acme/router"));
}

#[test]
fn a_weight_is_written_once_and_read_back_as_the_plugin_accepted_it() {
    let ro = rollout(json!({"acme/router": {"stableIngress": "web"}}));
    let mut objects = BTreeMap::from([(key(), json!({}))]);
    let writes = edit(&ro, &objects, &desired(20), None, false);
    let [(target, Write::Update(object))] = writes.as_slice() else {
        panic!("{writes:?}");
    };
    assert_eq!(target, &key());
    assert_eq!(object["weight"], 20);
    assert_eq!(object["stableWeight"], 80);
    assert_eq!(object["hashes"], json!({"canary": "c1", "stable": "s1"}));
    assert_eq!(object["config"], json!({"stableIngress": "web"}));
    assert_eq!(object["rollout"]["metadata"]["name"], "web");

    // Nothing read back before the plugin accepted a weight.
    let versions = ApiVersions::default();
    let view = View::of(&ro, &versions, &objects, Default::default()).unwrap();
    assert_eq!(RpcPlugins.observed_weight(&view, &desired(20)), None);

    // Once accepted, the same wish writes nothing and the weight reads back.
    objects.insert(key(), object.clone());
    assert!(edit(&ro, &objects, &desired(20), None, false).is_empty());
    let view = View::of(&ro, &versions, &objects, Default::default()).unwrap();
    assert_eq!(
        RpcPlugins.observed_weight(&view, &desired(20)),
        Some(ObservedWeight {
            canary: 20,
            stable: 80
        })
    );
}

#[test]
fn a_header_route_stays_until_the_managed_routes_are_removed() {
    let ro = rollout(json!({"acme/router": {}}));
    let header: SetHeaderRoute =
        serde_json::from_value(json!({"name": "beta", "match": [{"headerName": "x-beta"}]}))
            .unwrap();
    let mut objects = BTreeMap::from([(key(), json!({}))]);
    let writes = edit(&ro, &objects, &desired(0), Some(&header), false);
    let Write::Update(object) = &writes[0].1 else {
        panic!()
    };
    assert_eq!(object["headerRoute"]["name"], "beta");
    objects.insert(key(), object.clone());
    // A later step (no header route of its own) keeps it.
    assert!(edit(&ro, &objects, &desired(0), None, false).is_empty());
    let writes = edit(&ro, &objects, &desired(0), None, true);
    let Write::Update(object) = &writes[0].1 else {
        panic!()
    };
    assert_eq!(object["headerRoute"], Value::Null);
}

#[test]
fn a_plugin_that_cannot_be_called_is_the_reconciles_error() {
    let ro = rollout(json!({"acme/router": {}}));
    let versions = ApiVersions::default();
    let objects = BTreeMap::from([(
        key(),
        json!({"error": "plugin acme/router not configured in configmap"}),
    )]);
    let view = View::of(&ro, &versions, &objects, Default::default()).unwrap();
    assert_eq!(
        RpcPlugins.check(&view, &desired(0)).unwrap_err(),
        "spec.strategy.canary.trafficRouting.plugins.acme/router: plugin acme/router not configured in configmap"
    );
    let empty = BTreeMap::new();
    let view = View::of(&ro, &versions, &empty, Default::default()).unwrap();
    assert!(RpcPlugins.check(&view, &desired(0)).is_err());
}

#[test]
fn a_plugin_that_verifies_holds_the_weight_until_it_confirms_it() {
    let ro = rollout(json!({"acme/router": {}}));
    let versions = ApiVersions::default();
    let verified = |object: Value, weight: i32| {
        let objects = BTreeMap::from([(key(), object)]);
        let view = View::of(&ro, &versions, &objects, Default::default()).unwrap();
        let mut status = Default::default();
        let mut report = crate::Report {
            status: &mut status,
            events: Vec::new(),
        };
        RpcPlugins.weight_verified(&view, &desired(weight), &mut report)
    };
    // A plugin that does not verify says nothing.
    assert_eq!(verified(json!({"weight": 20, "verified": null}), 20), None);
    assert_eq!(verified(json!({"weight": 20, "verified": true}), 20), Some(true));
    assert_eq!(verified(json!({"weight": 20, "verified": false}), 20), Some(false));
    // Confirmed for a weight it was told before the one wanted now: not yet.
    assert_eq!(verified(json!({"weight": 20, "verified": true}), 40), Some(false));
}

#[test]
fn the_gateway_api_pointed_at_a_binary_is_served_by_the_binary() {
    let gateway = "argoproj-labs/gatewayAPI";
    let ro = rollout(json!({gateway: {"httpRoute": "web"}}));
    let built_in = ApiVersions::default();
    let binary = ApiVersions {
        plugin_binaries: [gateway.to_owned()].into(),
        ..ApiVersions::default()
    };
    let empty = BTreeMap::new();
    let serving = |versions: &ApiVersions| -> Vec<&'static str> {
        let view = View::of(&ro, versions, &empty, Default::default()).unwrap();
        REGISTRY
            .iter()
            .filter(|r| r.serves(view.routing, view.versions))
            .map(|r| r.key())
            .collect()
    };
    assert_eq!(serving(&built_in), [gateway]);
    assert_eq!(serving(&binary), ["plugins"]);
    let view = View::of(&ro, &binary, &empty, Default::default()).unwrap();
    assert_eq!(
        RpcPlugins.references(&view),
        [object_ref("shop", "web", gateway)]
    );
}
