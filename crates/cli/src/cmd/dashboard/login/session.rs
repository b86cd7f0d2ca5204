//! Sessions as signed cookies: who logged in, how, and until when. Nothing is kept on the
//! server, so any replica holding the same key reads any session, and a restart with a new
//! key ends them all. Pure: the time and the key are arguments.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use serde::{Deserialize, Serialize};

/// The cookie of a logged-in browser.
pub const COOKIE: &str = "sluice_session";
/// The cookie that carries a login through the OpenID Connect provider and back.
pub const PENDING_COOKIE: &str = "sluice_login";

/// Who a session acts as: the user and groups the dashboard impersonates on every request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Identity {
    #[serde(rename = "u")]
    pub user: String,
    #[serde(rename = "g", default)]
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    #[serde(flatten)]
    pub identity: Identity,
    /// How the user logged in: `token` or `oidc`.
    pub via: String,
    /// Seconds since the epoch after which the session is refused.
    pub exp: i64,
}

/// Why a cookie does not open a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not made by this dashboard's key, or changed since: a forged cookie.
    Forged,
    Expired,
}

impl Refusal {
    pub fn message(self) -> &'static str {
        match self {
            Refusal::Forged => "the session cookie was not issued by this dashboard: log in again",
            Refusal::Expired => "the session has expired: log in again",
        }
    }
}

/// The key that signs sessions and pending logins (HMAC-SHA256).
#[derive(Clone)]
pub struct Key(hmac::Key);

impl Key {
    pub fn new(secret: &[u8]) -> Self {
        Self(hmac::Key::new(hmac::HMAC_SHA256, secret))
    }

    /// `payload` as a cookie value: `v1.` + the payload + its signature, base64url.
    pub fn seal<T: Serialize>(&self, payload: &T) -> String {
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(payload).unwrap_or_default());
        let tag = hmac::sign(&self.0, body.as_bytes());
        format!("v1.{body}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    }

    /// The payload of a value `seal` made with this key; `None` for anything else.
    pub fn open<T: for<'de> Deserialize<'de>>(&self, value: &str) -> Option<T> {
        let rest = value.strip_prefix("v1.")?;
        let (body, tag) = rest.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        hmac::verify(&self.0, body.as_bytes(), &tag).ok()?;
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).ok()?).ok()
    }

    /// The session in a cookie's value at `now` (seconds since the epoch).
    pub fn session(&self, value: &str, now: i64) -> Result<Session, Refusal> {
        let session: Session = self.open(value).ok_or(Refusal::Forged)?;
        if now >= session.exp {
            return Err(Refusal::Expired);
        }
        Ok(session)
    }
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

/// A `Set-Cookie` value: HTTP-only, same-site lax (the provider's redirect back is a
/// top-level navigation, which lax lets through; other sites' requests carry no cookie),
/// `Secure` when the dashboard is served over HTTPS.
pub fn set_cookie(name: &str, value: &str, max_age: i64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice(exp: i64) -> Session {
        Session {
            identity: Identity {
                user: "alice@example.test".into(),
                groups: vec!["readers".into()],
            },
            via: "oidc".into(),
            exp,
        }
    }

    #[test]
    fn a_sealed_session_opens_until_it_expires() {
        let key = Key::new(b"0123456789abcdef0123456789abcdef");
        let cookie = key.seal(&alice(1_000));
        assert_eq!(key.session(&cookie, 999), Ok(alice(1_000)));
        assert_eq!(key.session(&cookie, 1_000), Err(Refusal::Expired));
    }

    #[test]
    fn a_changed_or_foreign_cookie_is_forged() {
        let key = Key::new(b"0123456789abcdef0123456789abcdef");
        let cookie = key.seal(&alice(1_000));
        // Another user put in the payload, the signature kept.
        let (_, tag) = cookie.rsplit_once('.').unwrap();
        let mut admin = alice(1_000);
        admin.identity.user = "admin".into();
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&admin).unwrap());
        let forged = format!("v1.{body}.{tag}");
        assert_eq!(key.session(&forged, 0), Err(Refusal::Forged));
        // The expiry pushed back, likewise.
        let later = key.seal(&alice(5_000));
        let (later_body, _) = later.rsplit_once('.').unwrap();
        assert_eq!(
            key.session(&format!("{later_body}.{tag}"), 2_000),
            Err(Refusal::Forged)
        );
        // Sealed by another key, or not a cookie of ours at all.
        let other = Key::new(b"another key, another dashboard!!");
        assert_eq!(other.session(&cookie, 0), Err(Refusal::Forged));
        for junk in ["", "v1.", "v1.a.b", "v2.x.y", "eyJ1IjoiYSJ9"] {
            assert_eq!(key.session(junk, 0), Err(Refusal::Forged), "{junk:?}");
        }
    }

    #[test]
    fn cookies_are_found_by_name() {
        let header = "theme=dark; sluice_session=v1.abc.def; other=1";
        assert_eq!(cookie(header, COOKIE), Some("v1.abc.def"));
        assert_eq!(cookie(header, "missing"), None);
        assert!(set_cookie(COOKIE, "v", 60, true).ends_with("Max-Age=60; Secure"));
    }
}
