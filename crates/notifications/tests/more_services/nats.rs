//! The `nats` service against a real NATS server (`nats-server`, built from its Go module by
//! `scripts/build-nats-server.sh` when not cached), with a subscriber of the test's own reading
//! what the server delivers.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;
use sluice_notifications::Config;
use sluice_notifications::services::SlackThreads;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::support::{config, notification, sender, server};

/// A user nkey made by the nkeys library: its seed and public key.
const SEED: &str = "SUAAGCQRDAPSMLJUHNBESUCXLZSWY432QGEI7FU5USV3FOOAY7HNLXDKKA";
const PUBLIC: &str = "UB2VYTFZEVWKPTOEVT64NT7O3KCJAF7FXH4VCTUZDEN5M7QLBVBHMA3W";
const PASSWORD: &str = "s3cret-pass";

/// The users of every test server: Sluice's (a password, an nkey), one allowed to publish only
/// to `rollouts.>`, and the test's reader.
fn users() -> String {
    format!(
        r#"authorization {{
  users = [
    {{user: sluice, password: "{PASSWORD}"}}
    {{nkey: {PUBLIC}}}
    {{user: limited, password: l, permissions: {{publish: "rollouts.>"}}}}
    {{user: reader, password: r}}
  ]
}}
"#
    )
}

