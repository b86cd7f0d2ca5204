//! `check_routes`: the reference validation of a VirtualService, run on every reconcile before
//! anything is written. A failure makes the Rollout `InvalidSpec`; the caller adds the field
//! path (`spec.strategy.canary.trafficRouting.istio.virtualService.name`, or
//! `virtualServices.name`) and the `Invalid value` framing.

use serde_json::Value;
use sluice_api::rollout::{IstioDestinationRule, IstioVirtualService};

use super::select::{self, Mirrors, SECTIONS};
use super::value;
use crate::{Desired, RouterError};

/// The first problem with the routes the Rollout configures on `vs`, as Argo words it:
/// no HTTP, TLS or TCP section at all, or a section whose selected routes are missing or do
/// not reach the canary and the stable (`Istio VirtualService has invalid <kind> routes.
/// Error: <why>`). Sections are checked in the order HTTP, TLS, TCP; mirror routes are not
/// part of this check.
pub fn check_routes(
    vs: &Value,
    vs_ref: &IstioVirtualService,
    dr: Option<&IstioDestinationRule>,
    desired: &Desired,
) -> Result<(), RouterError> {
    let any_section = SECTIONS
        .iter()
        .any(|&section| !matches!(value::routes(vs, section), Ok(None)));
    if !any_section {
        return Err(RouterError::new(
            "Unable to get any of the HTTP, TCP or TLS routes for the Istio VirtualService",
        ));
    }
    for section in SECTIONS {
        select::section_routes(vs, section, vs_ref, dr, desired, Mirrors::Exclude).map_err(
            |err| {
                RouterError::new(format!(
                    "Istio VirtualService has invalid {} routes. Error: {err}",
                    section.label()
                ))
            },
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::istio::fixtures::*;

    #[test]
    fn corpus_virtual_services_are_valid() {
        let mut tls = vs_ref("vs", &["primary"]);
        tls.tls_routes = Some(vec![tls_route(3000, &["istio-host-split"])]);
        let mut tls_only = vs_ref("vs", &["primary"]);
        tls_only.tls_routes = Some(vec![tls_route(3000, &["istio-host-split-tls"])]);
        let mut tls_only_desired = host_split(0);
        tls_only_desired.canary_service = "istio-host-split-tls-canary".into();
        tls_only_desired.stable_service = "istio-host-split-tls-stable".into();
        let dr = dr_ref(&[]);
        let cases = [
            (
                HOST_SPLIT_VS,
                vs_ref("vs", &["primary"]),
                None,
                host_split(0),
            ),
            (HOST_SPLIT_VS, vs_ref("vs", &[]), None, host_split(0)),
            (HTTP_TLS_SPLIT_VS, tls, None, host_split(0)),
            (TLS_ONLY_VS, tls_only, None, tls_only_desired),
            (
                SUBSET_SPLIT_VS,
                vs_ref("vs", &["primary"]),
                Some(&dr),
                subset_split(0),
            ),
            (
                SINGLE_ROUTE_VS,
                vs_ref("vs", &[]),
                Some(&dr),
                subset_split(0),
            ),
            (
                ROLLOUTS_DEMO_VS,
                vs_ref("vs", &["primary"]),
                None,
                demo(0, &[]),
            ),
        ];
        for (vs, reference, dr, desired) in cases {
            assert_eq!(
                check_routes(&yaml(vs), &reference, dr, &desired),
                Ok(()),
                "{vs}"
            );
        }
    }

    #[test]
    fn invalid_virtual_services() {
        let http = "Istio VirtualService has invalid HTTP routes. Error: ";
        let omitted_http = "spec.http[] should be set in VirtualService and it must have exactly \
                            one route when omitting \
                            spec.strategy.canary.trafficRouting.istio.virtualService.routes";
        let two_routes = format!("{HOST_SPLIT_VS}  - name: header\n");
        let mut tls_mismatch = vs_ref("vs", &["primary"]);
        tls_mismatch.tls_routes = Some(vec![tls_route(3000, &["other"])]);
        let mut tcp = vs_ref("vs", &["primary"]);
        tcp.tcp_routes = Some(vec![tcp_route(1)]);
        let tcp_vs = "
spec:
  tcp:
  - match: [{port: 2}]
    route:
    - {destination: {host: istio-host-split-stable}, weight: 100}
    - {destination: {host: istio-host-split-canary}, weight: 0}
";
        let cases: Vec<(&str, IstioVirtualService, Desired, String)> = vec![
            (
                "metadata: {name: vs}\nspec: {hosts: [a]}",
                vs_ref("vs", &[]),
                host_split(0),
                "Unable to get any of the HTTP, TCP or TLS routes for the Istio VirtualService"
                    .into(),
            ),
            (
                HOST_SPLIT_VS,
                vs_ref("vs", &["missing"]),
                host_split(0),
                format!("{http}HTTP Route 'missing' is not found in the defined Virtual Service."),
            ),
            (
                &two_routes,
                vs_ref("vs", &[]),
                host_split(0),
                format!("{http}{omitted_http}"),
            ),
            (
                HOST_SPLIT_VS,
                vs_ref("vs", &["primary"]),
                demo(0, &[]),
                format!("{http}Canary Service 'canary-service' not found in route"),
            ),
            (
                HTTP_TLS_SPLIT_VS,
                tls_mismatch,
                host_split(0),
                "Istio VirtualService has invalid TLS routes. Error: No matching TLS routes \
                 found in the defined Virtual Service."
                    .into(),
            ),
            (
                tcp_vs,
                tcp,
                host_split(0),
                "Istio VirtualService has invalid TCP routes. Error: No matching TCP routes \
                 found in the defined Virtual Service."
                    .into(),
            ),
        ];
        for (vs, reference, desired, message) in cases {
            assert_eq!(
                check_routes(&yaml(vs), &reference, None, &desired),
                Err(RouterError::new(message)),
                "{vs}"
            );
        }
    }

    #[test]
    fn managed_routes_do_not_count_when_routes_are_omitted() {
        let two_routes = yaml(&format!("{HOST_SPLIT_VS}  - name: header\n"));
        let mut desired = host_split(0);
        desired.managed_routes = vec!["header".into()];
        assert_eq!(
            check_routes(&two_routes, &vs_ref("vs", &[]), None, &desired),
            Ok(())
        );
    }

    #[test]
    fn mirror_routes_are_not_checked() {
        let vs = format!(
            "{HOST_SPLIT_VS}  - name: mirror\n    mirror: {{host: x}}\n    route: [{{destination: {{host: x}}}}]\n"
        );
        let mut desired = host_split(0);
        desired.managed_routes = vec!["mirror".into()];
        assert_eq!(
            check_routes(&yaml(&vs), &vs_ref("vs", &["primary"]), None, &desired),
            Ok(())
        );
        // set_weight weights the mirror route, and so needs it to reach both sides.
        assert_eq!(
            set_weight_error(&yaml(&vs), &desired),
            Some("Canary Service 'istio-host-split-canary' not found in route".into())
        );
    }

    fn set_weight_error(vs: &Value, desired: &Desired) -> Option<String> {
        crate::istio::set_weight(vs, &vs_ref("vs", &["primary"]), None, desired)
            .err()
            .map(|e| e.0)
    }
}
