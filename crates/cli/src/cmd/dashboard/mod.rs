//! `dashboard`: a web page of the Rollouts and Argo's dashboard API, served from this binary.
//!
//! One module per job: `safety` decides from the flags whether changes are allowed, `cache`
//! watches the objects once for the whole process, `views` and `argo_json` turn them into
//! Argo's `RolloutInfo` JSON, `routes` serves it (also as live streams, gzipped by
//! `compress`), `actions` makes the changes, `assets` holds the built page and `error` shapes
//! failures as grpc-gateway does; `login` asks who is there and acts as them.

mod actions;
mod argo_json;
mod assets;
mod brief;
mod cache;
mod compress;
mod error;
mod login;
mod routes;
mod safety;
mod views;

use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse as _;
use axum::routing::{any, get, post, put};
use kube::Client;

use super::emit;
use crate::cli::{DashboardArgs, GlobalArgs, LoginWay};
use crate::kube_target::Target;
use cache::{Cache, Scope};
use error::ApiError;
use safety::Mode;

/// What every request handler shares.
#[derive(Clone)]
pub struct Dashboard {
    cache: Cache,
    scope: Scope,
    mode: Mode,
    client: Client,
    /// The namespace the page opens on.
    namespace: String,
    /// With `--login`: who may come in, and the clients that act as them.
    login: Option<Arc<login::Login>>,
}

impl Dashboard {
    /// Requests about a namespace the dashboard does not serve are refused, rather than read
    /// with a watch nobody started.
    fn check_namespace(&self, namespace: &str) -> Result<(), ApiError> {
        if self.scope.covers(namespace) {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "this dashboard serves namespace {:?} only; start it with -n {namespace} or -A",
                self.namespace
            ),
        ))
    }
}

pub async fn run(global: &GlobalArgs, args: &DashboardArgs) -> anyhow::Result<()> {
    // Refused before connecting or listening, so a mistake exposes nothing. With logins each
    // person acts as themselves, so any address may take changes.
    let logins = !args.login.is_empty();
    let mode = safety::mode(args.address, args.read_only, args.allow_writes || logins)?;
    let (config, namespace) = Target::config(global).await?;
    let login = if logins {
        Some(Arc::new(login_of(args, &config)?))
    } else {
        None
    };
    let target = Target {
        client: kube::Client::try_from(config).context("creating the Kubernetes client")?,
        namespace,
    };
    let scope = if args.all_namespaces {
        Scope::All
    } else {
        Scope::One(target.namespace.clone())
    };
    let listener = tokio::net::TcpListener::bind((args.address, args.port))
        .await
        .with_context(|| format!("listening on {}:{}", args.address, args.port))?;
    let address = listener
        .local_addr()
        .context("reading the listening address")?;
    let dashboard = Dashboard {
        cache: Cache::start(&target.client, &scope),
        scope,
        mode,
        client: target.client,
        namespace: target.namespace,
        login,
    };
    let served = match &dashboard.scope {
        Scope::One(ns) => format!("namespace {ns}"),
        Scope::All => "all namespaces".to_owned(),
    };
    let writes = match mode {
        Mode::ReadOnly => ", read-only",
        Mode::ReadWrite => "",
    };
    let logins = if logins { ", with logins" } else { "" };
    emit(&format!(
        "Sluice dashboard at http://{address}/ ({served}{writes}{logins})\n"
    ))?;
    let bound = args.address;
    let gate = axum::middleware::from_fn_with_state(dashboard.clone(), login::gate);
    let router = router(dashboard)
        .layer(gate)
        .layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| async move {
                let host = request
                    .headers()
                    .get(axum::http::header::HOST)
                    .and_then(|h| h.to_str().ok());
                if !safety::host_allowed(host, bound) {
                    return ApiError::new(
                        StatusCode::FORBIDDEN,
                        "this dashboard answers only requests to localhost or 127.0.0.1 \
                     (the Host header names another machine)",
                    )
                    .into_response();
                }
                next.run(request).await
            },
        ));
    axum::serve(listener, router)
        .await
        .context("serving the dashboard")
}

