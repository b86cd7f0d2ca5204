//! `set_weight`: which routes of a VirtualService are weighed and how their destinations are
//! told apart, and the errors when they cannot be.

    use serde_json::json;

    use super::*;
    use crate::RouterError;
    use crate::istio::fixtures::*;

    /// `set_weight` on a VirtualService given as YAML; the edit must be idempotent.
    fn apply(
        vs: &str,
        vs_ref: &IstioVirtualService,
        dr: Option<&IstioDestinationRule>,
        desired: &Desired,
    ) -> Result<Option<Edit>, RouterError> {
        let edit = set_weight(&yaml(vs), vs_ref, dr, desired)?;
        if let Some(edit) = &edit {
            assert_eq!(set_weight(&edit.object, vs_ref, dr, desired), Ok(None));
        }
        Ok(edit)
    }

    pub(super) fn written(
        vs: &str,
        vs_ref: &IstioVirtualService,
        dr: Option<&IstioDestinationRule>,
        desired: &Desired,
    ) -> Value {
        match apply(vs, vs_ref, dr, desired) {
            Ok(Some(edit)) => edit.object,
            other => panic!("expected an edit, got {other:?}"),
        }
    }

    #[test]
    fn splits_by_host() {
        let edit = apply(
            HOST_SPLIT_VS,
            &vs_ref("istio-host-split-vsvc", &["primary"]),
            None,
            &host_split(10),
        );
        let Ok(Some(edit)) = edit else {
            panic!("expected an edit, got {edit:?}")
        };
        assert_eq!(
            weights(&edit.object, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 90),
                ("istio-host-split-canary", 10)
            ])
        );
        assert_eq!(
            edit.event,
            (
                "Updated VirtualService",
                "VirtualService `istio-host-split-vsvc` set to desiredWeight '10'".to_string()
            )
        );
        // Everything else is as read.
        let mut expected = yaml(HOST_SPLIT_VS);
        expected["spec"]["http"][0]["route"][0]["weight"] = json!(90);
        expected["spec"]["http"][0]["route"][1]["weight"] = json!(10);
        assert_eq!(edit.object, expected);
    }

    #[test]
    fn weights_are_json_integers() {
        let vs = written(
            HOST_SPLIT_VS,
            &vs_ref("v", &["primary"]),
            None,
            &host_split(33),
        );
        let weight = &vs["spec"]["http"][0]["route"][1]["weight"];
        assert!(weight.is_i64() || weight.is_u64(), "{weight}");
        assert_eq!(serde_json::to_string(weight).ok().as_deref(), Some("33"));
    }

    #[test]
    fn hosts_compare_by_first_dns_label() {
        let vs = HOST_SPLIT_VS.replace(
            "host: istio-host-split-canary",
            "host: istio-host-split-canary.default.svc.cluster.local",
        );
        let object = written(&vs, &vs_ref("v", &["primary"]), None, &host_split(25));
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 75),
                ("istio-host-split-canary.default.svc.cluster.local", 25)
            ])
        );
    }

    #[test]
    fn splits_by_subset() {
        let object = written(
            SUBSET_SPLIT_VS,
            &vs_ref("istio-subset-split-vsvc", &["primary"]),
            Some(&dr_ref(&[])),
            &subset_split(40),
        );
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[("stable", 60), ("canary", 40)])
        );
    }

    #[test]
    fn unnamed_single_route_when_routes_omitted() {
        let object = written(
            SINGLE_ROUTE_VS,
            &vs_ref("istio-subset-split-single-route-vsvc", &[]),
            Some(&dr_ref(&[])),
            &subset_split(10),
        );
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[("stable", 90), ("canary", 10)])
        );
    }

    #[test]
    fn first_unnamed_route_beside_managed_routes() {
        let vs = "
metadata: {name: vs}
spec:
  http:
  - name: header
    route:
    - destination: {host: istio-host-split-canary}
      weight: 100
  - route:
    - destination: {host: istio-host-split-stable}
      weight: 100
    - destination: {host: istio-host-split-canary}
      weight: 0
";
        let mut desired = host_split(30);
        desired.managed_routes = vec!["header".into()];
        let object = written(vs, &vs_ref("vs", &[]), None, &desired);
        assert_eq!(
            weights(&object, "http", 1),
            pairs(&[
                ("istio-host-split-stable", 70),
                ("istio-host-split-canary", 30)
            ])
        );
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[("istio-host-split-canary", 100)])
        );
    }

    #[test]
    fn several_named_routes() {
        let vs = "
metadata: {name: vs}
spec:
  http:
  - name: primary
    route:
    - destination: {host: istio-host-split-stable}
      weight: 100
    - destination: {host: istio-host-split-canary}
      weight: 0
  - name: untouched
    route:
    - destination: {host: istio-host-split-stable}
      weight: 100
    - destination: {host: istio-host-split-canary}
      weight: 0
  - name: secondary
    route:
    - destination: {host: istio-host-split-canary}
      weight: 0
    - destination: {host: istio-host-split-stable}
      weight: 100
";
        let object = written(
            vs,
            &vs_ref("vs", &["primary", "secondary"]),
            None,
            &host_split(20),
        );
        assert_eq!(
            weights(&object, "http", 0),
            pairs(&[
                ("istio-host-split-stable", 80),
                ("istio-host-split-canary", 20)
            ])
        );
        assert_eq!(
            weights(&object, "http", 1),
            pairs(&[
                ("istio-host-split-stable", 100),
                ("istio-host-split-canary", 0)
            ])
        );
        assert_eq!(
            weights(&object, "http", 2),
            pairs(&[
                ("istio-host-split-canary", 20),
                ("istio-host-split-stable", 80)
            ])
        );
    }

    #[test]
    fn tls_routes_by_port_and_sni_hosts() {
        let mut reference = vs_ref("istio-host-split-vsvc", &["primary"]);
        reference.tls_routes = Some(vec![tls_route(3000, &["istio-host-split"])]);
        let object = written(HTTP_TLS_SPLIT_VS, &reference, None, &host_split(10));
        for section in ["http", "tls"] {
            assert_eq!(
                weights(&object, section, 0),
                pairs(&[
                    ("istio-host-split-stable", 90),
                    ("istio-host-split-canary", 10)
                ]),
                "{section}"
            );
        }
    }

    #[test]
    fn tls_only_virtual_service_ignores_http_route_names() {
        let mut reference = vs_ref("istio-host-split-tls-vsvc", &["primary"]);
        reference.tls_routes = Some(vec![tls_route(3000, &["istio-host-split-tls"])]);
        let mut desired = host_split(50);
        desired.canary_service = "istio-host-split-tls-canary".into();
        desired.stable_service = "istio-host-split-tls-stable".into();
        let object = written(TLS_ONLY_VS, &reference, None, &desired);
        assert_eq!(
            weights(&object, "tls", 0),
            pairs(&[
                ("istio-host-split-tls-stable", 50),
                ("istio-host-split-tls-canary", 50)
            ])
        );
    }

    /// Two TLS routes (3000 for a.com, 3001 for a.com and b.com) and two TCP routes (4000, and
    /// one matching two ports).
    const MANY_PORTS_VS: &str = "
