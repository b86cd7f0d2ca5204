//! Logging in through an OpenID Connect provider: the authorization code flow with PKCE, a
//! state and a nonce, the ID token checked as kube-apiserver checks one (`jwt`), and the user
//! and groups read from its claims as kube-apiserver's `--oidc-*` flags read them. The pure
//! parts (the redirect, the pending login, the identity from the claims) are functions; the
//! provider's discovery document, token endpoint and keys are fetched by `Provider`.

use anyhow::Context as _;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::digest;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::{OnceCell, RwLock};

use super::jwt::{self, KeySet};
use super::session::Identity;

/// How the dashboard is registered with the provider and how its claims name users.
#[derive(Debug, Clone)]
pub struct Settings {
    pub issuer: String,
    pub client_id: String,
    pub client_secret: String,
    /// `<public URL>/login/callback`, registered with the provider.
    pub redirect_uri: String,
    pub scopes: Vec<String>,
    pub username_claim: String,
    pub username_prefix: String,
    pub groups_claim: String,
    pub groups_prefix: String,
}

/// A login on its way through the provider, kept in a signed cookie for ten minutes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    pub state: String,
    pub nonce: String,
    pub verifier: String,
    /// Where to go once logged in (a path of the dashboard).
    pub next: String,
    pub exp: i64,
}

/// How long a login may take at the provider.
pub const PENDING_SECONDS: i64 = 600;

/// The PKCE challenge of a verifier (S256).
pub fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, verifier.as_bytes()))
}

/// The provider's authorization endpoint with this login's parameters.
pub fn authorization_url(
    endpoint: &str,
    settings: &Settings,
    pending: &Pending,
) -> anyhow::Result<String> {
    let scopes = settings.scopes.join(" ");
    let url = reqwest::Url::parse_with_params(
        endpoint,
        [
            ("response_type", "code"),
            ("client_id", settings.client_id.as_str()),
            ("redirect_uri", settings.redirect_uri.as_str()),
            ("scope", scopes.as_str()),
            ("state", pending.state.as_str()),
            ("nonce", pending.nonce.as_str()),
            ("code_challenge", challenge(&pending.verifier).as_str()),
            ("code_challenge_method", "S256"),
        ],
    )
    .with_context(|| format!("the provider's authorization endpoint {endpoint:?}"))?;
    Ok(url.into())
}

/// The user and groups an ID token's claims name, as kube-apiserver would name them with the
/// same claims and prefixes; an email that the provider says is not verified is refused.
pub fn identity(claims: &Map<String, Value>, settings: &Settings) -> Result<Identity, String> {
    let Some(name) = claims.get(&settings.username_claim).and_then(Value::as_str) else {
        return Err(format!(
            "the ID token has no {:?} claim to name the user by (--oidc-username-claim)",
            settings.username_claim
        ));
    };
    if settings.username_claim == "email"
        && claims.get("email_verified") == Some(&Value::Bool(false))
    {
        return Err(format!("the provider has not verified the email {name:?}"));
    }
    let groups = match claims.get(&settings.groups_claim) {
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
        Some(Value::String(one)) => vec![one.as_str()],
        _ => Vec::new(),
    };
    Ok(Identity {
        user: format!("{}{name}", settings.username_prefix),
        groups: groups
            .into_iter()
            .map(|g| format!("{}{g}", settings.groups_prefix))
            .collect(),
    })
}

#[derive(Debug, Clone, Deserialize)]
struct Discovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
}

#[derive(Deserialize)]
struct TokenAnswer {
    id_token: Option<String>,
}

/// The provider, discovered at the first login (so the dashboard starts while the provider is
/// down) and its keys fetched again when a token names a key not yet seen (rotation).
pub struct Provider {
    pub settings: Settings,
    http: reqwest::Client,
    discovery: OnceCell<Discovery>,
    keys: RwLock<KeySet>,
}

impl Provider {
    pub fn new(settings: Settings, http: reqwest::Client) -> Self {
        Self {
            settings,
            http,
            discovery: OnceCell::new(),
            keys: RwLock::new(KeySet::default()),
        }
    }

    async fn discovery(&self) -> anyhow::Result<&Discovery> {
        self.discovery
            .get_or_try_init(|| async {
                let url = format!(
                    "{}/.well-known/openid-configuration",
                    self.settings.issuer.trim_end_matches('/')
                );
                let found: Discovery = self.get_json(&url).await?;
                // As kube-apiserver requires: the document names the issuer it was asked of.
                if found.issuer != self.settings.issuer {
                    anyhow::bail!(
                        "the provider at {url} names its issuer {:?}, not {:?} (--oidc-issuer)",
                        found.issuer,
                        self.settings.issuer
                    );
                }
                Ok(found)
            })
            .await
    }

