//! Turns an [`Evaluation`] into the pod status a kubelet would report.
//!
//! Timestamps are whole seconds (the API stores no more), and a condition keeps its
//! `lastTransitionTime` while its status does not change, so that reporting the same outcome
//! twice yields an identical status and no write.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::rules::{ContainerOutcome, Evaluation, RunState, Termination};

/// What besides the evaluation goes into a status.
pub struct StatusContext<'a> {
    /// The status the pod has now.
    pub current: Option<&'a PodStatus>,
    pub uid: &'a str,
    /// When the kubelet started the pod; offsets in the evaluation count from here.
    pub start: Timestamp,
    pub now: Timestamp,
    pub host_ip: &'a str,
}

/// The full status for the pod, ready to be written to the status subresource.
pub fn desired_status(eval: &Evaluation, ctx: &StatusContext<'_>) -> PodStatus {
    let pod_ip = ctx
        .current
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_else(|| pod_ip_for(ctx.uid));
    PodStatus {
        phase: Some(eval.phase.as_str().to_string()),
        host_ip: Some(ctx.host_ip.to_string()),
        pod_ip: Some(pod_ip.clone()),
        pod_ips: Some(vec![PodIP { ip: pod_ip }]),
        start_time: Some(whole_seconds(ctx.start)),
        conditions: Some(conditions(eval, ctx)),
        container_statuses: Some(
            eval.containers
                .iter()
                .map(|c| container_status(c, ctx))
                .collect(),
        ),
        ..PodStatus::default()
    }
}

/// Whether writing `desired` would change any field the kubelet owns.
pub fn needs_update(current: Option<&PodStatus>, desired: &PodStatus) -> bool {
    let Some(current) = current else {
        return true;
    };
    current.phase != desired.phase
        || current.pod_ip != desired.pod_ip
        || current.host_ip != desired.host_ip
        || current.start_time != desired.start_time
        || current.conditions != desired.conditions
        || current.container_statuses != desired.container_statuses
}

/// Whether a status says the pod is Ready.
pub fn is_ready(status: Option<&PodStatus>) -> bool {
    status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn conditions(eval: &Evaluation, ctx: &StatusContext<'_>) -> Vec<PodCondition> {
    let finished = eval.phase.is_terminal();
    let unready: Vec<&str> = eval
        .containers
        .iter()
        .filter(|c| !c.ready)
        .map(|c| c.name.as_str())
        .collect();
    let (reason, message) = if finished {
        (Some("PodCompleted".to_string()), None)
    } else if unready.is_empty() {
        (None, None)
    } else {
        (
            Some("ContainersNotReady".to_string()),
            Some(format!(
                "containers with unready status: [{}]",
                unready.join(" ")
            )),
        )
    };
    let containers_ready = !finished && unready.is_empty();
    let condition = |type_: &str, ok: bool, reason: Option<String>, message: Option<String>| {
        let status = if ok { "True" } else { "False" };
        let since = ctx
            .current
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.type_ == type_ && c.status == status)
            .and_then(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| whole_seconds(ctx.now));
        PodCondition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason,
            message,
            last_transition_time: Some(since),
            ..PodCondition::default()
        }
    };
    vec![
        condition("Initialized", true, None, None),
        condition("Ready", eval.ready(), reason.clone(), message.clone()),
        condition("ContainersReady", containers_ready, reason, message),
        condition("PodScheduled", true, None, None),
    ]
}

fn container_status(c: &ContainerOutcome, ctx: &StatusContext<'_>) -> ContainerStatus {
    let has_run = !matches!(c.state, RunState::Waiting { .. }) || c.last_termination.is_some();
    let container_id =
        has_run.then(|| format!("fake://{}/{}/{}", ctx.uid, c.name, c.restart_count));
    let state = match &c.state {
        RunState::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.to_string()),
                message: Some(message.clone()),
            }),
            ..ContainerState::default()
        },
        RunState::Running { since } => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: Some(offset(ctx, *since)),
            }),
            ..ContainerState::default()
        },
        RunState::Terminated(t) => terminated(t, ctx, container_id.clone()),
    };
    let last_state = c
        .last_termination
        .as_ref()
        .map(|t| terminated(t, ctx, container_id.clone()))
        .unwrap_or_default();
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone(),
        image_id: if has_run {
            format!("fake-image://{}", c.image)
        } else {
            String::new()
        },
        container_id,
        ready: c.ready,
        started: Some(c.started),
        restart_count: c.restart_count,
        state: Some(state),
        last_state: Some(last_state),
        ..ContainerStatus::default()
    }
}

fn terminated(
    t: &Termination,
    ctx: &StatusContext<'_>,
    container_id: Option<String>,
) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: t.exit_code,
            reason: Some(t.reason.to_string()),
            started_at: Some(offset(ctx, t.started)),
            finished_at: Some(offset(ctx, t.finished)),
            container_id,
            ..ContainerStateTerminated::default()
        }),
        ..ContainerState::default()
    }
}

