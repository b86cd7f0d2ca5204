//! A local SMTP server speaking enough of the protocol (RFC 5321: EHLO, AUTH PLAIN and LOGIN,
//! MAIL, RCPT, DATA, RSET, NOOP, QUIT) to record the messages a client sends.

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::TcpListener;

/// One message as the server took it.
#[derive(Debug, Clone, Default)]
pub struct Mail {
    /// `(username, password)` the client logged in with, if it did.
    pub login: Option<(String, String)>,
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
}

/// Starts the server on a free local port.
pub async fn start() -> (u16, Smtp) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let smtp = Smtp::default();
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

async fn session(socket: tokio::net::TcpStream, smtp: Smtp) -> std::io::Result<()> {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read).lines();
    let b64 = base64::engine::general_purpose::STANDARD;
    let decode =
        |s: &str| String::from_utf8_lossy(&b64.decode(s.trim()).unwrap_or_default()).into_owned();
    write.write_all(b"220 stub ESMTP ready\r\n").await?;
    let mut mail = Mail::default();
    let mut login = None;
    while let Some(line) = lines.next_line().await? {
        let upper = line.to_ascii_uppercase();
        let reply: &[u8] = if upper.starts_with("EHLO") {
            b"250-stub greets you\r\n250-AUTH PLAIN LOGIN\r\n250-8BITMIME\r\n250 SMTPUTF8\r\n"
        } else if upper.starts_with("HELO") || upper.starts_with("NOOP") {
            b"250 OK\r\n"
        } else if upper.starts_with("AUTH PLAIN") {
            let arg = line[10..].trim().to_owned();
            let arg = if arg.is_empty() {
                write.write_all(b"334 \r\n").await?;
                lines.next_line().await?.unwrap_or_default()
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
            write.write_all(b"334 VXNlcm5hbWU6\r\n").await?;
            let user = decode(&lines.next_line().await?.unwrap_or_default());
            write.write_all(b"334 UGFzc3dvcmQ6\r\n").await?;
            let pass = decode(&lines.next_line().await?.unwrap_or_default());
            login = Some((user, pass));
            b"235 2.7.0 Authentication successful\r\n"
        } else if upper.starts_with("MAIL FROM:") {
            mail = Mail {
                login: login.clone(),
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
            write
                .write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")
                .await?;
            let mut data = String::new();
            while let Some(l) = lines.next_line().await? {
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
            write.write_all(b"221 2.0.0 Bye\r\n").await?;
            return Ok(());
        } else {
            b"502 5.5.2 Command not recognized\r\n"
        };
        write.write_all(reply).await?;
    }
    Ok(())
}

/// `<a@b>` (with parameters after it) to `a@b`.
fn address(arg: &str) -> String {
    let arg = arg.trim();
    let end = arg.find('>').map_or(arg.len(), |i| i + 1);
    arg[..end].trim_matches(['<', '>']).to_owned()
}
