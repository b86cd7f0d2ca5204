//! GitHub App authentication as the engine's client (ghinstallation) does it: a JWT signed
//! with RS256 by the App's private key, exchanged for an installation token that is kept until
//! a minute before it expires.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use rustls::pki_types::pem::{self, SectionKind};
use serde_json::Value;

/// The key error of the engine's JWT library, wrapped as its GitHub App client wraps it.
const NOT_PEM: &str =
    "could not parse private key: invalid key: Key must be a PEM encoded PKCS1 or PKCS8 key";
const NOT_RSA: &str = "could not parse private key: key is not a valid RSA private key";

/// `appID` and `installationID` as the engine casts them to int64: a number (a fraction is
/// cut off), a string in Go's integer syntax (`0x`, `0o`, `0b` and a leading `0` give the
/// base; a trailing `.0` is dropped), a bool (1 or 0) or nothing (0). Never quotes the value,
/// which may come from the Secret.
pub(super) fn to_int64(field: &str, v: &Value) -> Result<i64, String> {
    let refused = |kind: &str| format!("{field}: unable to cast a value of type {kind} to int64");
    match v {
        Value::Null => Ok(0),
        Value::Bool(b) => Ok(i64::from(*b)),
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .ok_or_else(|| refused("number")),
        Value::String(s) => go_parse_int(trim_zero_decimal(s)).ok_or_else(|| refused("string")),
        Value::Array(_) => Err(refused("list")),
        Value::Object(_) => Err(refused("map")),
    }
}

/// cast's trimZeroDecimal: `12.00` is `12`, `12.50` stays as it is.
fn trim_zero_decimal(s: &str) -> &str {
    let mut found_zero = false;
    for (i, b) in s.bytes().enumerate().rev() {
        match b {
            b'.' if found_zero => return &s[..i],
            b'.' => return s,
            b'0' => found_zero = true,
            _ => return s,
        }
    }
    s
}

