//! `set_weight`: the weights written, experiment and unknown destinations, mirror routes and
//! the order of routes.

use serde_json::json;

use super::tests::written;
use super::*;
use crate::RouterError;
use crate::istio::fixtures::*;

    #[test]
    fn malformed_objects_are_errors() {
        let cases = [
            (
                json!({"spec": {"http": {"primary": {}}}}),
                "VirtualService spec.http is not a list",
            ),
            (json!({"spec": "x"}), "VirtualService spec is not an object"),
            (
                json!({"spec": {"http": [{"name": "primary", "route": [{"weight": true}]}]}}),
                "VirtualService spec.http[0].route[0].weight is not an integer",
            ),
        ];
        for (vs, message) in cases {
            assert_eq!(
                set_weight(&vs, &vs_ref("vs", &["primary"]), None, &host_split(5)),
                Err(RouterError::new(message)),
                "{vs}"
            );
        }
        // Not a VirtualService at all: nothing to weight.
        assert_eq!(
            set_weight(
                &json!([]),
                &vs_ref("vs", &["primary"]),
                None,
                &host_split(5)
            ),
            Ok(None)
        );
    }

    #[test]
    fn unchanged_object_is_not_written() {
        let vs = HOST_SPLIT_VS
            .replace("weight: 100", "weight: 90")
            .replace("weight: 0", "weight: 10");
        assert_eq!(
            set_weight(
                &yaml(&vs),
                &vs_ref("v", &["primary"]),
                None,
                &host_split(10)
            ),
            Ok(None)
        );
        // An absent weight reads as 0.
        let vs = HOST_SPLIT_VS.replace("      weight: 0\n", "");
        assert_eq!(
            set_weight(&yaml(&vs), &vs_ref("v", &["primary"]), None, &host_split(0)),
            Ok(None)
        );
    }

    #[test]
    fn experiment_destinations_added_then_removed() {
        let reference = vs_ref("vs", &["primary"]);
        let mut desired = host_split(10);
        desired.additional = vec![experiment("exp-b", 5), experiment("exp-a", 15)];
        let with = written(HOST_SPLIT_VS, &reference, None, &desired);
        assert_eq!(
            weights(&with, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 70),
                ("istio-host-split-canary", 10),
                ("exp-a", 15),
                ("exp-b", 5)
            ])
        );
        assert_eq!(
            with["spec"]["http"][0]["route"][2],
            json!({"destination": {"host": "exp-a"}, "weight": 15})
        );

        // A weight change of an experiment already present is an update, not an append.
        desired.additional = vec![experiment("exp-b", 20), experiment("exp-a", 15)];
        let Ok(Some(edit)) = set_weight(&with, &reference, None, &desired) else {
            panic!("expected an edit")
        };
        assert_eq!(
            weights(&edit.object, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 55),
                ("istio-host-split-canary", 10),
                ("exp-a", 15),
                ("exp-b", 20)
            ])
        );

        // The experiment is over: its weighted destinations go.
        desired.additional.clear();
        let Ok(Some(edit)) = set_weight(&edit.object, &reference, None, &desired) else {
            panic!("expected an edit")
        };
        assert_eq!(
            weights(&edit.object, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 90),
                ("istio-host-split-canary", 10)
            ])
        );
    }

    #[test]
    fn experiment_destinations_in_subset_split() {
        let mut desired = subset_split(20);
        desired.additional = vec![experiment("exp", 20)];
        let object = written(
            SUBSET_SPLIT_VS,
            &vs_ref("vs", &["primary"]),
            Some(&dr_ref(&[])),
            &desired,
        );
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[("stable", 60), ("canary", 20), ("exp", 20)])
        );
    }

    #[test]
    fn unknown_destinations_deleted_unless_zero_weight() {
        let vs = "
metadata: {name: vs}
spec:
  http:
  - name: primary
    route:
    - {destination: {host: istio-host-split-stable}, weight: 80}
    - {destination: {host: old-experiment}, weight: 10}
    - {destination: {host: parked}, weight: 0}
    - {destination: {host: no-weight}}
    - {destination: {host: istio-host-split-canary}, weight: 10}
";
        let object = written(vs, &vs_ref("vs", &["primary"]), None, &host_split(10));
        assert_eq!(
            weights(&object, "http", 0),
            vec![
                ("istio-host-split-stable".to_string(), json!(90)),
                ("parked".to_string(), json!(0)),
                ("no-weight".to_string(), Value::Null),
                ("istio-host-split-canary".to_string(), json!(10)),
            ]
        );
    }

    #[test]
    fn additional_subsets_keep_their_weight() {
        let vs = "
metadata: {name: vs}
spec:
  http:
  - name: primary
    route:
    - {destination: {host: svc, subset: stable}, weight: 100}
    - {destination: {host: svc, subset: canary}, weight: 0}
    - {destination: {host: svc, subset: preview}, weight: 15}
";
        let object = written(
            vs,
            &vs_ref("vs", &["primary"]),
            Some(&dr_ref(&["preview"])),
            &subset_split(25),
        );
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[("stable", 60), ("canary", 25), ("preview", 15)])
        );
    }

    #[test]
    fn stable_weight_never_below_zero() {
        let mut desired = host_split(100);
        desired.additional = vec![experiment("exp", 10)];
        let object = written(HOST_SPLIT_VS, &vs_ref("vs", &["primary"]), None, &desired);
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 0),
                ("istio-host-split-canary", 100),
                ("exp", 10)
            ])
        );
    }

    /// A mirror route first and a header route last, both managed, around `primary`.
    const MANAGED_VS: &str = "
metadata: {name: vs}
spec:
  http:
  - name: primary
    route:
    - {destination: {host: stable-service}, weight: 80}
    - {destination: {host: canary-service}, weight: 20}
  - name: mirror-1
    match: [{uri: {prefix: /}}]
    route:
    - {destination: {host: stable-service}, weight: 80}
    - {destination: {host: canary-service}, weight: 20}
    mirror: {host: canary-service}
    mirrorPercentage: {value: 100}
  - name: header-1
    route:
    - {destination: {host: canary-service}, weight: 100}
";

    #[test]
    fn mirror_routes_weighted_and_routes_ordered_after_a_change() {
        let desired = demo(40, &["header-1", "mirror-1"]);
        let object = written(MANAGED_VS, &vs_ref("vs", &["primary"]), None, &desired);
        assert_eq!(route_names(&object), ["header-1", "mirror-1", "primary"]);
        let split = pairs(&[("stable-service", 60), ("canary-service", 40)]);
        assert_eq!(weights(&object, "http", 1), split, "mirror route");
        assert_eq!(weights(&object, "http", 2), split, "primary");
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[("canary-service", 100)])
        );
    }

    #[test]
    fn mirror_routes_not_in_managed_routes_are_left_alone() {
        let desired = demo(40, &[]);
        let object = written(MANAGED_VS, &vs_ref("vs", &["primary"]), None, &desired);
        assert_eq!(route_names(&object), ["primary", "mirror-1", "header-1"]);
        assert_eq!(
            weights(&object, "http", 1),
            pairs(&[("stable-service", 80), ("canary-service", 20)])
        );
    }

    #[test]
    fn no_reordering_without_a_weight_change() {
        let desired = demo(20, &["header-1", "mirror-1"]);
        assert_eq!(
            set_weight(
                &yaml(MANAGED_VS),
                &vs_ref("vs", &["primary"]),
                None,
                &desired
            ),
            Ok(None)
        );
    }
