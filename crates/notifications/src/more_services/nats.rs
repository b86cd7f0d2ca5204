//! NATS (`service.nats`: `url`, `headers`, `username`, `password`, `nkey`): the template's
//! `message` published to the recipient's subject, as the engine's NATS client publishes it. The
//! client's protocol is a few text lines over TCP: the server's `INFO`, the client's `CONNECT`
//! and `PING`, the server's `PONG`, then `PUB` (or `HPUB` with the `headers` of the settings).
//!
//! `url` is one server or several, comma-separated (`nats://host:4222`; no scheme means
//! `nats://`, no port 4222, nothing `nats://127.0.0.1:4222`), tried in order until one
//! accepts. Credentials in the URL (`nats://user:pass@host`, or `nats://token@host`) win over
//! the settings'; otherwise `username` and `password` (both, or neither is sent) and `nkey` (a
//! user's seed, `SU...`, signing the server's nonce). A `tls://` URL, or a server that requires
//! TLS, gets TLS, verified with the system's roots as the engine's client does. Websocket URLs
//! (`ws://`, `wss://`) are not supported.
//!
//! After publishing, Sluice sends one more `PING` and waits for its `PONG`: a server refusing
//! the message (a permissions violation, say) is a failed send, where the engine's client closes
//! without asking. A server's refusal (`-ERR`), an unreachable server or a timeout is a failure
//! that may pass; a bad seed, an empty subject or an unusable URL will recur.

mod nkey;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::{NotificationService, SendContext, SendError};

/// The server the client reaches when the URL names none.
const DEFAULT_URL: &str = "nats://127.0.0.1:4222";
/// How long connecting to one server may take, the client's default.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest protocol line read (an `INFO` lists the cluster's URLs).
const MAX_LINE: u64 = 1 << 20;

#[derive(Clone, Deserialize)]
pub struct NatsOptions {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default)]
    nkey: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

impl fmt::Debug for NatsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<&String> = self.headers.iter().flat_map(|h| h.keys()).collect();
        f.debug_struct("NatsOptions")
            .field("headers", &headers)
            .finish_non_exhaustive()
    }
}

pub fn parse(settings: Value) -> Result<NatsOptions, String> {
    super::settings(settings)
}

/// A failure, and whether it will recur.
struct Failure {
    message: String,
    permanent: bool,
    /// No server listened: the client then goes on to the next, and says no server was there.
    refused: bool,
}

impl Failure {
    fn transient(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            permanent: false,
            refused: false,
        }
    }
    fn permanent(message: impl Into<String>) -> Failure {
        Failure {
            permanent: true,
            ..Failure::transient(message)
        }
    }
}

/// One server of the URL.
struct Server {
    tls: bool,
    host: String,
    port: u16,
    /// `(user, Some(password))`, or `(token, None)`.
    user_info: Option<(String, Option<String>)>,
}

/// The servers of `url`, as the client reads its comma-separated list.
fn servers(url: &str) -> Result<Vec<Server>, String> {
    let mut urls: Vec<&str> = url
        .split(',')
        .map(|u| u.trim().trim_end_matches('/'))
        .filter(|u| !u.is_empty())
        .collect();
    if urls.is_empty() {
        urls.push(DEFAULT_URL);
    }
    urls.into_iter().map(server).collect()
}

