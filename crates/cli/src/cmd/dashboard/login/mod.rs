//! Logging in to a shared dashboard: a Kubernetes bearer token pasted on the login page, or
//! an OpenID Connect provider. A login becomes a signed session cookie (`session`); while it
//! lasts, every request the dashboard makes for the user is made as the user (`users`:
//! impersonation), reads are served only from namespaces the user may read, and each action
//! is recorded as an Event naming the user. The ID token check (`jwt`), the flow through the
//! provider (`oidc`) and the page (`page`) are their own modules.

pub mod jwt;
pub mod oidc;
mod page;
pub mod session;
pub mod users;

use std::sync::Arc;
use std::time::Duration;

use axum::Form;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures::StreamExt as _;
use ring::rand::{SecureRandom as _, SystemRandom};
use serde::Deserialize;

use super::Dashboard;
use super::error::ApiError;
use session::{COOKIE, Identity, Key, PENDING_COOKIE, Session};

/// What a request is made as: the logged-in user, or (without `--login`) the dashboard's own
/// kubeconfig identity.
#[derive(Debug, Clone, Default)]
pub struct Who(pub Option<Session>);

impl Who {
    pub fn identity(&self) -> Option<&Identity> {
        self.0.as_ref().map(|s| &s.identity)
    }
}

