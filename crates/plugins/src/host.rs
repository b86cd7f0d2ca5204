//! Every plugin of the ConfigMap, installed once at start, started on first use, restarted with
//! back-off after it crashes or misses a deadline.
//!
//! A call waits only on its own plugin: a plugin that hangs costs the reconciles that use it
//! one deadline each, and nothing else.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Mutex;
use tokio::time::Instant;
use tracing::{error, info, warn};

use crate::PluginKind;
use crate::bridge::{Bridge, CallError};
use crate::install::{PluginSpec, install};

/// How plugins are run.
#[derive(Debug, Clone)]
pub struct HostSettings {
    /// The bridge executable (tools/plugin-bridge).
    pub bridge: PathBuf,
    /// Where plugins are installed (Argo's `plugin-bin`).
    pub dir: PathBuf,
    /// How long one call may take.
    pub call_timeout: Duration,
    /// How long a plugin may take to start (handshake and InitPlugin).
    pub start_timeout: Duration,
    /// Environment given to every plugin besides the controller's own (`KUBECONFIG`, so that
    /// a plugin reaches the cluster the controller was pointed at).
    pub env: Vec<(String, String)>,
}

/// The first wait after a failure; it doubles with each failure in a row, up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

struct Slot {
    spec: PluginSpec,
    /// Installed once, by the first of the start-up task and the first call.
    installed: tokio::sync::OnceCell<Result<PathBuf, String>>,
    state: Mutex<State>,
}

impl Slot {
    async fn installed(
        &self,
        dir: &std::path::Path,
        http: &reqwest::Client,
    ) -> &Result<PathBuf, String> {
        self.installed
            .get_or_init(|| async {
                let installed = install(&self.spec, dir, http).await;
                match &installed {
                    Ok(path) => {
                        info!(plugin = %self.spec.name, path = %path.display(), "plugin installed")
                    }
                    Err(e) => error!(plugin = %self.spec.name, "Failed to download plugins: {e}"),
                }
                installed
            })
            .await
    }
}

#[derive(Default)]
struct State {
    bridge: Option<Arc<Bridge>>,
    failures: u32,
    retry_at: Option<Instant>,
    last_error: String,
}

impl State {
    fn failed(&mut self, err: &str) {
        self.failures += 1;
        let backoff = FIRST_BACKOFF
            .saturating_mul(1 << (self.failures - 1).min(16))
            .min(MAX_BACKOFF);
        self.retry_at = Some(Instant::now() + backoff);
        self.last_error = err.to_string();
    }
}

/// Why a plugin call has no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginError {
    /// The plugin is not configured, not installed, not starting, or waiting to be restarted.
    NotRunning(String),
    /// The call itself failed: Argo's `<Method> rpc call error: ...`.
    Call(String),
}

impl std::fmt::Display for PluginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PluginError::NotRunning(e) | PluginError::Call(e) => f.write_str(e),
        }
    }
}

/// The plugins the controller runs.
pub struct PluginHost {
    settings: HostSettings,
    http: reqwest::Client,
    slots: BTreeMap<(PluginKind, String), Arc<Slot>>,
}

