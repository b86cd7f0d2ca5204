//! `spec.strategy.canary.trafficRouting`: the service meshes and ingress controllers a canary
//! can shift traffic with.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::schema::FreeFormObject;

/// Traffic routers of a canary. More than one may be set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutTrafficRouting {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub istio: Option<IstioTrafficRouting>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nginx: Option<NginxTrafficRouting>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alb: Option<AlbTrafficRouting>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smi: Option<SmiTrafficRouting>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ambassador: Option<AmbassadorTrafficRouting>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_mesh: Option<AppMeshTrafficRouting>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traefik: Option<TraefikTrafficRouting>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apisix: Option<ApisixTrafficRouting>,
    /// Traffic-router plugins by `<org>/<name>`, each with its own configuration.
    #[schemars(with = "Option<FreeFormObject>")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugins: Option<BTreeMap<String, serde_json::Value>>,
    /// Routes the controller owns for header and mirror steps, highest precedence first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub managed_routes: Option<Vec<ManagedRoute>>,
    /// Total weight all routes add up to; 100 when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_traffic_weight: Option<i32>,
}

/// Default of `maxTrafficWeight`.
pub const DEFAULT_MAX_TRAFFIC_WEIGHT: i32 = 100;

impl RolloutTrafficRouting {
    /// `maxTrafficWeight`, defaulting to 100.
    pub fn max_traffic_weight(&self) -> i32 {
        self.max_traffic_weight
            .unwrap_or(DEFAULT_MAX_TRAFFIC_WEIGHT)
    }
}

/// A route managed for header or mirror steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedRoute {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Istio: weights in VirtualService routes, optionally with DestinationRule subsets.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IstioTrafficRouting {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_service: Option<IstioVirtualService>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_services: Option<Vec<IstioVirtualService>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_rule: Option<IstioDestinationRule>,
}

/// A VirtualService and the routes in it the controller adjusts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IstioVirtualService {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// HTTP route names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_routes: Option<Vec<TlsRoute>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_routes: Option<Vec<TcpRoute>>,
}

/// A TLS route selected by port and SNI hosts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsRoute {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sni_hosts: Option<Vec<String>>,
}

/// A TCP route selected by port.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TcpRoute {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<i64>,
}

/// A DestinationRule whose canary and stable subsets get the pod-template-hash label.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IstioDestinationRule {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_subset_name: Option<String>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stable_subset_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_subset_names: Option<Vec<String>>,
}

/// NGINX ingress: a canary Ingress cloned from the stable one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NginxTrafficRouting {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotation_prefix: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stable_ingress: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stable_ingresses: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_ingress_annotations: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_ingress_annotations: Option<BTreeMap<String, String>>,
}

/// AWS Load Balancer Controller: weighted forward actions on the Ingress.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AlbTrafficRouting {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingresses: Option<Vec<String>>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_port: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_service: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotation_prefix: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stickiness_config: Option<StickinessConfig>,
}

/// Target-group stickiness of the ALB forward action.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StickinessConfig {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<i64>,
}

/// Service Mesh Interface: a TrafficSplit.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SmiTrafficRouting {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_service: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic_split_name: Option<String>,
}

/// Ambassador: weighted `-canary` copies of Mappings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AmbassadorTrafficRouting {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mappings: Option<Vec<String>>,
}

/// AWS App Mesh: VirtualRouter weights and VirtualNode selectors.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppMeshTrafficRouting {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_service: Option<AppMeshVirtualService>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_node_group: Option<AppMeshVirtualNodeGroup>,
}

/// An App Mesh VirtualService and the route names to adjust.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppMeshVirtualService {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<String>>,
}

/// The canary and stable App Mesh VirtualNodes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppMeshVirtualNodeGroup {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_virtual_node_ref: Option<AppMeshVirtualNodeReference>,
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stable_virtual_node_ref: Option<AppMeshVirtualNodeReference>,
}

/// A VirtualNode by name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppMeshVirtualNodeReference {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Traefik: a weighted TraefikService.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TraefikTrafficRouting {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weighted_traefik_service_name: Option<String>,
}

/// Apache APISIX: backend weights of an ApisixRoute.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApisixTrafficRouting {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<ApisixRoute>,
}

/// An ApisixRoute and the HTTP rule names to adjust.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApisixRoute {
    #[schemars(required)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<String>>,
}
