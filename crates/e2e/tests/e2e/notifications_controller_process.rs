//! Notifications with the controller as a real OS process (the `sluice-controller` binary).
//!
//! Killed with SIGKILL in the middle of a canary, while the notifications of its update, first
//! step and pause are due and their webhook is down, then started again: every notification of
//! Argo's catalog for the canary (update, both steps, pause, completion, and the Slack messages
//! of the pause and completion, in one thread) arrives exactly once.
//!
//! Killed with SIGKILL during a send, once the receiver has the notification and the
//! controller waits for its answer: that notification is sent again by the next process
//! (its record never landed), every other one exactly once. This is the one window of the
//! at-most-once promise (docs/notifications.md, "Between a send and its record").
//!
//! Killed with SIGKILL between a send the receiver answered and its record: the controller
//! talks to the API server through a fault proxy that kills it as its first record arrives
//! (the record never lands) or once the API server has answered it (the record landed). In the
//! first case the next process sends that notification again, and no other; in the second
//! every notification arrives exactly once.
//!
//! With `--self-service-notification-enabled`, a Rollout's namespace has its own notifications
//! configuration: its events go out under that configuration and the controller's, each once;
//! its malformed entries (a bad template, an unsupported service, a bad `when`) are logged and
//! published on its ConfigMap, and every valid notification still goes out.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use serde_json::{Value, json};
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestEnv, TestNamespace, wait_for};
use sluice_e2e::notify::*;
use sluice_e2e::process::ControllerProcess;
use sluice_e2e::*;
use sluice_testenv::fault_proxy::{FaultProxy, Faults, KillPoint};

/// The Rollout's `notified` record.
async fn notified(api: &Api<sluice_api::Rollout>) -> serde_json::Map<String, Value> {
    let ro = api.get("web").await.unwrap();
    ro.metadata
        .annotations
        .unwrap_or_default()
        .get("notified.notifications.argoproj.io")
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default()
}

