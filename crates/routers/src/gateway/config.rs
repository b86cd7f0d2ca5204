//! The plugin configuration under `trafficRouting.plugins["argoproj-labs/gatewayAPI"]`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;
use serde_json::Value;

use super::{PLUGIN_NAME, RouteKind};
use crate::RouterError;

/// Label the plugin puts on a route while a canary receives traffic through it.
pub const DEFAULT_IN_PROGRESS_LABEL_KEY: &str = "rollouts.argoproj.io/gatewayapi-canary";
/// Value of that label.
pub const DEFAULT_IN_PROGRESS_LABEL_VALUE: &str = "in-progress";

/// A route the Rollout shifts traffic on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteReference {
    pub kind: RouteKind,
    /// `apiVersion` to read and write it with.
    pub api_version: &'static str,
    pub name: String,
    /// Whether setHeaderRoute steps add header rules to it (and route removal cleans them).
    pub use_header_routes: bool,
}

/// A label selector of routes of one kind; the caller lists the matching routes in the
/// configured namespace and adds them with [`Config::add_selected`].
#[derive(Clone, Debug, PartialEq)]
pub struct RouteSelector {
    pub kind: RouteKind,
    pub selector: LabelSelector,
}

/// The parsed configuration, defaults applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    routes: Vec<RouteReference>,
    /// `namespace` of the routes; `None` means the Rollout's.
    pub namespace: Option<String>,
    pub selectors: Vec<RouteSelector>,
    pub disable_in_progress_label: bool,
    pub in_progress_label_key: String,
    pub in_progress_label_value: String,
}

impl Config {
    /// The routes by name, in the order the plugin processes them: HTTP, GRPC, TCP, TLS; in
    /// each kind the `…Routes` list, then the single `…Route`, then routes added from
    /// selectors.
    pub fn routes(&self) -> &[RouteReference] {
        &self.routes
    }

    /// Adds a route found through a selector, without header routes. A route already named
    /// in the configuration keeps its own entry, so it is not processed twice.
    pub fn add_selected(&mut self, kind: RouteKind, name: &str) {
        if self.routes.iter().any(|r| r.kind == kind && r.name == name) {
            return;
        }
        let at = self
            .routes
            .iter()
            .rposition(|r| r.kind <= kind)
            .map_or(0, |i| i + 1);
        self.routes
            .insert(at, reference(kind, name.to_string(), false));
    }

    /// The namespace of the routes: `namespace`, else the Rollout's.
    pub fn namespace<'a>(&'a self, rollout_namespace: &'a str) -> &'a str {
        self.namespace.as_deref().unwrap_or(rollout_namespace)
    }

    /// The plugin's error when there is no route at all. [`parse_config`] raises it when no
    /// route is named and no selector is given; a caller whose selectors matched nothing
    /// raises it through this.
    pub fn require_routes(&self) -> Result<(), RouterError> {
        if self.routes.is_empty() {
            Err(no_routes_error())
        } else {
            Ok(())
        }
    }
}

fn no_routes_error() -> RouterError {
    RouterError::new(
        "No routes configured. At least one of 'httpRoutes', 'grpcRoutes', 'tcpRoutes', \
         'tlsRoutes', 'httpRoute', 'grpcRoute', 'tcpRoute' or 'tlsRoute' must be set",
    )
}

fn reference(kind: RouteKind, name: String, use_header_routes: bool) -> RouteReference {
    RouteReference {
        kind,
        api_version: kind.api_version(),
        name,
        use_header_routes,
    }
}

/// The configuration as written; every key optional, unknown keys ignored, `null` the same as
/// absent.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Raw {
    http_route: Option<String>,
    grpc_route: Option<String>,
    tcp_route: Option<String>,
    tls_route: Option<String>,
    http_routes: Option<Vec<RawRoute>>,
    grpc_routes: Option<Vec<RawRoute>>,
    tcp_routes: Option<Vec<RawRoute>>,
    tls_routes: Option<Vec<RawRoute>>,
    namespace: Option<String>,
    http_route_selector: Option<LabelSelector>,
    grpc_route_selector: Option<LabelSelector>,
    tcp_route_selector: Option<LabelSelector>,
    tls_route_selector: Option<LabelSelector>,
    disable_in_progress_label: Option<bool>,
    in_progress_label_key: Option<String>,
    in_progress_label_value: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRoute {
    name: Option<String>,
    use_header_routes: Option<bool>,
}