fn offset(ctx: &StatusContext<'_>, by: Duration) -> Time {
    let at = SignedDuration::try_from(by)
        .ok()
        .and_then(|d| ctx.start.checked_add(d).ok())
        .unwrap_or(ctx.start);
    whole_seconds(at)
}

fn whole_seconds(ts: Timestamp) -> Time {
    Time(Timestamp::from_second(ts.as_second()).unwrap_or(ts))
}

/// A stable address in 10.64.0.0/10 derived from the pod's uid.
pub fn pod_ip_for(uid: &str) -> String {
    // FNV-1a: cheap, stable across runs, spreads uids evenly.
    let hash = uid.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let host = hash & 0x003f_ffff;
    let last = (host & 0xff).max(1);
    format!("10.{}.{}.{}", 64 + (host >> 16), (host >> 8) & 0xff, last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_kubelet::rules::{PodFacts, Timings, evaluate};
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn pod(image: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "uid": "u-1"},
            "spec": {"containers": [{"name": "app", "image": image}]}
        }))
        .unwrap()
    }

    fn status_at(pod: &Pod, current: Option<&PodStatus>, elapsed_s: i64) -> PodStatus {
        let start: Timestamp = "2026-01-01T00:00:00.400Z".parse().unwrap();
        let now = start + SignedDuration::from_secs(elapsed_s);
        let (facts, _) = PodFacts::from_pod(pod);
        let eval = evaluate(
            &facts,
            &Timings::default(),
            Duration::from_secs(elapsed_s as u64),
        );
        let ctx = StatusContext {
            current,
            uid: "u-1",
            start,
            now,
            host_ip: "127.0.0.1",
        };
        desired_status(&eval, &ctx)
    }

    fn condition<'a>(status: &'a PodStatus, type_: &str) -> &'a PodCondition {
        status
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap()
    }

    #[test]
    fn ready_transition_moves_only_the_changed_conditions() {
        let p = pod("nginx");
        let starting = status_at(&p, None, 0);
        assert_eq!(starting.phase.as_deref(), Some("Running"));
        assert!(!is_ready(Some(&starting)));
        assert_eq!(
            condition(&starting, "Ready").message.as_deref(),
            Some("containers with unready status: [app]")
        );
        let ready = status_at(&p, Some(&starting), 5);
        assert!(is_ready(Some(&ready)));
        assert!(needs_update(Some(&starting), &ready));
        let ready_since = condition(&ready, "Ready")
            .last_transition_time
            .clone()
            .unwrap();
        assert_eq!(ready_since.0.to_string(), "2026-01-01T00:00:05Z");
        let scheduled = condition(&ready, "PodScheduled")
            .last_transition_time
            .clone();
        assert_eq!(
            scheduled,
            condition(&starting, "PodScheduled").last_transition_time
        );
        assert_eq!(
            ready.start_time.unwrap().0.to_string(),
            "2026-01-01T00:00:00Z"
        );
    }

    #[test]
    fn reporting_the_same_outcome_again_changes_nothing() {
        let p = pod("nginx");
        let first = status_at(&p, None, 5);
        let again = status_at(&p, Some(&first), 50);
        assert_eq!(first, again);
        assert!(!needs_update(Some(&first), &again));
    }

    #[test]
    fn status_survives_an_api_round_trip_unchanged() {
        let p = pod("nginx");
        let sent = status_at(&p, None, 5);
        let stored: PodStatus =
            serde_json::from_value(serde_json::to_value(&sent).unwrap()).unwrap();
        assert!(!needs_update(
            Some(&stored),
            &status_at(&p, Some(&stored), 9)
        ));
    }

    #[test]
    fn image_pull_failure_reports_waiting_without_container_id() {
        let status = status_at(&pod("does-not-exist:1"), None, 10);
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        let c = &status.container_statuses.as_ref().unwrap()[0];
        let waiting = c.state.as_ref().unwrap().waiting.as_ref().unwrap();
        assert_eq!(waiting.reason.as_deref(), Some("ImagePullBackOff"));
        assert_eq!(c.container_id, None);
        assert_eq!(c.image_id, "");
        assert!(!c.ready);
    }

    #[test]
    fn pod_ips_are_stable_and_in_range() {
        let a = pod_ip_for("0b7d5a8e-1");
        assert_eq!(a, pod_ip_for("0b7d5a8e-1"));
        assert_ne!(a, pod_ip_for("0b7d5a8e-2"));
        let octets: Vec<u32> = a.split('.').map(|o| o.parse().unwrap()).collect();
        assert_eq!(octets[0], 10);
        assert!((64..128).contains(&octets[1]), "{a}");
        assert!(octets[3] >= 1, "{a}");
    }
}
