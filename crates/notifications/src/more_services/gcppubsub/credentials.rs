//! Google credentials as the Pub/Sub client finds them: a service account key file (`keyFile`,
//! else `GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's well-known file), else the metadata
//! server of GCE and GKE (Workload Identity). A service account signs its own token (a JWT
//! with Pub/Sub's scopes, RS256, as the client's self-signed JWTs are); the metadata server
//! hands one out. Errors carry the client's words and never a key or token.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde::Deserialize;
use serde_json::json;

/// The scopes the Pub/Sub client asks for.
pub const SCOPES: [&str; 2] = [
    "https://www.googleapis.com/auth/cloud-platform",
    "https://www.googleapis.com/auth/pubsub",
];
const METADATA_IP: &str = "169.254.169.254";
const NO_DEFAULT: &str = "credentials: could not find default credentials. See \
    https://cloud.google.com/docs/authentication/external/set-up-adc for more information";

/// Where the token comes from.
pub enum Source {
    ServiceAccount(Box<ServiceAccount>),
    /// The metadata server at this host.
    Metadata(String),
}

pub struct ServiceAccount {
    email: String,
    key_id: String,
    key: ring::rsa::KeyPair,
}

#[derive(Deserialize)]
struct File {
    #[serde(default, rename = "type")]
    type_: String,
    #[serde(default)]
    client_email: String,
    #[serde(default)]
    private_key: String,
    #[serde(default)]
    private_key_id: String,
}

