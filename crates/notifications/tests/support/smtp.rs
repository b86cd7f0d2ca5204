//! A local SMTP server speaking enough of the protocol (RFC 5321: EHLO, AUTH PLAIN and LOGIN,
//! MAIL, RCPT, DATA, RSET, NOOP, QUIT; STARTTLS, RFC 3207, when asked) to record the messages
//! a client sends.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use rustls::pki_types::PrivateKeyDer;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, AsyncWriteExt as _, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// One message as the server took it.
#[derive(Debug, Clone, Default)]
pub struct Mail {
    /// `(username, password)` the client logged in with, if it did.
    pub login: Option<(String, String)>,
    /// Whether the login and message came over TLS.
    pub secure: bool,
    pub from: String,
    pub to: Vec<String>,
    /// The message as sent after DATA (headers and body, dot-stuffing undone).
    pub data: String,
}

impl Mail {
    /// The value of header `name` (first occurrence, unfolded).
    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.data.split("\r\n\r\n").next().unwrap_or_default();
        let mut value: Option<String> = None;
        for line in head.split("\r\n") {
            if let Some(v) = &mut value {
                if line.starts_with([' ', '\t']) {
                    v.push_str(line.trim_start());
                    continue;
                }
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case(name)
            {
                value = Some(v.trim().to_owned());
            }
        }
        value
    }

    /// The body, after the headers.
    pub fn body(&self) -> &str {
        self.data.split_once("\r\n\r\n").map_or("", |(_, b)| b)
    }
}

/// The server's record; `reject_recipients` makes RCPT answer 550.
#[derive(Clone, Default)]
pub struct Smtp {
    pub mails: Arc<Mutex<Vec<Mail>>>,
    pub reject_recipients: Arc<Mutex<bool>>,
    /// Offered as STARTTLS when set.
    tls: Option<TlsAcceptor>,
}

/// Starts the server on a free local port.
pub async fn start() -> (u16, Smtp) {
    serve(Smtp::default()).await
}

/// Starts a server that offers STARTTLS with a self-signed certificate for `localhost`.
pub async fn start_with_starttls() -> (u16, Smtp) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = certified.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    serve(Smtp {
        tls: Some(TlsAcceptor::from(Arc::new(config))),
        ..Smtp::default()
    })
    .await
}

async fn serve(smtp: Smtp) -> (u16, Smtp) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let state = smtp.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let state = state.clone();
            tokio::spawn(async move {
                let _ = session(socket, state).await;
            });
        }
    });
    (port, smtp)
}

/// How a part of a session ended.
enum Next {
    Quit,
    StartTls,
}

async fn session(socket: TcpStream, smtp: Smtp) -> std::io::Result<()> {
    let mut plain = BufReader::new(socket);
    plain
        .get_mut()
        .write_all(b"220 stub ESMTP ready\r\n")
        .await?;
    let offer = smtp.tls.is_some();
    if let Next::StartTls = commands(&mut plain, &smtp, offer, false).await? {
        let acceptor = smtp.tls.clone().expect("offered");
        let tls = acceptor.accept(plain.into_inner()).await?;
        commands(&mut BufReader::new(tls), &smtp, false, true).await?;
    }
    Ok(())
}

/// Answers commands until QUIT, the end of the connection or STARTTLS; `secure` is whether
/// the connection is TLS by now.
async fn commands<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut BufReader<S>,
    smtp: &Smtp,
    offer_tls: bool,
    secure: bool,
) -> std::io::Result<Next> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let decode =
        |s: &str| String::from_utf8_lossy(&b64.decode(s.trim()).unwrap_or_default()).into_owned();
    let mut mail = Mail::default();
    let mut login = None;
    while let Some(line) = read_line(stream).await? {
        let upper = line.to_ascii_uppercase();
        let reply: &[u8] = if upper.starts_with("EHLO") {
            if offer_tls {
                b"250-stub greets you\r\n250-STARTTLS\r\n250-AUTH PLAIN LOGIN\r\n250 8BITMIME\r\n"
            } else {
                b"250-stub greets you\r\n250-AUTH PLAIN LOGIN\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n"
            }
        } else if upper == "STARTTLS" && offer_tls {
            stream
                .get_mut()
                .write_all(b"220 2.0.0 Ready to start TLS\r\n")
                .await?;
            return Ok(Next::StartTls);
        } else if upper.starts_with("HELO") || upper.starts_with("NOOP") {
            b"250 OK\r\n"
        } else if upper.starts_with("AUTH PLAIN") {
            let arg = line[10..].trim().to_owned();
            let arg = if arg.is_empty() {
                stream.get_mut().write_all(b"334 \r\n").await?;
                read_line(stream).await?.unwrap_or_default()
            } else {
                arg
            };
            let plain = decode(&arg);
            let mut parts = plain.split('\0').skip(1);
            login = Some((
                parts.next().unwrap_or_default().to_owned(),
                parts.next().unwrap_or_default().to_owned(),
            ));
            b"235 2.7.0 Authentication successful\r\n"
        } else if upper.starts_with("AUTH LOGIN") {
            stream.get_mut().write_all(b"334 VXNlcm5hbWU6\r\n").await?;
            let user = decode(&read_line(stream).await?.unwrap_or_default());
            stream.get_mut().write_all(b"334 UGFzc3dvcmQ6\r\n").await?;
            let pass = decode(&read_line(stream).await?.unwrap_or_default());
            login = Some((user, pass));
            b"235 2.7.0 Authentication successful\r\n"
        } else if upper.starts_with("MAIL FROM:") {
            mail = Mail {
                login: login.clone(),
                secure,
                from: address(&line[10..]),
                ..Mail::default()
            };
            b"250 2.1.0 OK\r\n"
        } else if upper.starts_with("RCPT TO:") {
            if *smtp.reject_recipients.lock().unwrap() {
                b"550 5.1.1 No such user\r\n"
            } else {
                mail.to.push(address(&line[8..]));
                b"250 2.1.5 OK\r\n"
            }
        } else if upper == "DATA" {
            stream
                .get_mut()
                .write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")
                .await?;
            let mut data = String::new();
            while let Some(l) = read_line(stream).await? {
                if l == "." {
                    break;
                }
                data.push_str(l.strip_prefix('.').unwrap_or(&l));
                data.push_str("\r\n");
            }
            mail.data = data;
            smtp.mails.lock().unwrap().push(std::mem::take(&mut mail));
            b"250 2.0.0 OK: queued\r\n"
        } else if upper == "RSET" {
            mail = Mail::default();
            b"250 2.0.0 OK\r\n"
        } else if upper == "QUIT" {
            stream.get_mut().write_all(b"221 2.0.0 Bye\r\n").await?;
            return Ok(Next::Quit);
        } else {
            b"502 5.5.2 Command not recognized\r\n"
        };
        stream.get_mut().write_all(reply).await?;
    }
    Ok(Next::Quit)
}

/// One line without its CRLF; None at the end of the stream.
async fn read_line<S: AsyncRead + Unpin>(
    stream: &mut BufReader<S>,
) -> std::io::Result<Option<String>> {
    let mut line = String::new();
    if stream.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    Ok(Some(line.trim_end_matches(['\r', '\n']).to_owned()))
}

/// `<a@b>` (with parameters after it) to `a@b`.
fn address(arg: &str) -> String {
    let arg = arg.trim();
    let end = arg.find('>').map_or(arg.len(), |i| i + 1);
    arg[..end].trim_matches(['<', '>']).to_owned()
}
