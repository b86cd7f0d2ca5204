//! A control plane of a test's own, for tests that kill, stop or restart its components: the
//! shared one in `.dev/` serves other tests and people at the same time.
//!
//! `scripts/cluster-up.sh` starts it in a temporary state directory (`SLUICE_DEV_DIR`), on free
//! ports of its own; dropping the [`OwnControlPlane`] runs `scripts/cluster-down.sh` on the same
//! directory, also when the test fails (its logs are copied aside first and the copy named).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};

use super::cluster::{ClusterPaths, repo_root};
use super::{TestEnv, crds};

/// The components `scripts/cluster-up.sh` starts, by the name it records their pids under.
pub const COMPONENTS: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "fake-kubelet",
];

/// A running control plane in a temporary directory; stopped and removed when dropped.
pub struct OwnControlPlane {
    dir: PathBuf,
    root: PathBuf,
}

impl OwnControlPlane {
    /// Starts a control plane in a new directory under the system's temporary directory, named
    /// after `name`, and waits until it is ready (a minute or so, more when the fake kubelet
    /// has to be built).
    pub async fn start(name: &str) -> anyhow::Result<OwnControlPlane> {
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let dir =
            std::env::temp_dir().join(format!("sluice-{name}-{}-{stamp}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        // Made before the start, so that a start failing half-way is cleaned up too.
        let plane = OwnControlPlane {
            dir,
            root: repo_root(),
        };
        plane.script("cluster-up.sh", &[]).await?;
        Ok(plane)
    }

    /// A connection to this control plane, with the project's CRDs from `manifests/crds/`
    /// installed.
    pub async fn env(&self) -> anyhow::Result<TestEnv> {
        let env = TestEnv::connect(ClusterPaths {
            repo_root: self.root.clone(),
            kubeconfig: self.dir.join("kubeconfig"),
            controller_kubeconfig: self.dir.join("kubeconfig-controller"),
        })
        .await?;
        crds::install(&env).await?;
        Ok(env)
    }

    /// The state directory (`SLUICE_DEV_DIR`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the components log, one `<component>.log` each.
    pub fn logs_dir(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// The pid of a running component (one of [`COMPONENTS`]), checked to still be that
    /// component's process: a pid is never signalled after it was reused.
    pub fn pid(&self, component: &str) -> anyhow::Result<u32> {
        let binary = match component {
            "fake-kubelet" => "sluice-fake-kubelet",
            other if COMPONENTS.contains(&other) => other,
            other => bail!("{other} is not a component of the control plane"),
        };
        let file = self.dir.join("pids").join(format!("{component}.pid"));
        let pid: u32 = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?
            .trim()
            .parse()
            .with_context(|| format!("the pid in {}", file.display()))?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        if !cmdline.split('\0').any(|arg| arg.ends_with(binary)) {
            bail!("{component} (pid {pid}) is not running");
        }
        Ok(pid)
    }

    /// Sends `signal` (`KILL`, `TERM`, `STOP`, `CONT`, ...) to a running component.
    pub fn signal(&self, component: &str, signal: &str) -> anyhow::Result<()> {
        let pid = self.pid(component)?;
        let status = Command::new("kill")
            .args(["-s", signal, &pid.to_string()])
            .status()
            .context("running kill")?;
        if !status.success() {
            bail!("kill -s {signal} {pid} ({component}) failed: {status}");
        }
        Ok(())
    }

    /// Stops a component with SIGSTOP until the returned guard is dropped (SIGCONT), so that a
    /// failing test never leaves it stopped.
    pub fn freeze(&self, component: &str) -> anyhow::Result<Frozen> {
        let pid = self.pid(component)?;
        self.signal(component, "STOP")?;
        Ok(Frozen {
            pid,
            component: component.to_string(),
        })
    }

    /// Starts kube-apiserver again with the flags, port and certificates it had, on the same
    /// etcd, and waits until it is ready (`cluster-up.sh --restart kube-apiserver`). A running
    /// API server is stopped first with SIGTERM, which ends every request and watch it serves.
    pub async fn restart_apiserver(&self) -> anyhow::Result<()> {
        self.script("cluster-up.sh", &["--restart", "kube-apiserver"])
            .await
    }

    async fn script(&self, name: &str, args: &[&str]) -> anyhow::Result<()> {
        let script = self.root.join("scripts").join(name);
        let mut command = Command::new("bash");
        command
            .arg(&script)
            .args(args)
            .env("SLUICE_DEV_DIR", &self.dir)
            .current_dir(&self.root)
            .stdin(Stdio::null());
        let status = tokio::task::spawn_blocking(move || command.status())
            .await
            .context("waiting for the script")?
            .with_context(|| format!("running {}", script.display()))?;
        if !status.success() {
            bail!(
                "{name} {} failed ({status}); logs in {}",
                args.join(" "),
                self.logs_dir().display()
            );
        }
        Ok(())
    }
}

impl Drop for OwnControlPlane {
    fn drop(&mut self) {
        // A component a failing test left stopped would only delay the stop below.
        let _ = self.signal("etcd", "CONT");
        if std::thread::panicking() {
            let kept = self.dir.with_extension("logs");
            let copied = Command::new("cp")
                .arg("-r")
                .arg(self.logs_dir())
                .arg(&kept)
                .status();
            if copied.is_ok_and(|s| s.success()) {
                eprintln!("logs of the control plane kept in {}", kept.display());
            }
        }
        let stopped = Command::new("bash")
            .arg(self.root.join("scripts/cluster-down.sh"))
            .env("SLUICE_DEV_DIR", &self.dir)
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .status();
        match stopped {
            Ok(status) if status.success() => {
                let _ = std::fs::remove_dir_all(&self.dir);
            }
            other => eprintln!(
                "stopping the control plane in {} failed ({other:?}); its processes are listed \
                 in {}/pids",
                self.dir.display(),
                self.dir.display()
            ),
        }
    }
}

/// A component stopped by [`OwnControlPlane::freeze`]; continued (SIGCONT) when dropped.
pub struct Frozen {
    pid: u32,
    component: String,
}

impl Frozen {
    /// Continues the component now.
    pub fn thaw(self) {}
}

impl Drop for Frozen {
    fn drop(&mut self) {
        // SIGCONT to the pid recorded at the stop: a stopped process does not exit unless
        // killed, so the pid is still its own.
        let resumed = Command::new("kill")
            .args(["-s", "CONT", &self.pid.to_string()])
            .status();
        if !resumed.is_ok_and(|s| s.success()) {
            eprintln!("could not continue {} (pid {})", self.component, self.pid);
        }
    }
}
