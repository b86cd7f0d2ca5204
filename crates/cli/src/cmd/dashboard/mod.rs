//! `dashboard`: a web page of the Rollouts and Argo's dashboard API, served from this binary.
//!
//! One module per job: `safety` decides from the flags whether changes are allowed, `cache`
//! watches the objects once for the whole process, `views` and `argo_json` turn them into
//! Argo's `RolloutInfo` JSON, `routes` serves it (also as live streams, gzipped by
//! `compress`), `actions` makes the changes, `assets` holds the built page and `error` shapes
//! failures as grpc-gateway does.

mod actions;
mod argo_json;
mod assets;
mod brief;
mod cache;
mod compress;
mod error;
mod routes;
mod safety;
mod views;

use anyhow::Context as _;
use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse as _;
use axum::routing::{any, get, put};
use kube::Client;

use super::emit;
use crate::cli::{DashboardArgs, GlobalArgs};
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
    // Refused before connecting or listening, so a mistake exposes nothing.
    let mode = safety::mode(args.address, args.read_only, args.allow_writes)?;
    let target = Target::connect(global).await?;
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
    };
    let served = match &dashboard.scope {
        Scope::One(ns) => format!("namespace {ns}"),
        Scope::All => "all namespaces".to_owned(),
    };
    let writes = match mode {
        Mode::ReadOnly => ", read-only",
        Mode::ReadWrite => "",
    };
    emit(&format!(
        "Sluice dashboard at http://{address}/ ({served}{writes})\n"
    ))?;
    let bound = args.address;
    let router = router(dashboard).layer(axum::middleware::from_fn(
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
        .route("/api", any(routes::no_such_api))
        .route("/api/{*rest}", any(routes::no_such_api))
        .fallback(get(routes::page))
        .with_state(dashboard)
}
