//! What `get` shows of a pod: its name, age, readiness, restarts and the status word
//! `kubectl get pods` would show.

use k8s_openapi::api::core::v1::Pod;

use super::{PodInfo, created};

pub(super) fn pod_info(pod: &Pod) -> PodInfo {
    let container_statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default();
    PodInfo {
        name: pod.metadata.name.clone().unwrap_or_default(),
        created: created(&pod.metadata),
        status: pod_status(pod),
        ready_containers: container_statuses.iter().filter(|c| c.ready).count(),
        containers: pod.spec.as_ref().map_or(0, |s| s.containers.len()),
        restarts: container_statuses.iter().map(|c| c.restart_count).sum(),
    }
}

/// The pod status word `kubectl get pods` shows: the most telling container state, else the
/// pod phase.
pub(crate) fn pod_status(pod: &Pod) -> String {
    let status = pod.status.as_ref();
    let mut reason = status
        .and_then(|s| s.reason.clone().or_else(|| s.phase.clone()))
        .unwrap_or_else(|| "Unknown".into());

    let init_statuses = status
        .and_then(|s| s.init_container_statuses.as_deref())
        .unwrap_or_default();
    let init_total = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map_or(init_statuses.len(), Vec::len);
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        let state = c.state.as_ref();
        if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
            if t.exit_code == 0 {
                continue;
            }
            reason = match &t.reason {
                Some(r) if !r.is_empty() => format!("Init:{r}"),
                _ if t.signal.unwrap_or(0) != 0 => format!("Init:Signal:{}", t.signal.unwrap_or(0)),
                _ => format!("Init:ExitCode:{}", t.exit_code),
            };
        } else if let Some(r) = state
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref())
            .filter(|r| !r.is_empty() && *r != "PodInitializing")
        {
            reason = format!("Init:{r}");
        } else {
            reason = format!("Init:{i}/{init_total}");
        }
        initializing = true;
        break;
    }

    if !initializing {
        let statuses = status
            .and_then(|s| s.container_statuses.as_deref())
            .unwrap_or_default();
        let mut running = false;
        for c in statuses.iter().rev() {
            let state = c.state.as_ref();
            let waiting = state
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.as_deref())
                .filter(|r| !r.is_empty());
            let terminated = state.and_then(|s| s.terminated.as_ref());
            if let Some(w) = waiting {
                reason = w.to_owned();
            } else if let Some(t) = terminated {
                reason = match &t.reason {
                    Some(r) if !r.is_empty() => r.clone(),
                    _ if t.signal.unwrap_or(0) != 0 => format!("Signal:{}", t.signal.unwrap_or(0)),
                    _ => format!("ExitCode:{}", t.exit_code),
                };
            } else if c.ready && state.and_then(|s| s.running.as_ref()).is_some() {
                running = true;
            }
        }
        if reason == "Completed" && running {
            reason = "Running".into();
        }
    }

    if pod.metadata.deletion_timestamp.is_some() {
        reason = if status.and_then(|s| s.reason.as_deref()) == Some("NodeLost") {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    reason
}
