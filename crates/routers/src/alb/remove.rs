//! `remove_managed_routes`: take every header route of the Rollout off an Ingress, when the
//! Rollout is promoted, aborted or its canary has no pods.

use serde_json::Value;
use sluice_api::rollout::AlbTrafficRouting;

use super::{action_key, condition_key, ingress, managed};
use crate::{Desired, EditResult};

/// The Ingress without the action and condition annotations of every route in
/// `managedRoutes`, without their keys in the Rollout's managed list, and without their paths.
/// The weights' action is kept. `None` when there are no managed routes or none is on the
/// Ingress.
pub fn remove_managed_routes(
    ingress: &Value,
    cfg: &AlbTrafficRouting,
    desired: &Desired,
) -> EditResult {
    let routes: Vec<&str> = desired
        .managed_routes
        .iter()
        .map(String::as_str)
        .filter(|r| !r.is_empty())
        .collect();
    if routes.is_empty() {
        return Ok(None);
    }
    let name = ingress::name(ingress);
    let mut annotations = ingress::annotations(ingress)?;
    let mut keys = Vec::with_capacity(2 * routes.len());
    for route in &routes {
        for key in [action_key(cfg, route), condition_key(cfg, route)] {
            annotations.shift_remove(&key);
            keys.push(key);
        }
    }
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    managed::remove(&mut annotations, &desired.rollout, &keys, name)?;
    let mut updated = ingress::with_annotations(ingress, annotations)?;
    for route in &routes {
        ingress::remove_route_paths(&mut updated, route);
    }
    ingress::finish(
        ingress,
        updated,
        format!("Updating Ingress `{name}` removing managed routes"),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sluice_api::rollout::{HeaderRoutingMatch, SetHeaderRoute, StringMatch};

    use super::*;
    use crate::alb::fixtures::{annotation, cfg, desired, ingress, path};
    use crate::alb::{MANAGED_ANNOTATIONS, set_header_route, set_weight};

    fn managed_desired() -> Desired {
        Desired {
            managed_routes: vec!["header-route".into(), "second-route".into()],
            ..desired()
        }
    }

    fn with_route(i: &Value, route: &str) -> Value {
        let step = SetHeaderRoute {
            name: Some(route.into()),
            match_: Some(vec![HeaderRoutingMatch {
                header_name: Some("X-Canary".into()),
                header_value: Some(StringMatch {
                    exact: Some("yes".into()),
                    ..StringMatch::default()
                }),
            }]),
        };
        set_header_route(i, &cfg(), &step, &managed_desired())
            .unwrap()
            .unwrap()
            .object
    }

    fn weighted() -> Value {
        set_weight(&ingress(), &cfg(), &desired())
            .unwrap()
            .unwrap()
            .object
    }

    #[test]
    fn every_managed_route_goes() {
        let both = with_route(&with_route(&weighted(), "header-route"), "second-route");
        let edit = remove_managed_routes(&both, &cfg(), &managed_desired())
            .unwrap()
            .unwrap();
        assert_eq!(
            edit.event,
            (
                "PatchingALBIngress",
                "Updating Ingress `alb-canary-ingress` removing managed routes".to_string()
            )
        );
        assert_eq!(edit.object, weighted());
        assert_eq!(
            remove_managed_routes(&edit.object, &cfg(), &managed_desired()),
            Ok(None)
        );
    }

    #[test]
    fn one_route_on_the_ingress() {
        let one = with_route(&weighted(), "second-route");
        let edit = remove_managed_routes(&one, &cfg(), &managed_desired())
            .unwrap()
            .unwrap();
        assert_eq!(edit.object, weighted());
    }

    #[test]
    fn other_rollouts_and_paths_are_kept() {
        let mut i = with_route(&weighted(), "header-route");
        let user = path("/api", "api-svc", json!({"number": 8080}));
        i["spec"]["rules"][0]["http"]["paths"]
            .as_array_mut()
            .unwrap()
            .push(user.clone());
        let annotations = i["metadata"]["annotations"].as_object_mut().unwrap();
        let mine = annotations[MANAGED_ANNOTATIONS]
            .as_str()
            .unwrap()
            .to_string();
        annotations.insert(
            MANAGED_ANNOTATIONS.into(),
            mine.replacen(
                '{',
                r#"{"another":["alb.ingress.kubernetes.io/actions.header-route"],"#,
                1,
            )
            .into(),
        );
        let edit = remove_managed_routes(&i, &cfg(), &managed_desired())
            .unwrap()
            .unwrap();
        assert_eq!(
            annotation(&edit.object, MANAGED_ANNOTATIONS),
            Some(
                r#"{"alb-canary":["alb.ingress.kubernetes.io/actions.alb-canary-root"],"another":["alb.ingress.kubernetes.io/actions.header-route"]}"#
            )
        );
        assert_eq!(
            edit.object["spec"]["rules"][0]["http"]["paths"],
            json!([
                path("/*", "alb-canary-root", json!({"name": "use-annotation"})),
                user
            ])
        );
    }

    #[test]
    fn nothing_to_remove() {
        let with_route = with_route(&weighted(), "header-route");
        // No managed routes configured: the Ingress is not even looked at.
        assert_eq!(
            remove_managed_routes(&with_route, &cfg(), &desired()),
            Ok(None)
        );
        let blank = Desired {
            managed_routes: vec![String::new()],
            ..desired()
        };
        assert_eq!(remove_managed_routes(&with_route, &cfg(), &blank), Ok(None));
        // Managed routes, but none on the Ingress.
        let mut bare = ingress();
        bare["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        for i in [weighted(), ingress(), bare] {
            assert_eq!(
                remove_managed_routes(&i, &cfg(), &managed_desired()),
                Ok(None)
            );
        }
    }

    #[test]
    fn malformed_ingress_is_an_error() {
        let bad = json!({"metadata": {"name": "x", "annotations": "junk"}});
        assert!(remove_managed_routes(&bad, &cfg(), &managed_desired()).is_err());
    }
}
