//! A fault-injecting proxy for the Kubernetes API, to put between a controller and the API
//! server in tests.
//!
//! The controller talks plain HTTP to the proxy (no credentials needed); the proxy forwards
//! every request over HTTPS with the upstream client configuration it was given (its TLS
//! settings and credentials), streaming responses so watches work. At the configured rate a
//! request meets one of the [`Fault`]s instead:
//!
//! - an error status before the request reaches the server (409 for writes only; 429 with
//!   `Retry-After`; 500; 503),
//! - an error status after the server applied it (the response is lost, as with a timeout),
//! - a slow response,
//! - for watches, the connection dropped after a moment.
//!
//! Faults are drawn from a seeded generator, so a failing run can be repeated.
//!
//! A test can also cut every watch open at one moment ([`FaultProxy::cut_watches`]), as a
//! network fault between a controller and its API server would, or hold back what the watches
//! receive ([`FaultProxy::hold_watches`]), as a lagging watch does.
//!
//! A test can also set [`Rule`]s that apply to every matching request until changed: answer
//! with a status (a kind that is not served, a broken watch) or never answer (a hanging write).
//!
//! ```no_run
//! # async fn example(upstream: kube::Config) -> anyhow::Result<()> {
//! use sluice_testenv::fault_proxy::{FaultProxy, Faults};
//! let proxy = FaultProxy::start(upstream, Faults::at_rate(0.1, 42)).await?;
//! let client = kube::Client::try_from(proxy.client_config())?;
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, Response};
use futures::StreamExt;
use kube::Client;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// Largest request body forwarded (objects are far smaller).
const MAX_REQUEST_BODY: usize = 16 * 1024 * 1024;

/// What can happen to a request instead of plain forwarding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    /// Answered with this status; the server never sees the request.
    Refused(u16),
    /// Forwarded and applied, but the client gets this status instead of the response.
    ResponseLost(u16),
    /// Forwarded after this delay.
    Slow(Duration),
    /// A watch whose stream ends after this long.
    WatchDropped(Duration),
}

impl Fault {
    fn label(&self) -> String {
        match self {
            Fault::Refused(code) => format!("refused-{code}"),
            Fault::ResponseLost(code) => format!("response-lost-{code}"),
            Fault::Slow(_) => "slow".into(),
            Fault::WatchDropped(_) => "watch-dropped".into(),
        }
    }
}

/// Which requests a [`Rule`] applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requests {
    /// Every request.
    All,
    /// Mutating requests (POST, PUT, PATCH, DELETE).
    Writes,
    /// Watch requests.
    Watches,
}

/// What a [`Rule`] does to a matching request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Answered with this status; the server never sees the request.
    Status(u16),
    /// Never answered: the request hangs until the client gives up.
    Hang,
}

impl Action {
    fn label(&self) -> String {
        match self {
            Action::Status(code) => format!("rule-status-{code}"),
            Action::Hang => "rule-hang".into(),
        }
    }
}

/// A deterministic fault: every request of `requests` whose path starts with `path_prefix`
/// meets `action`.
#[derive(Clone, Debug)]
pub struct Rule {
    pub path_prefix: String,
    pub requests: Requests,
    pub action: Action,
}

impl Rule {
    fn matches(&self, method: &Method, path: &str, watch: bool) -> bool {
        path.starts_with(&self.path_prefix)
            && match self.requests {
                Requests::All => true,
                Requests::Writes => is_write(method),
                Requests::Watches => watch,
            }
    }
}