fn server(url: &str) -> Result<Server, String> {
    let with_scheme = if url.contains("://") {
        url.to_owned()
    } else {
        format!("nats://{url}")
    };
    // A URL is never quoted: it may carry a password.
    let parsed = reqwest::Url::parse(&with_scheme).map_err(|e| format!("invalid URL: {e}"))?;
    let scheme = parsed.scheme();
    if scheme == "ws" || scheme == "wss" {
        return Err("websocket URLs are not supported".into());
    }
    let host = match parsed.host_str() {
        Some(host) if !host.is_empty() => host.trim_start_matches('[').trim_end_matches(']'),
        _ => return Err("the URL has no host".into()),
    }
    .to_owned();
    let user_info = if parsed.username().is_empty() && parsed.password().is_none() {
        None
    } else {
        Some((
            percent_decode(parsed.username()),
            parsed.password().map(percent_decode),
        ))
    };
    Ok(Server {
        tls: scheme == "tls",
        host,
        port: parsed.port().unwrap_or(4222),
        user_info,
    })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The server's `INFO`, what the client reads of it.
#[derive(Deserialize, Default)]
struct Info {
    #[serde(default)]
    tls_required: bool,
    #[serde(default)]
    tls_available: bool,
    #[serde(default)]
    headers: bool,
    #[serde(default)]
    max_payload: i64,
    #[serde(default)]
    nonce: String,
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

struct Connection {
    io: BufReader<Box<dyn Io>>,
    info: Info,
}

/// The TLS settings of the client: the system's roots (as the platform verifier sees them),
/// made once.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            use rustls_platform_verifier::ConfigVerifierExt as _;
            rustls::ClientConfig::with_platform_verifier()
                .map(Arc::new)
                .map_err(|e| format!("TLS setup: {e}"))
        })
        .clone()
}

/// A protocol line without its line end.
async fn read_line(io: &mut BufReader<Box<dyn Io>>) -> Result<String, String> {
    let mut line = Vec::new();
    let n = (&mut *io)
        .take(MAX_LINE)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| format!("read: {e}"))?;
    if n == 0 {
        return Err("connection closed by the server".into());
    }
    if line.last() != Some(&b'\n') {
        return Err("protocol line too long".into());
    }
    Ok(String::from_utf8_lossy(&line)
        .trim_end_matches(['\r', '\n'])
        .to_owned())
}

/// `-ERR 'Authorization Violation'` as the client words it: `nats: Authorization Violation`.
fn server_error(line: &str) -> String {
    let text = line.trim_start_matches("-ERR").trim();
    format!("nats: {}", text.trim_matches('\''))
}

/// Reads until the server's `PONG`, answering its `PING`s; its `-ERR` is the error.
async fn await_pong(io: &mut BufReader<Box<dyn Io>>) -> Result<(), String> {
    loop {
        let line = read_line(io).await?;
        let op = line
            .split([' ', '\t'])
            .next()
            .unwrap_or_default()
            .to_ascii_uppercase();
        match op.as_str() {
            "PONG" => return Ok(()),
            "PING" => io
                .get_mut()
                .write_all(b"PONG\r\n")
                .await
                .map_err(|e| format!("write: {e}"))?,
            "-ERR" => return Err(server_error(&line)),
            // `+OK`, a newer `INFO`: nothing to act on.
            _ => {}
        }
    }
}

/// What CONNECT authenticates with.
struct Auth<'a> {
    username: &'a str,
    password: &'a str,
    key: Option<&'a nkey::KeyPair>,
}

