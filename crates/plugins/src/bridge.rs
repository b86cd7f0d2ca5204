//! One bridge process (tools/plugin-bridge) and the plugin it runs: started, asked, ended.
//!
//! Requests are JSON lines on the bridge's stdin, each with an id; answers come back on its
//! stdout in any order and are matched by id, so calls from several reconciles share one plugin
//! as they share one go-plugin client in Argo. The bridge's stderr (go-plugin's and the plugin's
//! logs) goes to the controller's log.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{Mutex, oneshot};
use tracing::{debug, info};

use crate::PluginKind;

type Pending = Arc<std::sync::Mutex<HashMap<u64, oneshot::Sender<Result<Value, String>>>>>;

/// A running bridge. Dropping it ends the bridge and the plugin.
pub struct Bridge {
    name: String,
    plugin_type: String,
    stdin: Mutex<ChildStdin>,
    child: std::sync::Mutex<Child>,
    pending: Pending,
    next_id: AtomicU64,
    alive: Arc<AtomicBool>,
}

/// Why a call got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The plugin answered with an error of the bridge (a request it could not decode).
    Refused(String),
    /// No answer within the deadline.
    Timeout(Duration),
    /// The plugin (and so its bridge) ended before answering.
    Exited(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Refused(e) => write!(f, "{e}"),
            CallError::Timeout(d) => write!(f, "no answer within {}s", d.as_secs_f64()),
            CallError::Exited(e) => write!(f, "plugin exited: {e}"),
        }
    }
}

impl Bridge {
    /// Starts `bridge` running the plugin at `plugin` with `args`, and waits for it to be ready
    /// (the go-plugin handshake, Dispense and InitPlugin done) for at most `start_timeout`.
    pub async fn start(
        bridge: &Path,
        kind: PluginKind,
        name: &str,
        plugin: &Path,
        args: &[String],
        env: &[(String, String)],
        start_timeout: Duration,
    ) -> Result<Bridge, String> {
        let mut child = Command::new(bridge)
            .arg(kind.cookie())
            .arg(plugin)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env(
                "SLUICE_PLUGIN_START_TIMEOUT",
                format!("{}ms", start_timeout.as_millis()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start the plugin bridge {}: {e}", bridge.display()))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("the plugin bridge started without its pipes".to_string());
        };
        {
            let name = name.to_string();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    debug!(plugin = %name, "{line}");
                }
            });
        }
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(start_timeout + Duration::from_secs(2), lines.next_line())
            .await
            .map_err(|_| format!("plugin did not start within {}s", start_timeout.as_secs()))?
            .map_err(|e| format!("reading the plugin bridge: {e}"))?
            .ok_or_else(|| "the plugin bridge ended before the plugin started".to_string())?;
        let ready: Value = serde_json::from_str(&first)
            .map_err(|e| format!("unexpected answer of the plugin bridge ({e}): {first}"))?;
        if let Some(err) = ready.get("error").and_then(Value::as_str) {
            return Err(err.to_string());
        }
        let plugin_type = ready
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        info!(plugin = %name, %plugin_type, "plugin started");

        let pending: Pending = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        {
            let (pending, alive) = (pending.clone(), alive.clone());
            tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    let Ok(answer) = serde_json::from_str::<Value>(&line) else {
                        continue;
                    };
                    let id = answer.get("id").and_then(Value::as_u64).unwrap_or(0);
                    let result = match answer.get("error").and_then(Value::as_str) {
                        Some(err) => Err(err.to_string()),
                        None => Ok(answer.get("result").cloned().unwrap_or(Value::Null)),
                    };
                    if let Some(tx) = locked(&pending).remove(&id) {
                        let _ = tx.send(result);
                    }
                }
                // The bridge ended: every call in flight fails (its sender is dropped).
                alive.store(false, Ordering::SeqCst);
                locked(&pending).clear();
            });
        }
        Ok(Bridge {
            name: name.to_string(),
            plugin_type,
            stdin: Mutex::new(stdin),
            child: std::sync::Mutex::new(child),
            pending,
            next_id: AtomicU64::new(1),
            alive,
        })
    }

    /// What the plugin's `Type()` answered.
    pub fn plugin_type(&self) -> &str {
        &self.plugin_type
    }

    /// Whether the bridge (and so the plugin) is still running.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Calls `method` with `args`, waiting at most `deadline` for the answer.
    pub async fn call(
        &self,
        method: &str,
        args: Value,
        deadline: Duration,
    ) -> Result<Value, CallError> {
        if !self.is_alive() {
            return Err(CallError::Exited(self.exit_reason()));
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        locked(&self.pending).insert(id, tx);
        let request = json!({"id": id, "method": method, "args": args});
        let mut line = request.to_string().into_bytes();
        line.push(b'\n');
        let written = {
            let mut stdin = self.stdin.lock().await;
            match stdin.write_all(&line).await {
                Ok(()) => stdin.flush().await,
                Err(e) => Err(e),
            }
        };
        if let Err(e) = written {
            locked(&self.pending).remove(&id);
            return Err(CallError::Exited(format!("{} ({e})", self.exit_reason())));
        }
        match tokio::time::timeout(deadline, rx).await {
            Ok(Ok(answer)) => answer.map_err(CallError::Refused),
            Ok(Err(_)) => Err(CallError::Exited(self.exit_reason())),
            Err(_) => {
                locked(&self.pending).remove(&id);
                Err(CallError::Timeout(deadline))
            }
        }
    }

    /// Ends the bridge and its plugin now.
    pub fn kill(&self) {
        self.alive.store(false, Ordering::SeqCst);
        let _ = locked(&self.child).start_kill();
    }

    fn exit_reason(&self) -> String {
        match locked(&self.child).try_wait() {
            Ok(Some(status)) => format!("{} ended ({status})", self.name),
            _ => format!("{} ended", self.name),
        }
    }
}

/// The guarded value even if a thread panicked while holding the lock: the maps and the child
/// handle stay usable, and a plugin's trouble never becomes the controller's panic.
fn locked<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.kill();
    }
}