/// From the canary's pause to Healthy, every notification of the update recorded (7), and
/// three quiet seconds for any late repeat to arrive.
async fn promote_to_the_end(api: &Api<sluice_api::Rollout>) {
    wait_phase(api, "web", RolloutPhase::Paused, TIMEOUT).await;
    promote(api, "web").await;
    wait_phase(api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    wait_for("every notification recorded", TIMEOUT, || async {
        let record = notified(api).await;
        anyhow::ensure!(record.len() == 7, "{record:?}");
        Ok(())
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
}

/// A Healthy canary `web` subscribed to Argo's catalog, its webhook `hook` at the inbox's
/// `/<path>/hook`, run by a controller process limited to the namespace.
async fn subscribed_canary(
    namespace: &str,
    path: &str,
) -> (
    TestEnv,
    TestNamespace,
    Inbox,
    Api<sluice_api::Rollout>,
    ControllerProcess,
) {
    let env = TestEnv::with_crds().await.expect("control plane");
    let kubeconfig = env.kubeconfig_path().to_path_buf();
    subscribed_canary_on(env, &kubeconfig, namespace, path).await
}

/// As [`subscribed_canary`], with the controller talking to the API server with `kubeconfig`.
async fn subscribed_canary_on(
    env: TestEnv,
    kubeconfig: &std::path::Path,
    namespace: &str,
    path: &str,
) -> (
    TestEnv,
    TestNamespace,
    Inbox,
    Api<sluice_api::Rollout>,
    ControllerProcess,
) {
    let ns = TestNamespace::create(&env, namespace).await.unwrap();
    let (url, inbox) = local_server().await;
    let hook = format!("url: {url}/{path}/hook\n");
    apply_config(&ns, &url, &[("service.webhook.hook", &hook)]).await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout("web", 2, "app:v1", steps(), json!({})))
        .await
        .unwrap();
    let args = ["--namespaced", "--namespace", ns.name()];
    let controller = ControllerProcess::start_with(&env, kubeconfig, ns.name(), &args, &[])
        .await
        .unwrap();
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    subscribe(&api, "web", &[]).await;
    (env, ns, inbox, api, controller)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_catalog_notification_arrives_once_with_the_controller_killed_mid_canary() {
    let (env, ns, inbox, api, mut controller) = subscribed_canary("notify-kill", "down").await;
    let args = ["--namespaced", "--namespace", ns.name()];

    // The webhook is down while the canary updates and pauses: its notifications are due,
    // recorded as pending, and failing when the controller is killed.
    inbox.down.lock().unwrap().0 = true;
    set_image(&api, "web", "app:v2").await;
    wait_phase(&api, "web", RolloutPhase::Paused, TIMEOUT).await;
    wait_for("the webhook's notifications failing", TIMEOUT, || async {
        let failed = inbox.down.lock().unwrap().1;
        let ro = api.get("web").await?;
        let pending = ro
            .metadata
            .annotations
            .unwrap_or_default()
            .get("rollouts.sluice.dev/notifications-pending")
            .cloned()
            .unwrap_or_default();
        if failed >= 3 && pending.matches(":hook:").count() == 3 {
            Ok(())
        } else {
            anyhow::bail!("{failed} failed, pending {pending}")
        }
    })
    .await
    .unwrap();
    // Every first attempt has been made (retries come a second later).
    tokio::time::sleep(Duration::from_secs(2)).await;
    controller.kill();
    assert!(inbox.bodies("/down/hook").is_empty());
    inbox.down.lock().unwrap().0 = false;

    // Started again, the controller sends what was pending, once.
    let _controller = ControllerProcess::start(&env, ns.name(), &args, &[])
        .await
        .unwrap();
    wait_for("the pending notifications", TIMEOUT, || async {
        let got = inbox.bodies("/down/hook");
        if got.len() >= 3 {
            Ok(())
        } else {
            anyhow::bail!("{got:?}")
        }
    })
    .await
    .unwrap();
    promote(&api, "web").await;
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    wait_for("every notification recorded", TIMEOUT, || async {
        let record = notified(&api).await;
        if record.len() == 7 {
            Ok(())
        } else {
            anyhow::bail!("{record:?}")
        }
    })
    .await
    .unwrap();
    // Nothing more comes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut got = inbox.bodies("/down/hook");
    got.sort();
    let mut expected = vec![
        "Rollout web has been updated.",
        "Rollout web step number 1/2 has been completed.",
        "Rollout web has been paused.",
        "Rollout web step number 2/2 has been completed.",
        "Rollout web has been completed.",
    ];
    expected.sort();
    assert_eq!(got, expected);
    let posts = inbox.slack_posts();
    let texts: Vec<&str> = posts.iter().filter_map(|p| p["text"].as_str()).collect();
    assert_eq!(
        texts,
        [
            "Rollout web has been paused.",
            "Rollout web has been completed."
        ]
    );
    assert_eq!(posts[0].get("thread_ts"), None);
    assert!(posts[1]["thread_ts"].is_string(), "{posts:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_the_receiver_had_when_the_controller_was_killed_is_sent_again_and_no_other()
{
    let (env, ns, inbox, api, mut controller) = subscribed_canary("notify-kill-send", "hang").await;
    let args = ["--namespaced", "--namespace", ns.name()];

    // The receiver takes the update's notification and holds its answer: the controller is
    // killed in the middle of that send.
    *inbox.hang.lock().unwrap() = true;
    set_image(&api, "web", "app:v2").await;
    wait_for("a send in flight", TIMEOUT, || async {
        let got = inbox.bodies("/hang/hook");
        anyhow::ensure!(!got.is_empty(), "nothing received yet");
        Ok(())
    })
    .await
    .unwrap();
    controller.kill();
    let in_flight = inbox.bodies("/hang/hook");
    assert!(
        !notified(&api).await.keys().any(|k| k.contains(":hook:")),
        "a send still waiting for its answer was recorded: {:?}",
        notified(&api).await
    );
    *inbox.hang.lock().unwrap() = false;

    let _controller = ControllerProcess::start(&env, ns.name(), &args, &[])
        .await
        .unwrap();
    promote_to_the_end(&api).await;
    let got = inbox.bodies("/hang/hook");
    for expected in [
        "Rollout web has been updated.",
        "Rollout web step number 1/2 has been completed.",
        "Rollout web has been paused.",
        "Rollout web step number 2/2 has been completed.",
        "Rollout web has been completed.",
    ] {
        let times = got.iter().filter(|b| *b == expected).count();
        // In flight at the kill: the receiver has it, its record never landed, so the next
        // process sends it again. Any other arrives once.
        let wanted = if in_flight.iter().any(|b| b == expected) {
            2
        } else {
            1
        };
        assert_eq!(
            times, wanted,
            "{expected:?} in {got:#?} (in flight: {in_flight:?})"
        );
    }
    assert_eq!(got.len(), 5 + in_flight.len(), "{got:#?}");
    // The record names the webhook's sends as the check above looked for them.
    let hooks = notified(&api)
        .await
        .keys()
        .filter(|k| k.contains(":hook:"))
        .count();
    assert_eq!(hooks, 5);
}

/// The notifications of the canary's update: the webhook's bodies and the Slack texts, each
/// with how often it arrived.
fn arrivals(inbox: &Inbox, path: &str) -> Vec<(String, usize)> {
    let mut all = inbox.bodies(&format!("/{path}/hook"));
    all.extend(
        inbox
            .slack_posts()
            .iter()
            .filter_map(|p| p["text"].as_str().map(|t| format!("slack: {t}"))),
    );
    let mut counted: Vec<(String, usize)> = Vec::new();
    for body in all {
        match counted.iter_mut().find(|(b, _)| *b == body) {
            Some((_, n)) => *n += 1,
            None => counted.push((body, 1)),
        }
    }
    counted.sort();
    counted
}

/// The canary updated under a controller killed at its first notification record (before the
/// record is sent on, or once it is answered), then finished by a fresh process. Returns what
/// arrived, and the notified record's keys at the kill.
async fn killed_at_the_first_record(namespace: &str, point: KillPoint) -> Vec<(String, usize)> {
    let env = TestEnv::with_crds().await.expect("control plane");
    let proxy = FaultProxy::start(env.config().clone(), Faults::none())
        .await
        .unwrap();
    let kubeconfig = std::env::temp_dir().join(format!(
        "sluice-{namespace}-{}.kubeconfig",
        std::process::id()
    ));
    std::fs::write(&kubeconfig, proxy.kubeconfig()).unwrap();
    let (env, ns, inbox, api, mut controller) =
        subscribed_canary_on(env, &kubeconfig, namespace, "rec").await;
    let args = ["--namespaced", "--namespace", ns.name()];
    assert!(
        notified(&api).await.is_empty(),
        "nothing is recorded before the update"
    );
    proxy.kill_at_write_containing(
        sluice_notifications::state::NOTIFIED,
        controller.pid().expect("running"),
        point,
    );
    set_image(&api, "web", "app:v2").await;
    wait_for("the kill at the first record", TIMEOUT, || async {
        anyhow::ensure!(proxy.killed(), "not yet");
        Ok(())
    })
    .await
    .unwrap();
    let signal = wait_for("the process to end", Duration::from_secs(10), || {
        let signal = controller.ended_by_signal();
        async move { signal.ok_or_else(|| anyhow::anyhow!("still running")) }
    })
    .await
    .unwrap();
    assert_eq!(signal, 9);
    drop(proxy);
    let sent_before = arrivals(&inbox, "rec");
    assert!(!sent_before.is_empty(), "the kill came before any send");
    let recorded = notified(&api).await;
    match point {
        KillPoint::BeforeSent => assert!(recorded.is_empty(), "{recorded:?}"),
        KillPoint::AfterAnswered => assert_eq!(recorded.len(), 1, "{recorded:?}"),
    }

    let _controller = ControllerProcess::start(&env, ns.name(), &args, &[])
        .await
        .unwrap();
    promote_to_the_end(&api).await;
    let _ = std::fs::remove_file(&kubeconfig);
    let got = arrivals(&inbox, "rec");
    let names: Vec<&str> = got.iter().map(|(b, _)| b.as_str()).collect();
    assert_eq!(
        names,
        [
            "Rollout web has been completed.",
            "Rollout web has been paused.",
            "Rollout web has been updated.",
            "Rollout web step number 1/2 has been completed.",
            "Rollout web step number 2/2 has been completed.",
            "slack: Rollout web has been completed.",
            "slack: Rollout web has been paused.",
        ],
        "{got:#?}"
    );
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_sent_and_killed_before_its_record_is_sent_again_and_no_other() {
    let got = killed_at_the_first_record("notify-kill-record", KillPoint::BeforeSent).await;
    // The one whose send the receiver answered and whose record never landed comes twice.
    let twice: Vec<&String> = got
        .iter()
        .filter(|(_, n)| *n == 2)
        .map(|(b, _)| b)
        .collect();
    assert_eq!(twice.len(), 1, "{got:#?}");
    assert!(got.iter().all(|(_, n)| *n <= 2), "{got:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_killed_after_its_record_landed_is_not_sent_again() {
    let got = killed_at_the_first_record("notify-kill-recorded", KillPoint::AfterAnswered).await;
    assert!(got.iter().all(|(_, n)| *n == 1), "{got:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaces_own_configuration_notifies_besides_the_controllers_with_self_service() {
    let env = TestEnv::with_crds().await.expect("control plane");
    // The controller's namespace and the Rollout's, each with its configuration.
    let home = TestNamespace::create(&env, "notify-home").await.unwrap();
    let team = TestNamespace::create(&env, "notify-team").await.unwrap();
    let (url, inbox) = local_server().await;
    apply_config(&home, &url, &[]).await;
    let mut data = sluice_notifications::catalog::data();
    data.insert("service.webhook.team".into(), format!("url: {url}/team\n"));
    // Malformed entries: each is reported, and everything else still goes out.
    for (key, value) in [
        ("template.broken", "message: '{{.rollout.metadata.name'\n"),
        ("service.irc", "server: 127.0.0.1:9\n"),
        (
            "trigger.on-rollout-aborted",
            "- send: [rollout-aborted]\n  when: rollout.status.phase ==\n",
        ),
    ] {
        data.insert(key.into(), value.into());
    }
    let own = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "argo-rollouts-notification-configmap"},
        "data": data,
    });
    team.apply_yaml(&own.to_string()).await.unwrap();

    // A controller for the whole cluster, limited to this test's Rollout by its instance id.
    let instance = format!("self-service-{}", team.name());
    let mut rollout: Value =
        serde_json::from_str(&canary_rollout("web", 1, "app:v1", steps(), json!({}))).unwrap();
    rollout["metadata"]["labels"] =
        json!({"argo-rollouts.argoproj.io/controller-instance-id": instance});
    team.apply_yaml(&rollout.to_string()).await.unwrap();
    let api = rollouts(&team);
    let controller = ControllerProcess::start(
        &env,
        team.name(),
        &[
            "--instance-id",
            &instance,
            "--self-service-notification-enabled",
        ],
        &[("POD_NAMESPACE", home.name())],
    )
    .await
    .unwrap();
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    let mut annotations = serde_json::Map::new();
    for trigger in ["on-rollout-updated", "on-rollout-paused"] {
        for service in ["hook", "team"] {
            annotations.insert(
                format!("notifications.argoproj.io/subscribe.{trigger}.{service}"),
                json!(""),
            );
        }
    }
    api.patch(
        "web",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"annotations": annotations}})),
    )
    .await
    .unwrap();

    set_image(&api, "web", "app:v2").await;
    wait_phase(&api, "web", RolloutPhase::Paused, TIMEOUT).await;
    wait_for("four notifications recorded", TIMEOUT, || async {
        let record = notified(&api).await;
        if record.len() == 4 {
            Ok(record)
        } else {
            anyhow::bail!("{record:?}")
        }
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let expected = [
        "Rollout web has been paused.",
        "Rollout web has been updated.",
    ];
    for path in ["/hook", "/team"] {
        let mut got = inbox.bodies(path);
        got.sort();
        assert_eq!(got, expected, "{path}");
    }
    // The namespace's notifications are recorded under keys naming it, as the engine keys them.
    let record = notified(&api).await;
    let own_keys = record
        .keys()
        .filter(|k| k.contains(&format!(":{}:on-rollout-", team.name())))
        .count();
    assert_eq!(own_keys, 2, "{record:?}");
    // The malformed entries are logged and published as events on the namespace's ConfigMap;
    // a service only one of the configurations has is no problem of the Rollout's.
    let problems = [
        "template.broken: bad template",
        "service.irc: service type 'irc' is not supported",
        "trigger.on-rollout-aborted: bad trigger: cannot compile when",
    ];
    let events: Api<Event> = team.api();
    let warnings: Vec<(String, String)> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("NotificationConfigInvalid"))
        .map(|e| {
            let on = e.regarding.and_then(|r| r.kind).unwrap_or_default();
            (on, e.note.unwrap_or_default())
        })
        .collect();
    assert_eq!(warnings.len(), problems.len(), "{warnings:#?}");
    let log = controller.log();
    for problem in problems {
        assert!(
            warnings
                .iter()
                .any(|(on, note)| on == "ConfigMap" && note.contains(problem)),
            "{problem}: {warnings:#?}"
        );
        assert!(
            log.contains(&format!("notifications configuration: {problem}")),
            "{problem} not logged"
        );
    }
}