/// The dashboard's logins, when started with `--login`.
pub struct Login {
    pub key: Key,
    /// How long a session lasts, in seconds.
    pub ttl: i64,
    /// Cookies marked `Secure` (the dashboard's public URL is HTTPS).
    pub secure: bool,
    pub token: bool,
    pub oidc: Option<oidc::Provider>,
    pub users: users::Users,
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// 32 random bytes, base64url: session keys, states, nonces, PKCE verifiers.
pub fn random() -> String {
    let mut bytes = [0u8; 32];
    // The system's random source failing is not something to serve through.
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random number generator");
    URL_SAFE_NO_PAD.encode(bytes)
}

/// A path of this dashboard to return to; anything else (another site) is the front page.
fn local_path(next: Option<&str>) -> String {
    match next {
        Some(p) if p.starts_with('/') && !p.starts_with("//") && !p.contains('\\') => p.to_owned(),
        _ => "/".to_owned(),
    }
}

fn see_other(location: &str, cookies: &[String]) -> Response {
    let mut response = (
        StatusCode::SEE_OTHER,
        [(header::LOCATION, location.to_owned())],
    )
        .into_response();
    for cookie in cookies {
        if let Ok(value) = HeaderValue::from_str(cookie) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

fn login_with_error(next: &str, error: &str, cookies: &[String]) -> Response {
    let query =
        reqwest::Url::parse_with_params("http://x/login", [("next", next), ("error", error)])
            .map(|u| format!("/login?{}", u.query().unwrap_or_default()))
            .unwrap_or_else(|_| "/login".to_owned());
    see_other(&query, cookies)
}

impl Login {
    fn session_cookie(&self, identity: Identity, via: &str) -> String {
        let session = Session {
            identity,
            via: via.to_owned(),
            exp: now() + self.ttl,
        };
        session::set_cookie(COOKIE, &self.key.seal(&session), self.ttl, self.secure)
    }

    fn cleared(&self, name: &str) -> String {
        session::set_cookie(name, "", 0, self.secure)
    }
}

/// Paths served before a login: the login flow itself and the page's static files.
fn open_path(path: &str) -> bool {
    path == "/login"
        || path.starts_with("/login/")
        || path == "/logout"
        || path.starts_with("/assets/")
}

/// The namespace of an API path about Rollouts (`/api/v1/rollouts/{ns}/...`).
fn rollouts_namespace(path: &str) -> Option<&str> {
    path.strip_prefix("/api/v1/rollouts/")?
        .split('/')
        .next()
        .filter(|ns| !ns.is_empty())
}

/// Every request passes here: without `--login` it is made as the dashboard's own identity;
/// with it, it needs a live session, and a read of a namespace needs the user's right to list
/// its Rollouts. A stream ends when its session does, so an expired session is asked to log
/// in again by the page's reconnect.
pub async fn gate(State(app): State<Dashboard>, mut request: Request, next: Next) -> Response {
    let Some(login) = app.login.clone() else {
        request.extensions_mut().insert(Who(None));
        return next.run(request).await;
    };
    let path = request.uri().path().to_owned();
    if open_path(&path) {
        return next.run(request).await;
    }
    let cookie = request
        .headers()
        .get(header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| session::cookie(h, COOKIE));
    let session = match cookie.map(|c| login.key.session(c, now())) {
        Some(Ok(session)) => session,
        refused => {
            let message = match refused {
                Some(Err(refusal)) => refusal.message(),
                _ => "log in first",
            };
            let clear = [login.cleared(COOKIE)];
            if path.starts_with("/api") {
                let mut response = ApiError::new(StatusCode::UNAUTHORIZED, message).into_response();
                if cookie.is_some()
                    && let Ok(value) = HeaderValue::from_str(&clear[0])
                {
                    response.headers_mut().append(header::SET_COOKIE, value);
                }
                return response;
            }
            let next_path = request
                .uri()
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_owned();
            let error = cookie.map(|_| message).unwrap_or_default();
            if error.is_empty() {
                return see_other(&format!("/login?next={}", urlencode(&next_path)), &[]);
            }
            return login_with_error(&next_path, error, &clear);
        }
    };
    if let Some(namespace) = rollouts_namespace(&path)
        && let Err(refusal) = login.users.may_read(&session.identity, namespace).await
    {
        return ApiError::new(StatusCode::FORBIDDEN, refusal).into_response();
    }
    let left = Duration::from_secs(u64::try_from(session.exp - now()).unwrap_or(0));
    request.extensions_mut().insert(Who(Some(session)));
    let response = next.run(request).await;
    if !path.ends_with("/watch") {
        return response;
    }
    let (parts, body) = response.into_parts();
    let ends = tokio::time::sleep(left);
    Response::from_parts(
        parts,
        Body::from_stream(body.into_data_stream().take_until(ends)),
    )
}

fn urlencode(text: &str) -> String {
    reqwest::Url::parse_with_params("http://x/", [("v", text)])
        .ok()
        .and_then(|u| u.query().map(|q| q.trim_start_matches("v=").to_owned()))
        .unwrap_or_default()
}

/// The logins, or the answer to a login path on a dashboard started without them.
fn login_of(app: &Dashboard) -> Result<Arc<Login>, Box<Response>> {
    app.login.clone().ok_or_else(|| {
        Box::new(
            (
                StatusCode::NOT_FOUND,
                "this dashboard has no login (started without --login)",
            )
                .into_response(),
        )
    })
}

#[derive(Deserialize)]
pub struct PageQuery {
    next: Option<String>,
    error: Option<String>,
}

pub async fn login_page(State(app): State<Dashboard>, Query(query): Query<PageQuery>) -> Response {
    let login = match login_of(&app) {
        Ok(login) => login,
        Err(response) => return *response,
    };
    let issuer = login.oidc.as_ref().map(|p| p.settings.issuer.as_str());
    let next = local_path(query.next.as_deref());
    Html(page::render(
        login.token,
        issuer,
        &next,
        query.error.as_deref(),
    ))
    .into_response()
}

/// Whether a form was posted from this dashboard's own page (`Origin`, when the browser sends
/// it, names the host the request was sent to).
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    origin
        .split_once("://")
        .is_some_and(|(_, rest)| rest == host)
}

#[derive(Deserialize)]
pub struct TokenForm {
    token: String,
    next: Option<String>,
}

pub async fn token_login(
    State(app): State<Dashboard>,
    headers: HeaderMap,
    Form(form): Form<TokenForm>,
) -> Response {
    let login = match login_of(&app) {
        Ok(login) => login,
        Err(response) => return *response,
    };
    let next = local_path(form.next.as_deref());
    if !login.token {
        return login_with_error(
            &next,
            "logging in with a token is not enabled (--login)",
            &[],
        );
    }
    if !same_origin(&headers) {
        return (
            StatusCode::FORBIDDEN,
            "a login must be posted from this dashboard's page",
        )
            .into_response();
    }
    match login.users.whose(form.token.trim()).await {
        Ok(identity) => {
            eprintln!("{} logged in with a token", identity.user);
            see_other(&next, &[login.session_cookie(identity, "token")])
        }
        Err(e) => login_with_error(&next, &format!("{e:#}"), &[]),
    }
}

#[derive(Deserialize)]
pub struct StartQuery {
    next: Option<String>,
}

pub async fn oidc_start(State(app): State<Dashboard>, Query(query): Query<StartQuery>) -> Response {
    let login = match login_of(&app) {
        Ok(login) => login,
        Err(response) => return *response,
    };
    let next = local_path(query.next.as_deref());
    let Some(provider) = &login.oidc else {
        return login_with_error(
            &next,
            "logging in with OpenID Connect is not enabled (--login)",
            &[],
        );
    };
    let pending = oidc::Pending {
        state: random(),
        nonce: random(),
        verifier: random(),
        next: next.clone(),
        exp: now() + oidc::PENDING_SECONDS,
    };
    match provider.redirect(&pending).await {
        Ok(url) => {
            let cookie = session::set_cookie(
                PENDING_COOKIE,
                &login.key.seal(&pending),
                oidc::PENDING_SECONDS,
                login.secure,
            );
            see_other(&url, &[cookie])
        }
        Err(e) => login_with_error(&next, &format!("{e:#}"), &[]),
    }
}

#[derive(Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

pub async fn oidc_callback(
    State(app): State<Dashboard>,
    headers: HeaderMap,
    Query(query): Query<CallbackQuery>,
) -> Response {
    let login = match login_of(&app) {
        Ok(login) => login,
        Err(response) => return *response,
    };
    let Some(provider) = &login.oidc else {
        return login_with_error(
            "/",
            "logging in with OpenID Connect is not enabled (--login)",
            &[],
        );
    };
    let clear = [login.cleared(PENDING_COOKIE)];
    let pending = headers
        .get(header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| session::cookie(h, PENDING_COOKIE))
        .and_then(|c| login.key.open::<oidc::Pending>(c))
        .filter(|p| p.exp > now());
    let Some(pending) = pending else {
        return login_with_error(
            "/",
            "this login was not started here, or took longer than ten minutes: log in again",
            &clear,
        );
    };
    if let Some(error) = query.error {
        let detail = query
            .error_description
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        return login_with_error(
            &pending.next,
            &format!("the provider refused the login ({error}{detail})"),
            &clear,
        );
    }
    if query.state.as_deref() != Some(pending.state.as_str()) {
        return login_with_error(
            &pending.next,
            "the provider's answer does not belong to this login (state)",
            &clear,
        );
    }
    let Some(code) = query.code else {
        return login_with_error(&pending.next, "the provider sent no login code", &clear);
    };
    match provider.finish(&code, &pending, now()).await {
        Ok(identity) => {
            eprintln!("{} logged in with OpenID Connect", identity.user);
            see_other(
                &pending.next,
                &[clear[0].clone(), login.session_cookie(identity, "oidc")],
            )
        }
        Err(e) => login_with_error(&pending.next, &format!("{e:#}"), &clear),
    }
}

pub async fn logout(State(app): State<Dashboard>) -> Response {
    match login_of(&app) {
        Ok(login) => see_other("/login", &[login.cleared(COOKIE)]),
        Err(response) => *response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_returned_to() {
        assert_eq!(local_path(Some("/rollout/ns/a?x=1")), "/rollout/ns/a?x=1");
        for elsewhere in [
            "//evil.test/",
            "https://evil.test/",
            "/\\evil.test",
            "rollouts",
        ] {
            assert_eq!(local_path(Some(elsewhere)), "/", "{elsewhere}");
        }
        assert_eq!(local_path(None), "/");
    }

    #[test]
    fn the_namespace_of_a_rollouts_path() {
        assert_eq!(
            rollouts_namespace("/api/v1/rollouts/team/info/watch"),
            Some("team")
        );
        assert_eq!(
            rollouts_namespace("/api/v1/rollouts/team/shop/promote"),
            Some("team")
        );
        assert_eq!(rollouts_namespace("/api/v1/settings"), None);
        assert!(
            open_path("/login/callback")
                && open_path("/assets/app.js")
                && !open_path("/api/v1/settings")
        );
    }

    #[test]
    fn a_form_from_another_site_is_told_apart() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("dash.example:3100"));
        assert!(same_origin(&headers));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://dash.example:3100"),
        );
        assert!(same_origin(&headers));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.test"),
        );
        assert!(!same_origin(&headers));
    }
}
