//! `set_header_route`: a listener rule, ahead of the weighted one, that sends requests with
//! the step's headers to the canary.

use serde_json::Value;
use sluice_api::rollout::{AlbTrafficRouting, SetHeaderRoute};

use super::action::{header_action, header_conditions};
use super::{action_key, condition_key, ingress, managed};
use crate::{Desired, EditResult, RouterError};

/// The Ingress with the header route of `step` added, updated, or (without `match`) removed.
///
/// - With `match`: `<prefix>/actions.<route>` forwards everything to the canary (with the
///   configured stickiness), `<prefix>/conditions.<route>` holds the header conditions, both
///   keys are recorded as the Rollout's, and unless a path already goes to `<route>`, a `/*`
///   path with backend `<route>` (port name `use-annotation`) is put first in every rule.
/// - Without: both annotations, the keys in the managed list and the route's paths go.
///
/// Then in each rule the paths of managed routes are moved first, in `managedRoutes` order.
/// `None` when nothing changes.
pub fn set_header_route(
    ingress: &Value,
    cfg: &AlbTrafficRouting,
    step: &SetHeaderRoute,
    desired: &Desired,
) -> EditResult {
    let route = crate::router::step_name(step.name.as_deref(), "setHeaderRoute")?;
    let name = ingress::name(ingress);
    let action = action_key(cfg, route);
    let condition = condition_key(cfg, route);
    let keys = [action.as_str(), condition.as_str()];
    let mut annotations = ingress::annotations(ingress)?;
    let mut updated = match step.match_.as_deref() {
        Some([]) => {
            return Err(RouterError::new(format!(
                "setHeaderRoute `{route}` has an empty match: an ALB rule without conditions \
                 would send all traffic to the canary"
            )));
        }
        Some(matches) => {
            annotations.insert(action.clone(), header_action(cfg, desired)?.into());
            annotations.insert(condition.clone(), header_conditions(matches).into());
            managed::add(&mut annotations, &desired.rollout, &keys, name)?;
            let mut updated = ingress::with_annotations(ingress, annotations)?;
            ingress::insert_route_path(&mut updated, route);
            updated
        }
        None => {
            annotations.shift_remove(&action);
            annotations.shift_remove(&condition);
            managed::remove(&mut annotations, &desired.rollout, &keys, name)?;
            let mut updated = ingress::with_annotations(ingress, annotations)?;
            ingress::remove_route_paths(&mut updated, route);
            updated
        }
    };
    ingress::sort_paths(&mut updated, &desired.managed_routes);
    ingress::finish(
        ingress,
        updated,
        format!("Updating Ingress `{name}` to headerRoute '{route}'"),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sluice_api::rollout::{HeaderRoutingMatch, StickinessConfig, StringMatch};

    use super::*;
    use crate::alb::fixtures::{annotation, cfg, desired, ingress, path, route_path};
    use crate::alb::{MANAGED_ANNOTATIONS, set_weight};

    const ACTION: &str = "alb.ingress.kubernetes.io/actions.header-route";
    const CONDITION: &str = "alb.ingress.kubernetes.io/conditions.header-route";

    fn managed_desired() -> Desired {
        Desired {
            managed_routes: vec!["header-route".into(), "second-route".into()],
            ..desired()
        }
    }

    fn exact(name: &str, value: &str) -> HeaderRoutingMatch {
        HeaderRoutingMatch {
            header_name: Some(name.into()),
            header_value: Some(StringMatch {
                exact: Some(value.into()),
                ..StringMatch::default()
            }),
        }
    }

    fn step(route: &str, matches: Option<Vec<HeaderRoutingMatch>>) -> SetHeaderRoute {
        SetHeaderRoute {
            name: Some(route.into()),
            match_: matches,
        }
    }

    /// The corpus' header step: `Custom-Header: Mozilla*`.
    fn add() -> SetHeaderRoute {
        step(
            "header-route",
            Some(vec![exact("Custom-Header", "Mozilla*")]),
        )
    }

    fn root_path() -> Value {
        path("/*", "alb-canary-root", json!({"name": "use-annotation"}))
    }

    /// The Ingress after the 10% step.
    fn weighted() -> Value {
        set_weight(&ingress(), &cfg(), &desired())
            .unwrap()
            .unwrap()
            .object
    }

    fn paths(i: &Value) -> Value {
        i["spec"]["rules"][0]["http"]["paths"].clone()
    }

    #[test]
    fn adding_a_route() {
        let d = managed_desired();
        let edit = set_header_route(&weighted(), &cfg(), &add(), &d)
            .unwrap()
            .unwrap();
        assert_eq!(
            edit.event,
            (
                "PatchingALBIngress",
                "Updating Ingress `alb-canary-ingress` to headerRoute 'header-route'".to_string()
            )
        );
        let i = &edit.object;
        assert_eq!(
            annotation(i, ACTION),
            Some(
                r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"alb-canary-desired","ServicePort":"80","Weight":100}]}}"#
            )
        );
        assert_eq!(
            annotation(i, CONDITION),
            Some(
                r#"[{"field":"http-header","httpHeaderConfig":{"httpHeaderName":"Custom-Header","values":["Mozilla*"]}}]"#
            )
        );
        assert_eq!(
            annotation(i, MANAGED_ANNOTATIONS),
            Some(
                r#"{"alb-canary":["alb.ingress.kubernetes.io/actions.alb-canary-root","alb.ingress.kubernetes.io/actions.header-route","alb.ingress.kubernetes.io/conditions.header-route"]}"#
            )
        );
        assert_eq!(paths(i), json!([route_path("header-route"), root_path()]));
        // The weights are untouched.
        assert_eq!(
            annotation(i, "alb.ingress.kubernetes.io/actions.alb-canary-root"),
            annotation(
                &weighted(),
                "alb.ingress.kubernetes.io/actions.alb-canary-root"
            )
        );
        // Applying the same step again changes nothing.
        assert_eq!(set_header_route(i, &cfg(), &add(), &d), Ok(None));
    }

    #[test]
    fn updating_a_route() {
        let d = managed_desired();
        let first = set_header_route(&weighted(), &cfg(), &add(), &d)
            .unwrap()
            .unwrap()
            .object;
        let second = step(
            "header-route",
            Some(vec![exact("X-Env", "qa"), exact("X-Env", "staging")]),
        );
        let sticky = AlbTrafficRouting {
            stickiness_config: Some(StickinessConfig {
                enabled: Some(true),
                duration_seconds: Some(60),
            }),
            ..cfg()
        };
        let edit = set_header_route(&first, &sticky, &second, &d)
            .unwrap()
            .unwrap();
        let i = &edit.object;
        assert_eq!(
            annotation(i, ACTION),
            Some(
                r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"alb-canary-desired","ServicePort":"80","Weight":100}],"TargetGroupStickinessConfig":{"Enabled":true,"DurationSeconds":60}}}"#
            )
        );
        assert_eq!(
            annotation(i, CONDITION),
            Some(
                r#"[{"field":"http-header","httpHeaderConfig":{"httpHeaderName":"X-Env","values":["qa","staging"]}}]"#
            )
        );
        // Neither the path nor the managed keys are repeated.
        assert_eq!(paths(i), paths(&first));
        assert_eq!(
            annotation(i, MANAGED_ANNOTATIONS),
            annotation(&first, MANAGED_ANNOTATIONS)
        );
    }

    #[test]
    fn removing_a_route() {
        let d = managed_desired();
        let added = set_header_route(&weighted(), &cfg(), &add(), &d)
            .unwrap()
            .unwrap()
            .object;
        let remove = step("header-route", None);
        let edit = set_header_route(&added, &cfg(), &remove, &d)
            .unwrap()
            .unwrap();
        assert_eq!(
            edit.event.1,
            "Updating Ingress `alb-canary-ingress` to headerRoute 'header-route'"
        );
        // Back to the weighted Ingress; the managed list keeps the weights' key.
        assert_eq!(edit.object, weighted());
        // Nothing left to remove.
        assert_eq!(
            set_header_route(&edit.object, &cfg(), &remove, &d),
            Ok(None)
        );
        // Never added, on an Ingress this Rollout never wrote: nothing changes at all.
        assert_eq!(set_header_route(&ingress(), &cfg(), &remove, &d), Ok(None));
        let mut bare = ingress();
        bare["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        assert_eq!(set_header_route(&bare, &cfg(), &remove, &d), Ok(None));
    }

    #[test]
    fn managed_routes_ordered_in_every_rule() {
        let d = managed_desired();
        let user = path("/api", "api-svc", json!({"number": 8080}));
        let mut i = weighted();
        i["spec"]["rules"] = json!([
            {"host": "a.example.com", "http": {"paths": [user.clone(), root_path()]}},
            {"host": "b.example.com", "http": {"paths": [root_path()]}}
        ]);
        // The lower-precedence route first: it goes on top of every rule.
        let second = step("second-route", Some(vec![exact("X-B", "1")]));
        let i = set_header_route(&i, &cfg(), &second, &d)
            .unwrap()
            .unwrap()
            .object;
        assert_eq!(
            i["spec"]["rules"],
            json!([
                {"host": "a.example.com", "http": {"paths": [route_path("second-route"), user.clone(), root_path()]}},
                {"host": "b.example.com", "http": {"paths": [route_path("second-route"), root_path()]}}
            ])
        );
        // Then the first managed route: inserted on top, it sorts ahead of the second.
        let i = set_header_route(&i, &cfg(), &add(), &d)
            .unwrap()
            .unwrap()
            .object;
        assert_eq!(
            i["spec"]["rules"],
            json!([
                {"host": "a.example.com", "http": {"paths": [
                    route_path("header-route"), route_path("second-route"), user.clone(), root_path()
                ]}},
                {"host": "b.example.com", "http": {"paths": [
                    route_path("header-route"), route_path("second-route"), root_path()
                ]}}
            ])
        );
        // Reordered by hand: the next step puts the managed routes back in order.
        let mut shuffled = i.clone();
        shuffled["spec"]["rules"][0]["http"]["paths"] = json!([
            user.clone(),
            route_path("second-route"),
            root_path(),
            route_path("header-route")
        ]);
        let again = set_header_route(&shuffled, &cfg(), &add(), &d)
            .unwrap()
            .unwrap()
            .object;
        assert_eq!(again, i);
    }

    #[test]
    fn ingress_without_annotations() {
        let mut i = ingress();
        i["metadata"].as_object_mut().unwrap().remove("annotations");
        let edit = set_header_route(&i, &cfg(), &add(), &managed_desired())
            .unwrap()
            .unwrap();
        assert!(annotation(&edit.object, ACTION).is_some());
        assert!(annotation(&edit.object, CONDITION).is_some());
    }

    #[test]
    fn errors() {
        let d = managed_desired();
        let cases = [
            (
                SetHeaderRoute::default(),
                "setHeaderRoute step has no route name",
            ),
            (
                step("", Some(vec![exact("a", "b")])),
                "setHeaderRoute step has no route name",
            ),
            (
                step("header-route", Some(vec![])),
                "setHeaderRoute `header-route` has an empty match: an ALB rule without conditions would send all traffic to the canary",
            ),
        ];
        for (step, want) in cases {
            assert_eq!(
                set_header_route(&weighted(), &cfg(), &step, &d),
                Err(RouterError::new(want))
            );
        }
        let bad_sticky = AlbTrafficRouting {
            stickiness_config: Some(StickinessConfig {
                enabled: Some(true),
                duration_seconds: Some(604_801),
            }),
            ..cfg()
        };
        assert_eq!(
            set_header_route(&weighted(), &bad_sticky, &add(), &d),
            Err(RouterError::new(
                "TargetGroupStickinessConfig's duration must be between 1 and 604800 seconds (7 days)!"
            ))
        );
    }
}
