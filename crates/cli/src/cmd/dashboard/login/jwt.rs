//! An OpenID Connect ID token checked as kube-apiserver checks one: signed (RS256 or ES256) by
//! a key of the provider's published set, issued by the configured issuer for this client,
//! not expired, and answering this login's nonce. Pure: the keys and the time are arguments.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use serde::Deserialize;
use serde_json::{Map, Value};

/// Tolerance for clocks that disagree, as kube-apiserver's OIDC authenticator allows.
const SKEW: i64 = 60;

/// The provider's published keys (`jwks_uri`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct KeySet {
    pub keys: Vec<Jwk>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Jwk {
    pub kty: String,
    #[serde(default)]
    pub kid: Option<String>,
    #[serde(default)]
    pub crv: Option<String>,
    #[serde(default)]
    pub n: Option<String>,
    #[serde(default)]
    pub e: Option<String>,
    #[serde(default)]
    pub x: Option<String>,
    #[serde(default)]
    pub y: Option<String>,
}

/// What must hold of a token besides its signature.
pub struct Expected<'a> {
    pub issuer: &'a str,
    pub client_id: &'a str,
    pub nonce: &'a str,
    /// Seconds since the epoch.
    pub now: i64,
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
}

fn decode(part: &str, what: &str) -> Result<Vec<u8>, String> {
    URL_SAFE_NO_PAD
        .decode(part.trim_end_matches('='))
        .map_err(|_| format!("the ID token's {what} is not base64url"))
}

/// The claims of `token` once it passes every check; otherwise why not.
pub fn verify(
    token: &str,
    keys: &KeySet,
    expected: &Expected,
) -> Result<Map<String, Value>, String> {
    let mut parts = token.split('.');
    let (Some(head), Some(body), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the ID token is not a signed JWT (three parts)".into());
    };
    let header: Header = serde_json::from_slice(&decode(head, "header")?)
        .map_err(|e| format!("the ID token's header: {e}"))?;
    let signature = decode(sig, "signature")?;
    let signed = &token.as_bytes()[..head.len() + 1 + body.len()];
    let kty = match header.alg.as_str() {
        "RS256" => "RSA",
        "ES256" => "EC",
        other => {
            return Err(format!(
                "the ID token is signed with {other}; RS256 and ES256 are accepted"
            ));
        }
    };
    let candidates: Vec<&Jwk> = keys
        .keys
        .iter()
        .filter(|k| k.kty == kty)
        .filter(|k| header.kid.is_none() || k.kid == header.kid)
        .collect();
    if candidates.is_empty() {
        return Err(format!(
            "no {kty} key{} among the provider's published keys",
            header
                .kid
                .as_deref()
                .map(|k| format!(" with kid {k:?}"))
                .unwrap_or_default()
        ));
    }
    if !candidates
        .iter()
        .any(|key| checks(key, &header.alg, signed, &signature))
    {
        return Err("the ID token's signature does not verify with the provider's keys".into());
    }
    let claims: Map<String, Value> = serde_json::from_slice(&decode(body, "payload")?)
        .map_err(|e| format!("the ID token's claims: {e}"))?;
    check_claims(&claims, expected)?;
    Ok(claims)
}

fn checks(key: &Jwk, alg: &str, signed: &[u8], signature: &[u8]) -> bool {
    let part = |p: &Option<String>| p.as_deref().and_then(|v| URL_SAFE_NO_PAD.decode(v).ok());
    match alg {
        "RS256" => {
            let (Some(n), Some(e)) = (part(&key.n), part(&key.e)) else {
                return false;
            };
            RsaPublicKeyComponents { n, e }
                .verify(&signature::RSA_PKCS1_2048_8192_SHA256, signed, signature)
                .is_ok()
        }
        "ES256" => {
            let (Some(x), Some(y)) = (part(&key.x), part(&key.y)) else {
                return false;
            };
            if key.crv.as_deref() != Some("P-256") || x.len() != 32 || y.len() != 32 {
                return false;
            }
            let point = [&[4u8][..], &x, &y].concat();
            UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                .verify(signed, signature)
                .is_ok()
        }
        _ => false,
    }
}