fn is_write(method: &Method) -> bool {
    matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// How often and with what faults requests fail.
#[derive(Clone, Debug)]
pub struct Faults {
    /// Fraction of requests (0.0 to 1.0) that meet a fault.
    pub rate: f64,
    /// Fraction of watches whose connection is dropped after a moment.
    pub watch_drop_rate: f64,
    pub seed: u64,
    /// Slow responses are delayed by up to this.
    pub max_delay: Duration,
    /// Dropped watches last up to this.
    pub max_watch: Duration,
}

impl Faults {
    pub fn at_rate(rate: f64, seed: u64) -> Faults {
        Faults {
            rate,
            watch_drop_rate: rate,
            seed,
            max_delay: Duration::from_millis(1500),
            max_watch: Duration::from_secs(3),
        }
    }

    pub fn none() -> Faults {
        Faults::at_rate(0.0, 0)
    }
}

/// xorshift64*: small, seeded, good enough to pick faults.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Decides which requests meet which fault.
#[derive(Debug)]
struct Picker {
    faults: Faults,
    rng: Rng,
}

impl Picker {
    fn new(faults: Faults) -> Picker {
        Picker {
            rng: Rng(faults.seed | 1),
            faults,
        }
    }

    fn pick(&mut self, method: &Method, watch: bool) -> Option<Fault> {
        let rng = &mut self.rng;
        let delay = |rng: &mut Rng, max: Duration| {
            Duration::from_millis(100 + rng.below(max.as_millis().max(101) as u64 - 100))
        };
        if watch && rng.unit() < self.faults.watch_drop_rate {
            return Some(Fault::WatchDropped(delay(rng, self.faults.max_watch)));
        }
        if rng.unit() >= self.faults.rate {
            return None;
        }
        if watch {
            return Some(if rng.below(2) == 0 {
                Fault::Refused(if rng.below(2) == 0 { 500 } else { 503 })
            } else {
                Fault::Slow(delay(rng, self.faults.max_delay))
            });
        }
        let mutating = !matches!(*method, Method::GET | Method::HEAD);
        // The API server answers 409 to writes only.
        let refusals: &[u16] = if mutating {
            &[409, 429, 500, 503]
        } else {
            &[429, 500, 503]
        };
        Some(match rng.below(if mutating { 3 } else { 2 }) {
            0 => Fault::Refused(refusals[rng.below(refusals.len() as u64) as usize]),
            1 => Fault::Slow(delay(rng, self.faults.max_delay)),
            _ => Fault::ResponseLost(if rng.below(2) == 0 { 500 } else { 503 }),
        })
    }
}

struct State {
    upstream: Client,
    picker: Mutex<Picker>,
    injected: Mutex<BTreeMap<String, u64>>,
    forwarded: Mutex<u64>,
    rules: Mutex<Vec<Rule>>,
    writes: Mutex<Writes>,
    /// Bumped to cut every open watch; each watch holds a receiver while it streams.
    watch_cuts: tokio::sync::watch::Sender<u64>,
    /// True while every watch's stream is held back ([`FaultProxy::hold_watches`]).
    watch_held: tokio::sync::watch::Sender<bool>,
    /// The most objects a page of a list holds ([`FaultProxy::limit_pages`]); 0: as asked.
    page_limit: AtomicU32,
}

/// The writes counted (Events aside), and where the proxy cuts them off.
#[derive(Debug, Default)]
struct Writes {
    /// Let past the cut (a random fault may still refuse one).
    admitted: u64,
    /// Answered by the API server.
    answered: u64,
    /// No write after this many is let through.
    cut_after: Option<u64>,
    /// The process to kill at one write, and when.
    kill: Option<Kill>,
    /// The process was killed: nothing more is forwarded.
    killed: bool,
}

/// When, around its `at`-th write, the controller process is killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillPoint {
    /// As the write arrives: it never reaches the API server.
    BeforeSent,
    /// Once the API server has answered it: the write is applied, and the process dies before
    /// it learns so.
    AfterAnswered,
}

#[derive(Clone, Debug)]
struct Kill {
    at: KillAt,
    pid: u32,
    point: KillPoint,
}

/// Which write a kill is at.
#[derive(Clone, Debug)]
enum KillAt {
    /// The n-th (from 1).
    Count(u64),
    /// The first whose body contains this text.
    Containing(String),
}

impl Writes {
    /// `kill`, when it is this write's: one before the send is returned (and the process
    /// counted as killed at once), one after the answer goes to `after`. Either way the kill is
    /// used up.
    fn take_kill(&mut self, kill: Option<Kill>, after: &mut Option<Kill>) -> Option<Kill> {
        let kill = kill?;
        self.kill = None;
        match kill.point {
            KillPoint::BeforeSent => {
                self.killed = true;
                Some(kill)
            }
            KillPoint::AfterAnswered => {
                *after = Some(kill);
                None
            }
        }
    }
}

