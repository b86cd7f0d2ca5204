//! `setHeaderRoute` for NGINX, which Argo refuses (its #2830): ingress-nginx sends a request to
//! the canary Ingress's backend when a header matches (`canary-by-header` with
//! `canary-by-header-value` or `canary-by-header-pattern`), ahead of the weight, so the header
//! route lives in the annotations of the canary Ingress the Rollout already owns.
//!
//! ingress-nginx reads one header per canary Ingress, so a Rollout has one header route at a
//! time: a step naming another route replaces it (validation refuses a step with more than one
//! match). The route's name is kept beside the annotations so that a step without `match` removes
//! only its own route.

use serde_json::{Map, Value};
use sluice_api::rollout::{NginxTrafficRouting, SetHeaderRoute, StringMatch};

use super::annotation_prefix;
use crate::ingress::{annotations, name, with_annotations};
use crate::{Edit, EditResult, RouterError};

/// The annotation naming the header route the canary Ingress holds. Argo does not read it.
pub const HEADER_ROUTE_ANNOTATION: &str = "rollouts.sluice.dev/header-route";

/// The ingress-nginx annotations a header route writes, without their prefix.
pub const HEADER_ANNOTATIONS: [&str; 3] = [
    "canary-by-header",
    "canary-by-header-value",
    "canary-by-header-pattern",
];

/// The canary Ingress with the header route of `step` set, or (without `match`) removed if it
/// is the one the Ingress holds. `None` when nothing changes.
pub fn set_header_route(
    canary: &Value,
    cfg: &NginxTrafficRouting,
    step: &SetHeaderRoute,
) -> EditResult {
    let route = crate::router::step_name(step.name.as_deref(), "setHeaderRoute")?;
    let mut annotations = annotations(canary)?;
    let prefix = annotation_prefix(cfg);
    match step.match_.as_deref() {
        Some([]) => {
            return Err(RouterError::new(format!(
                "setHeaderRoute `{route}` has an empty match: NGINX needs the header to route by"
            )));
        }
        None => {
            if holds(&annotations) != Some(route) {
                return Ok(None);
            }
            clear(&mut annotations, prefix);
        }
        Some([condition]) => {
            let header = condition
                .header_name
                .as_deref()
                .filter(|h| !h.is_empty())
                .ok_or_else(|| {
                    RouterError::new(format!("setHeaderRoute `{route}` has no headerName"))
                })?;
            let (key, value) = header_value(condition.header_value.as_ref()).ok_or_else(|| {
                RouterError::new(format!(
                    "setHeaderRoute `{route}` needs one of exact, prefix or regex for `{header}`"
                ))
            })?;
            clear(&mut annotations, prefix);
            annotations.insert(format!("{prefix}/canary-by-header"), header.into());
            annotations.insert(format!("{prefix}/{key}"), value.into());
            annotations.insert(HEADER_ROUTE_ANNOTATION.into(), route.into());
        }
        Some(more) => {
            return Err(RouterError::new(format!(
                "setHeaderRoute `{route}` has {} matches: NGINX routes by one header",
                more.len()
            )));
        }
    }
    finish(canary, annotations, format!("headerRoute '{route}'"))
}

/// The canary Ingress without any header route (the update is over or aborted).
pub fn remove_header_route(canary: &Value, cfg: &NginxTrafficRouting) -> EditResult {
    let mut annotations = annotations(canary)?;
    if holds(&annotations).is_none() {
        return Ok(None);
    }
    clear(&mut annotations, annotation_prefix(cfg));
    finish(canary, annotations, "no header route".into())
}

/// The name of the header route the annotations hold.
fn holds(annotations: &Map<String, Value>) -> Option<&str> {
    annotations.get(HEADER_ROUTE_ANNOTATION)?.as_str()
}

fn clear(annotations: &mut Map<String, Value>, prefix: &str) {
    for key in HEADER_ANNOTATIONS {
        annotations.remove(&format!("{prefix}/{key}"));
    }
    annotations.remove(HEADER_ROUTE_ANNOTATION);
}

