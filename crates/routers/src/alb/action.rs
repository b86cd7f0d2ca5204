//! The annotation values the load balancer controller reads: forward actions (target groups
//! with weights) and header conditions, as Argo writes them.

use serde::Serialize;
use sluice_api::rollout::{AlbTrafficRouting, HeaderRoutingMatch};

use super::go_json;
use crate::{Desired, RouterError};

/// The forward action. Fields are declared in the order Argo writes them; the names are the
/// load balancer controller's.
#[derive(Serialize)]
struct Action<'a> {
    #[serde(rename = "Type")]
    kind: &'static str,
    #[serde(rename = "ForwardConfig")]
    forward_config: ForwardConfig<'a>,
}

#[derive(Serialize)]
struct ForwardConfig<'a> {
    #[serde(rename = "TargetGroups")]
    target_groups: Vec<TargetGroup<'a>>,
    #[serde(
        rename = "TargetGroupStickinessConfig",
        skip_serializing_if = "Option::is_none"
    )]
    stickiness: Option<Stickiness>,
}

/// One destination. The port is a string (the controller also accepts port names); the weight
/// is always written, 0 included.
#[derive(Serialize)]
struct TargetGroup<'a> {
    #[serde(rename = "ServiceName", skip_serializing_if = "str::is_empty")]
    service_name: &'a str,
    #[serde(rename = "ServicePort", skip_serializing_if = "String::is_empty")]
    service_port: String,
    #[serde(rename = "Weight")]
    weight: i64,
}

#[derive(Serialize)]
struct Stickiness {
    #[serde(rename = "Enabled")]
    enabled: bool,
    #[serde(rename = "DurationSeconds")]
    duration_seconds: i64,
}

/// The longest target-group stickiness AWS accepts: 7 days.
const MAX_STICKINESS_SECONDS: i64 = 604_800;

/// The weights of an ALB action always add up to 100 in Argo: `maxTrafficWeight` is not
/// allowed with ALB.
const TOTAL_WEIGHT: i64 = 100;

/// `stickinessConfig` when enabled, checked against the range AWS accepts.
fn stickiness(cfg: &AlbTrafficRouting) -> Result<Option<Stickiness>, RouterError> {
    let Some(s) = cfg
        .stickiness_config
        .as_ref()
        .filter(|s| s.enabled == Some(true))
    else {
        return Ok(None);
    };
    let duration_seconds = s.duration_seconds.unwrap_or(0);
    if !(1..=MAX_STICKINESS_SECONDS).contains(&duration_seconds) {
        return Err(RouterError::new(
            "TargetGroupStickinessConfig's duration must be between 1 and 604800 seconds (7 days)!",
        ));
    }
    Ok(Some(Stickiness {
        enabled: true,
        duration_seconds,
    }))
}

fn action_text(
    cfg: &AlbTrafficRouting,
    target_groups: Vec<TargetGroup<'_>>,
) -> Result<String, RouterError> {
    Ok(go_json::to_string(&Action {
        kind: "forward",
        forward_config: ForwardConfig {
            target_groups,
            stickiness: stickiness(cfg)?,
        },
    }))
}

fn port(cfg: &AlbTrafficRouting) -> String {
    cfg.service_port.unwrap_or_default().to_string()
}

/// The weights: canary at `desired.weight`, each experiment Service at its weight, stable with
/// the rest of 100 (never below 0).
pub(crate) fn forward_action(
    cfg: &AlbTrafficRouting,
    desired: &Desired,
) -> Result<String, RouterError> {
    let group = |service_name, weight| TargetGroup {
        service_name,
        service_port: port(cfg),
        weight,
    };
    let canary = i64::from(desired.weight);
    let mut groups = vec![group(&desired.canary_service, canary)];
    let mut stable = TOTAL_WEIGHT - canary;
    for d in &desired.additional {
        groups.push(group(&d.service_name, i64::from(d.weight)));
        stable -= i64::from(d.weight);
    }
    groups.push(group(&desired.stable_service, stable.max(0)));
    action_text(cfg, groups)
}