metadata: {name: vs}
spec:
  tls:
  - match:
    - {port: 3000, sniHosts: [a.com]}
    route:
    - {destination: {host: istio-host-split-stable}, weight: 100}
    - {destination: {host: istio-host-split-canary}, weight: 0}
  - match:
    - {port: 3001, sniHosts: [a.com]}
    - {port: 3001, sniHosts: [b.com]}
    route:
    - {destination: {host: istio-host-split-stable}, weight: 100}
    - {destination: {host: istio-host-split-canary}, weight: 0}
  tcp:
  - match:
    - {port: 4000}
    route:
    - {destination: {host: istio-host-split-stable}, weight: 100}
    - {destination: {host: istio-host-split-canary}, weight: 0}
  - match:
    - {port: 4000}
    - {port: 4001}
    route:
    - {destination: {host: istio-host-split-stable}, weight: 100}
    - {destination: {host: istio-host-split-canary}, weight: 0}
";

    #[test]
    fn tls_and_tcp_route_matching() {
        let untouched = pairs(&[
            ("istio-host-split-stable", 100),
            ("istio-host-split-canary", 0),
        ]);
        let weighted = pairs(&[
            ("istio-host-split-stable", 95),
            ("istio-host-split-canary", 5),
        ]);
        let mut reference = vs_ref("vs", &[]);
        reference.tls_routes = Some(vec![tls_route(3001, &["b.com", "a.com"])]);
        reference.tcp_routes = Some(vec![tcp_route(4000)]);
        let object = written(MANY_PORTS_VS, &reference, None, &host_split(5));
        assert_eq!(weights(&object, "tls", 0), untouched);
        assert_eq!(weights(&object, "tls", 1), weighted);
        assert_eq!(weights(&object, "tcp", 0), weighted);
        assert_eq!(
            weights(&object, "tcp", 1),
            untouched,
            "two ports never match"
        );

        // Every configured entry selects its routes.
        reference.tls_routes = Some(vec![
            tls_route(3000, &["a.com"]),
            tls_route(3001, &["a.com", "b.com"]),
        ]);
        let object = written(MANY_PORTS_VS, &reference, None, &host_split(5));
        assert_eq!(weights(&object, "tls", 0), weighted);
        assert_eq!(weights(&object, "tls", 1), weighted);
    }

    #[test]
    fn single_tls_and_tcp_routes_when_omitted() {
        let vs = "
metadata: {name: vs}
spec:
  tls:
  - match: [{port: 443, sniHosts: [a.com]}]
    route:
    - {destination: {host: istio-host-split-stable}, weight: 100}
    - {destination: {host: istio-host-split-canary}, weight: 0}
  tcp:
  - route:
    - {destination: {host: istio-host-split-stable}, weight: 100}
    - {destination: {host: istio-host-split-canary}, weight: 0}
";
        let object = written(vs, &vs_ref("vs", &[]), None, &host_split(15));
        let split = pairs(&[
            ("istio-host-split-stable", 85),
            ("istio-host-split-canary", 15),
        ]);
        assert_eq!(weights(&object, "tls", 0), split);
        assert_eq!(weights(&object, "tcp", 0), split);
    }

    #[test]
    fn route_selection_errors() {
        let tls = |port, hosts: &[&str]| {
            let mut reference = vs_ref("vs", &[]);
            reference.tls_routes = Some(vec![tls_route(port, hosts)]);
            reference.tcp_routes = Some(vec![tcp_route(4000)]);
            reference
        };
        let tcp = |port| {
            let mut reference = tls(3000, &["a.com"]);
            reference.tcp_routes = Some(vec![tcp_route(port)]);
            reference
        };
        let cases = [
            (
                tls(3000, &["b.com"]),
                "No matching TLS routes found in the defined Virtual Service.",
            ),
            (
                tls(3001, &["a.com"]),
                "No matching TLS routes found in the defined Virtual Service.",
            ),
            (
                tls(3002, &["a.com"]),
                "No matching TLS routes found in the defined Virtual Service.",
            ),
            (
                tcp(4001),
                "No matching TCP routes found in the defined Virtual Service.",
            ),
            (
                vs_ref("vs", &[]),
                "spec.tls[] should be set in VirtualService and it must have exactly one route \
                 when omitting spec.strategy.canary.trafficRouting.istio.virtualService.tlsRoutes",
            ),
            (
                {
                    let mut reference = tls(3000, &["a.com"]);
                    reference.tcp_routes = None;
                    reference
                },
                "spec.tcp[] should be set in VirtualService and it must have exactly one route \
                 when omitting spec.strategy.canary.trafficRouting.istio.virtualService.tcpRoutes",
            ),
        ];
        for (reference, message) in cases {
            assert_eq!(
                set_weight(&yaml(MANY_PORTS_VS), &reference, None, &host_split(5)),
                Err(RouterError::new(message)),
                "{reference:?}"
            );
        }
    }

    #[test]
    fn destination_errors() {
        let vs = yaml(SUBSET_SPLIT_VS);
        let without = |field: &str, value: &str| {
            let text =
                SUBSET_SPLIT_VS.replace(&format!("{field}: {value}"), &format!("{field}: other"));
            yaml(&text)
        };
        let subset = Some(dr_ref(&[]));
        let cases = [
            (
                vs.clone(),
                vs_ref("vs", &["missing"]),
                subset.clone(),
                subset_split(5),
                "HTTP Route 'missing' is not found in the defined Virtual Service.",
            ),
            (
                without("subset", "canary"),
                vs_ref("vs", &["primary"]),
                subset.clone(),
                subset_split(5),
                "Canary DestinationRule subset 'canary' not found in route",
            ),
            (
                without("subset", "stable"),
                vs_ref("vs", &["primary"]),
                subset.clone(),
                subset_split(5),
                "Stable DestinationRule subset 'stable' not found in route",
            ),
            (
                yaml(HOST_SPLIT_VS).clone(),
                vs_ref("vs", &["primary"]),
                None,
                {
                    let mut desired = host_split(5);
                    desired.canary_service = "elsewhere".into();
                    desired
                },
                "Canary Service 'elsewhere' not found in route",
            ),
            (
                yaml(HOST_SPLIT_VS).clone(),
                vs_ref("vs", &["primary"]),
                None,
                {
                    let mut desired = host_split(5);
                    desired.stable_service = "elsewhere".into();
                    desired
                },
                "Stable Service 'elsewhere' not found in route",
            ),
            (
                yaml(&format!("{HOST_SPLIT_VS}  - name: second\n")),
                vs_ref("vs", &[]),
                None,
                host_split(5),
                "spec.http[] should be set in VirtualService and it must have exactly one route \
                 when omitting spec.strategy.canary.trafficRouting.istio.virtualService.routes",
            ),
        ];
        for (vs, reference, dr, desired, message) in cases {
            assert_eq!(
                set_weight(&vs, &reference, dr.as_ref(), &desired),
                Err(RouterError::new(message)),
                "{message}"
            );
        }
    }
