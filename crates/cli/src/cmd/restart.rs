//! `restart`: ask the controller to replace every pod created before a point in time.

use std::time::Duration;

use anyhow::Context as _;
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::{emit, merge_patch, rollouts};
use crate::cli::RestartArgs;
use crate::kube_target::Target;

pub async fn run(target: &Target, args: &RestartArgs) -> anyhow::Result<()> {
    let patch = restart_patch(Timestamp::now(), args.delay)?;
    merge_patch(&rollouts(target), &args.name, &patch).await?;
    let when = if args.delay.is_zero() {
        String::new()
    } else {
        format!(" in {}", humantime_like(args.delay))
    };
    emit(&format!("rollout '{}' restarts{when}\n", args.name))
}

/// Merge patch setting `spec.restartAt` to `now + delay`, in whole seconds, RFC 3339 UTC.
pub fn restart_patch(now: Timestamp, delay: Duration) -> anyhow::Result<Value> {
    let delay = SignedDuration::try_from(delay).context("restart delay is too long")?;
    let at = now
        .checked_add(delay)
        .context("restart time is out of range")?;
    let at = Timestamp::from_second(at.as_second()).context("restart time is out of range")?;
    Ok(json!({"spec": {"restartAt": at.to_string()}}))
}

/// A delay as the user would write it again (`90s` → `1m30s`).
fn humantime_like(delay: Duration) -> String {
    let total = delay.as_secs();
    let (h, m, s) = (total / 3600, total / 60 % 60, total % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_at_is_now_plus_delay_in_utc_seconds() {
        let now: Timestamp = "2024-05-01T12:00:00.734Z".parse().unwrap();
        assert_eq!(
            restart_patch(now, Duration::ZERO).unwrap().to_string(),
            r#"{"spec":{"restartAt":"2024-05-01T12:00:00Z"}}"#
        );
        assert_eq!(
            restart_patch(now, Duration::from_secs(3725))
                .unwrap()
                .to_string(),
            r#"{"spec":{"restartAt":"2024-05-01T13:02:05Z"}}"#
        );
        assert!(restart_patch(now, Duration::from_secs(u64::MAX)).is_err());
    }

    #[test]
    fn delays_read_back_as_written() {
        assert_eq!(humantime_like(Duration::from_secs(10)), "10s");
        assert_eq!(humantime_like(Duration::from_secs(90)), "1m30s");
        assert_eq!(humantime_like(Duration::from_secs(7200)), "2h");
        assert_eq!(humantime_like(Duration::from_millis(500)), "0s");
    }
}