fn check_claims(claims: &Map<String, Value>, expected: &Expected) -> Result<(), String> {
    let text = |name: &str| claims.get(name).and_then(Value::as_str);
    if text("iss") != Some(expected.issuer) {
        return Err(format!(
            "the ID token was issued by {:?}, not by {:?}",
            text("iss").unwrap_or_default(),
            expected.issuer
        ));
    }
    let audience = match claims.get("aud") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !audience.contains(&expected.client_id) {
        return Err(format!(
            "the ID token is for {audience:?}, not for client {:?}",
            expected.client_id
        ));
    }
    if audience.len() > 1 && text("azp").is_some_and(|azp| azp != expected.client_id) {
        return Err("the ID token was given to another client (azp)".into());
    }
    let Some(exp) = claims.get("exp").and_then(Value::as_i64) else {
        return Err("the ID token has no expiry (exp)".into());
    };
    if expected.now > exp + SKEW {
        return Err("the ID token has expired".into());
    }
    if text("nonce") != Some(expected.nonce) {
        return Err("the ID token does not answer this login (nonce)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
    use serde_json::json;

    use super::*;

    const ISSUER: &str = "http://127.0.0.1:5556/dex";

    fn expected(now: i64) -> Expected<'static> {
        Expected {
            issuer: ISSUER,
            client_id: "sluice",
            nonce: "n-0S6",
            now,
        }
    }

    fn claims() -> Value {
        json!({"iss": ISSUER, "aud": "sluice", "sub": "alice", "exp": 2_000,
               "nonce": "n-0S6", "email": "alice@example.test", "groups": ["readers"]})
    }

    /// A P-256 key, its JWK, and tokens it signs.
    struct Signer(EcdsaKeyPair);

    impl Signer {
        fn new() -> Self {
            let rng = SystemRandom::new();
            let pkcs8 =
                EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
            Self(
                EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
                    .unwrap(),
            )
        }
        fn jwk(&self, kid: &str) -> Jwk {
            let point = self.0.public_key().as_ref();
            serde_json::from_value(json!({"kty": "EC", "crv": "P-256", "kid": kid,
                "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..])}))
            .unwrap()
        }
        fn sign(&self, kid: &str, claims: &Value) -> String {
            let head = URL_SAFE_NO_PAD.encode(json!({"alg": "ES256", "kid": kid}).to_string());
            let body = URL_SAFE_NO_PAD.encode(claims.to_string());
            let signed = format!("{head}.{body}");
            let sig = self
                .0
                .sign(&SystemRandom::new(), signed.as_bytes())
                .unwrap();
            format!("{signed}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
        }
    }

    #[test]
    fn an_es256_token_of_the_provider_verifies_and_its_claims_are_checked() {
        let signer = Signer::new();
        let keys = KeySet {
            keys: vec![signer.jwk("k1")],
        };
        let token = signer.sign("k1", &claims());
        let got = verify(&token, &keys, &expected(1_000)).unwrap();
        assert_eq!(got["email"], "alice@example.test");

        let refused = |claims: Value, now: i64| {
            verify(&signer.sign("k1", &claims), &keys, &expected(now)).unwrap_err()
        };
        assert!(refused(claims(), 2_061).contains("expired"));
        let mut other = claims();
        other["iss"] = json!("http://elsewhere");
        assert!(refused(other, 1_000).contains("issued by"));
        let mut other = claims();
        other["aud"] = json!(["another-client"]);
        assert!(refused(other, 1_000).contains("not for client"));
        let mut other = claims();
        other["nonce"] = json!("replayed");
        assert!(refused(other, 1_000).contains("nonce"));
    }

    #[test]
    fn a_token_signed_by_another_key_or_changed_is_refused() {
        let provider = Signer::new();
        let keys = KeySet {
            keys: vec![provider.jwk("k1")],
        };
        let forger = Signer::new();
        let forged = forger.sign("k1", &claims());
        assert!(
            verify(&forged, &keys, &expected(1_000))
                .unwrap_err()
                .contains("does not verify")
        );
        // A genuine token whose claims were swapped afterwards.
        let genuine = provider.sign("k1", &claims());
        let parts: Vec<&str> = genuine.split('.').collect();
        let mut admin = claims();
        admin["email"] = json!("admin@example.test");
        let swapped = format!(
            "{}.{}.{}",
            parts[0],
            URL_SAFE_NO_PAD.encode(admin.to_string()),
            parts[2]
        );
        assert!(
            verify(&swapped, &keys, &expected(1_000))
                .unwrap_err()
                .contains("does not verify")
        );
        // Unsigned ("alg": "none") and unknown keys.
        let none = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            parts[1]
        );
        assert!(
            verify(&none, &keys, &expected(1_000))
                .unwrap_err()
                .contains("none")
        );
        assert!(
            verify(&provider.sign("k2", &claims()), &keys, &expected(1_000))
                .unwrap_err()
                .contains("kid")
        );
        assert!(verify("not-a-jwt", &keys, &expected(1_000)).is_err());
    }

    /// RS256, made by OpenSSL (`openssl genrsa 2048`, `openssl dgst -sha256 -sign`), so the
    /// check is held to another implementation's signature.
    #[test]
    fn an_rs256_token_signed_by_openssl_verifies() {
        let keys: KeySet = serde_json::from_str(RSA_JWKS).unwrap();
        let got = verify(RSA_TOKEN, &keys, &expected(1_000)).unwrap();
        assert_eq!(got["sub"], "alice");
        // One character of the signature changed (not the last, whose low bits are padding).
        let at = RSA_TOKEN.len() - 10;
        let was = &RSA_TOKEN[at..=at];
        let tampered = format!(
            "{}{}{}",
            &RSA_TOKEN[..at],
            if was == "A" { "B" } else { "A" },
            &RSA_TOKEN[at + 1..]
        );
        assert!(verify(&tampered, &keys, &expected(1_000)).is_err());
    }

    include!("jwt_rsa_vector.rs");
}