/// A header route's action: everything to the canary.
pub(crate) fn header_action(
    cfg: &AlbTrafficRouting,
    desired: &Desired,
) -> Result<String, RouterError> {
    let canary = TargetGroup {
        service_name: &desired.canary_service,
        service_port: port(cfg),
        weight: TOTAL_WEIGHT,
    };
    action_text(cfg, vec![canary])
}

#[derive(Serialize)]
struct Condition<'a> {
    field: &'static str,
    #[serde(rename = "httpHeaderConfig")]
    http_header_config: HeaderConfig<'a>,
}

#[derive(Serialize)]
struct HeaderConfig<'a> {
    #[serde(rename = "httpHeaderName")]
    http_header_name: &'a str,
    values: Vec<&'a str>,
}

/// A header route's conditions: one `http-header` condition per header name, holding the
/// exact values given for it in order. The load balancer ANDs conditions and ORs the values of
/// one condition, so two matches on the same header mean "either value", as they would in the
/// other routers. Only `exact` is read: validation rejects other match types with ALB.
pub(crate) fn header_conditions(matches: &[HeaderRoutingMatch]) -> String {
    let mut conditions: Vec<Condition<'_>> = Vec::new();
    for m in matches {
        let name = m.header_name.as_deref().unwrap_or_default();
        let value = m
            .header_value
            .as_ref()
            .and_then(|v| v.exact.as_deref())
            .unwrap_or_default();
        match conditions
            .iter_mut()
            .find(|c| c.http_header_config.http_header_name == name)
        {
            Some(c) => c.http_header_config.values.push(value),
            None => conditions.push(Condition {
                field: "http-header",
                http_header_config: HeaderConfig {
                    http_header_name: name,
                    values: vec![value],
                },
            }),
        }
    }
    go_json::to_string(&conditions)
}

#[cfg(test)]
mod tests {
    use sluice_api::rollout::{StickinessConfig, StringMatch};

    use super::*;
    use crate::Destination;
    use crate::alb::fixtures::{cfg, desired};

    fn sticky(enabled: Option<bool>, duration: Option<i64>) -> AlbTrafficRouting {
        AlbTrafficRouting {
            stickiness_config: Some(StickinessConfig {
                enabled,
                duration_seconds: duration,
            }),
            ..cfg()
        }
    }

