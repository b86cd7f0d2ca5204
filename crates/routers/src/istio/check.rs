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
