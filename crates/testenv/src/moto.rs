//! A real AWS API emulator (moto's server, installed from PyPI by `scripts/install-moto.sh`)
//! for the cloudWatch provider and the ALB target-group checks: started on a free loopback
//! port, stopped when dropped. Each server is its own empty AWS account.
//!
//! Processes reach it through the SDK's standard variables ([`Moto::env`]): the endpoint,
//! a region, and credentials moto accepts (it checks no signature).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::loopback::{encode, free_port};

/// The region every test account lives in.
pub const REGION: &str = "us-east-1";

pub struct Moto {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
    /// The access key id and secret processes sign with.
    key: (String, String),
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

impl Moto {
    /// Installs moto's server if needed (`SLUICE_MOTO` names another binary), starts it and
    /// waits until it answers. It checks no signature.
    pub async fn start() -> anyhow::Result<Moto> {
        Self::launch(None).await
    }

    /// Like [`Moto::start`], but every request after the setup must carry a valid SigV4
    /// signature of an IAM user allowed everything: [`Moto::env`] names that user's key.
    pub async fn start_checking_signatures() -> anyhow::Result<Moto> {
        // moto's IAM checks begin after this many requests: the three that make the user.
        let mut moto = Self::launch(Some(3)).await?;
        moto.query(
            "iam",
            &[
                ("Action", "CreateUser"),
                ("Version", "2010-05-08"),
                ("UserName", "sluice"),
            ],
        )
        .await?;
        moto.query("iam", &[
            ("Action", "PutUserPolicy"),
            ("Version", "2010-05-08"),
            ("UserName", "sluice"),
            ("PolicyName", "all"),
            (
                "PolicyDocument",
                r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#,
            ),
        ])
        .await?;
        let key = moto
            .query(
                "iam",
                &[
                    ("Action", "CreateAccessKey"),
                    ("Version", "2010-05-08"),
                    ("UserName", "sluice"),
                ],
            )
            .await?;
        let field = |name: &str| -> anyhow::Result<String> {
            let open = format!("<{name}>");
            let start = key.find(&open).context("no access key in moto's answer")? + open.len();
            let end = key[start..]
                .find('<')
                .context("no access key in moto's answer")?;
            Ok(key[start..start + end].to_string())
        };
        moto.key = (field("AccessKeyId")?, field("SecretAccessKey")?);
        Ok(moto)
    }

    async fn launch(no_auth_actions: Option<u32>) -> anyhow::Result<Moto> {
        let binary = match std::env::var("SLUICE_MOTO") {
            Ok(path) => path,
            Err(_) => install()?,
        };
        let port = free_port()?;
        let log = std::env::temp_dir().join(format!("sluice-moto-{port}.log"));
        let out = std::fs::File::create(&log)?;
        let mut command = Command::new(&binary);
        if let Some(n) = no_auth_actions {
            command.env("INITIAL_NO_AUTH_ACTION_COUNT", n.to_string());
        }
        let child = command
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {binary}"))?;
        let key = ("testing".to_string(), "testing".to_string());
        let mut moto = Moto {
            child,
            port,
            log,
            key,
        };
        for _ in 0..150 {
            if let Some(status) = moto.child.try_wait()? {
                bail!(
                    "moto_server exited ({status}): {}",
                    std::fs::read_to_string(&moto.log).unwrap_or_default()
                );
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(moto);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!("moto_server on port {port} did not answer in 30 s")
    }

    /// The access key id and secret that [`Moto::env`] gives.
    pub fn key(&self) -> (&str, &str) {
        (&self.key.0, &self.key.1)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment a process needs to use this server as AWS.
    pub fn env(&self) -> Vec<(String, String)> {
        [
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_REGION", REGION.to_string()),
            ("AWS_ACCESS_KEY_ID", self.key.0.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.key.1.clone()),
            // No profile file or instance metadata is asked for on a test machine.
            ("AWS_CONFIG_FILE", "/dev/null".to_string()),
            ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null".to_string()),
            ("AWS_EC2_METADATA_DISABLED", "true".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    /// A form-encoded call of one of AWS's query APIs (IAM, EC2, ELBv2; `service` as in a
    /// signature's scope: `iam`, `ec2`, `elasticloadbalancing`), answering its XML;
    /// for setting up what a test needs, e.g. EC2 subnets no Sluice code asks for. Unsigned:
    /// on a server checking signatures, only for the first requests.
    pub async fn query(&self, service: &str, params: &[(&str, &str)]) -> anyhow::Result<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let body: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        let body = body.join("&");
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await?;
        let request = format!(
            "POST / HTTP/1.0\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/x-www-form-urlencoded\r\nAuthorization: AWS4-HMAC-SHA256 Credential=testing/20260101/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=0\r\nContent-Length: {}\r\n\r\n{body}",
            self.port,
            body.len()
        );
        stream.write_all(request.as_bytes()).await?;
        let mut out = String::new();
        stream.read_to_string(&mut out).await?;
        if !(out.starts_with("HTTP/1.0 200") || out.starts_with("HTTP/1.1 200")) {
            bail!("moto answered {params:?} with {out}");
        }
        Ok(out)
    }
}

/// The Python of moto's environment, which has botocore (AWS's Python SDK core).
pub fn python() -> anyhow::Result<std::path::PathBuf> {
    let server = match std::env::var("SLUICE_MOTO") {
        Ok(path) => path,
        Err(_) => install()?,
    };
    let python = std::path::Path::new(&server).with_file_name("python3");
    if !python.exists() {
        bail!("no python3 beside {server}");
    }
    Ok(python)
}

/// Runs `scripts/install-moto.sh` (a no-op once installed) and answers the binary's path.
fn install() -> anyhow::Result<String> {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-moto.sh");
    let out = Command::new(&script)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} failed ({})", script.display(), out.status);
    }
    Ok(String::from_utf8(out.stdout)?.trim().to_string())
}