/// Connects to `server`, through TLS when it or the URL asks, and authenticates.
async fn connect(server: &Server, auth: &Auth<'_>) -> Result<Connection, Failure> {
    let tcp = TcpStream::connect((server.host.as_str(), server.port))
        .await
        .map_err(|e| Failure {
            refused: e.kind() == std::io::ErrorKind::ConnectionRefused,
            ..Failure::transient(format!("dial tcp {}:{}: {e}", server.host, server.port))
        })?;
    let _ = tcp.set_nodelay(true);
    let mut io: BufReader<Box<dyn Io>> = BufReader::new(Box::new(tcp));
    let line = read_line(&mut io).await.map_err(Failure::transient)?;
    let Some(info) = line.strip_prefix("INFO").map(str::trim) else {
        return Err(Failure::transient(
            "nats: protocol exception, INFO not received",
        ));
    };
    let info: Info = serde_json::from_str(info)
        .map_err(|_| Failure::transient("nats: unreadable INFO from the server"))?;
    if auth.key.is_some() && info.nonce.is_empty() {
        return Err(Failure::transient(
            "nats: nkeys not supported by the server",
        ));
    }
    if server.tls && !info.tls_required && !info.tls_available {
        return Err(Failure::transient("nats: secure connection not available"));
    }
    let secure = server.tls || info.tls_required;
    if secure {
        if !io.buffer().is_empty() {
            return Err(Failure::transient(
                "nats: the server spoke before the TLS handshake",
            ));
        }
        let config = tls_config().map_err(Failure::permanent)?;
        let name = rustls::pki_types::ServerName::try_from(server.host.clone())
            .map_err(|_| Failure::permanent("invalid TLS server name"))?;
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, io.into_inner())
            .await
            .map_err(|e| Failure::transient(format!("tls: {e}")))?;
        io = BufReader::new(Box::new(tls));
    }
    let mut connect = json!({
        "verbose": false,
        "pedantic": false,
        "tls_required": secure,
        "name": "",
        "lang": "rust",
        "version": env!("CARGO_PKG_VERSION"),
        "protocol": 1,
        "echo": true,
        "headers": info.headers,
        "no_responders": info.headers,
    });
    match &server.user_info {
        Some((user, Some(pass))) => {
            connect["user"] = json!(user);
            connect["pass"] = json!(pass);
        }
        Some((token, None)) => connect["auth_token"] = json!(token),
        None => {
            if !auth.username.is_empty() && !auth.password.is_empty() {
                connect["user"] = json!(auth.username);
                connect["pass"] = json!(auth.password);
            }
            if let Some(key) = auth.key {
                connect["nkey"] = json!(key.public_key());
                connect["sig"] = json!(key.sign(info.nonce.as_bytes()));
            }
        }
    }
    let hello = format!("CONNECT {connect}\r\nPING\r\n");
    io.get_mut()
        .write_all(hello.as_bytes())
        .await
        .map_err(|e| Failure::transient(format!("write: {e}")))?;
    await_pong(&mut io).await.map_err(Failure::transient)?;
    Ok(Connection { io, info })
}

