//! `observed_weight`: the canary and stable weights a VirtualService gives right now, for the
//! scale-down safety rule, which must trust the router object rather than what was last
//! written.

use serde_json::Value;
use sluice_api::rollout::{IstioDestinationRule, IstioVirtualService};

use super::destination::{Classifier, Role};
use super::select::{self, Mirrors, SECTIONS};
use super::value;
use crate::{Desired, ObservedWeight};

/// The weights of the routes `set_weight` manages (HTTP, TLS and TCP, mirror routes included).
///
/// Each route gives the summed weight of its canary destinations and of its stable ones. When
/// every selected route agrees, that is the answer. When they disagree (a route edited by hand,
/// a write half done), the answer is the largest canary weight and the smallest stable weight
/// of any route: the traffic the canary may be receiving somewhere and the least the stable is
/// guaranteed everywhere, so that a safety check built on it errs on the side of keeping pods.
///
/// `None` when the routes cannot be selected (a named route is missing, a route lacks the canary
/// or the stable) or when no route is selected at all.
pub fn observed_weight(
    vs: &Value,
    vs_ref: &IstioVirtualService,
    dr: Option<&IstioDestinationRule>,
    desired: &Desired,
) -> Option<ObservedWeight> {
    let selection = select::weighted(vs, vs_ref, dr, desired, Mirrors::Include).ok()?;
    let classifier = Classifier::new(dr, desired);
    let mut weights = Vec::new();
    for section in SECTIONS {
        let Ok(Some(routes)) = value::routes(vs, section) else {
            continue;
        };
        for &i in selection.get(section) {
            if let Some(route) = routes.get(i) {
                weights.push(route_weight(value::destinations(route), &classifier));
            }
        }
    }
    let first = *weights.first()?;
    if weights.iter().all(|w| *w == first) {
        return Some(first);
    }
    Some(ObservedWeight {
        canary: weights
            .iter()
            .map(|w| w.canary)
            .max()
            .unwrap_or(first.canary),
        stable: weights
            .iter()
            .map(|w| w.stable)
            .min()
            .unwrap_or(first.stable),
    })
}

/// The canary and stable weights of one route.
fn route_weight(destinations: &[Value], classifier: &Classifier) -> ObservedWeight {
    let sum = |wanted: Role| {
        let total = destinations
            .iter()
            .filter(|d| classifier.role(d) == wanted)
            .map(value::weight)
            .fold(0_i64, i64::saturating_add);
        saturate(total)
    };
    ObservedWeight {
        canary: sum(Role::Canary),
        stable: sum(Role::Stable),
    }
}

fn saturate(weight: i64) -> i32 {
    i32::try_from(weight).unwrap_or(if weight < 0 { i32::MIN } else { i32::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::istio::fixtures::*;
    use crate::istio::set_weight;

    fn observed(
        vs: &str,
        reference: &IstioVirtualService,
        desired: &Desired,
    ) -> Option<ObservedWeight> {
        observed_weight(&yaml(vs), reference, None, desired)
    }

    #[test]
    fn agreeing_routes_give_their_weights() {
        let vs = HTTP_TLS_SPLIT_VS
            .replace("weight: 100", "weight: 70")
            .replace("weight: 0", "weight: 30");
        let mut reference = vs_ref("vs", &["primary"]);
        reference.tls_routes = Some(vec![tls_route(3000, &["istio-host-split"])]);
        assert_eq!(
            observed(&vs, &reference, &host_split(10)),
            Some(ObservedWeight {
                canary: 30,
                stable: 70
            })
        );
    }

    #[test]
    fn disagreeing_routes_give_the_most_canary_and_the_least_stable() {
        // HTTP at 90/10 (after a write), TLS still at 100/0.
        let mut reference = vs_ref("vs", &["primary"]);
        reference.tls_routes = Some(vec![tls_route(3000, &["istio-host-split"])]);
        let Ok(Some(edit)) = set_weight(
            &yaml(HTTP_TLS_SPLIT_VS),
            &vs_ref("vs", &["primary"]),
            None,
            &host_split(10),
        ) else {
            panic!("expected an edit")
        };
        let mut object = edit.object;
        object["spec"]["tls"][0]["route"][0]["weight"] = 95.into();
        object["spec"]["tls"][0]["route"][1]["weight"] = 5.into();
        assert_eq!(
            observed_weight(&object, &reference, None, &host_split(10)),
            Some(ObservedWeight {
                canary: 10,
                stable: 90
            })
        );
        object["spec"]["http"][0]["route"][0]["weight"] = 99.into();
        object["spec"]["http"][0]["route"][1]["weight"] = 1.into();
        assert_eq!(
            observed_weight(&object, &reference, None, &host_split(10)),
            Some(ObservedWeight {
                canary: 5,
                stable: 95
            })
        );
    }

    #[test]
    fn subsets_and_mirror_routes_count() {
        let vs = "
metadata: {name: vs}
spec:
  http:
  - name: mirror
    mirror: {host: svc, subset: canary}
    route:
    - {destination: {host: svc, subset: stable}, weight: 50}
    - {destination: {host: svc, subset: canary}, weight: 50}
  - name: primary
    route:
    - {destination: {host: svc, subset: stable}, weight: 80}
    - {destination: {host: svc, subset: canary}, weight: 20}
";
        let mut desired = subset_split(20);
        let reference = vs_ref("vs", &["primary"]);
        let dr = dr_ref(&[]);
        assert_eq!(
            observed_weight(&yaml(vs), &reference, Some(&dr), &desired),
            Some(ObservedWeight {
                canary: 20,
                stable: 80
            })
        );
        desired.managed_routes = vec!["mirror".into()];
        assert_eq!(
            observed_weight(&yaml(vs), &reference, Some(&dr), &desired),
            Some(ObservedWeight {
                canary: 50,
                stable: 50
            })
        );
    }

    #[test]
    fn nothing_to_read() {
        let reference = vs_ref("vs", &["missing"]);
        assert_eq!(observed(HOST_SPLIT_VS, &reference, &host_split(10)), None);
        assert_eq!(
            observed("metadata: {name: vs}", &vs_ref("vs", &[]), &host_split(10)),
            None
        );
        let mut desired = host_split(10);
        desired.canary_service = "elsewhere".into();
        assert_eq!(
            observed(HOST_SPLIT_VS, &vs_ref("vs", &["primary"]), &desired),
            None
        );
    }
}
