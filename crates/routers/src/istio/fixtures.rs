//! Objects shared by the Istio tests: VirtualServices and DestinationRules of the Argo Rollouts
//! e2e corpus (v1.9.1 `test/e2e/istio`, `header-routing`, `mirror-route`), and the Rollout
//! settings that go with them.

use serde_json::Value;
use sluice_api::rollout::{IstioDestinationRule, IstioVirtualService, TcpRoute, TlsRoute};

use crate::{Desired, Destination};

/// Parses a YAML literal; test inputs are trusted.
pub(crate) fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).expect("test YAML parses")
}

/// `istio-host-split.yaml`: one named route, stable 100, canary 0.
pub(crate) const HOST_SPLIT_VS: &str = "
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: istio-host-split-vsvc
spec:
  hosts:
  - istio-host-split
  http:
  - name: primary
    route:
    - destination:
        host: istio-host-split-stable
      weight: 100
    - destination:
        host: istio-host-split-canary
      weight: 0
";

/// `istio-host-http-tls-split.yaml`: the same HTTP route plus a TLS route on port 3000.
pub(crate) const HTTP_TLS_SPLIT_VS: &str = "
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: istio-host-split-vsvc
spec:
  hosts:
  - istio-host-split
  http:
  - name: primary
    route:
    - destination:
        host: istio-host-split-stable
      weight: 100
    - destination:
        host: istio-host-split-canary
      weight: 0
  tls:
  - match:
    - port: 3000
      sniHosts:
      - istio-host-split
    route:
    - destination:
        host: istio-host-split-stable
      weight: 100
    - destination:
        host: istio-host-split-canary
      weight: 0
";

/// `istio-host-only-tls-split.yaml`: TLS only, although the Rollout also names `primary`.
pub(crate) const TLS_ONLY_VS: &str = "
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: istio-host-split-tls-vsvc
spec:
  hosts:
  - istio-host-split-tls
  tls:
  - match:
    - port: 3000
      sniHosts:
      - istio-host-split-tls
    route:
    - destination:
        host: istio-host-split-tls-stable
      weight: 100
    - destination:
        host: istio-host-split-tls-canary
      weight: 0
";

/// `istio-subset-split.yaml`: one named route split by subsets of one host.
pub(crate) const SUBSET_SPLIT_VS: &str = "
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: istio-subset-split-vsvc
spec:
  hosts:
  - istio-subset-split
  http:
  - name: primary
    route:
    - destination:
        host: istio-subset-split
        subset: stable
      weight: 100
    - destination:
        host: istio-subset-split
        subset: canary
      weight: 0
";

/// `istio-subset-split-single-route.yaml`: one unnamed route, no `routes` in the Rollout.
pub(crate) const SINGLE_ROUTE_VS: &str = "
apiVersion: networking.istio.io/v1alpha3
kind: VirtualService
metadata:
  name: istio-subset-split-single-route-vsvc
spec:
  hosts:
  - istio-subset-split-single-route
  http:
  - route:
    - destination:
        host: istio-subset-split-single-route
        subset: stable
      weight: 100
    - destination:
        host: istio-subset-split-single-route
        subset: canary
      weight: 0
";

/// `istio-subset-split.yaml`: the DestinationRule of the subset split.
pub(crate) const SUBSET_SPLIT_DR: &str = "
apiVersion: networking.istio.io/v1alpha3
kind: DestinationRule
metadata:
  name: istio-subset-split-destrule
spec:
  host: istio-subset-split
  subsets:
  - name: stable
    labels:
      app: istio-subset-split
  - name: canary
    labels:
      app: istio-subset-split
";

/// `header-routing/istio-hr-host.yaml` and `mirror-route/istio-mirror-host.yaml`: a gateway
/// VirtualService at stable 80, canary 20.
pub(crate) const ROLLOUTS_DEMO_VS: &str = "
apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata:
  name: rollouts-demo-vsvc