/// The header block of `HPUB` as the client writes it: `NATS/1.0`, then the headers sorted by
/// name, invalid names left out, line breaks in values made spaces.
fn header_block(headers: &BTreeMap<String, String>) -> Vec<u8> {
    let mut out = b"NATS/1.0\r\n".to_vec();
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    for (name, value) in headers {
        if name.is_empty() || !name.chars().all(token) {
            continue;
        }
        let value = value.replace(['\r', '\n'], " ");
        out.extend_from_slice(
            format!("{name}: {}\r\n", value.trim_matches([' ', '\t'])).as_bytes(),
        );
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Publishes `data` (with `headers`) to `subject`, then waits for the server to have read it.
async fn publish(
    conn: &mut Connection,
    subject: &str,
    headers: &BTreeMap<String, String>,
    data: &[u8],
) -> Result<(), Failure> {
    let header = (!headers.is_empty()).then(|| header_block(headers));
    if header.is_some() && !conn.info.headers {
        return Err(Failure::transient(
            "nats: headers not supported by this server",
        ));
    }
    let size = data.len() + header.as_ref().map_or(0, Vec::len);
    if conn.info.max_payload > 0 && size as i64 > conn.info.max_payload {
        return Err(Failure::permanent("nats: maximum payload exceeded"));
    }
    let mut out = match &header {
        Some(h) => format!("HPUB {subject} {} {size}\r\n", h.len()).into_bytes(),
        None => format!("PUB {subject} {size}\r\n").into_bytes(),
    };
    out.extend_from_slice(header.as_deref().unwrap_or_default());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\nPING\r\n");
    conn.io
        .get_mut()
        .write_all(&out)
        .await
        .map_err(|e| Failure::transient(format!("write: {e}")))?;
    await_pong(&mut conn.io).await.map_err(Failure::transient)
}

impl NatsOptions {
    async fn send_message(&self, subject: &str, message: &str) -> Result<(), SendError> {
        let fail = |what: &str, f: Failure| {
            let message = format!("{what}: {}", f.message);
            if f.permanent {
                SendError::permanent(message)
            } else {
                SendError::transient(message)
            }
        };
        let seed = self.nkey.as_deref().unwrap_or_default();
        let key = if seed.is_empty() {
            None
        } else {
            Some(
                nkey::KeyPair::from_seed(seed)
                    .map_err(|e| fail("failed to create NKey from seed", Failure::permanent(e)))?,
            )
        };
        let servers = servers(self.url.as_deref().unwrap_or_default())
            .map_err(|e| fail("failed to connect to NATS server", Failure::permanent(e)))?;
        // Checked before connecting: a subject with blanks would change the PUB line's meaning.
        if subject.is_empty() || subject.contains(char::is_whitespace) {
            return Err(fail(
                "failed to publish message to NATS",
                Failure::permanent("nats: invalid subject"),
            ));
        }
        let auth = Auth {
            username: self.username.as_deref().unwrap_or_default(),
            password: self.password.as_deref().unwrap_or_default(),
            key: key.as_ref(),
        };
        let mut last: Option<Failure> = None;
        let mut conn = None;
        for server in &servers {
            match tokio::time::timeout(CONNECT_TIMEOUT, connect(server, &auth)).await {
                Ok(Ok(c)) => {
                    conn = Some(c);
                    break;
                }
                Ok(Err(f)) if f.refused => {}
                Ok(Err(f)) => last = Some(f),
                Err(_) => last = Some(Failure::transient("nats: timeout")),
            }
        }
        let Some(mut conn) = conn else {
            let f = last
                .unwrap_or_else(|| Failure::transient("nats: no servers available for connection"));
            return Err(fail("failed to connect to NATS server", f));
        };
        let headers = self.headers.clone().unwrap_or_default();
        let published = tokio::time::timeout(
            super::REQUEST_TIMEOUT,
            publish(&mut conn, subject, &headers, message.as_bytes()),
        )
        .await
        .unwrap_or_else(|_| Err(Failure::transient("nats: timeout")));
        let _ = conn.io.get_mut().shutdown().await;
        published.map_err(|f| fail("failed to publish message to NATS", f))
    }
}

impl NotificationService for NatsOptions {
    fn send<'a>(&'a self, ctx: SendContext<'a>) -> BoxFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let message = ctx
                .content
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default();
            self.send_message(ctx.recipient, message)
                .await
                .map_err(|e| SendError {
                    message: format!("nats '{}': {}", ctx.service, e.message),
                    permanent: e.permanent,
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{header_block, servers};

    #[test]
    fn urls_are_read_as_the_client_reads_them() {
        let s = servers(" nats://a:1/, b ,tls://u%40x:p%3Aw@c:5,nats://tok@d").unwrap();
        let view: Vec<_> = s
            .iter()
            .map(|s| (s.tls, s.host.as_str(), s.port, s.user_info.clone()))
            .collect();
        assert_eq!(
            view,
            vec![
                (false, "a", 1, None),
                (false, "b", 4222, None),
                (true, "c", 5, Some(("u@x".into(), Some("p:w".into())))),
                (false, "d", 4222, Some(("tok".into(), None))),
            ]
        );
        let default = servers("").unwrap();
        assert_eq!(
            (default[0].host.as_str(), default[0].port),
            ("127.0.0.1", 4222)
        );
        assert_eq!(
            servers("ws://a:80").err().unwrap(),
            "websocket URLs are not supported"
        );
    }

    #[test]
    fn headers_are_written_sorted_with_bad_names_left_out() {
        let headers: BTreeMap<String, String> = [
            ("my-header", " my value "),
            ("Bad Name", "x"),
            ("A", "line\r\nbreak"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(
            String::from_utf8(header_block(&headers)).unwrap(),
            "NATS/1.0\r\nA: line  break\r\nmy-header: my value\r\n\r\n"
        );
    }
}
