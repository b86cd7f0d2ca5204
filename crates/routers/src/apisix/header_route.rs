//! The header routes of `setHeaderRoute` steps: each a separate ApisixRoute named after the
//! step's route, owned by the Rollout, that sends matching requests to the canary alone.

use serde_json::{Map, Value};
use sluice_api::rollout::{ApisixTrafficRouting, SetHeaderRoute};

use super::exprs::header_exprs;
use super::rules::{backend_position, backends, http, rule_position, set_backend_weight};
use super::{CREATED_REASON, DELETED_REASON, UPDATED_REASON, rule_names};
use crate::nginx::owner;
use crate::{Change, ChangeResult, Desired, Edit, RouterError};

/// Metadata the API server sets, cleared from the copy of the main route so that it can be
/// created (Argo clears the first four; the others would be refused or are meaningless on a
/// new object).
const SERVER_SET_METADATA: [&str; 8] = [
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The change to the header route of `step` (the ApisixRoute named `step.name`, `existing`
/// when it exists), given the main ApisixRoute `main`:
///
/// - `match` absent: [`Change::Delete`] when the header route exists and the Rollout controls
///   it, else `None`.
/// - header route owned by someone else: `duplicate ApisixRoute [<name>] already exists`.
/// - otherwise the header route: when new, a copy of `main` renamed, with server-set metadata
///   and `status` cleared and a controller reference to the Rollout as its only owner. In each
///   rule of [`rule_names`](super::rule_names): the canary backend at weight 100, the stable
///   backend removed, `match.exprs` one expression per header condition, and (only when new,
///   so that repeated calls do not climb) `priority` one above the main rule's, so that APISIX
///   tries it first. `None` when an existing header route is already so.
///
/// Rule and backend errors are those of [`set_weight`](super::set_weight).
pub fn set_header_route(
    main: &Value,
    existing: Option<&Value>,
    cfg: &ApisixTrafficRouting,
    step: &SetHeaderRoute,
    desired: &Desired,
) -> ChangeResult {
    let name = step
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| RouterError::new("setHeaderRoute has no name"))?;
    let Some(matches) = &step.match_ else {
        return match existing {
            Some(route) => remove_managed_route(route, desired),
            None => Ok(None),
        };
    };
    if let Some(route) = existing
        && !owner::is_controlled_by(route, &desired.rollout_uid)
    {
        return Err(RouterError::new(format!(
            "duplicate ApisixRoute [{name}] already exists"
        )));
    }
    let exprs = header_exprs(matches)?;
    let source = match existing {
        Some(route) => route.clone(),
        None => copy_of(main, name, desired)?,
    };
    let http = http(&source)?;
    let mut object = source.clone();
    for rule in rule_names(cfg, main) {
        let i = rule_position(http, &rule)?;
        let canary = backend_position(backends(&http[i], &rule)?, &desired.canary_service)?;
        set_backend_weight(&mut object, i, canary, 100);
        let Some(rule_object) = object
            .pointer_mut(&format!("/spec/http/{i}"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        if let Some(Value::Array(backends)) = rule_object.get_mut("backends") {
            backends.retain(|b| {
                b.get("serviceName").and_then(Value::as_str) != Some(&desired.stable_service)
            });
        }
        if existing.is_none() {
            let priority = rule_object
                .get("priority")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            rule_object.insert("priority".into(), priority.saturating_add(1).into());
        }
        let matcher = rule_object
            .entry("match")
            .and_modify(|m| {
                if m.is_null() {
                    *m = Value::Object(Map::new());
                }
            })
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .ok_or_else(|| {
                RouterError::new(format!(
                    "Apisix http route rule {rule} match is not an object"
                ))
            })?;
        matcher.insert("exprs".into(), Value::Array(exprs.clone()));
    }
    let event = if existing.is_none() {
        (CREATED_REASON, format!("ApisixRoute `{name}` created"))
    } else if object == source {
        return Ok(None);
    } else {
        (UPDATED_REASON, format!("ApisixRoute `{name}` updated"))
    };
    Ok(Some(Change::Write(Edit { object, event })))
}

/// The removal of a header route the Rollout no longer needs (`managedRoutes` cleanup at the
/// end of an update, after an abort, ...): [`Change::Delete`] when the Rollout controls it,
/// `None` for a route someone else owns, which is left alone.
pub fn remove_managed_route(existing: &Value, desired: &Desired) -> ChangeResult {
    if !owner::is_controlled_by(existing, &desired.rollout_uid) {
        return Ok(None);
    }
    let name = super::name_of(existing);
    Ok(Some(Change::Delete {
        event: (DELETED_REASON, format!("ApisixRoute `{name}` deleted")),
    }))
}

/// The main route renamed to `name`, ready to create and owned by the Rollout.
fn copy_of(main: &Value, name: &str, desired: &Desired) -> Result<Value, RouterError> {
    let mut object = main.clone();
    let Some(fields) = object.as_object_mut() else {
        return Err(RouterError::new("ApisixRoute is not an object"));
    };
    fields.remove("status");
    let metadata = fields
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if metadata.is_null() {
        *metadata = Value::Object(Map::new());
    }
    let Some(metadata) = metadata.as_object_mut() else {
        return Err(RouterError::new("ApisixRoute metadata is not an object"));
    };
    for key in SERVER_SET_METADATA {
        metadata.remove(key);
    }
    metadata.insert("name".into(), name.into());
    let has_namespace = metadata
        .get("namespace")
        .and_then(Value::as_str)
        .is_some_and(|ns| !ns.is_empty());
    if !has_namespace {
        metadata.insert("namespace".into(), desired.namespace.clone().into());
    }
    metadata.insert(
        "ownerReferences".into(),
        Value::Array(vec![owner::controller_ref(desired)]),
    );
    Ok(object)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sluice_api::rollout::{HeaderRoutingMatch, StringMatch};

    use super::*;
    use crate::apisix::fixtures::{cfg, desired, route};

    fn exact(name: &str, value: &str) -> HeaderRoutingMatch {
        HeaderRoutingMatch {
            header_name: Some(name.into()),
            header_value: Some(StringMatch {
                exact: Some(value.into()),
                ..StringMatch::default()
            }),
        }
    }

    /// The step of `test/e2e/apisix/rollout-apisix-canary-set-header.yaml`.
    fn step() -> SetHeaderRoute {
        SetHeaderRoute {
            name: Some("set-header".into()),
            match_: Some(vec![exact("trace", "debug")]),
        }
    }

    fn removal() -> SetHeaderRoute {
        SetHeaderRoute {
            name: Some("set-header".into()),
            match_: None,
        }
    }

    /// The header route created from the corpus route for [`step`].
    fn created() -> Value {
        serde_saphyr::from_str(
            r#"
apiVersion: apisix.apache.org/v2
kind: ApisixRoute
metadata:
  name: set-header
  namespace: default
  labels: {app: demo}
  ownerReferences:
  - apiVersion: argoproj.io/v1alpha1
    kind: Rollout
    name: rollout-apisix-canary
    uid: uid-apisix
    controller: true
    blockOwnerDeletion: true
spec:
  http:
    - name: rollouts-apisix
      priority: 1
      match:
        paths:
          - /*
        methods:
          - GET
          - POST
          - PUT
          - DELETE
          - PATCH
        hosts:
          - rollouts-demo.apisix.local
        exprs:
          - subject: {scope: Header, name: trace}
            op: Equal
            value: debug
      backends:
        - serviceName: rollout-apisix-canary-canary
          servicePort: 80
          weight: 100
"#,
        )
        .unwrap()
    }

    fn write(result: ChangeResult) -> Edit {
        match result {
            Ok(Some(Change::Write(edit))) => edit,
            other => panic!("expected a write, got {other:?}"),
        }
    }

    #[test]
    fn new_header_route_is_a_copy_of_the_main_route() {
        let mut main = route();
        main["status"] = json!({"conditions": []});
        main["metadata"]["managedFields"] = json!([{"manager": "kubectl"}]);
        main["metadata"]["ownerReferences"] = json!([{"uid": "someone", "controller": true}]);
        let edit = write(set_header_route(&main, None, &cfg(), &step(), &desired(0)));
        assert_eq!(edit.object, created());
        assert_eq!(
            edit.event,
            (
                "ApisixRouteCreated",
                "ApisixRoute `set-header` created".to_string()
            )
        );
    }

    #[test]
    fn priority_is_raised_once() {
        let mut main = route();
        main["spec"]["http"][0]["priority"] = json!(7);
        let edit = write(set_header_route(&main, None, &cfg(), &step(), &desired(0)));
        assert_eq!(edit.object["spec"]["http"][0]["priority"], 8);
        // Read back and reapplied: already as wanted.
        let got = set_header_route(&main, Some(&edit.object), &cfg(), &step(), &desired(0));
        assert_eq!(got, Ok(None));
    }

    #[test]
    fn existing_header_route_gets_the_new_match() {
        let mut live = created();
        live["metadata"]["resourceVersion"] = json!("50");
        let step = SetHeaderRoute {
            name: Some("set-header".into()),
            match_: Some(vec![
                exact("trace", "full"),
                HeaderRoutingMatch {
                    header_name: Some("agent".into()),
                    header_value: Some(StringMatch {
                        prefix: Some("curl".into()),
                        ..StringMatch::default()
                    }),
                },
            ]),
        };
        let edit = write(set_header_route(
            &route(),
            Some(&live),
            &cfg(),
            &step,
            &desired(0),
        ));
        let mut want = live.clone();
        want["spec"]["http"][0]["match"]["exprs"] = json!([
            {"subject": {"scope": "Header", "name": "trace"}, "op": "Equal", "value": "full"},
            {"subject": {"scope": "Header", "name": "agent"}, "op": "RegexMatch", "value": "^curl.*"}
        ]);
        assert_eq!(edit.object, want);
        assert_eq!(
            edit.event,
            (
                "ApisixRouteUpdated",
                "ApisixRoute `set-header` updated".to_string()
            )
        );
    }

    #[test]
    fn route_of_another_owner_is_a_duplicate() {
        let dup = Err(RouterError::new(
            "duplicate ApisixRoute [set-header] already exists",
        ));
        let mut theirs = created();
        theirs["metadata"]["ownerReferences"][0]["uid"] = json!("uid-other");
        let mut unowned = created();
        unowned["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
        for existing in [theirs, unowned] {
            let got = set_header_route(&route(), Some(&existing), &cfg(), &step(), &desired(0));
            assert_eq!(got, dup, "{existing}");
        }
    }

    #[test]
    fn step_without_match_removes_our_route_only() {
        let deleted = Ok(Some(Change::Delete {
            event: (
                "ApisixRouteDeleted",
                "ApisixRoute `set-header` deleted".to_string(),
            ),
        }));
        let mut theirs = created();
        theirs["metadata"]["ownerReferences"][0]["uid"] = json!("uid-other");
        let cases = [
            (Some(created()), deleted),
            (Some(theirs), Ok(None)),
            (None, Ok(None)),
        ];
        for (existing, want) in cases {
            let got =
                set_header_route(&route(), existing.as_ref(), &cfg(), &removal(), &desired(0));
            assert_eq!(got, want, "{existing:?}");
        }
    }

    #[test]
    fn remove_managed_route_deletes_only_what_the_rollout_controls() {
        let mut theirs = created();
        theirs["metadata"]["ownerReferences"][0]["uid"] = json!("uid-other");
        assert_eq!(
            remove_managed_route(&created(), &desired(0)),
            Ok(Some(Change::Delete {
                event: (
                    "ApisixRouteDeleted",
                    "ApisixRoute `set-header` deleted".to_string()
                )
            }))
        );
        assert_eq!(remove_managed_route(&theirs, &desired(0)), Ok(None));
        assert_eq!(remove_managed_route(&route(), &desired(0)), Ok(None));
    }

    #[test]
    fn errors() {
        let e = |m: &str| Err(RouterError::new(m));
        let no_name = SetHeaderRoute {
            name: None,
            ..step()
        };
        assert_eq!(
            set_header_route(&route(), None, &cfg(), &no_name, &desired(0)),
            e("setHeaderRoute has no name")
        );
        let mut no_canary = route();
        no_canary["spec"]["http"][0]["backends"][1]["serviceName"] = json!("x");
        let mut bad_match = route();
        bad_match["spec"]["http"][0]["match"] = json!([]);
        let cases = [
            (
                json!({"metadata": {"name": "r"}}),
                "spec.http was not found in Apisix Route manifest",
            ),
            (json!([]), "ApisixRoute is not an object"),
            (
                json!({"metadata": 1}),
                "ApisixRoute metadata is not an object",
            ),
            (
                no_canary,
                "apisix route rollout-apisix-canary-canary backend was not found",
            ),
            (
                bad_match,
                "Apisix http route rule rollouts-apisix match is not an object",
            ),
        ];
        for (main, want) in cases {
            assert_eq!(
                set_header_route(&main, None, &cfg(), &step(), &desired(0)),
                e(want),
                "{main}"
            );
        }
        let bad_step = SetHeaderRoute {
            match_: Some(vec![HeaderRoutingMatch::default()]),
            ..step()
        };
        assert_eq!(
            set_header_route(&route(), None, &cfg(), &bad_step, &desired(0)),
            e("SetHeaderRoute match has no headerName")
        );
    }

    /// The header route does not depend on the canary weight, and a missing `match` on a rule
    /// is created.
    #[test]
    fn rule_without_match_gets_one() {
        let mut main = route();
        main["spec"]["http"][0]
            .as_object_mut()
            .unwrap()
            .remove("match");
        let edit = write(set_header_route(&main, None, &cfg(), &step(), &desired(40)));
        assert_eq!(
            edit.object["spec"]["http"][0]["match"],
            json!({"exprs": [
                {"subject": {"scope": "Header", "name": "trace"}, "op": "Equal", "value": "debug"}
            ]})
        );
    }

    /// The corpus' set-header e2e objects: the step of its Rollout applied to its route gives
    /// the header route, which the end of the update removes.
    #[test]
    fn corpus_set_header_step() {
        let root = sluice_api::corpus::require_argo_corpus_dir().unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(
            root.join("test/e2e/apisix/rollout-apisix-canary-set-header.yaml"),
        )
        .unwrap();
        let objects = sluice_api::yaml::from_multi_doc_str(&text).unwrap();
        let of_kind = |kind: &str| objects.iter().find(|o| o["kind"] == kind).unwrap();
        let rollout = of_kind("Rollout");
        let canary = &rollout["spec"]["strategy"]["canary"];
        let cfg: ApisixTrafficRouting =
            serde_json::from_value(canary["trafficRouting"]["apisix"].clone()).unwrap();
        let step: SetHeaderRoute =
            serde_json::from_value(canary["steps"][0]["setHeaderRoute"].clone()).unwrap();
        let mut main = of_kind("ApisixRoute").clone();
        main["metadata"]["namespace"] = json!("default");
        main["metadata"]["labels"] = json!({"app": "demo"});

        let edit = write(set_header_route(&main, None, &cfg, &step, &desired(0)));
        assert_eq!(edit.object, created());
        let got = set_header_route(&main, Some(&edit.object), &cfg, &step, &desired(0));
        assert_eq!(got, Ok(None), "idempotent");
        assert!(matches!(
            remove_managed_route(&edit.object, &desired(0)),
            Ok(Some(Change::Delete { .. }))
        ));
    }
}