/// The annotation (`canary-by-header-value` or `-pattern`) and value that make ingress-nginx
/// match as the step asks. ingress-nginx searches a pattern anywhere in the value, where Argo's
/// other routers match a regex against the whole value, so patterns are anchored; a prefix is
/// an anchored pattern of the escaped prefix.
fn header_value(m: Option<&StringMatch>) -> Option<(&'static str, String)> {
    let m = m?;
    let some = |v: &Option<String>| v.clone().filter(|s| !s.is_empty());
    if let Some(exact) = some(&m.exact) {
        return Some(("canary-by-header-value", exact));
    }
    if let Some(prefix) = some(&m.prefix) {
        return Some(("canary-by-header-pattern", format!("^{}", escaped(&prefix))));
    }
    let regex = some(&m.regex)?;
    Some(("canary-by-header-pattern", format!("^(?:{regex})$")))
}

/// `text` as a PCRE pattern matching it literally: every character that is not a letter, a
/// digit or `_` is escaped (PCRE treats an escaped non-alphanumeric as itself).
fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if !(c.is_ascii_alphanumeric() || c == '_' || !c.is_ascii()) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn finish(canary: &Value, annotations: Map<String, Value>, what: String) -> EditResult {
    let updated = with_annotations(canary, annotations)?;
    if &updated == canary {
        return Ok(None);
    }
    let message = format!("Updating Ingress `{}` to {what}", name(canary));
    Ok(Some(Edit {
        object: updated,
        event: ("PatchingCanaryIngress", message),
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use sluice_api::rollout::HeaderRoutingMatch;

    use super::*;
    use crate::nginx::fixtures::cfg;

    fn canary() -> Value {
        json!({
            "metadata": {
                "name": "web-web-ingress-canary",
                "resourceVersion": "7",
                "annotations": {
                    "nginx.ingress.kubernetes.io/canary": "true",
                    "nginx.ingress.kubernetes.io/canary-weight": "10",
                },
            },
            "spec": {},
        })
    }

    fn step(route: &str, value: Option<StringMatch>) -> SetHeaderRoute {
        SetHeaderRoute {
            name: Some(route.into()),
            match_: value.map(|v| {
                vec![HeaderRoutingMatch {
                    header_name: Some("X-Canary".into()),
                    header_value: Some(v),
                }]
            }),
        }
    }

    fn exact(v: &str) -> StringMatch {
        StringMatch {
            exact: Some(v.into()),
            ..StringMatch::default()
        }
    }

    fn annotation<'a>(ingress: &'a Value, key: &str) -> Option<&'a str> {
        ingress["metadata"]["annotations"].get(key)?.as_str()
    }

    fn set(ingress: &Value, step: &SetHeaderRoute) -> Value {
        set_header_route(ingress, &cfg(), step).unwrap().unwrap().object
    }

    #[test]
    fn an_exact_match_is_a_header_and_its_value() {
        let edit = set_header_route(&canary(), &cfg(), &step("beta", Some(exact("yes"))))
            .unwrap()
            .unwrap();
        let i = &edit.object;
        let p = "nginx.ingress.kubernetes.io";
        assert_eq!(annotation(i, &format!("{p}/canary-by-header")), Some("X-Canary"));
        assert_eq!(annotation(i, &format!("{p}/canary-by-header-value")), Some("yes"));
        assert_eq!(annotation(i, &format!("{p}/canary-by-header-pattern")), None);
        assert_eq!(annotation(i, HEADER_ROUTE_ANNOTATION), Some("beta"));
        // The weight and everything else stay.
        assert_eq!(annotation(i, &format!("{p}/canary-weight")), Some("10"));
        assert_eq!(i["metadata"]["resourceVersion"], "7");
        assert_eq!(
            edit.event.1,
            "Updating Ingress `web-web-ingress-canary` to headerRoute 'beta'"
        );
        // Set again: nothing to write.
        assert_eq!(
            set_header_route(i, &cfg(), &step("beta", Some(exact("yes")))),
            Ok(None)
        );
    }

    #[test]
    fn prefixes_and_regexes_are_anchored_patterns() {
        let prefix = StringMatch {
            prefix: Some("v1.2+".into()),
            ..StringMatch::default()
        };
        let i = set(&canary(), &step("beta", Some(prefix)));
        let key = "nginx.ingress.kubernetes.io/canary-by-header-pattern";
        assert_eq!(annotation(&i, key), Some(r"^v1\.2\+"));
        let regex = StringMatch {
            regex: Some("a|b".into()),
            ..StringMatch::default()
        };
        let i = set(&i, &step("beta", Some(regex)));
        assert_eq!(annotation(&i, key), Some("^(?:a|b)$"));
        // The value of the earlier exact match does not linger.
        let i = set(&i, &step("beta", Some(exact("x"))));
        assert_eq!(annotation(&i, key), None);
    }

    #[test]
    fn a_step_without_match_removes_only_its_own_route() {
        let with = set(&canary(), &step("beta", Some(exact("yes"))));
        assert_eq!(set_header_route(&with, &cfg(), &step("other", None)), Ok(None));
        let without = set(&with, &step("beta", None));
        assert_eq!(without, canary());
        assert_eq!(set_header_route(&canary(), &cfg(), &step("beta", None)), Ok(None));
    }

    #[test]
    fn another_route_replaces_the_one_held() {
        let beta = set(&canary(), &step("beta", Some(exact("yes"))));
        let gamma = set(&beta, &step("gamma", Some(exact("g"))));
        assert_eq!(annotation(&gamma, HEADER_ROUTE_ANNOTATION), Some("gamma"));
        assert_eq!(
            annotation(&gamma, "nginx.ingress.kubernetes.io/canary-by-header-value"),
            Some("g")
        );
        // Removing beta now changes nothing: gamma is held.
        assert_eq!(set_header_route(&gamma, &cfg(), &step("beta", None)), Ok(None));
    }

    #[test]
    fn removal_at_the_end_clears_any_route() {
        let with = set(&canary(), &step("beta", Some(exact("yes"))));
        let edit = remove_header_route(&with, &cfg()).unwrap().unwrap();
        assert_eq!(edit.object, canary());
        assert_eq!(remove_header_route(&canary(), &cfg()), Ok(None));
    }

    #[test]
    fn the_configured_annotation_prefix_is_used() {
        let custom = NginxTrafficRouting {
            annotation_prefix: Some("custom.nginx.org".into()),
            ..cfg()
        };
        let i = set_header_route(&canary(), &custom, &step("beta", Some(exact("yes"))))
            .unwrap()
            .unwrap()
            .object;
        assert_eq!(annotation(&i, "custom.nginx.org/canary-by-header"), Some("X-Canary"));
        let cleared = remove_header_route(&i, &custom).unwrap().unwrap().object;
        assert_eq!(cleared, canary());
    }

    #[test]
    fn what_nginx_cannot_express_is_an_error() {
        let mut two = step("beta", Some(exact("yes")));
        let first = two.match_.as_ref().unwrap()[0].clone();
        two.match_.as_mut().unwrap().push(first);
        let err = set_header_route(&canary(), &cfg(), &two).unwrap_err();
        assert!(err.to_string().contains("NGINX routes by one header"), "{err}");
        let empty = step("beta", Some(StringMatch::default()));
        assert!(set_header_route(&canary(), &cfg(), &empty).is_err());
        let no_match = SetHeaderRoute {
            match_: Some(Vec::new()),
            ..step("beta", None)
        };
        assert!(set_header_route(&canary(), &cfg(), &no_match).is_err());
        let unnamed = SetHeaderRoute {
            name: None,
            ..step("beta", Some(exact("yes")))
        };
        assert!(set_header_route(&canary(), &cfg(), &unnamed).is_err());
        let malformed = json!({"metadata": {"annotations": "x"}});
        assert!(remove_header_route(&malformed, &cfg()).is_err());
    }
}
