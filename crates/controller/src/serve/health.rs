//! The HTTP endpoints every replica serves, leader or not: `/healthz` and `/readyz` on the
//! health port, `/metrics` on the metrics port (Argo Rollouts' ports 8080 and 8090).
//!
//! - `/healthz` answers `ok` while the process runs: losing the lease is not a failure, the
//!   replica stays up as a standby.
//! - `/readyz` answers `ok` once the watch caches have synced, and 503 before that and while
//!   shutting down.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::serve::metrics::{self, Metrics};

/// Readiness as the probes report it.
#[derive(Debug, Default)]
pub struct Health {
    caches_synced: AtomicBool,
    stopping: AtomicBool,
}

impl Health {
    pub fn set_caches_synced(&self) {
        self.caches_synced.store(true, Ordering::Relaxed);
    }

    pub fn set_stopping(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// `Err(reason)` while not ready.
    pub fn readiness(&self) -> Result<(), &'static str> {
        if self.stopping.load(Ordering::Relaxed) {
            Err("shutting down")
        } else if !self.caches_synced.load(Ordering::Relaxed) {
            Err("caches not synced")
        } else {
            Ok(())
        }
    }
}

/// Ports actually bound (differs from the flags when they were 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundPorts {
    pub healthz: u16,
    pub metrics: u16,
}

/// The two listeners, bound before anything else starts so a port clash fails at once.
pub struct Listeners {
    health: TcpListener,
    metrics: TcpListener,
    pub ports: BoundPorts,
}

impl Listeners {
    pub async fn bind(healthz_port: u16, metrics_port: u16) -> anyhow::Result<Listeners> {
        let bind = |port: u16| async move {
            let addr = SocketAddr::from((Ipv4Addr::UNSPECIFIED, port));
            TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding {addr}"))
        };
        let health = bind(healthz_port).await?;
        let metrics = bind(metrics_port).await?;
        let ports = BoundPorts {
            healthz: health.local_addr()?.port(),
            metrics: metrics.local_addr()?.port(),
        };
        Ok(Listeners {
            health,
            metrics,
            ports,
        })
    }

    /// Serves both endpoints until `stop` fires.
    pub fn serve(
        self,
        health: Arc<Health>,
        metrics: Arc<Metrics>,
        stop: CancellationToken,
    ) -> JoinHandle<()> {
        let health_app = Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route(
                "/readyz",
                get(move || {
                    let health = health.clone();
                    async move {
                        match health.readiness() {
                            Ok(()) => (StatusCode::OK, "ok").into_response(),
                            Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
                        }
                    }
                }),
            );
        let metrics_app = Router::new().route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
                        metrics.render(),
                    )
                }
            }),
        );
        let (health_listener, metrics_listener) = (self.health, self.metrics);
        tokio::spawn(async move {
            let a = axum::serve(health_listener, health_app)
                .with_graceful_shutdown(stop.clone().cancelled_owned());
            let b = axum::serve(metrics_listener, metrics_app)
                .with_graceful_shutdown(stop.cancelled_owned());
            let (a, b) = tokio::join!(a.into_future(), b.into_future());
            for result in [a, b] {
                if let Err(e) = result {
                    tracing::warn!(error = %e, "HTTP server stopped with an error");
                }
            }
        })
    }
}

/// Writes the bound ports as JSON, atomically (readers never see a half-written file).
pub fn write_ports_file(path: &Path, ports: BoundPorts) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(&ports)?)
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(port: u16, path: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut buf = String::new();
        stream.read_to_string(&mut buf).await.unwrap();
        let status = buf.split_whitespace().nth(1).unwrap().parse().unwrap();
        let body = buf.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
        (status, body)
    }

    #[tokio::test]
    async fn probes_and_metrics_on_free_ports() {
        let listeners = Listeners::bind(0, 0).await.unwrap();
        let ports = listeners.ports;
        assert_ne!(ports.healthz, 0);
        assert_ne!(ports.healthz, ports.metrics);
        let health = Arc::new(Health::default());
        let metrics = Metrics::new("v9");
        let stop = CancellationToken::new();
        let server = listeners.serve(health.clone(), metrics.clone(), stop.clone());

        assert_eq!(get(ports.healthz, "/healthz").await, (200, "ok".into()));
        assert_eq!(get(ports.healthz, "/readyz").await.0, 503);
        health.set_caches_synced();
        assert_eq!(get(ports.healthz, "/readyz").await, (200, "ok".into()));
        let (status, body) = get(ports.metrics, "/metrics").await;
        assert_eq!(status, 200);
        assert!(body.contains(r#"argo_rollouts_controller_info{version="v9"} 1"#));
        assert!(body.contains("sluice_leader 0"));
        health.set_stopping();
        assert_eq!(get(ports.healthz, "/readyz").await.0, 503);
        assert_eq!(get(ports.healthz, "/healthz").await.0, 200);

        stop.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(5), server)
            .await
            .unwrap()
            .unwrap();
    }

    #[test]
    fn ports_file_is_json() {
        let dir = std::env::temp_dir().join(format!("sluice-ports-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ports.json");
        let ports = BoundPorts {
            healthz: 1234,
            metrics: 5678,
        };
        write_ports_file(&path, ports).unwrap();
        let read: BoundPorts =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(read, ports);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