/// Go's `strconv.ParseInt(s, 0, 64)`.
fn go_parse_int(s: &str) -> Option<i64> {
    let (negative, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits, prefixed) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d, true)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d, true)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d, true)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..], true)
    } else {
        (10, lower.as_str(), false)
    };
    // Underscores may only separate digits (or follow a base prefix), as in Go literals.
    if digits.contains('_') {
        let bytes = format!("{}{digits}", if prefixed { "0" } else { "" });
        let b = bytes.as_bytes();
        let bad =
            b.last() == Some(&b'_') || b.first() == Some(&b'_') || b.windows(2).any(|w| w == b"__");
        if bad {
            return None;
        }
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    if clean.is_empty() {
        return None;
    }
    let magnitude = u64::from_str_radix(&clean, radix).ok()?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// The App's private key: the first PEM block, read as PKCS#1 and then PKCS#8, as the
/// engine's JWT library reads it.
pub(super) fn parse_key(text: &str) -> Result<RsaKeyPair, String> {
    let mut input = text.as_bytes();
    let (kind, der) = match pem::from_buf(&mut input) {
        Ok(Some(section)) => section,
        _ => return Err(NOT_PEM.into()),
    };
    if kind == SectionKind::EcPrivateKey {
        return Err(NOT_RSA.into());
    }
    match RsaKeyPair::from_der(&der) {
        Ok(key) => Ok(key),
        Err(_) => RsaKeyPair::from_pkcs8(&der).map_err(|e| {
            if e.to_string() == "WrongAlgorithm" {
                NOT_RSA.to_owned()
            } else {
                format!("could not parse private key: {e}")
            }
        }),
    }
}

/// The App's JWT at `now` (Unix seconds): issued 30 seconds back against clock drift, valid
/// for two minutes, issued by the App's id.
pub(super) fn jwt(key: &RsaKeyPair, app_id: i64, now: i64) -> Result<String, String> {
    let iat = now - 30;
    let exp = iat + 120;
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let claims = URL_SAFE_NO_PAD.encode(format!(r#"{{"iss":"{app_id}","exp":{exp},"iat":{iat}}}"#));
    let input = format!("{header}.{claims}");
    let mut signature = vec![0; key.public().modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        input.as_bytes(),
        &mut signature,
    )
    .map_err(|_| "could not sign jwt: signing failed".to_owned())?;
    Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

/// An installation token and when to fetch the next: a minute before it expires.
#[derive(Clone)]
pub(super) struct Token {
    pub value: String,
    pub refresh_at: jiff::Timestamp,
}

impl Token {
    /// The token of an access_tokens answer; one without a readable `expires_at` is used for
    /// this send only (the engine's client fetches again when it cannot tell the expiry).
    pub fn from_answer(answer: &Value) -> Option<Token> {
        let value = answer.get("token")?.as_str()?.to_owned();
        let refresh_at = answer
            .get("expires_at")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            .and_then(|t| t.checked_sub(jiff::SignedDuration::from_secs(60)).ok())
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        Some(Token { value, refresh_at })
    }

    pub fn fresh(&self, now: jiff::Timestamp) -> bool {
        now < self.refresh_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_are_cast_as_the_engine_casts_them() {
        let cast = |v: Value| to_int64("appID", &v);
        assert_eq!(cast(json!(12345)), Ok(12345));
        assert_eq!(cast(json!(12345.9)), Ok(12345));
        assert_eq!(cast(json!("12345")), Ok(12345));
        assert_eq!(cast(json!("12345.00")), Ok(12345));
        assert_eq!(cast(json!("0x1F")), Ok(31));
        assert_eq!(cast(json!("010")), Ok(8));
        assert_eq!(cast(json!("1_000")), Ok(1000));
        assert_eq!(cast(json!("-7")), Ok(-7));
        assert_eq!(cast(json!(true)), Ok(1));
        assert_eq!(cast(Value::Null), Ok(0));
        assert_eq!(
            cast(json!("secret-ish")),
            Err("appID: unable to cast a value of type string to int64".into())
        );
        assert!(cast(json!("12.5")).is_err());
        assert!(cast(json!("1__0")).is_err());
        assert!(cast(json!([1])).is_err());
    }

    #[test]
    fn keys_are_read_as_pkcs1_or_pkcs8_and_sign_rs256() {
        let pkcs1 = include_str!("../../../tests/more_services/github-app-key.pem");
        let pkcs8 = include_str!("../../../tests/more_services/github-app-key-pkcs8.pem");
        let a = parse_key(pkcs1).unwrap();
        let b = parse_key(pkcs8).unwrap();
        assert_eq!(a.public().as_ref(), b.public().as_ref());
        let token = jwt(&a, 42, 1_700_000_030).unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(
            claims,
            json!({"iss": "42", "iat": 1_700_000_000, "exp": 1_700_000_120})
        );
        let public = ring::signature::UnparsedPublicKey::new(
            &ring::signature::RSA_PKCS1_2048_8192_SHA256,
            b.public().as_ref(),
        );
        let signed = format!("{}.{}", parts[0], parts[1]);
        public
            .verify(
                signed.as_bytes(),
                &URL_SAFE_NO_PAD.decode(parts[2]).unwrap(),
            )
            .unwrap();
        assert_eq!(parse_key("not a key").unwrap_err(), NOT_PEM);
    }

    #[test]
    fn a_token_is_kept_until_a_minute_before_it_expires() {
        let t = Token::from_answer(&json!({"token": "t", "expires_at": "2030-01-01T10:00:00Z"}))
            .unwrap();
        assert!(t.fresh("2030-01-01T09:58:59Z".parse().unwrap()));
        assert!(!t.fresh("2030-01-01T09:59:00Z".parse().unwrap()));
        let once = Token::from_answer(&json!({"token": "t"})).unwrap();
        assert!(!once.fresh(jiff::Timestamp::now()));
        assert!(Token::from_answer(&json!({"message": "no"})).is_none());
    }
}