/// Kills the process of `kill` as its write arrives; the write never goes on.
async fn killed_before_sent(state: &State, kill: &Kill) {
    sigkill(kill.pid);
    state.count("killed-before-sent");
    futures::future::pending::<()>().await;
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

impl State {
    fn lock_writes(&self) -> std::sync::MutexGuard<'_, Writes> {
        self.writes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn pick(&self, method: &Method, watch: bool) -> Option<Fault> {
        self.picker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pick(method, watch)
    }

    fn record(&self, fault: &Fault) {
        self.count(&fault.label());
    }

    fn count(&self, label: &str) {
        *self
            .injected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(label.to_owned())
            .or_default() += 1;
    }
}

/// A running proxy; stops when dropped.
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// Listens on a free local port and forwards to the API server of `upstream`.
    pub async fn start(upstream: kube::Config, faults: Faults) -> anyhow::Result<FaultProxy> {
        let client = Client::try_from(upstream).context("building the upstream client")?;
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            upstream: client,
            picker: Mutex::new(Picker::new(faults)),
            injected: Mutex::new(BTreeMap::new()),
            forwarded: Mutex::new(0),
            rules: Mutex::new(Vec::new()),
            writes: Mutex::new(Writes::default()),
            watch_cuts: tokio::sync::watch::Sender::new(0),
            watch_held: tokio::sync::watch::Sender::new(false),
            page_limit: AtomicU32::new(0),
        });
        let app = axum::Router::new().fallback({
            let state = state.clone();
            move |request: Request<Body>| {
                let state = state.clone();
                async move { handle(&state, request).await }
            }
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FaultProxy { addr, state, task })
    }

    /// Replaces the rules; the first matching rule applies, before any random fault.
    pub fn set_rules(&self, rules: Vec<Rule>) {
        *self.state.rules.lock().unwrap_or_else(|p| p.into_inner()) = rules;
    }

    /// While `hold` is on, what every watch receives from the API server is kept back from the
    /// client, as from a client whose watches lag behind; once off, it is passed on in order.
    /// A watch whose connection ends meanwhile loses what was kept back, as a lagging client
    /// loses the events an API server had not sent yet when it died.
    pub fn hold_watches(&self, hold: bool) {
        self.state.watch_held.send_replace(hold);
    }

    /// Lists answer in pages of at most `limit` objects, whatever page size the client asks
    /// for, so that a test reaches a list of several pages with a few objects (0: as asked).
    pub fn limit_pages(&self, limit: u32) {
        self.state.page_limit.store(limit, Ordering::Relaxed);
    }

    /// Cuts the connection of every watch open now, at once: each response stream ends with an
    /// error, as when the network fails, and the client has to watch again. Returns how many
    /// were cut (also counted as `watch-cut` in [`FaultProxy::injected`]).
    pub fn cut_watches(&self) -> u64 {
        let open = self.state.watch_cuts.receiver_count() as u64;
        self.state.watch_cuts.send_modify(|cuts| *cuts += 1);
        *self
            .state
            .injected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry("watch-cut".to_owned())
            .or_default() += open;
        open
    }

    /// A client configuration that reaches the API server through this proxy.
    pub fn client_config(&self) -> kube::Config {
        let url = format!("http://{}", self.addr)
            .parse()
            .unwrap_or_else(|_| unreachable!("a socket address is a valid authority"));
        kube::Config::new(url)
    }

    /// A kubeconfig that reaches the API server through this proxy (plain HTTP, no
    /// credentials), for a controller started as a process.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: \
             http://{}\nusers:\n- name: proxied\n  user: {{}}\ncontexts:\n- name: proxy\n  \
             context:\n    cluster: proxy\n    user: proxied\ncurrent-context: proxy\n",
            self.addr
        )
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Faults injected so far, by kind (`refused-409`, `response-lost-503`, `slow`,
    /// `watch-dropped`, and for rules `rule-status-404`, `rule-hang`, ...).
    pub fn injected(&self) -> BTreeMap<String, u64> {
        self.state
            .injected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Lets the first `n` writes through (creates, updates, patches and deletes; Events
    /// aside, as they change nothing a controller reads) and holds every later write for ever:
    /// what reaches the API server is what a controller killed right after its `n`-th write
    /// had written.
    pub fn cut_after_writes(&self, n: u64) {
        self.state.lock_writes().cut_after = Some(n);
    }

    /// Kills the process `pid` (SIGKILL) at its `at`-th write (Events aside), before the write
    /// is sent on or once it is answered ([`KillPoint`]); from then on the proxy forwards
    /// nothing (a request already on its way goes on, as from a process that died mid-flight).
    /// The process must be the one talking through this proxy.
    pub fn kill_at_write(&self, at: u64, pid: u32, point: KillPoint) {
        self.state.lock_writes().kill = Some(Kill {
            at: KillAt::Count(at),
            pid,
            point,
        });
    }

    /// As [`FaultProxy::kill_at_write`], at the first write (Events aside) whose body contains
    /// `text`: a record the controller writes, say.
    pub fn kill_at_write_containing(&self, text: &str, pid: u32, point: KillPoint) {
        self.state.lock_writes().kill = Some(Kill {
            at: KillAt::Containing(text.to_owned()),
            pid,
            point,
        });
    }

    /// Whether the process of [`FaultProxy::kill_at_write`] was killed.
    pub fn killed(&self) -> bool {
        self.state.lock_writes().killed
    }

    /// Writes (Events aside) the API server has answered so far, whatever the answer.
    pub fn writes(&self) -> u64 {
        self.state.lock_writes().answered
    }

    /// Requests seen so far.
    pub fn requests(&self) -> u64 {
        *self
            .state
            .forwarded
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

fn is_watch(request: &Request<Body>) -> bool {
    request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"))
}

/// Headers that belong to one connection, or that the upstream client sets itself.
fn forwardable(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in headers {
        if matches!(
            name.as_str(),
            "host"
                | "connection"
                | "keep-alive"
                | "transfer-encoding"
                | "content-length"
                | "authorization"
                | "upgrade"
                | "te"
                | "trailer"
                | "proxy-connection"
        ) {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

async fn handle(state: &State, request: Request<Body>) -> Response<Body> {
    *state.forwarded.lock().unwrap_or_else(|p| p.into_inner()) += 1;
    let watch = is_watch(&request);
    let rule = state
        .rules
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|r| r.matches(request.method(), request.uri().path(), watch))
        .map(|r| r.action);
    if let Some(action) = rule {
        state.count(&action.label());
        match action {
            Action::Status(code) => return status_response(code),
            Action::Hang => futures::future::pending::<()>().await,
        }
    }
    let path = request.uri().path();
    let counted =
        is_write(request.method()) && !path.ends_with("/events") && !path.contains("/events/");
    if state.lock_writes().killed {
        // From a process killed meanwhile: nothing of it goes on.
        futures::future::pending::<()>().await;
    }
    // The kill this write is the point of, if any.
    let mut kill_after = None;
    if counted {
        // Checked and counted at once: of two concurrent writes, only one may be the last.
        let (cut, kill_before) = {
            let mut writes = state.lock_writes();
            let cut = writes.killed || writes.cut_after.is_some_and(|n| writes.admitted >= n);
            writes.admitted += u64::from(!cut);
            let this = writes.admitted;
            let kill = writes
                .kill
                .clone()
                .filter(|k| !cut && matches!(k.at, KillAt::Count(n) if n == this));
            (cut, writes.take_kill(kill, &mut kill_after))
        };
        if cut {
            state.count("cut");
            futures::future::pending::<()>().await;
        }
        if let Some(kill) = kill_before {
            killed_before_sent(state, &kill).await;
        }
    }
    let fault = state.pick(request.method(), watch);
    if let Some(f) = &fault {
        state.record(f);
    }
    match fault {
        Some(Fault::Refused(code)) => return status_response(code),
        Some(Fault::Slow(delay)) => tokio::time::sleep(delay).await,
        _ => {}
    }

    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_REQUEST_BODY).await {
        Ok(bytes) => bytes,
        Err(_) => return status_response(500),
    };
    if counted && kill_after.is_none() {
        let kill_before = {
            let mut writes = state.lock_writes();
            let kill = writes.kill.clone().filter(|k| match &k.at {
                KillAt::Containing(text) => !writes.killed && contains(&body, text.as_bytes()),
                KillAt::Count(_) => false,
            });
            writes.take_kill(kill, &mut kill_after)
        };
        if let Some(kill) = kill_before {
            killed_before_sent(state, &kill).await;
        }
    }
    let uri = match state.page_limit.load(Ordering::Relaxed) {
        limit if limit > 0 && !watch && parts.method == Method::GET => {
            pages::limited(parts.uri, limit)
        }
        _ => parts.uri,
    };
    let mut upstream = Request::builder()
        .method(parts.method)
        .uri(uri)
        .body(kube::client::Body::from(body))
        .unwrap_or_else(|_| unreachable!("parts of a valid request"));
    *upstream.headers_mut() = forwardable(&parts.headers);

    let sent = state.upstream.send(upstream).await;
    if counted {
        let mut writes = state.lock_writes();
        writes.answered += 1;
        if let Some(kill) = kill_after {
            // Under the lock: no other request of the process is forwarded after this one.
            writes.killed = true;
            sigkill(kill.pid);
            drop(writes);
            state.count("killed-after-answer");
        }
    }
    let response = match sent {
        Ok(response) => response,
        Err(kube::Error::Api(status)) => return status_response(status.code),
        Err(_) => return status_response(503),
    };
    if let Some(Fault::ResponseLost(code)) = fault {
        return status_response(code);
    }
    let (parts, body) = response.into_parts();
    let body = Body::new(body);
    let body = match fault {
        Some(Fault::WatchDropped(after)) => Body::from_stream(
            body.into_data_stream()
                .take_until(tokio::time::sleep(after)),
        ),
        _ if watch => watches::body(
            body,
            state.watch_cuts.subscribe(),
            state.watch_held.subscribe(),
        ),
        _ => body,
    };
    let mut response = Response::new(body);
    *response.status_mut() = parts.status;
    *response.headers_mut() = forwardable(&parts.headers);
    response
}

/// SIGKILL to `pid`, as a node's kernel or the kubelet would end a container.
fn sigkill(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-s", "KILL", &pid.to_string()])
        .status();
}

mod pages;
mod responses;
mod watches;

use responses::status_response;

#[cfg(test)]
mod tests;