    async fn get_json<T: for<'de> Deserialize<'de>>(&self, url: &str) -> anyhow::Result<T> {
        let answer = self
            .http
            .get(url)
            .send()
            .await
            .with_context(|| format!("reaching the OpenID Connect provider at {url}"))?;
        let status = answer.status();
        if !status.is_success() {
            anyhow::bail!("the OpenID Connect provider answered {status} to GET {url}");
        }
        answer
            .json()
            .await
            .with_context(|| format!("reading the provider's answer to GET {url}"))
    }

    /// Where to send the browser to log in.
    pub async fn redirect(&self, pending: &Pending) -> anyhow::Result<String> {
        let discovery = self.discovery().await?;
        authorization_url(&discovery.authorization_endpoint, &self.settings, pending)
    }

    /// The identity the provider vouches for, from the code it sent the browser back with.
    pub async fn finish(
        &self,
        code: &str,
        pending: &Pending,
        now: i64,
    ) -> anyhow::Result<Identity> {
        let discovery = self.discovery().await?;
        let answer = self
            .http
            .post(&discovery.token_endpoint)
            .basic_auth(&self.settings.client_id, Some(&self.settings.client_secret))
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", self.settings.redirect_uri.as_str()),
                ("code_verifier", pending.verifier.as_str()),
            ])
            .send()
            .await
            .context("reaching the provider's token endpoint")?;
        let status = answer.status();
        if !status.is_success() {
            let body = answer.text().await.unwrap_or_default();
            anyhow::bail!(
                "the provider refused the login code ({status}): {}",
                body.trim()
            );
        }
        let token = answer
            .json::<TokenAnswer>()
            .await
            .context("reading the provider's token answer")?
            .id_token
            .context(
                "the provider's token answer has no ID token (is `openid` among --oidc-scopes?)",
            )?;
        let expected = jwt::Expected {
            issuer: &self.settings.issuer,
            client_id: &self.settings.client_id,
            nonce: &pending.nonce,
            now,
        };
        let keys = self.keys.read().await.clone();
        let claims = match jwt::verify(&token, &keys, &expected) {
            Ok(claims) => claims,
            // A key not seen yet: the provider may have rotated its keys since they were read.
            Err(_) => {
                let fresh: KeySet = self.get_json(&discovery.jwks_uri).await?;
                *self.keys.write().await = fresh.clone();
                jwt::verify(&token, &fresh, &expected).map_err(anyhow::Error::msg)?
            }
        };
        identity(&claims, &self.settings).map_err(anyhow::Error::msg)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn settings() -> Settings {
        Settings {
            issuer: "http://127.0.0.1:5556".into(),
            client_id: "sluice".into(),
            client_secret: "secret".into(),
            redirect_uri: "http://127.0.0.1:3100/login/callback".into(),
            scopes: vec!["openid".into(), "email".into(), "groups".into()],
            username_claim: "email".into(),
            username_prefix: String::new(),
            groups_claim: "groups".into(),
            groups_prefix: "oidc:".into(),
        }
    }

    #[test]
    fn the_pkce_challenge_is_rfc_7636s() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn the_redirect_carries_the_login_s_parameters() {
        let pending = Pending {
            state: "st".into(),
            nonce: "no".into(),
            verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".into(),
            next: "/".into(),
            exp: 0,
        };
        let url =
            authorization_url("http://127.0.0.1:5556/auth?x=1", &settings(), &pending).unwrap();
        let url = reqwest::Url::parse(&url).unwrap();
        let query: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
        assert_eq!(query["x"], "1");
        assert_eq!(query["scope"], "openid email groups");
        assert_eq!(
            query["redirect_uri"],
            "http://127.0.0.1:3100/login/callback"
        );
        assert_eq!(
            query["code_challenge"],
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert_eq!(
            (query["state"].as_str(), query["nonce"].as_str()),
            ("st", "no")
        );
    }

    #[test]
    fn the_identity_follows_the_claims_and_prefixes() {
        let claims = |v: Value| v.as_object().unwrap().clone();
        let got = identity(
            &claims(json!({"email": "bob@example.test", "groups": ["deployers", "staff"]})),
            &settings(),
        )
        .unwrap();
        assert_eq!(got.user, "bob@example.test");
        assert_eq!(got.groups, ["oidc:deployers", "oidc:staff"]);
        let one = identity(
            &claims(json!({"email": "a@x", "groups": "ops"})),
            &settings(),
        )
        .unwrap();
        assert_eq!(one.groups, ["oidc:ops"]);
        assert!(
            identity(&claims(json!({"sub": "x"})), &settings())
                .unwrap_err()
                .contains("\"email\"")
        );
        assert!(
            identity(
                &claims(json!({"email": "a@x", "email_verified": false})),
                &settings()
            )
            .unwrap_err()
            .contains("not verified")
        );
    }
}
