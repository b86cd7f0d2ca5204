//! The email service (`service.email[.<name>]`): a message over SMTP to the recipient's
//! addresses (`email:a@x.com,b@x.com`), from `from`, with the template's `email.subject` and
//! `email.body` (the `message` when the template has no body), as plain text or, with
//! `html: true`, HTML.
//!
//! The connection follows the engine's mail client: port 465 is TLS from the first byte, any
//! other port upgrades with STARTTLS when the server offers it; the server's certificate is
//! checked unless `insecure_skip_verify`. It logs in with `username` and `password` (usually
//! `$email-password` from the Secret) when both are set.

use lettre::message::header::ContentType;
use lettre::message::{Mailbox, Message};
use lettre::transport::smtp::AsyncSmtpTransport;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncTransport as _, Tokio1Executor};
use serde_json::Value as Json;

use super::{REQUEST_TIMEOUT, SendError};
use crate::config::EmailOptions;

/// The port whose connections are TLS from the start (SMTPS).
const SMTPS_PORT: u16 = 465;

/// The message `content` makes for `recipient`.
pub fn message(
    service: &str,
    opts: &EmailOptions,
    recipient: &str,
    content: &Json,
) -> Result<Message, SendError> {
    let text = |v: Option<&Json>| v.and_then(Json::as_str).unwrap_or_default().to_owned();
    let email = content.get("email");
    let subject = text(email.and_then(|e| e.get("subject")));
    let body = Some(text(email.and_then(|e| e.get("body"))))
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| text(content.get("message")));
    let from: Mailbox = opts.from.parse().map_err(|_| {
        SendError::permanent(format!("email '{service}': 'from' is not an email address"))
    })?;
    let mut builder = Message::builder().from(from).subject(subject);
    let mut any = false;
    for to in recipient
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        let to: Mailbox = to.parse().map_err(|_| {
            SendError::permanent(format!(
                "email '{service}': recipient {to:?} is not an email address"
            ))
        })?;
        builder = builder.to(to);
        any = true;
    }
    if !any {
        return Err(SendError::permanent(format!(
            "email '{service}': no recipient"
        )));
    }
    let content_type = if opts.html {
        ContentType::TEXT_HTML
    } else {
        ContentType::TEXT_PLAIN
    };
    builder.header(content_type).body(body).map_err(|e| {
        SendError::permanent(format!("email '{service}': cannot build the message: {e}"))
    })
}

/// Sends one email.
pub async fn send(
    service: &str,
    opts: &EmailOptions,
    recipient: &str,
    content: &Json,
) -> Result<(), SendError> {
    let message = message(service, opts, recipient, content)?;
    let tls = TlsParameters::builder(opts.host.clone())
        .dangerous_accept_invalid_certs(opts.insecure_skip_verify)
        .build_rustls()
        .map_err(|_| SendError::permanent(format!("email '{service}': cannot set up TLS")))?;
    let tls = if opts.port == SMTPS_PORT {
        Tls::Wrapper(tls)
    } else {
        Tls::Opportunistic(tls)
    };
    let mut transport = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(opts.host.as_str())
        .port(opts.port)
        .tls(tls)
        .timeout(Some(REQUEST_TIMEOUT));
    if !opts.username.is_empty() && !opts.password.is_empty() {
        transport = transport.credentials(Credentials::new(
            opts.username.clone(),
            opts.password.clone(),
        ));
    }
    transport
        .build()
        .send(message)
        .await
        .map(drop)
        .map_err(|e| failure(service, &e))
}

/// What went wrong, by kind and the server's reply code (never the server's text, which may
/// quote what was sent, or the credentials).
fn failure(service: &str, e: &lettre::transport::smtp::Error) -> SendError {
    let what = if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_tls() || tls_failure(e) {
        "TLS error (the connection or the server's certificate)".to_owned()
    } else if let Some(code) = e.status() {
        format!("the server answered {code}")
    } else {
        "cannot connect or the connection failed".to_owned()
    };
    let message = format!("email '{service}': sending failed: {what}");
    // A 5xx reply (bad address, refused login) fails the same way again.
    if e.is_permanent() {
        SendError::permanent(message)
    } else {
        SendError::transient(message)
    }
}

/// Whether TLS failed somewhere under `e` (a refused certificate surfaces as a connection
/// error whose cause is rustls's).
fn tls_failure(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = e.source();
    while let Some(c) = cause {
        if c.is::<rustls::Error>()
            || c.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .is_some_and(|inner| inner.is::<rustls::Error>())
        {
            return true;
        }
        cause = c.source();
    }
    false
}
