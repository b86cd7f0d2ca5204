//! A real graphite-web (Debian's `graphite-web` package) serving its render API from a
//! throw-away whisper directory, for the graphite provider's tests: started with Django's
//! server on a free loopback port, stopped (and its data removed) when dropped.
//!
//! Series are written with the `whisper` library graphite-web itself reads (the files
//! carbon would write), so no carbon daemon is needed.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::loopback::free_port;

/// Debian's Python, which has graphite-web, Django and whisper installed.
const PYTHON: &str = "/usr/bin/python3";

pub struct Graphite {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Drop for Graphite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Graphite {
    /// Starts graphite-web and waits until its render API answers.
    pub async fn start() -> anyhow::Result<Graphite> {
        let found = Command::new(PYTHON)
            .args(["-c", "import graphite, whisper, django"])
            .stderr(Stdio::null())
            .status();
        if !found.is_ok_and(|s| s.success()) {
            bail!(
                "graphite-web not found: install Debian's `graphite-web` package (scripts/install-test-tools.sh does)"
            );
        }
        let port = free_port()?;
        let dir =
            std::env::temp_dir().join(format!("sluice-graphite-{port}-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("whisper"))?;
        std::fs::create_dir_all(dir.join("log"))?;
        let d = dir.display();
        // graphite.settings imports the module GRAPHITE_SETTINGS_MODULE names.
        std::fs::write(
            dir.join("sluice_graphite_settings.py"),
            format!(
                "SECRET_KEY = 'sluice-test'\nALLOWED_HOSTS = ['127.0.0.1']\n\
                 GRAPHITE_ROOT = '/usr/share/graphite-web'\nSTATIC_ROOT = '/usr/share/graphite-web/static'\n\
                 STORAGE_DIR = '{d}'\nWHISPER_DIR = '{d}/whisper'\nLOG_DIR = '{d}/log'\nINDEX_FILE = '{d}/index'\n\
                 DATABASES = {{'default': {{'NAME': '{d}/graphite.db', 'ENGINE': 'django.db.backends.sqlite3'}}}}\n"
            ),
        )?;
        let log = std::fs::File::create(dir.join("server.log"))?;
        let child = Command::new(PYTHON)
            .args([
                "-m",
                "django",
                "runserver",
                &format!("127.0.0.1:{port}"),
                "--noreload",
            ])
            .current_dir(&dir)
            .env("PYTHONPATH", &dir)
            .env("GRAPHITE_SETTINGS_MODULE", "sluice_graphite_settings")
            .env("DJANGO_SETTINGS_MODULE", "graphite.settings")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting graphite-web")?;
        let mut graphite = Graphite { child, dir, port };
        for _ in 0..150 {
            if let Some(status) = graphite.child.try_wait()? {
                bail!(
                    "graphite-web exited ({status}): {}",
                    std::fs::read_to_string(graphite.dir.join("server.log")).unwrap_or_default()
                );
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(graphite);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!("graphite-web on port {port} did not answer in 30 s")
    }

    /// `http://127.0.0.1:<port>/`, the address an analysis template names.
    pub fn address(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Writes `points` (`(value, unix seconds)`) into the series `metric` (dotted, as
    /// Graphite names it), at a 10 s resolution kept for an hour.
    pub fn write(&self, metric: &str, points: &[(f64, i64)]) -> anyhow::Result<()> {
        let path = self
            .dir
            .join("whisper")
            .join(format!("{}.wsp", metric.replace('.', "/")));
        // whisper takes (timestamp, value) pairs.
        let points: Vec<String> = points.iter().map(|(v, t)| format!("({t}, {v})")).collect();
        let script = format!(
            "import os, whisper\np = {path:?}\nos.makedirs(os.path.dirname(p), exist_ok=True)\n\
             if not os.path.exists(p): whisper.create(p, [(10, 360)])\n\
             whisper.update_many(p, [{}])\n",
            points.join(", ")
        );
        let out = Command::new(PYTHON).args(["-c", &script]).output()?;
        if !out.status.success() {
            bail!("writing {metric}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
    }
}
