//! Throw-away namespaces for tests, with a dump of their state when a test fails.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kube::{Client, Resource};
use serde_json::json;

use super::TestEnv;

/// Label on every namespace made here, so that leftovers are easy to find.
pub const E2E_LABEL: &str = "sluice.dev/e2e";

/// A namespace with a unique name, deleted when dropped (without waiting for it to go). When the
/// test is panicking at that point the namespace is kept, and its pods, ReplicaSets, Argo
/// Rollouts objects and events are printed to stderr.
pub struct TestNamespace {
    name: String,
    env: TestEnv,
    keep: bool,
}

impl TestNamespace {
    /// Creates `<prefix>-<random suffix>`.
    pub async fn create(env: &TestEnv, prefix: &str) -> anyhow::Result<TestNamespace> {
        let namespaces: Api<Namespace> = Api::all(env.client());
        let mut attempt = 0;
        loop {
            let name = unique_name(prefix);
            let namespace: Namespace = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {E2E_LABEL: "true"}}
            }))?;
            match namespaces.create(&PostParams::default(), &namespace).await {
                Ok(_) => {
                    return Ok(TestNamespace {
                        name,
                        env: env.clone(),
                        keep: false,
                    });
                }
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < 5 => attempt += 1,
                Err(e) => return Err(e).context(format!("creating namespace {name}")),
            }
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The control plane the namespace is in.
    pub fn env(&self) -> &TestEnv {
        &self.env
    }

    /// The API of a namespaced kind in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.env.client(), &self.name)
    }

    /// Applies multi-document YAML into this namespace; see [`TestEnv::apply_yaml`].
    pub async fn apply_yaml(&self, yaml: &str) -> anyhow::Result<Vec<DynamicObject>> {
        self.env.apply_yaml(&self.name, yaml).await
    }

    /// A bearer token of the ServiceAccount `account` of this namespace, valid for an hour
    /// (the TokenRequest API, as `kubectl create token` asks it).
    pub async fn service_account_token(&self, account: &str) -> anyhow::Result<String> {
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        use k8s_openapi::api::core::v1::ServiceAccount;
        let request = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(3600),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let answer: TokenRequest = self
            .api::<ServiceAccount>()
            .create_subresource("token", account, &PostParams::default(), &request)
            .await
            .with_context(|| format!("a token of the ServiceAccount {account}"))?;
        Ok(answer
            .status
            .context("a TokenRequest without status")?
            .token)
    }

    /// Keeps the namespace after the test even when it passes.
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// A readable report of the namespace's state.
    pub async fn dump(&self) -> String {
        dump_namespace(&self.env.client(), &self.name).await
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let failed = std::thread::panicking();
        if self.keep && !failed {
            return;
        }
        // The test's runtime may be the one blocked in this drop, so the work runs on a thread
        // of its own with a fresh client.
        let name = self.name.clone();
        let config = self.env.config().clone();
        let kubeconfig = self.env.kubeconfig_path().display().to_string();
        let worker = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let client = Client::try_from(config)?;
                if failed {
                    let report = dump_namespace(&client, &name).await;
                    eprintln!(
                        "\n===== namespace {name} kept for inspection: kubectl --kubeconfig {kubeconfig} -n {name} get all =====\n{report}"
                    );
                } else {
                    let namespaces: Api<Namespace> = Api::all(client);
                    namespaces.delete(&name, &DeleteParams::background()).await?;
                }
                anyhow::Ok(())
            })
        });
        match worker.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("cleaning up namespace {}: {e:#}", self.name),
            Err(_) => eprintln!(
                "cleaning up namespace {}: the cleanup thread panicked",
                self.name
            ),
        }
    }
}

fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let seed = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // Mix so that names made in the same nanosecond by different processes differ everywhere.
    let mut mixed = seed.wrapping_mul(0xff51_afd7_ed55_8ccd);
    mixed ^= mixed >> 33;
    let mut suffix = String::new();
    for _ in 0..6 {
        let digit = (mixed % 36) as u32;
        suffix.push(char::from_digit(digit, 36).unwrap_or('x'));
        mixed /= 36;
    }
    let mut base: String = prefix
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(50)
        .collect();
    base = base.trim_matches('-').to_string();
    if base.is_empty() {
        base.push_str("e2e");
    }
    format!("{base}-{suffix}")
}