/// Argo's paths, then the page for everything else.
fn router(dashboard: Dashboard) -> Router {
    let rollouts = "/api/v1/rollouts/{namespace}";
    Router::new()
        .route("/api/v1/version", get(routes::version))
        .route("/api/v1/namespace", get(routes::namespace))
        .route("/api/v1/settings", get(routes::settings))
        .route(&format!("{rollouts}/info"), get(routes::list))
        .route(&format!("{rollouts}/info/watch"), get(routes::watch_list))
        .route(&format!("{rollouts}/{{name}}/info"), get(routes::one))
        .route(
            &format!("{rollouts}/{{name}}/explain"),
            get(routes::explain),
        )
        .route(
            &format!("{rollouts}/{{name}}/info/watch"),
            get(routes::watch_one),
        )
        .route(
            &format!("{rollouts}/{{name}}/promote"),
            put(actions::promote),
        )
        .route(&format!("{rollouts}/{{name}}/abort"), put(actions::abort))
        .route(&format!("{rollouts}/{{name}}/pause"), put(actions::pause))
        .route(&format!("{rollouts}/{{name}}/resume"), put(actions::resume))
        .route(&format!("{rollouts}/{{name}}/retry"), put(actions::retry))
        .route(
            &format!("{rollouts}/{{name}}/restart"),
            put(actions::restart),
        )
        .route(
            &format!("{rollouts}/{{name}}/undo/{{revision}}"),
            put(actions::undo),
        )
        .route(
            &format!("{rollouts}/{{name}}/undo-fast/{{revision}}"),
            put(actions::undo_fast),
        )
        .route(
            &format!("{rollouts}/{{name}}/set/{{container}}/{{*image}}"),
            put(actions::set_image),
        )
        .route("/login", get(login::login_page))
        .route("/login/token", post(login::token_login))
        .route("/login/oidc", get(login::oidc_start))
        .route("/login/callback", get(login::oidc_callback))
        .route("/logout", post(login::logout))
        .route("/api", any(routes::no_such_api))
        .route("/api/{*rest}", any(routes::no_such_api))
        .fallback(get(routes::page))
        .with_state(dashboard)
}

/// The logins `--login` asks for, from the flags: refused before listening when a way is
/// asked for without what it needs.
fn login_of(args: &DashboardArgs, config: &kube::Config) -> anyhow::Result<login::Login> {
    let ttl = args.session_ttl.as_secs();
    anyhow::ensure!(ttl > 0, "--session-ttl must be longer than a second");
    let key = match &args.session_key_file {
        Some(path) => {
            let bytes = std::fs::read(path)
                .with_context(|| format!("reading --session-key-file {}", path.display()))?;
            anyhow::ensure!(
                bytes.len() >= 32,
                "--session-key-file {} holds {} bytes; at least 32 random bytes are needed",
                path.display(),
                bytes.len()
            );
            bytes
        }
        None => login::random().into_bytes(),
    };
    let public_url = args
        .public_url
        .clone()
        .map(|u| u.trim_end_matches('/').to_owned());
    let oidc = if args.login.contains(&LoginWay::Oidc) {
        let issuer = args
            .oidc_issuer
            .clone()
            .context("--login oidc needs --oidc-issuer (the provider's issuer URL)")?;
        let public_url = public_url.clone().context(
            "--login oidc needs --public-url (the dashboard's address as browsers reach it), \
             for the provider to send them back to",
        )?;
        let client_secret = match &args.oidc_client_secret_file {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("reading --oidc-client-secret-file {}", path.display()))?
                .trim()
                .to_owned(),
            None => std::env::var("SLUICE_OIDC_CLIENT_SECRET").context(
                "--login oidc needs the client's secret: --oidc-client-secret-file or \
                 SLUICE_OIDC_CLIENT_SECRET",
            )?,
        };
        let mut http = reqwest::Client::builder().timeout(std::time::Duration::from_secs(15));
        if let Some(path) = &args.oidc_ca_file {
            let pem = std::fs::read(path)
                .with_context(|| format!("reading --oidc-ca-file {}", path.display()))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)
                .with_context(|| format!("reading certificates from {}", path.display()))?
            {
                http = http.add_root_certificate(cert);
            }
        }
        let settings = login::oidc::Settings {
            issuer,
            client_id: args.oidc_client_id.clone(),
            client_secret,
            redirect_uri: format!("{public_url}/login/callback"),
            scopes: args.oidc_scopes.clone(),
            username_claim: args.oidc_username_claim.clone(),
            username_prefix: args.oidc_username_prefix.clone(),
            groups_claim: args.oidc_groups_claim.clone(),
            groups_prefix: args.oidc_groups_prefix.clone(),
        };
        let http = http.build().context("creating the OpenID Connect client")?;
        Some(login::oidc::Provider::new(settings, http))
    } else {
        None
    };
    Ok(login::Login {
        key: login::session::Key::new(&key),
        ttl,
        secure: public_url
            .as_deref()
            .is_some_and(|u| u.starts_with("https://")),
        token: args.login.contains(&LoginWay::Token),
        oidc,
        users: login::users::Users::new(config.clone()),
    })
}
