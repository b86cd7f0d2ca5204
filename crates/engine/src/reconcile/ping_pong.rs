//! Ping-pong Services (`canary.pingPong`): instead of a canary and a stable Service, two
//! Services that swap roles at every promotion. `status.canary.stablePingPong` says which one
//! fronts the stable pods; the other one is the canary's. A promotion only flips the field:
//! the canary's Service already selects the new pods, so it becomes the stable one without a
//! selector change, and the next update points the other Service at its new pods.

use sluice_api::rollout::{CanaryStatus, CanaryStrategy, PingPongType, RolloutStatus};

/// The (canary, stable) Service names by `stablePingPong`: `ping` means ping is stable;
/// anything else, including unset, means pong is stable (a first deploy flips it to `ping`).
pub(super) fn roles(
    canary: &CanaryStrategy,
    status: Option<&RolloutStatus>,
) -> Option<(String, String)> {
    let pp = canary.ping_pong.as_ref()?;
    let ping = pp.ping_service.clone().unwrap_or_default();
    let pong = pp.pong_service.clone().unwrap_or_default();
    let stable_is_ping = status
        .and_then(|s| s.canary.as_ref())
        .and_then(|c| c.stable_ping_pong.as_ref())
        == Some(&PingPongType::Ping);
    Some(if stable_is_ping {
        (pong, ping)
    } else {
        (ping, pong)
    })
}

/// At every change of the stable ReplicaSet (the first deploy included) the canary's Service
/// becomes the stable one.
pub(super) fn flip(canary: &CanaryStrategy, status: &mut RolloutStatus) {
    if canary.ping_pong.is_none() {
        return;
    }
    let c = status.canary.get_or_insert_with(CanaryStatus::default);
    c.stable_ping_pong = Some(match c.stable_ping_pong {
        Some(PingPongType::Ping) => PingPongType::Pong,
        _ => PingPongType::Ping,
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn strategy() -> CanaryStrategy {
        serde_json::from_value(json!({"pingPong": {"pingService": "ping", "pongService": "pong"}}))
            .unwrap()
    }

    fn status(v: Option<&str>) -> RolloutStatus {
        serde_json::from_value(json!({"canary": {"stablePingPong": v}})).unwrap()
    }

    #[test]
    fn roles_follow_the_stable_ping_pong_field() {
        let s = strategy();
        let pair = |a: &str, b: &str| Some((a.to_string(), b.to_string()));
        assert_eq!(roles(&s, None), pair("ping", "pong"));
        assert_eq!(roles(&s, Some(&status(None))), pair("ping", "pong"));
        assert_eq!(roles(&s, Some(&status(Some("ping")))), pair("pong", "ping"));
        assert_eq!(roles(&s, Some(&status(Some("pong")))), pair("ping", "pong"));
        assert_eq!(roles(&CanaryStrategy::default(), None), None);
    }

    #[test]
    fn every_promotion_flips_and_the_first_one_says_ping() {
        let s = strategy();
        let mut st = RolloutStatus::default();
        flip(&s, &mut st);
        assert_eq!(
            st.canary.as_ref().unwrap().stable_ping_pong,
            Some(PingPongType::Ping)
        );
        flip(&s, &mut st);
        assert_eq!(
            st.canary.as_ref().unwrap().stable_ping_pong,
            Some(PingPongType::Pong)
        );
        let mut plain = RolloutStatus::default();
        flip(&CanaryStrategy::default(), &mut plain);
        assert_eq!(plain.canary, None);
    }
}