impl std::fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginHost")
            .field("settings", &self.settings)
            .field("plugins", &self.slots.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl PluginHost {
    /// Installs every plugin of `specs` in the background (a slow download holds up only the
    /// objects that use that plugin). One that cannot be installed is logged with Argo's message
    /// and kept as that error for the objects that use it.
    pub fn new(settings: HostSettings, specs: &[PluginSpec], http: reqwest::Client) -> PluginHost {
        let slots: BTreeMap<_, _> = specs
            .iter()
            .map(|spec| {
                let slot = Arc::new(Slot {
                    spec: spec.clone(),
                    installed: tokio::sync::OnceCell::new(),
                    state: Mutex::default(),
                });
                ((spec.kind, spec.name.clone()), slot)
            })
            .collect();
        for slot in slots.values() {
            let (slot, dir, http) = (slot.clone(), settings.dir.clone(), http.clone());
            tokio::spawn(async move {
                let _ = slot.installed(&dir, &http).await;
            });
        }
        PluginHost {
            settings,
            http,
            slots,
        }
    }

    /// Installs every plugin of `specs` and waits until each is installed or failed.
    pub async fn install(
        settings: HostSettings,
        specs: &[PluginSpec],
        http: reqwest::Client,
    ) -> PluginHost {
        let host = PluginHost::new(settings, specs, http);
        for slot in host.slots.values() {
            let _ = slot.installed(&host.settings.dir, &host.http).await;
        }
        host
    }

    /// Whether installing plugin `name` failed, and why (`None` while it is being installed).
    pub fn install_error(&self, kind: PluginKind, name: &str) -> Option<String> {
        let slot = self.slots.get(&(kind, name.to_string()))?;
        slot.installed.get()?.as_ref().err().cloned()
    }

    /// Whether the ConfigMap lists plugin `name` of `kind`.
    pub fn has(&self, kind: PluginKind, name: &str) -> bool {
        self.slots.contains_key(&(kind, name.to_string()))
    }

    /// Calls `method` of plugin `name` with `args` (Argo's objects as JSON, see the bridge).
    /// The error is a message to show on the object: why the plugin is not there or not
    /// running, or why the call got no answer.
    pub async fn call(
        &self,
        kind: PluginKind,
        name: &str,
        method: &str,
        args: Value,
    ) -> Result<Value, PluginError> {
        use PluginError::{Call, NotRunning};
        let Some(slot) = self.slots.get(&(kind, name.to_string())) else {
            return Err(NotRunning(format!(
                "plugin {name} not configured in configmap"
            )));
        };
        let path = slot
            .installed(&self.settings.dir, &self.http)
            .await
            .as_ref()
            .map_err(|e| NotRunning(e.clone()))?;
        // A plugin found gone when called (killed between calls) is started again at once,
        // once: nothing reached it, so the call is repeated.
        let mut retried = false;
        let (bridge, answer) = loop {
            let (bridge, fresh) = self.bridge(slot, kind, name, path).await?;
            let answer = bridge
                .call(method, args.clone(), self.settings.call_timeout)
                .await;
            match answer {
                Err(CallError::Exited(_)) if !fresh && !retried => {
                    retried = true;
                    let mut state = slot.state.lock().await;
                    if state
                        .bridge
                        .as_ref()
                        .is_some_and(|b| Arc::ptr_eq(b, &bridge))
                    {
                        state.bridge = None;
                    }
                }
                answer => break (bridge, answer),
            }
        };
        match answer {
            Ok(answer) => {
                let mut state = slot.state.lock().await;
                state.failures = 0;
                state.retry_at = None;
                Ok(answer)
            }
            Err(CallError::Refused(e)) => Err(Call(format!("{method} rpc call error: {e}"))),
            Err(e) => {
                // A plugin that hangs or died is ended and started again at a later call.
                bridge.kill();
                let message = format!("{method} rpc call error: {e}");
                warn!(plugin = %name, "{message}");
                let mut state = slot.state.lock().await;
                if state
                    .bridge
                    .as_ref()
                    .is_some_and(|b| Arc::ptr_eq(b, &bridge))
                {
                    state.bridge = None;
                }
                state.failed(&message);
                Err(Call(message))
            }
        }
    }

    /// The plugin's running bridge, started if needed; `true` when just started.
    async fn bridge(
        &self,
        slot: &Slot,
        kind: PluginKind,
        name: &str,
        path: &std::path::Path,
    ) -> Result<(Arc<Bridge>, bool), PluginError> {
        use PluginError::NotRunning;
        let mut state = slot.state.lock().await;
        match &state.bridge {
            Some(bridge) if bridge.is_alive() => Ok((bridge.clone(), false)),
            _ => {
                state.bridge = None;
                if let Some(at) = state.retry_at
                    && at > Instant::now()
                {
                    return Err(NotRunning(format!(
                        "plugin {name} failed ({}); restarting it in {}s",
                        state.last_error,
                        (at - Instant::now()).as_secs() + 1
                    )));
                }
                match Bridge::start(
                    &self.settings.bridge,
                    kind,
                    name,
                    path,
                    &slot.spec.args,
                    &self.settings.env,
                    self.settings.start_timeout,
                )
                .await
                {
                    Ok(bridge) => {
                        let bridge = Arc::new(bridge);
                        state.bridge = Some(bridge.clone());
                        Ok((bridge, true))
                    }
                    Err(e) => {
                        warn!(plugin = %name, "plugin did not start: {e}");
                        state.failed(&e);
                        Err(NotRunning(format!("unable to start plugin ({name}): {e}")))
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_off_doubles_from_a_second_up_to_a_minute() {
        let mut state = State::default();
        let mut waits = Vec::new();
        for _ in 0..9 {
            let before = Instant::now();
            state.failed("e");
            let wait = state.retry_at.unwrap() - before;
            waits.push(wait.as_secs_f64().round() as u64);
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(state.last_error, "e");
    }
}
