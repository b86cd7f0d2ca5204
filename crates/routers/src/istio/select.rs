//! Which routes of a VirtualService carry the Rollout's weights, and whether each of them has
//! somewhere to send the canary and the stable traffic. `set_weight`, `observed_weight` and the
//! reference validation all select the same way; only `set_weight` (and what reads its result
//! back) adds the managed mirror routes, which copy the weights of the route they mirror.

use std::collections::BTreeSet;

use serde_json::Value;
use sluice_api::rollout::{IstioDestinationRule, IstioVirtualService, TcpRoute, TlsRoute};

use super::destination::host_label;
use super::value::{self, Section};
use crate::{Desired, RouterError};

/// Whether managed mirror routes join the selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mirrors {
    Include,
    Exclude,
}

/// The selected route indexes of every section, in the order they are weighted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Selection {
    pub(crate) http: Vec<usize>,
    pub(crate) tls: Vec<usize>,
    pub(crate) tcp: Vec<usize>,
}

impl Selection {
    pub(crate) fn get(&self, section: Section) -> &[usize] {
        match section {
            Section::Http => &self.http,
            Section::Tls => &self.tls,
            Section::Tcp => &self.tcp,
        }
    }

    fn set(&mut self, section: Section, indexes: Vec<usize>) {
        match section {
            Section::Http => self.http = indexes,
            Section::Tls => self.tls = indexes,
            Section::Tcp => self.tcp = indexes,
        }
    }
}

/// The sections in the order Argo processes them.
pub(crate) const SECTIONS: [Section; 3] = [Section::Http, Section::Tls, Section::Tcp];

/// Selects and validates the routes of every section present in the VirtualService.
pub(crate) fn weighted(
    vs: &Value,
    vs_ref: &IstioVirtualService,
    dr: Option<&IstioDestinationRule>,
    desired: &Desired,
    mirrors: Mirrors,
) -> Result<Selection, RouterError> {
    let mut selection = Selection::default();
    for section in SECTIONS {
        if let Some(indexes) = section_routes(vs, section, vs_ref, dr, desired, mirrors)? {
            selection.set(section, indexes);
        }
    }
    Ok(selection)
}

/// Selects and validates the routes of one section; `None` when the VirtualService has no such
/// section, which is then left alone (a TLS-only VirtualService may still name HTTP routes).
pub(crate) fn section_routes(
    vs: &Value,
    section: Section,
    vs_ref: &IstioVirtualService,
    dr: Option<&IstioDestinationRule>,
    desired: &Desired,
    mirrors: Mirrors,
) -> Result<Option<Vec<usize>>, RouterError> {
    let Some(routes) = value::routes(vs, section)? else {
        return Ok(None);
    };
    let indexes = match section {
        Section::Http => http(
            routes,
            vs_ref.routes.as_deref().unwrap_or(&[]),
            &desired.managed_routes,
            mirrors,
        )?,
        Section::Tls => tls(routes, vs_ref.tls_routes.as_deref().unwrap_or(&[]))?,
        Section::Tcp => tcp(routes, vs_ref.tcp_routes.as_deref().unwrap_or(&[]))?,
    };
    for &i in &indexes {
        validate_route(&routes[i], dr, desired)?;
    }
    Ok(Some(indexes))
}

/// The error when a route list may be omitted only because the VirtualService leaves no choice.
fn omitted(section: Section) -> RouterError {
    let field = match section {
        Section::Http => "routes",
        Section::Tls => "tlsRoutes",
        Section::Tcp => "tcpRoutes",
    };
    RouterError::new(format!(
        "spec.{}[] should be set in VirtualService and it must have exactly one route when \
         omitting spec.strategy.canary.trafficRouting.istio.virtualService.{field}",
        section.key()
    ))
}

fn push_unique(indexes: &mut Vec<usize>, i: usize) {
    if !indexes.contains(&i) {
        indexes.push(i);
    }
}

/// HTTP routes: the named ones (each must exist), or, when none are named, the only route of
/// the VirtualService or else its first unnamed route. The managed routes (header and mirror
/// routes) do not count towards "only": one route besides them must remain. Managed mirror
/// routes carry a copy of the weighted destinations and join the selection when asked.
fn http(
    routes: &[Value],
    names: &[String],
    managed: &[String],
    mirrors: Mirrors,
) -> Result<Vec<usize>, RouterError> {
    let is_managed = |route: &Value| managed.iter().any(|m| m == value::name(route));
    let mut indexes = Vec::new();
    if names.is_empty() {
        if routes.iter().filter(|r| !is_managed(r)).count() != 1 {
            return Err(omitted(Section::Http));
        }
        if routes.len() == 1 {
            indexes.push(0);
        } else if let Some(i) = routes.iter().position(|r| value::name(r).is_empty()) {
            indexes.push(i);
        }
    } else {
        for name in names {
            let Some(i) = routes.iter().position(|r| value::name(r) == name) else {
                return Err(RouterError::new(format!(
                    "HTTP Route '{name}' is not found in the defined Virtual Service."
                )));
            };
            push_unique(&mut indexes, i);
        }
    }
    if mirrors == Mirrors::Include {
        for (i, route) in routes.iter().enumerate() {
            let mirrored = route.get("mirror").is_some_and(|m| !m.is_null());
            if mirrored && !value::name(route).is_empty() && is_managed(route) {
                push_unique(&mut indexes, i);
            }
        }
    }
    Ok(indexes)
}

