//! Waiting, at start-up, until the API server serves the kinds the controller watches.
//!
//! A controller started before its CRDs are installed (or before they are Established, or
//! while the API server is still down) would otherwise spin in watch back-offs that say nothing
//! useful. Instead it says once what it waits for, repeats that every
//! [`REMIND_EVERY`], picks the kinds up as soon as they are served, and gives up at once when
//! told to stop.

use std::time::Duration;

use kube::Client;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The group version of every kind the controller watches.
pub const GROUP_VERSION: &str = "argoproj.io/v1alpha1";
/// The resources the controller watches, by their plural names.
pub const WATCHED: &[&str] = &["rollouts", "analysisruns"];
/// How often the API server is asked again.
const POLL: Duration = Duration::from_secs(1);
/// How often a controller still waiting says so again.
const REMIND_EVERY: Duration = Duration::from_secs(30);

/// What the API server answered when asked for the watched kinds.
#[derive(Debug, PartialEq, Eq)]
enum Served {
    All,
    /// These resources are not served (yet): the CRDs are missing or not Established.
    Missing(Vec<String>),
    /// The API server could not be asked.
    Unreachable(String),
}

async fn served(client: &Client) -> Served {
    match client.list_api_group_resources(GROUP_VERSION).await {
        Ok(list) => missing_of(list.resources.iter().map(|r| r.name.as_str())),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            missing_of(std::iter::empty::<&str>())
        }
        Err(e) => Served::Unreachable(e.to_string()),
    }
}

fn missing_of<'a>(served: impl Iterator<Item = &'a str>) -> Served {
    let served: Vec<&str> = served.collect();
    let missing: Vec<String> = WATCHED
        .iter()
        .filter(|w| !served.contains(w))
        .map(|w| format!("{w}.argoproj.io"))
        .collect();
    if missing.is_empty() {
        Served::All
    } else {
        Served::Missing(missing)
    }
}

/// Returns `true` once every watched kind is served, `false` if `stop` fired first.
pub async fn wait_until_served(client: &Client, stop: &CancellationToken) -> bool {
    let mut last: Option<(Served, tokio::time::Instant)> = None;
    loop {
        let now = tokio::select! {
            () = stop.cancelled() => return false,
            now = served(client) => now,
        };
        if now == Served::All {
            if last.is_some() {
                info!("the watched kinds are served now; starting");
            }
            return true;
        }
        let remind = match &last {
            Some((before, at)) => *before != now || at.elapsed() >= REMIND_EVERY,
            None => true,
        };
        if remind {
            match &now {
                Served::Missing(kinds) => warn!(
                    missing = %kinds.join(", "),
                    "waiting for the CRDs to be served (install them with \
                     `kubectl apply --server-side -k manifests/crds`)"
                ),
                Served::Unreachable(e) => {
                    warn!(error = %e, "waiting for the API server to answer")
                }
                Served::All => {}
            }
            last = Some((now, tokio::time::Instant::now()));
        }
        tokio::select! {
            () = stop.cancelled() => return false,
            () = tokio::time::sleep(POLL) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_missing_kinds() {
        assert_eq!(
            missing_of(["rollouts", "analysisruns", "experiments"].into_iter()),
            Served::All
        );
        assert_eq!(
            missing_of(["analysisruns"].into_iter()),
            Served::Missing(vec!["rollouts.argoproj.io".into()])
        );
        assert_eq!(
            missing_of(std::iter::empty()),
            Served::Missing(vec![
                "rollouts.argoproj.io".into(),
                "analysisruns.argoproj.io".into()
            ])
        );
    }
}