/// A readable report of a namespace: pods, ReplicaSets, Argo Rollouts objects (as dynamic
/// objects, skipped when their CRDs are not installed) and events in time order.
pub async fn dump_namespace(client: &Client, namespace: &str) -> String {
    let mut out = String::new();
    let list = ListParams::default();
    let _ = writeln!(out, "--- pods ---");
    match Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&list)
        .await
    {
        Ok(pods) => {
            for pod in pods {
                let _ = writeln!(out, "{}", pod_line(&pod));
            }
        }
        Err(e) => {
            let _ = writeln!(out, "(listing failed: {e})");
        }
    }
    let _ = writeln!(out, "--- replicasets ---");
    match Api::<ReplicaSet>::namespaced(client.clone(), namespace)
        .list(&list)
        .await
    {
        Ok(sets) => {
            for rs in sets {
                let spec = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                let status = rs.status.clone().unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{} desired={spec} current={} ready={} available={} labels={}",
                    rs.metadata.name.clone().unwrap_or_default(),
                    status.replicas,
                    status.ready_replicas.unwrap_or(0),
                    status.available_replicas.unwrap_or(0),
                    serde_json::to_string(&rs.metadata.labels).unwrap_or_default(),
                );
            }
        }
        Err(e) => {
            let _ = writeln!(out, "(listing failed: {e})");
        }
    }
    for (kind, plural) in [
        ("Rollout", "rollouts"),
        ("AnalysisRun", "analysisruns"),
        ("Experiment", "experiments"),
    ] {
        let gvk = GroupVersionKind::gvk("argoproj.io", "v1alpha1", kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
        match api.list(&list).await {
            Ok(objects) if objects.items.is_empty() => {}
            Ok(objects) => {
                let _ = writeln!(out, "--- {plural} ---");
                for object in objects {
                    let name = object.metadata.name.clone().unwrap_or_default();
                    let status = object.data.get("status").cloned().unwrap_or_default();
                    let pretty = serde_json::to_string_pretty(&status).unwrap_or_default();
                    let _ = writeln!(out, "{name} status: {pretty}");
                }
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                let _ = writeln!(out, "--- {plural} ---\n(listing failed: {e})");
            }
        }
    }
    let _ = writeln!(out, "--- events ---");
    match Api::<Event>::namespaced(client.clone(), namespace)
        .list(&list)
        .await
    {
        Ok(events) => {
            let mut events = events.items;
            events.sort_by_key(|e| event_time(e).unwrap_or_default());
            for event in events {
                let object = &event.involved_object;
                let _ = writeln!(
                    out,
                    "{} {} {} {}/{}: {}",
                    event_time(&event).unwrap_or_default(),
                    event.type_.as_deref().unwrap_or(""),
                    event.reason.as_deref().unwrap_or(""),
                    object.kind.as_deref().unwrap_or(""),
                    object.name.as_deref().unwrap_or(""),
                    event.message.as_deref().unwrap_or("").trim(),
                );
            }
        }
        Err(e) => {
            let _ = writeln!(out, "(listing failed: {e})");
        }
    }
    out
}

fn event_time(event: &Event) -> Option<String> {
    event
        .last_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .or_else(|| event.event_time.as_ref().map(|t| t.0.to_string()))
        .or_else(|| event.first_timestamp.as_ref().map(|t| t.0.to_string()))
}

fn pod_line(pod: &Pod) -> String {
    let status = pod.status.clone().unwrap_or_default();
    let ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let containers: Vec<String> = status
        .container_statuses
        .iter()
        .flatten()
        .map(|c| {
            let state = c.state.clone().unwrap_or_default();
            let detail = if let Some(w) = state.waiting {
                format!("waiting:{}", w.reason.unwrap_or_default())
            } else if let Some(t) = state.terminated {
                format!(
                    "terminated:{}:{}",
                    t.reason.unwrap_or_default(),
                    t.exit_code
                )
            } else if state.running.is_some() {
                "running".to_string()
            } else {
                "unknown".to_string()
            };
            format!(
                "{}={detail},ready={},restarts={}",
                c.name, c.ready, c.restart_count
            )
        })
        .collect();
    format!(
        "{} phase={} ready={ready} node={} deleting={} labels={} [{}]",
        pod.metadata.name.clone().unwrap_or_default(),
        status.phase.unwrap_or_default(),
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default(),
        pod.metadata.deletion_timestamp.is_some(),
        serde_json::to_string(&pod.metadata.labels).unwrap_or_default(),
        containers.join(" "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_valid() {
        let a = unique_name("Rollout_Canary test");
        let b = unique_name("Rollout_Canary test");
        assert_ne!(a, b);
        assert!(a.starts_with("rollout-canary-test-"), "{a}");
        assert!(a.len() <= 63);
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{a}"
        );
        assert!(unique_name("--").starts_with("e2e-"));
        assert!(unique_name(&"x".repeat(100)).len() <= 63);
    }
}