/// The credentials, looked up in the client's order; `env` reads the environment.
pub fn find(key_file: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Source, String> {
    let named = Some(key_file.to_owned())
        .filter(|f| !f.is_empty())
        .or_else(|| env("GOOGLE_APPLICATION_CREDENTIALS"));
    if let Some(path) = named {
        let bytes = std::fs::read(&path).map_err(|e| format!("open {path}: {}", io_words(&e)))?;
        return from_json(&bytes).map(|a| Source::ServiceAccount(Box::new(a)));
    }
    let gcloud = env("CLOUDSDK_CONFIG")
        .or_else(|| env("HOME").map(|home| format!("{home}/.config/gcloud")))
        .map(|dir| format!("{dir}/application_default_credentials.json"));
    if let Some(bytes) = gcloud.and_then(|path| std::fs::read(path).ok()) {
        return from_json(&bytes).map(|a| Source::ServiceAccount(Box::new(a)));
    }
    Ok(Source::Metadata(
        env("GCE_METADATA_HOST").unwrap_or_else(|| METADATA_IP.to_owned()),
    ))
}

/// Go's words for the common file errors, without Rust's `(os error n)`.
fn io_words(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// A credentials file; only service account keys are signed with.
fn from_json(bytes: &[u8]) -> Result<ServiceAccount, String> {
    // serde's message may quote the file, key included: never shown.
    let file: File = serde_json::from_slice(bytes)
        .map_err(|_| "credentials: the credentials file is not a JSON object".to_string())?;
    if file.type_ != "service_account" {
        return Err(format!(
            "credentials: {:?} credentials are not supported (a service account key or the \
             metadata server is)",
            file.type_
        ));
    }
    let key = parse_key(&file.private_key)
        .map_err(|e| format!("credentials: could not parse key: {e}"))?;
    Ok(ServiceAccount {
        email: file.client_email,
        key_id: file.private_key_id,
        key,
    })
}

/// A PEM (or bare) PKCS#8 or PKCS#1 RSA key.
fn parse_key(pem: &str) -> Result<ring::rsa::KeyPair, String> {
    let body: String = if pem.contains("-----BEGIN") {
        pem.lines()
            .skip_while(|l| !l.starts_with("-----BEGIN"))
            .skip(1)
            .take_while(|l| !l.starts_with("-----END"))
            .collect()
    } else {
        pem.split_whitespace().collect()
    };
    let der = base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .map_err(|_| "private key should be a PEM or plain PKCS1 or PKCS8".to_string())?;
    ring::rsa::KeyPair::from_pkcs8(&der)
        .or_else(|_| ring::rsa::KeyPair::from_der(&der))
        .map_err(|e| format!("private key should be a PEM or plain PKCS1 or PKCS8: {e}"))
}

impl ServiceAccount {
    /// A self-signed token for Pub/Sub's scopes, valid for an hour from `now`.
    pub fn token(&self, now: SystemTime) -> Result<String, String> {
        let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        let iat = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let header = json!({"alg": "RS256", "typ": "JWT", "kid": self.key_id});
        let claims = json!({"iss": self.email, "sub": self.email, "scope": SCOPES.join(" "),
            "iat": iat, "exp": iat + 3600});
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let mut signature = vec![0; self.key.public().modulus_len()];
        self.key
            .sign(
                &ring::signature::RSA_PKCS1_SHA256,
                &ring::rand::SystemRandom::new(),
                input.as_bytes(),
                &mut signature,
            )
            .map_err(|_| "credentials: could not encode JWT: signing failed".to_string())?;
        Ok(format!("{input}.{}", b64(&signature)))
    }
}

#[derive(Deserialize)]
struct MetadataToken {
    #[serde(default)]
    access_token: String,
    #[serde(default)]
    expires_in: u64,
}

/// A token of the metadata server at `host` for Pub/Sub's scopes.
pub async fn metadata_token(http: &reqwest::Client, host: &str) -> Result<String, String> {
    let url = format!(
        "http://{host}/computeMetadata/v1/instance/service-accounts/default/token?scopes={}",
        SCOPES.join(",")
    );
    let response = http
        .get(url)
        .header("Metadata-Flavor", "Google")
        .timeout(std::time::Duration::from_secs(5))
        .send()
        .await
        .map_err(|e| {
            if e.is_connect() || e.is_timeout() {
                NO_DEFAULT.to_string()
            } else {
                format!(
                    "credentials: cannot fetch token: {}",
                    super::super::kind(&e)
                )
            }
        })?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!(
            "credentials: cannot fetch token: metadata: GCE metadata \
             \"instance/service-accounts/default/token\" not defined (status {})",
            status.as_u16()
        ));
    }
    let token: MetadataToken = response
        .json()
        .await
        .map_err(|_| "credentials: invalid token JSON from metadata".to_string())?;
    if token.expires_in == 0 || token.access_token.is_empty() {
        return Err("credentials: incomplete token received from metadata".into());
    }
    Ok(token.access_token)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use axum::Router;
    use axum::http::HeaderMap;
    use axum::routing::get;

    use super::{Source, find, metadata_token};

    #[test]
    fn credentials_are_looked_up_in_the_clients_order() {
        let dir = std::env::temp_dir().join(format!("sluice-gcp-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("gcloud")).unwrap();
        let user = dir.join("gcloud/application_default_credentials.json");
        std::fs::write(
            &user,
            r#"{"type": "authorized_user", "refresh_token": "r"}"#,
        )
        .unwrap();
        let vars: BTreeMap<&str, String> = [("CLOUDSDK_CONFIG", dir.join("gcloud"))]
            .into_iter()
            .map(|(k, v)| (k, v.display().to_string()))
            .collect();
        let env = |name: &str| vars.get(name).cloned();
        let err = |r: Result<Source, String>| r.err().unwrap();
        assert_eq!(
            err(find("", &env)),
            "credentials: \"authorized_user\" credentials are not supported (a service account \
             key or the metadata server is)"
        );
        let missing = dir.join("none.json").display().to_string();
        assert_eq!(
            err(find(&missing, &env)),
            format!("open {missing}: no such file or directory")
        );
        let bad = dir.join("bad.json");
        std::fs::write(
            &bad,
            r#"{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}"#,
        )
        .unwrap();
        let e = err(find(&bad.display().to_string(), &env));
        assert!(
            e.starts_with("credentials: could not parse key: private key should be a PEM"),
            "{e}"
        );
        let none = |name: &str| (name == "GCE_METADATA_HOST").then(|| "10.0.0.9:80".to_owned());
        assert!(matches!(find("", &none), Ok(Source::Metadata(h)) if h == "10.0.0.9:80"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn the_metadata_server_gives_the_token_for_pubsubs_scopes() {
        let app = Router::new().route(
            "/computeMetadata/v1/instance/service-accounts/default/token",
            get(
                |headers: HeaderMap, uri: axum::http::Uri| async move {
                    assert_eq!(headers["metadata-flavor"], "Google");
                    assert_eq!(
                        uri.query(),
                        Some(
                            "scopes=https://www.googleapis.com/auth/cloud-platform,https://www.googleapis.com/auth/pubsub"
                        )
                    );
                    r#"{"access_token": "ya29.token", "expires_in": 3599, "token_type": "Bearer"}"#
                },
            ),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::new();
        assert_eq!(metadata_token(&http, &host).await.unwrap(), "ya29.token");
        // Nobody at the address: not on Google's cloud.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let gone = closed.local_addr().unwrap().to_string();
        drop(closed);
        assert_eq!(
            metadata_token(&http, &gone).await.unwrap_err(),
            super::NO_DEFAULT
        );
    }
}