/// The distinct ports of a TLS or TCP route's `match[]` (an absent port reads as 0).
fn match_ports(route: &Value) -> BTreeSet<i64> {
    matches(route)
        .map(|m| m.get("port").and_then(Value::as_i64).unwrap_or(0))
        .collect()
}

/// The SNI hosts of all `match[]` entries of a TLS route.
fn match_sni_hosts(route: &Value) -> BTreeSet<&str> {
    matches(route)
        .filter_map(|m| m.get("sniHosts").and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

fn matches(route: &Value) -> impl Iterator<Item = &Value> {
    route
        .get("match")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// A route matches a port when its `match[]` names exactly that one port.
fn on_port(route: &Value, port: Option<i64>) -> bool {
    let ports = match_ports(route);
    ports.len() == 1 && ports.contains(&port.unwrap_or(0))
}

/// TLS and TCP routes are chosen by their match; all matching entries are weighted.
fn by_match(
    routes: &[Value],
    section: Section,
    configured: bool,
    is_match: impl Fn(&Value) -> bool,
) -> Result<Vec<usize>, RouterError> {
    if !configured {
        return if routes.len() == 1 {
            Ok(vec![0])
        } else {
            Err(omitted(section))
        };
    }
    let indexes: Vec<usize> = (0..routes.len())
        .filter(|&i| is_match(&routes[i]))
        .collect();
    if indexes.is_empty() {
        return Err(RouterError::new(format!(
            "No matching {} routes found in the defined Virtual Service.",
            section.label()
        )));
    }
    Ok(indexes)
}

/// TLS routes: a route matches a `tlsRoutes[]` entry by its one port and its exact set of
/// SNI hosts.
fn tls(routes: &[Value], wanted: &[TlsRoute]) -> Result<Vec<usize>, RouterError> {
    by_match(routes, Section::Tls, !wanted.is_empty(), |route| {
        let hosts = match_sni_hosts(route);
        wanted.iter().any(|w| {
            let wanted_hosts: BTreeSet<&str> =
                w.sni_hosts.iter().flatten().map(String::as_str).collect();
            on_port(route, w.port) && hosts == wanted_hosts
        })
    })
}

/// TCP routes: a route matches a `tcpRoutes[]` entry by its one port.
fn tcp(routes: &[Value], wanted: &[TcpRoute]) -> Result<Vec<usize>, RouterError> {
    by_match(routes, Section::Tcp, !wanted.is_empty(), |route| {
        wanted.iter().any(|w| on_port(route, w.port))
    })
}

/// A destination's host as compared with a Service name.
fn host_of(destination: &Value) -> &str {
    host_label(value::host(destination))
}

/// A weighted route must reach both sides: the two subsets when a DestinationRule is used,
/// the two Services otherwise. Canary is checked first.
fn validate_route(
    route: &Value,
    dr: Option<&IstioDestinationRule>,
    desired: &Desired,
) -> Result<(), RouterError> {
    let destinations = value::destinations(route);
    let has = |wanted: &str, field: fn(&Value) -> &str| {
        !wanted.is_empty() && destinations.iter().any(|d| field(d) == wanted)
    };
    let host: fn(&Value) -> &str = host_of;
    let subset: fn(&Value) -> &str = value::subset;
    if let Some(dr) = dr {
        let canary = dr.canary_subset_name.as_deref().unwrap_or("");
        let stable = dr.stable_subset_name.as_deref().unwrap_or("");
        if !has(canary, subset) {
            return Err(RouterError::new(format!(
                "Canary DestinationRule subset '{canary}' not found in route"
            )));
        }
        if !has(stable, subset) {
            return Err(RouterError::new(format!(
                "Stable DestinationRule subset '{stable}' not found in route"
            )));
        }
    } else {
        if !has(&desired.canary_service, host) {
            return Err(RouterError::new(format!(
                "Canary Service '{}' not found in route",
                desired.canary_service
            )));
        }
        if !has(&desired.stable_service, host) {
            return Err(RouterError::new(format!(
                "Stable Service '{}' not found in route",
                desired.stable_service
            )));
        }
    }
    Ok(())
}
