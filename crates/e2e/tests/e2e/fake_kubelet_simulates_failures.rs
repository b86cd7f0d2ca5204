//! The fake kubelet's rules let tests stage failures: a missing image never gets Ready, and Jobs
//! succeed or fail according to their command.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use sluice_testenv::harness::{TestEnv, TestNamespace, wait_for_object};

const TIMEOUT: Duration = Duration::from_secs(60);

// The broken pod comes first, so by the time its sibling is Ready the readiness delay has
// passed for both.
const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: broken
  annotations: {sluice.dev/ready-delay: "1s"}
spec:
  containers:
  - name: app
    image: registry.invalid/app:does-not-exist
---
apiVersion: v1
kind: Pod
metadata:
  name: healthy
  annotations: {sluice.dev/ready-delay: "1s"}
spec:
  containers:
  - name: app
    image: registry.invalid/app:v1
"#;

const JOBS: &str = r#"
apiVersion: batch/v1
kind: Job
metadata:
  name: sleeper
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: ["sh", "-c", "sleep 1"]
---
apiVersion: batch/v1
kind: Job
metadata:
  name: crasher
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: ["/bad-command"]
"#;

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn waiting_reason(pod: &Pod) -> Option<String> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    statuses
        .first()?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

fn has_condition(job: &Job, type_: &str) -> bool {
    job.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == type_ && c.status == "True")
}

#[tokio::test]
async fn pod_with_missing_image_never_becomes_ready() {
    let env = TestEnv::shared().await.unwrap();
    let ns = TestNamespace::create(&env, "bad-image").await.unwrap();
    ns.apply_yaml(PODS).await.unwrap();
    let pods = ns.api::<Pod>();

    wait_for_object(
        &pods,
        "healthy",
        TIMEOUT,
        "the healthy pod to be Ready",
        is_ready,
    )
    .await
    .unwrap();
    let broken = wait_for_object(
        &pods,
        "broken",
        TIMEOUT,
        "the image pull to back off",
        |p| waiting_reason(p).as_deref() == Some("ImagePullBackOff"),
    )
    .await
    .unwrap();

    assert!(!is_ready(&broken));
    let status = broken.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let container = &status.container_statuses.as_ref().unwrap()[0];
    assert!(!container.ready);
    assert_eq!(container.started, Some(false));
}

#[tokio::test]
async fn jobs_complete_or_fail_by_their_command() {
    let env = TestEnv::shared().await.unwrap();
    let ns = TestNamespace::create(&env, "jobs").await.unwrap();
    ns.apply_yaml(JOBS).await.unwrap();
    let jobs = ns.api::<Job>();

    let sleeper = wait_for_object(
        &jobs,
        "sleeper",
        TIMEOUT,
        "the sleeping job to complete",
        |j| has_condition(j, "Complete"),
    )
    .await
    .unwrap();
    assert_eq!(sleeper.status.as_ref().unwrap().succeeded, Some(1));
    assert!(!has_condition(&sleeper, "Failed"));

    let crasher = wait_for_object(&jobs, "crasher", TIMEOUT, "the crashing job to fail", |j| {
        has_condition(j, "Failed")
    })
    .await
    .unwrap();
    assert_eq!(crasher.status.as_ref().unwrap().failed, Some(1));
    assert!(!has_condition(&crasher, "Complete"));

    let failed_pods = ns
        .api::<Pod>()
        .list(&ListParams::default().labels("job-name=crasher"))
        .await
        .unwrap();
    let pod = &failed_pods.items[0];
    assert_eq!(
        pod.status.as_ref().unwrap().phase.as_deref(),
        Some("Failed")
    );
    let terminated = pod
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0]
        .state
        .as_ref()
        .unwrap()
        .terminated
        .clone()
        .unwrap();
    assert_eq!(terminated.exit_code, 1);
}