spec:
  gateways:
    - rollouts-demo-gateway
  hosts:
    - rollouts-demo.com
  http:
  - name: primary
    route:
    - destination:
        host: stable-service
      weight: 80
    - destination:
        host: canary-service
      weight: 20
";

/// A Rollout reference to a VirtualService naming HTTP routes.
pub(crate) fn vs_ref(name: &str, routes: &[&str]) -> IstioVirtualService {
    IstioVirtualService {
        name: Some(name.into()),
        routes: (!routes.is_empty()).then(|| routes.iter().map(|r| r.to_string()).collect()),
        tls_routes: None,
        tcp_routes: None,
    }
}

/// A `tlsRoutes[]` entry.
pub(crate) fn tls_route(port: i64, sni_hosts: &[&str]) -> TlsRoute {
    TlsRoute {
        port: Some(port),
        sni_hosts: Some(sni_hosts.iter().map(|h| h.to_string()).collect()),
    }
}

/// A `tcpRoutes[]` entry.
pub(crate) fn tcp_route(port: i64) -> TcpRoute {
    TcpRoute { port: Some(port) }
}

/// The subset-split DestinationRule reference (`canary`/`stable`).
pub(crate) fn dr_ref(additional: &[&str]) -> IstioDestinationRule {
    IstioDestinationRule {
        name: Some("istio-subset-split-destrule".into()),
        canary_subset_name: Some("canary".into()),
        stable_subset_name: Some("stable".into()),
        additional_subset_names: (!additional.is_empty())
            .then(|| additional.iter().map(|s| s.to_string()).collect()),
    }
}

/// The desired state of the host-split Rollouts at `weight`.
pub(crate) fn host_split(weight: i32) -> Desired {
    Desired {
        rollout: "istio-host-split".into(),
        namespace: "default".into(),
        canary_service: "istio-host-split-canary".into(),
        stable_service: "istio-host-split-stable".into(),
        canary_hash: "canary-hash".into(),
        stable_hash: "stable-hash".into(),
        weight,
        max_weight: 100,
        ..Desired::default()
    }
}

/// The desired state of the rollouts-demo Rollouts (header and mirror routes) at `weight`.
pub(crate) fn demo(weight: i32, managed_routes: &[&str]) -> Desired {
    Desired {
        rollout: "rollouts-demo".into(),
        canary_service: "canary-service".into(),
        stable_service: "stable-service".into(),
        weight,
        max_weight: 100,
        managed_routes: managed_routes.iter().map(|r| r.to_string()).collect(),
        ..Desired::default()
    }
}

/// The desired state of the subset-split Rollouts (no Services) at `weight`.
pub(crate) fn subset_split(weight: i32) -> Desired {
    Desired {
        rollout: "istio-subset-split".into(),
        canary_hash: "canary-hash".into(),
        stable_hash: "stable-hash".into(),
        weight,
        max_weight: 100,
        ..Desired::default()
    }
}

/// An experiment destination.
pub(crate) fn experiment(service: &str, weight: i32) -> Destination {
    Destination {
        service_name: service.into(),
        pod_template_hash: format!("{service}-hash"),
        weight,
    }
}

/// The `(host or subset, weight)` pairs of `spec.<section>[index].route`.
pub(crate) fn weights(vs: &Value, section: &str, index: usize) -> Vec<(String, Value)> {
    vs["spec"][section][index]["route"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            let destination = &d["destination"];
            let id = destination["subset"]
                .as_str()
                .or(destination["host"].as_str())
                .unwrap_or("")
                .to_string();
            (id, d["weight"].clone())
        })
        .collect()
}

/// `(id, weight)` pairs for comparing with [`weights`].
pub(crate) fn pairs(expected: &[(&str, i64)]) -> Vec<(String, Value)> {
    expected
        .iter()
        .map(|(id, w)| (id.to_string(), Value::from(*w)))
        .collect()
}

/// The names of the HTTP routes, in order.
pub(crate) fn route_names(vs: &Value) -> Vec<String> {
    vs["spec"]["http"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["name"].as_str().unwrap_or("").to_string())
        .collect()
}
