//! A reverse proxy that checks AWS SigV4 signatures with botocore (AWS's Python signer, from
//! moto's environment), for tests of requests Sluice signs itself: a request whose signature
//! botocore computes differently gets 403, one that matches goes on to the upstream server.
//! It also hands out a role's credentials to signed STS `AssumeRole` calls. Stopped when
//! dropped.

use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const SCRIPT: &str = include_str!("sigv4_proxy.py");

/// Temporary credentials the proxy's STS gives for any role.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RoleCredentials {
    pub key: String,
    pub secret: String,
    pub token: String,
}

/// What the proxy accepts and where it forwards.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sigv4ProxyConfig {
    /// The base URL accepted requests go to (`http://127.0.0.1:9090`).
    pub upstream: String,
    /// A path prefix taken off before forwarding; requests without it get 404.
    pub strip: String,
    /// The service and region signatures must be scoped to (`aps`, `us-east-1`).
    pub service: String,
    pub region: String,
    /// Access key id to secret.
    pub keys: BTreeMap<String, String>,
    /// What `AssumeRole` answers; without it, `AssumeRole` is refused.
    pub role: Option<RoleCredentials>,
}

pub struct Sigv4Proxy {
    child: Child,
    port: u16,
}

impl Drop for Sigv4Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Sigv4Proxy {
    /// Starts the proxy on a free loopback port (installing moto's environment if needed).
    pub async fn start(config: &Sigv4ProxyConfig) -> anyhow::Result<Sigv4Proxy> {
        let python = crate::moto::python()?;
        let mut child = Command::new(&python)
            .arg("-c")
            .arg(SCRIPT)
            .arg(serde_json::to_string(config)?)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", python.display()))?;
        let stdout = child.stdout.take().context("the proxy's stdout")?;
        let mut proxy = Sigv4Proxy { child, port: 0 };
        let first = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            std::io::BufReader::new(stdout)
                .read_line(&mut line)
                .map(|_| line)
        });
        let first = tokio::time::timeout(std::time::Duration::from_secs(30), first)
            .await
            .context("the SigV4 proxy did not start in 30 s")???;
        proxy.port = first
            .trim()
            .parse()
            .with_context(|| format!("the SigV4 proxy printed {first:?}, not its port"))?;
        Ok(proxy)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What the proxy saw, in order: `{service, key, path, refused}` (`refused` is null for a
    /// request let through), and `role_arn`, `session_name` for `AssumeRole`.
    pub async fn log(&self) -> anyhow::Result<Vec<serde_json::Value>> {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await?;
        let request = format!(
            "GET /_log HTTP/1.0\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.port
        );
        stream.write_all(request.as_bytes()).await?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await?;
        let body = answer
            .split_once("\r\n\r\n")
            .map(|(_, body)| body)
            .context("no body in the proxy's log answer")?;
        Ok(serde_json::from_str(body)?)
    }
}
