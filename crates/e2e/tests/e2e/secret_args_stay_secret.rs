//! A Secret-backed analysis argument is used for measuring and found nowhere else: not in the
//! stored AnalysisRuns (spec or measurements, even when a provider's error echoes it), not in
//! events, not in the controller's logs at debug level.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use k8s_openapi::api::core::v1::{Event, Secret};
use kube::api::{ListParams, ObjectMeta, PostParams};
use serde_json::json;
use sluice_api::analysis::AnalysisRun;
use sluice_api::common::AnalysisPhase;
use sluice_e2e::*;
use sluice_testenv::harness::{TestNamespace, wait_for};
use sluice_testenv::http_stub::HttpStub;
use tracing_subscriber::fmt::MakeWriter;

const TOKEN: &str = "s3cr3t-t0k3n-4f9a";

/// Everything the controller logs, kept for the test to search.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

fn secret_run(name: &str, url: &str) -> String {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "AnalysisRun",
        "metadata": {"name": name},
        "spec": {
            "args": [{"name": "token", "valueFrom": {"secretKeyRef": {"name": "metric-token", "key": "token"}}}],
            "metrics": [{
                "name": "web",
                "successCondition": "result.status == 'ok'",
                // The first error ends the run: no 10 s retries to wait for.
                "consecutiveErrorLimit": 0,
                "provider": {"web": {
                    "url": format!("{url}?token={{{{args.token}}}}"),
                    "headers": [{"key": "Authorization", "value": "Bearer {{args.token}}"}],
                    "timeoutSeconds": 2
                }}
            }]
        }
    })
    .to_string()
}

async fn finished(ns: &TestNamespace, name: &str) -> AnalysisRun {
    let api = ns.api::<AnalysisRun>();
    wait_for(
        &format!("analysis run {name} to finish"),
        TIMEOUT,
        || async {
            let run = api.get(name).await?;
            match run.status.as_ref().and_then(|s| s.phase.clone()) {
                Some(p) if p.is_completed() => Ok(run),
                other => anyhow::bail!("{other:?}"),
            }
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_argument_is_used_but_never_stored_logged_or_evented() {
    let logs = Captured::default();
    tracing_subscriber::fmt()
        .with_env_filter("debug,hyper=info,hyper_util=info,h2=info,rustls=info,tower=info")
        .with_writer(logs.clone())
        .init();

    let (env, ns, _controller) = setup("secret-args").await;
    let secrets = ns.api::<Secret>();
    secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    name: Some("metric-token".into()),
                    ..Default::default()
                },
                string_data: Some([("token".to_string(), TOKEN.to_string())].into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();

    let healthy = HttpStub::start().await.unwrap();
    healthy.respond_json(200, &json!({"status": "ok"}));
    // A server whose error page echoes the token back.
    let echoing = HttpStub::start().await.unwrap();
    echoing.respond(500, "text/plain", &format!("invalid token {TOKEN}"));

    ns.apply_yaml(&secret_run("with-secret", &healthy.url("/check")))
        .await
        .unwrap();
    ns.apply_yaml(&secret_run("echoed-secret", &echoing.url("/check")))
        .await
        .unwrap();
    // Nothing listens on port 1: the client error names the URL, token included.
    ns.apply_yaml(&secret_run("unreachable", "http://127.0.0.1:1/check"))
        .await
        .unwrap();

    let ok = finished(&ns, "with-secret").await;
    assert_eq!(
        ok.status.as_ref().unwrap().phase,
        Some(AnalysisPhase::Successful)
    );
    let request = &healthy.requests()[0];
    assert_eq!(
        request.uri,
        format!("/check?token={TOKEN}"),
        "the secret was used"
    );
    assert!(
        request
            .headers
            .iter()
            .any(|(k, v)| k == "authorization" && *v == format!("Bearer {TOKEN}"))
    );

    for name in ["echoed-secret", "unreachable"] {
        let run = finished(&ns, name).await;
        let status = run.status.clone().unwrap();
        assert_eq!(status.phase, Some(AnalysisPhase::Error), "{name}");
    }
    // The connection error names the URL; the token in it is masked.
    let unreachable = finished(&ns, "unreachable").await;
    let text = serde_json::to_string(&unreachable.status).unwrap();
    assert!(
        text.contains("token=*****"),
        "the error is reported, redacted: {text}"
    );

    // Nothing stored holds the value: runs, events.
    let runs = ns
        .api::<AnalysisRun>()
        .list(&ListParams::default())
        .await
        .unwrap();
    let stored = serde_json::to_string(&runs).unwrap();
    assert!(
        !stored.contains(TOKEN),
        "an AnalysisRun holds the secret: {stored}"
    );
    let events = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(!serde_json::to_string(&events).unwrap().contains(TOKEN));

    let logged = logs.text();
    assert!(
        logged.contains("analysis run phase changed"),
        "the controller's logs were captured"
    );
    assert!(!logged.contains(TOKEN), "the controller logged the secret");
    drop(env);
}