/// The cached `nats-server`, built first when it is not.
fn binary() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("bash")
        .arg(root.join("scripts/build-nats-server.sh"))
        .current_dir(&root)
        .stderr(Stdio::inherit())
        .output()
        .expect("running scripts/build-nats-server.sh");
    assert!(out.status.success(), "scripts/build-nats-server.sh failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A NATS server on a free loopback port, stopped when dropped.
struct Nats {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Nats {
    /// A server with `extra` configuration besides its port and [`users`], and `files` in its
    /// directory (`$DIR` in `extra`).
    async fn start(extra: &str, files: &[(&str, String)]) -> Nats {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("sluice-nats-{port}"));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, content) in files {
            std::fs::write(dir.join(name), content).unwrap();
        }
        let conf = dir.join("nats.conf");
        let extra = extra.replace("$DIR", &dir.display().to_string());
        std::fs::write(
            &conf,
            format!("host: 127.0.0.1\nport: {port}\n{}{extra}", users()),
        )
        .unwrap();
        let child = Command::new(binary())
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let nats = Nats { child, port, dir };
        for _ in 0..100 {
            if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return nats;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("nats-server did not listen on {port}");
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The reader, subscribed to `subject`.
    async fn subscribe(&self, subject: &str) -> Reader {
        let tcp = TcpStream::connect(("127.0.0.1", self.port)).await.unwrap();
        let mut io = BufReader::new(tcp);
        let info = line(&mut io).await;
        assert!(info.starts_with("INFO "), "{info}");
        let connect = json!({"user": "reader", "pass": "r", "verbose": false, "headers": true,
            "protocol": 1});
        io.get_mut()
            .write_all(format!("CONNECT {connect}\r\nSUB {subject} 1\r\nPING\r\n").as_bytes())
            .await
            .unwrap();
        assert_eq!(line(&mut io).await, "PONG");
        Reader { io }
    }
}

async fn line(io: &mut BufReader<TcpStream>) -> String {
    let mut s = String::new();
    io.read_line(&mut s).await.unwrap();
    s.trim_end().to_owned()
}

struct Reader {
    io: BufReader<TcpStream>,
}

/// One delivered message: its protocol line, header block and payload.
#[derive(Debug, PartialEq)]
struct Delivered {
    line: String,
    headers: String,
    payload: String,
}

impl Reader {
    async fn next(&mut self) -> Delivered {
        let read = async {
            loop {
                let l = line(&mut self.io).await;
                let parts: Vec<&str> = l.split(' ').collect();
                let (header_len, total) = match parts[0] {
                    "MSG" => (0, parts[3].parse::<usize>().unwrap()),
                    "HMSG" => (parts[3].parse().unwrap(), parts[4].parse().unwrap()),
                    "PING" => {
                        self.io.get_mut().write_all(b"PONG\r\n").await.unwrap();
                        continue;
                    }
                    _ => continue,
                };
                let mut body = vec![0; total + 2];
                self.io.read_exact(&mut body).await.unwrap();
                let body = String::from_utf8(body).unwrap();
                return Delivered {
                    line: l,
                    headers: body[..header_len].to_owned(),
                    payload: body[header_len..total].to_owned(),
                };
            }
        };
        tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .expect("no message delivered")
    }
}

fn nats_config(settings: String) -> Config {
    config(
        &[("service.nats", settings)],
        &[("nats-password", PASSWORD), ("nats-seed", SEED)],
    )
}

async fn send(cfg: &Config, subject: &str, message: &str) -> Result<(), (String, bool)> {
    sender()
        .send(
            cfg,
            &notification("nats", subject, json!({"message": message})),
            &SlackThreads::new(),
        )
        .await
        .map(drop)
        .map_err(|e| (e.message, e.permanent))
}

#[tokio::test]
async fn nats_publishes_the_message_with_its_headers_as_the_user() {
    let nats = Nats::start("", &[]).await;
    let mut reader = nats.subscribe("rollouts.>").await;
    let cfg = nats_config(format!(
        "url: {}\nusername: sluice\npassword: $nats-password\nheaders:\n  my-header: my-value\n  X-Rollout: web\n",
        nats.url()
    ));
    send(
        &cfg,
        "rollouts.web.completed",
        "Rollout web has been completed.\n",
    )
    .await
    .unwrap();
    // The header block as the engine's client writes it: names sorted, as given.
    let headers = "NATS/1.0\r\nX-Rollout: web\r\nmy-header: my-value\r\n\r\n";
    let payload = "Rollout web has been completed.\n";
    let got = reader.next().await;
    assert_eq!(
        got.line,
        format!(
            "HMSG rollouts.web.completed 1 {} {}",
            headers.len(),
            headers.len() + payload.len()
        )
    );
    assert_eq!(
        (got.headers.as_str(), got.payload.as_str()),
        (headers, payload)
    );
}

#[tokio::test]
async fn nats_signs_the_nonce_with_the_nkey_and_tries_the_servers_in_turn() {
    let nats = Nats::start("", &[]).await;
    let mut reader = nats.subscribe("rollouts.web").await;
    // The first server of the list has nobody listening.
    let cfg = nats_config(format!(
        "url: nats://127.0.0.1:{},{}\nnkey: $nats-seed\n",
        free_port(),
        nats.url()
    ));
    send(&cfg, "rollouts.web", "by nkey").await.unwrap();
    let got = reader.next().await;
    assert_eq!(got.line, "MSG rollouts.web 1 7");
    assert_eq!(
        (got.headers.as_str(), got.payload.as_str()),
        ("", "by nkey")
    );

    // Credentials in the URL win over the settings' (here a wrong password).
    let cfg = nats_config(format!(
        "url: nats://sluice:{PASSWORD}@127.0.0.1:{}\nusername: sluice\npassword: wrong\n",
        nats.port
    ));
    send(&cfg, "rollouts.web", "by URL").await.unwrap();
    assert_eq!(reader.next().await.payload, "by URL");
}

#[tokio::test]
async fn nats_failures_use_the_clients_words_and_name_no_secret() {
    let nats = Nats::start("", &[]).await;
    let url = nats.url();
    let cfg = nats_config(format!(
        "url: {url}\nusername: sluice\npassword: not-{PASSWORD}\n"
    ));
    let (message, permanent) = send(&cfg, "rollouts.web", "m").await.unwrap_err();
    assert_eq!(
        message,
        "nats 'nats': failed to connect to NATS server: nats: Authorization Violation"
    );
    assert!(!permanent && !message.contains(PASSWORD));

    // The server refuses a subject the user may not publish to; the client hears it.
    let cfg = nats_config(format!("url: {url}\nusername: limited\npassword: l\n"));
    send(&cfg, "rollouts.web", "m").await.unwrap();
    let (message, permanent) = send(&cfg, "audit.web", "m").await.unwrap_err();
    assert_eq!(
        message,
        "nats 'nats': failed to publish message to NATS: nats: Permissions Violation for Publish to \"audit.web\""
    );
    assert!(!permanent);

    let cfg = nats_config(format!(
        "url: {url}\nusername: sluice\npassword: $nats-password\n"
    ));
    let (message, permanent) = send(&cfg, "", "m").await.unwrap_err();
    assert_eq!(
        message,
        "nats 'nats': failed to publish message to NATS: nats: invalid subject"
    );
    assert!(permanent);

    let mut bad_seed = SEED.to_owned();
    bad_seed.replace_range(20..21, "A");
    let cfg = config(
        &[("service.nats", format!("url: {url}\nnkey: $seed\n"))],
        &[("seed", &bad_seed)],
    );
    let (message, permanent) = send(&cfg, "rollouts.web", "m").await.unwrap_err();
    assert_eq!(
        message,
        "nats 'nats': failed to create NKey from seed: nkeys: invalid checksum"
    );
    assert!(permanent && !message.contains(&bad_seed[..20]));

    let cfg = nats_config(format!("url: tls://127.0.0.1:{}\n", nats.port));
    let (message, permanent) = send(&cfg, "rollouts.web", "m").await.unwrap_err();
    assert_eq!(
        message,
        "nats 'nats': failed to connect to NATS server: nats: secure connection not available"
    );
    assert!(!permanent);

    let cfg = nats_config(format!("url: nats://127.0.0.1:{}\n", free_port()));
    let (message, permanent) = send(&cfg, "rollouts.web", "m").await.unwrap_err();
    assert_eq!(
        message,
        "nats 'nats': failed to connect to NATS server: nats: no servers available for connection"
    );
    assert!(!permanent);
}

#[tokio::test]
async fn nats_speaks_tls_when_the_server_requires_it_and_verifies_its_certificate() {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let nats = Nats::start(
        "tls {\n  cert_file: \"$DIR/cert.pem\"\n  key_file: \"$DIR/key.pem\"\n}\n",
        &[
            ("cert.pem", certified.cert.pem()),
            ("key.pem", certified.signing_key.serialize_pem()),
        ],
    )
    .await;
    let cfg = nats_config(format!(
        "url: nats://localhost:{}\nusername: sluice\npassword: $nats-password\n",
        nats.port
    ));
    let (message, _) = send(&cfg, "rollouts.web", "m").await.unwrap_err();
    // A certificate no root vouches for: the client went into TLS and refused it.
    assert_eq!(
        message,
        "nats 'nats': failed to connect to NATS server: tls: invalid peer certificate: UnknownIssuer"
    );
}

#[tokio::test]
async fn nats_settings_of_the_wrong_type_are_a_problem_and_other_services_still_send() {
    let (url, rec) = server().await;
    let data = [
        ("service.nats".to_owned(), "url: [a, b]\n".to_owned()),
        ("service.webhook".to_owned(), format!("url: {url}/hook")),
    ]
    .into_iter()
    .collect();
    let cfg = Config::parse(&data, &Default::default());
    assert_eq!(cfg.problems.len(), 1, "{:?}", cfg.problems);
    assert_eq!(cfg.problems[0].key, "service.nats");
    assert_eq!(
        cfg.problems[0].message,
        "bad nats service settings: a field has the wrong type"
    );
    let (message, permanent) = send(&cfg, "rollouts.web", "m").await.unwrap_err();
    assert_eq!(
        (message.as_str(), permanent),
        ("notification service 'nats' is not configured", true)
    );
    sender()
        .send(
            &cfg,
            &notification("webhook", "", json!({"message": "still sent"})),
            &SlackThreads::new(),
        )
        .await
        .unwrap();
    assert_eq!(rec.received.lock().unwrap()[0].body, "still sent");
}
