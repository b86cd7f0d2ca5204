//! AWS App Mesh as a [`TrafficRouter`]: weights of the VirtualRouter the VirtualService names,
//! and the canary and stable VirtualNodes pointed at pod hashes.

use serde_json::Value;
use sluice_api::rollout::{
    AppMeshTrafficRouting, AppMeshVirtualNodeReference, RolloutTrafficRouting,
};

use crate::edits::Edits;
use crate::kinds::{ObjectRef, RouterKind};
use crate::router::{Calls, Shares, SharesBy, TrafficRouter, View};
use crate::{Desired, ObservedWeight};

pub struct AppMesh;

struct Found<'a> {
    cfg: &'a AppMeshTrafficRouting,
    router: (ObjectRef, &'a Value),
    canary_node: (ObjectRef, &'a Value),
    stable_node: (ObjectRef, &'a Value),
}

fn virtual_service_ref(view: &View<'_>, cfg: &AppMeshTrafficRouting) -> ObjectRef {
    let name = cfg.virtual_service.as_ref().and_then(|v| v.name.as_deref());
    view.named(RouterKind::AppMeshVirtualService, name.unwrap_or_default())
}

fn node_refs(cfg: &AppMeshTrafficRouting) -> [Option<&AppMeshVirtualNodeReference>; 2] {
    let group = cfg.virtual_node_group.as_ref();
    [
        group.and_then(|g| g.canary_virtual_node_ref.as_ref()),
        group.and_then(|g| g.stable_virtual_node_ref.as_ref()),
    ]
}

/// The objects, with the VirtualRouter's routes checked when `check`.
fn find<'a>(view: &View<'a>, check: bool) -> Result<Found<'a>, String> {
    let cfg = view
        .routing
        .app_mesh
        .as_ref()
        .ok_or_else(|| "appMesh: not configured".to_string())?;
    let vs_key = virtual_service_ref(view, cfg);
    let vs = view.find("appMesh.virtualService.name", &vs_key)?;
    let (vr_name, vr_ns) =
        super::virtual_router_ref(vs, view.namespace).map_err(|e| e.to_string())?;
    let vr_key = ObjectRef::new(RouterKind::AppMeshVirtualRouter, vr_ns, vr_name);
    let vr = view.find("appMesh.virtualService.name", &vr_key)?;
    if check {
        super::check_routes(vr, cfg).map_err(|e| e.to_string())?;
    }
    let node = |field: &str, r: Option<&AppMeshVirtualNodeReference>| {
        let name = r.and_then(|r| r.name.as_deref()).unwrap_or_default();
        let key = view.named(RouterKind::AppMeshVirtualNode, name);
        let path = format!("appMesh.virtualNodeGroup.{field}.name");
        view.find(&path, &key).map(|o| (key, o))
    };
    let [canary, stable] = node_refs(cfg);
    let canary_node = node("canaryVirtualNodeRef", canary)?;
    let stable_node = node("stableVirtualNodeRef", stable)?;
    Ok(Found {
        cfg,
        router: (vr_key, vr),
        canary_node,
        stable_node,
    })
}

/// The pod hash a VirtualNode selects now.
fn node_hash(node: &Value) -> Option<String> {
    node.pointer("/spec/podSelector/matchLabels/rollouts-pod-template-hash")
        .and_then(Value::as_str)
        .map(str::to_string)
}

impl TrafficRouter for AppMesh {
    fn key(&self) -> &'static str {
        "appMesh"
    }

    fn configured(&self, routing: &RolloutTrafficRouting) -> bool {
        routing.app_mesh.is_some()
    }

    fn references(&self, view: &View<'_>) -> Vec<ObjectRef> {
        let Some(cfg) = view.routing.app_mesh.as_ref() else {
            return Vec::new();
        };
        let mut refs = Vec::new();
        if cfg
            .virtual_service
            .as_ref()
            .and_then(|v| v.name.as_deref())
            .is_some()
        {
            refs.push(virtual_service_ref(view, cfg));
        }
        for node in node_refs(cfg).into_iter().flatten() {
            if let Some(name) = node.name.as_deref() {
                refs.push(view.named(RouterKind::AppMeshVirtualNode, name));
            }
        }
        refs
    }

    /// The VirtualRouter, which the VirtualService's provider names.
    fn dependent_references(&self, view: &View<'_>) -> Vec<ObjectRef> {
        let Some(cfg) = view.routing.app_mesh.as_ref() else {
            return Vec::new();
        };
        if cfg
            .virtual_service
            .as_ref()
            .and_then(|v| v.name.as_deref())
            .is_none()
        {
            return Vec::new();
        }
        view.objects
            .get(&virtual_service_ref(view, cfg))
            .and_then(|vs| super::virtual_router_ref(vs, view.namespace).ok())
            .map(|(name, ns)| vec![ObjectRef::new(RouterKind::AppMeshVirtualRouter, ns, name)])
            .unwrap_or_default()
    }

    fn check(&self, view: &View<'_>, _desired: &Desired) -> Result<(), String> {
        find(view, true).map(|_| ())
    }

    fn observed_weight(&self, view: &View<'_>, desired: &Desired) -> Option<ObservedWeight> {
        let found = find(view, false).ok()?;
        super::observed_weight(found.router.1, found.cfg, view.namespace, desired)
    }

    /// The VirtualNodes, not the Services, decide which pods get each share.
    fn shares(&self, view: &View<'_>) -> Shares {
        let Ok(found) = find(view, false) else {
            return Shares::default();
        };
        Shares {
            by: SharesBy::Hashes {
                canary: node_hash(found.canary_node.1),
                stable: node_hash(found.stable_node.1),
            },
            also_named: Vec::new(),
        }
    }

    fn silent_reasons(&self) -> &'static [&'static str] {
        &[super::ROUTER_UPDATED_REASON, super::NODE_UPDATED_REASON]
    }

    fn edit(&self, view: &View<'_>, calls: &Calls<'_>, edits: &mut Edits) -> Result<(), String> {
        let d = calls.desired;
        let found = find(view, false)?;
        for (node, role) in [
            (&found.stable_node, super::NodeRole::Stable),
            (&found.canary_node, super::NodeRole::Canary),
        ] {
            let current = edits.current(&node.0, node.1).clone();
            edits.apply(&node.0, false, super::update_hash(&current, role, d))?;
        }
        let (key, router) = &found.router;
        let current = edits.current(key, router).clone();
        let r = super::set_weight(&current, found.cfg, view.namespace, d);
        edits.apply(key, false, r)
    }
}