    #[test]
    fn weights() {
        let experiment = |name: &str, weight| Destination {
            service_name: name.into(),
            pod_template_hash: "h".into(),
            weight,
        };
        let at = |weight, additional| Desired {
            weight,
            additional,
            ..desired()
        };
        let cases = [
            (
                cfg(),
                at(10, vec![]),
                r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"alb-canary-desired","ServicePort":"80","Weight":10},{"ServiceName":"alb-canary-stable","ServicePort":"80","Weight":90}]}}"#,
            ),
            (
                cfg(),
                at(0, vec![]),
                r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"alb-canary-desired","ServicePort":"80","Weight":0},{"ServiceName":"alb-canary-stable","ServicePort":"80","Weight":100}]}}"#,
            ),
            (
                cfg(),
                at(10, vec![experiment("alb-canary-experiment-alb", 20)]),
                r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"alb-canary-desired","ServicePort":"80","Weight":10},{"ServiceName":"alb-canary-experiment-alb","ServicePort":"80","Weight":20},{"ServiceName":"alb-canary-stable","ServicePort":"80","Weight":70}]}}"#,
            ),
            (
                sticky(Some(true), Some(300)),
                at(5, vec![experiment("exp-a", 5), experiment("exp-b", 10)]),
                r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"alb-canary-desired","ServicePort":"80","Weight":5},{"ServiceName":"exp-a","ServicePort":"80","Weight":5},{"ServiceName":"exp-b","ServicePort":"80","Weight":10},{"ServiceName":"alb-canary-stable","ServicePort":"80","Weight":80}],"TargetGroupStickinessConfig":{"Enabled":true,"DurationSeconds":300}}}"#,
            ),
            // Disabled stickiness is not written, whatever its duration.
            (
                sticky(Some(false), Some(0)),
                at(100, vec![]),
                r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"alb-canary-desired","ServicePort":"80","Weight":100},{"ServiceName":"alb-canary-stable","ServicePort":"80","Weight":0}]}}"#,
            ),
            // More than 100 asked: stable gets 0, not a negative weight.
            (
                AlbTrafficRouting {
                    service_port: Some(8080),
                    ..cfg()
                },
                at(90, vec![experiment("exp", 20)]),
                r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"alb-canary-desired","ServicePort":"8080","Weight":90},{"ServiceName":"exp","ServicePort":"8080","Weight":20},{"ServiceName":"alb-canary-stable","ServicePort":"8080","Weight":0}]}}"#,
            ),
        ];
        for (cfg, desired, want) in cases {
            assert_eq!(forward_action(&cfg, &desired).as_deref(), Ok(want));
        }
    }

    #[test]
    fn stickiness_duration_range() {
        let err = Err(RouterError::new(
            "TargetGroupStickinessConfig's duration must be between 1 and 604800 seconds (7 days)!",
        ));
        let cases = [
            (Some(0), false),
            (None, false),
            (Some(-5), false),
            (Some(604_801), false),
            (Some(1), true),
            (Some(604_800), true),
        ];
        for (duration, ok) in cases {
            let cfg = sticky(Some(true), duration);
            let got = forward_action(&cfg, &desired());
            assert_eq!(got.is_ok(), ok, "{duration:?}");
            if !ok {
                assert_eq!(got, err);
                assert_eq!(header_action(&cfg, &desired()), err);
            }
        }
        assert!(forward_action(&sticky(None, Some(0)), &desired()).is_ok());
    }

    #[test]
    fn header_action_sends_everything_to_the_canary() {
        assert_eq!(
            header_action(&cfg(), &desired()).as_deref(),
            Ok(
                r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"alb-canary-desired","ServicePort":"80","Weight":100}]}}"#
            )
        );
        assert_eq!(
            header_action(&sticky(Some(true), Some(3600)), &desired()).as_deref(),
            Ok(
                r#"{"Type":"forward","ForwardConfig":{"TargetGroups":[{"ServiceName":"alb-canary-desired","ServicePort":"80","Weight":100}],"TargetGroupStickinessConfig":{"Enabled":true,"DurationSeconds":3600}}}"#
            )
        );
    }

    #[test]
    fn conditions() {
        let m = |name: &str, exact: &str| HeaderRoutingMatch {
            header_name: Some(name.into()),
            header_value: Some(StringMatch {
                exact: Some(exact.into()),
                ..StringMatch::default()
            }),
        };
        let cases = [
            (
                vec![m("Custom-Header", "Mozilla*")],
                r#"[{"field":"http-header","httpHeaderConfig":{"httpHeaderName":"Custom-Header","values":["Mozilla*"]}}]"#,
            ),
            (
                vec![
                    m("origin", "https://one"),
                    m("x-env", "qa"),
                    m("origin", "https://two"),
                ],
                r#"[{"field":"http-header","httpHeaderConfig":{"httpHeaderName":"origin","values":["https://one","https://two"]}},{"field":"http-header","httpHeaderConfig":{"httpHeaderName":"x-env","values":["qa"]}}]"#,
            ),
            // Escaped as Go escapes it.
            (
                vec![m("q", "a&b<c>")],
                r#"[{"field":"http-header","httpHeaderConfig":{"httpHeaderName":"q","values":["a\u0026b\u003cc\u003e"]}}]"#,
            ),
            (vec![], "[]"),
        ];
        for (matches, want) in cases {
            assert_eq!(header_conditions(&matches), want);
        }
    }
}