/// Parses the plugin configuration. The single-route keys (`httpRoute`, …) are routes with
/// header routes; list entries have them only with `useHeaderRoutes: true`. Empty strings
/// count as unset, as Go's zero values do in the plugin.
pub fn parse_config(v: &Value) -> Result<Config, RouterError> {
    let raw: Raw = if v.is_null() {
        Raw::default()
    } else {
        Raw::deserialize(v)
            .map_err(|e| RouterError::new(format!("invalid {PLUGIN_NAME} configuration: {e}")))?
    };
    let non_empty = |s: Option<String>| s.filter(|s| !s.is_empty());
    let kinds = [
        (
            RouteKind::Http,
            raw.http_routes,
            raw.http_route,
            raw.http_route_selector,
        ),
        (
            RouteKind::Grpc,
            raw.grpc_routes,
            raw.grpc_route,
            raw.grpc_route_selector,
        ),
        (
            RouteKind::Tcp,
            raw.tcp_routes,
            raw.tcp_route,
            raw.tcp_route_selector,
        ),
        (
            RouteKind::Tls,
            raw.tls_routes,
            raw.tls_route,
            raw.tls_route_selector,
        ),
    ];
    let mut routes = Vec::new();
    let mut selectors = Vec::new();
    for (kind, list, single, selector) in kinds {
        for (i, route) in list.into_iter().flatten().enumerate() {
            let name = non_empty(route.name).ok_or_else(|| {
                RouterError::new(format!(
                    "invalid {PLUGIN_NAME} configuration: {}s[{i}].name is required",
                    kind.field()
                ))
            })?;
            routes.push(reference(
                kind,
                name,
                route.use_header_routes.unwrap_or(false),
            ));
        }
        if let Some(name) = non_empty(single) {
            routes.push(reference(kind, name, true));
        }
        if let Some(selector) = selector {
            selectors.push(RouteSelector { kind, selector });
        }
    }
    if routes.is_empty() && selectors.is_empty() {
        return Err(no_routes_error());
    }
    Ok(Config {
        routes,
        namespace: non_empty(raw.namespace),
        selectors,
        disable_in_progress_label: raw.disable_in_progress_label.unwrap_or(false),
        in_progress_label_key: non_empty(raw.in_progress_label_key)
            .unwrap_or_else(|| DEFAULT_IN_PROGRESS_LABEL_KEY.into()),
        in_progress_label_value: non_empty(raw.in_progress_label_value)
            .unwrap_or_else(|| DEFAULT_IN_PROGRESS_LABEL_VALUE.into()),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    fn names(cfg: &Config) -> Vec<(RouteKind, &'static str, &str, bool)> {
        cfg.routes()
            .iter()
            .map(|r| (r.kind, r.api_version, r.name.as_str(), r.use_header_routes))
            .collect()
    }

    #[test]
    fn single_http_route_with_defaults() {
        let cfg =
            parse_config(&json!({"httpRoute": "argo-rollouts-http-route", "namespace": "default"}))
                .unwrap();
        assert_eq!(
            names(&cfg),
            [(
                RouteKind::Http,
                "gateway.networking.k8s.io/v1",
                "argo-rollouts-http-route",
                true
            )]
        );
        assert_eq!(cfg.namespace("shop"), "default");
        assert!(!cfg.disable_in_progress_label);
        assert_eq!(
            cfg.in_progress_label_key,
            "rollouts.argoproj.io/gatewayapi-canary"
        );
        assert_eq!(cfg.in_progress_label_value, "in-progress");
        assert!(cfg.selectors.is_empty());
    }

    #[test]
    fn every_route_key() {
        let cfg = parse_config(&json!({
            "tlsRoute": "tls-one",
            "tcpRoutes": [{"name": "tcp-a"}, {"name": "tcp-b", "useHeaderRoutes": true}],
            "httpRoutes": [{"name": "http-a", "useHeaderRoutes": true}, {"name": "http-b"}],
            "httpRoute": "http-one",
            "grpcRoute": "grpc-one",
            "grpcRoutes": null,
            "disableInProgressLabel": true,
            "inProgressLabelKey": "example.com/canary",
            "inProgressLabelValue": "yes",
            "somethingElse": 1
        }))
        .unwrap();
        let v1 = "gateway.networking.k8s.io/v1";
        let v1alpha2 = "gateway.networking.k8s.io/v1alpha2";
        assert_eq!(
            names(&cfg),
            [
                (RouteKind::Http, v1, "http-a", true),
                (RouteKind::Http, v1, "http-b", false),
                (RouteKind::Http, v1, "http-one", true),
                (RouteKind::Grpc, v1, "grpc-one", true),
                (RouteKind::Tcp, v1alpha2, "tcp-a", false),
                (RouteKind::Tcp, v1alpha2, "tcp-b", true),
                (RouteKind::Tls, v1alpha2, "tls-one", true),
            ]
        );
        assert_eq!(cfg.namespace("shop"), "shop");
        assert!(cfg.disable_in_progress_label);
        assert_eq!(cfg.in_progress_label_key, "example.com/canary");
        assert_eq!(cfg.in_progress_label_value, "yes");
    }

    #[test]
    fn selectors_are_kept_for_the_caller() {
        let mut cfg = parse_config(&json!({
            "httpRouteSelector": {"matchLabels": {"app": "web"}},
            "tcpRouteSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
            "tcpRoute": "named-tcp"
        }))
        .unwrap();
        assert_eq!(cfg.selectors.len(), 2);
        assert_eq!(cfg.selectors[0].kind, RouteKind::Http);
        assert_eq!(
            cfg.selectors[0].selector.match_labels,
            Some(BTreeMap::from([("app".to_string(), "web".to_string())]))
        );
        assert_eq!(cfg.selectors[1].kind, RouteKind::Tcp);
        cfg.add_selected(RouteKind::Http, "found-http");
        cfg.add_selected(RouteKind::Tcp, "named-tcp");
        cfg.add_selected(RouteKind::Tcp, "found-tcp");
        let v1 = "gateway.networking.k8s.io/v1";
        let v1alpha2 = "gateway.networking.k8s.io/v1alpha2";
        assert_eq!(
            names(&cfg),
            [
                (RouteKind::Http, v1, "found-http", false),
                (RouteKind::Tcp, v1alpha2, "named-tcp", true),
                (RouteKind::Tcp, v1alpha2, "found-tcp", false),
            ]
        );
        assert_eq!(cfg.require_routes(), Ok(()));
    }

    #[test]
    fn selector_only_config_needs_routes_after_listing() {
        let cfg = parse_config(&json!({"grpcRouteSelector": {}})).unwrap();
        assert_eq!(cfg.require_routes(), Err(no_routes_error()));
    }

    #[test]
    fn errors() {
        let no_routes = "No routes configured. At least one of 'httpRoutes', 'grpcRoutes', \
                         'tcpRoutes', 'tlsRoutes', 'httpRoute', 'grpcRoute', 'tcpRoute' or \
                         'tlsRoute' must be set";
        let cases = [
            (json!({}), no_routes.to_string()),
            (json!(null), no_routes.to_string()),
            (
                json!({"httpRoute": "", "httpRoutes": []}),
                no_routes.to_string(),
            ),
            (json!({"namespace": "x"}), no_routes.to_string()),
            (
                json!({"httpRoutes": [{"useHeaderRoutes": true}]}),
                "invalid argoproj-labs/gatewayAPI configuration: httpRoutes[0].name is required"
                    .to_string(),
            ),
            (
                json!({"tlsRoutes": [{"name": "a"}, {"name": ""}]}),
                "invalid argoproj-labs/gatewayAPI configuration: tlsRoutes[1].name is required"
                    .to_string(),
            ),
        ];
        for (v, want) in cases {
            assert_eq!(parse_config(&v), Err(RouterError::new(want)), "{v}");
        }
        for v in [
            json!({"httpRoute": 3}),
            json!("httpRoute"),
            json!({"httpRoutes": {}}),
        ] {
            let err = parse_config(&v).unwrap_err();
            assert!(
                err.0
                    .starts_with("invalid argoproj-labs/gatewayAPI configuration: "),
                "{v}: {err}"
            );
        }
    }
}
