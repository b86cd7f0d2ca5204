//! Notifications on the real control plane: Argo's default catalog, a local webhook and a local
//! Slack-API stub. A canary with a pause and a completion sends exactly the catalog's
//! notifications for those events, once each, with the controller killed while paused and
//! started again, and across a change of leader; a Slack thread started before the restart is
//! continued after it; a failed analysis notifies its failure (from its AnalysisRuns, with the
//! engine's `time` and `strings` helpers) and the abort. A
//! malformed ConfigMap is reported (events on the ConfigMap and the Rollout) and every valid
//! notification still goes out.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::{Value, json};
use sluice_api::rollout::RolloutPhase;
use sluice_e2e::harness::{TestEnv, TestNamespace, wait_for};
use sluice_e2e::notify::*;
use sluice_e2e::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_and_completed_canary_notifies_once_each_across_a_restart() {
    let env = TestEnv::with_crds().await.expect("control plane");
    let ns = TestNamespace::create(&env, "notify").await.unwrap();
    let (url, inbox) = local_server().await;
    apply_config(&ns, &url, &[]).await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout("web", 2, "app:v1", steps(), json!({})))
        .await
        .unwrap();
    let controller = start_controller(&env, &ns);
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    subscribe(&api, "web", &[]).await;

    set_image(&api, "web", "app:v2").await;
    wait_phase(&api, "web", RolloutPhase::Paused, TIMEOUT).await;
    // Updated, step 1 completed, paused.
    wait_messages(&inbox, 3).await;
    wait_for("the Slack message of the pause", TIMEOUT, || async {
        if inbox.slack_posts().len() == 1 {
            Ok(())
        } else {
            anyhow::bail!("{:?}", inbox.slack_posts())
        }
    })
    .await
    .unwrap();
    // What was sent is recorded on the Rollout (with the Slack thread) before anything else.
    let threads = wait_for("the notifications recorded", TIMEOUT, || async {
        let ro = api.get("web").await?;
        let notified = ro
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("notified.notifications.argoproj.io"))
            .cloned()
            .unwrap_or_default();
        let record: serde_json::Map<String, Value> =
            serde_json::from_str(&notified).unwrap_or_default();
        let threads = ro
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("rollouts.sluice.dev/notification-slack-threads"))
            .cloned();
        if record.len() == 4
            && let Some(threads) = threads
        {
            Ok(threads)
        } else {
            anyhow::bail!("{record:?} {threads:?}")
        }
    })
    .await
    .unwrap();

    // Killed while paused, started again: nothing is sent again.
    controller.stop().await;
    let controller = start_controller(&env, &ns);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        inbox.webhook_messages().len(),
        3,
        "{:#?}",
        inbox.webhook_messages()
    );

    // A change of the ConfigMap applies without a restart: the webhook moves.
    let cms: Api<ConfigMap> = ns.api();
    cms.patch(
        "argo-rollouts-notification-configmap",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"data": {"service.webhook.hook": format!("url: {url}/hook-moved\n")}}),
        ),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    promote(&api, "web").await;
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    wait_messages(&inbox, 5).await;
    // Nothing more comes.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut got = inbox.webhook_messages();
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
    assert_eq!(
        inbox.paths("/hook-moved").len(),
        2,
        "{:?}",
        inbox.paths("/")
    );

    // Slack: the pause started the thread, the completion (after the restart) went into it.
    let posts = inbox.slack_posts();
    assert_eq!(posts.len(), 2, "{posts:#?}");
    assert_eq!(posts[0]["channel"], "releases");
    assert_eq!(posts[0]["text"], "Rollout web has been paused.");
    assert_eq!(posts[0]["attachments"][0]["title"], "web");
    assert_eq!(posts[0].get("thread_ts"), None);
    assert_eq!(posts[1]["text"], "Rollout web has been completed.");
    let threads: Value = serde_json::from_str(&threads).unwrap();
    let ts = &threads["slack:releases"]["web"];
    assert!(ts.is_string(), "{threads}");
    assert_eq!(&posts[1]["thread_ts"], ts);
    drop(controller);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_config_map_is_reported_and_valid_notifications_still_go_out() {
    let env = TestEnv::with_crds().await.expect("control plane");
    let ns = TestNamespace::create(&env, "notify-bad").await.unwrap();
    let (url, inbox) = local_server().await;
    let flaky = format!("url: {url}/flaky\n");
    apply_config(
        &ns,
        &url,
        &[
            ("template.broken", "message: '{{.rollout.metadata.name'\n"),
            ("service.irc", "server: 127.0.0.1:9\n"),
            (
                "trigger.on-rollout-step-completed",
                "- send: [rollout-step-completed]\n  when: rollout.status.phase ==\n",
            ),
            ("service.webhook.flaky", &flaky),
        ],
    )
    .await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout("web", 2, "app:v1", steps(), json!({})))
        .await
        .unwrap();
    let _controller = start_controller(&env, &ns);
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    subscribe(
        &api,
        "web",
        &[
            (
                "notifications.argoproj.io/subscribe.on-rollout-paused.irc",
                "x",
            ),
            (
                "notifications.argoproj.io/subscribe.on-rollout-paused.pager",
                "oncall",
            ),
            (
                "notifications.argoproj.io/subscribe.on-rollout-paused.flaky",
                "",
            ),
        ],
    )
    .await;
    set_image(&api, "web", "app:v2").await;
    wait_phase(&api, "web", RolloutPhase::Paused, TIMEOUT).await;
    promote(&api, "web").await;
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    // The update, pause and completion still reach the webhook; the step trigger's condition
    // does not compile, so it sends nothing.
    wait_messages(&inbox, 3).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut got = inbox.webhook_messages();
    got.sort();
    assert_eq!(
        got,
        [
            "Rollout web has been completed.",
            "Rollout web has been paused.",
            "Rollout web has been updated.",
        ]
    );
    assert_eq!(inbox.slack_posts().len(), 2);
    // The flaky webhook refused twice: retried with back-off until it took the notification,
    // then never again.
    wait_for("the flaky webhook to take the pause", TIMEOUT, || async {
        let n = inbox.paths("/flaky").len();
        if n >= 3 {
            Ok(())
        } else {
            anyhow::bail!("{n} requests")
        }
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(inbox.paths("/flaky").len(), 3);

    // Each problem is a Warning event: on the ConfigMap for the configuration, on the Rollout
    // for its subscription to a service that is not configured.
    let cm: Api<ConfigMap> = ns.api();
    let cm_uid = cm
        .get("argo-rollouts-notification-configmap")
        .await
        .unwrap()
        .metadata
        .uid;
    wait_for(
        "the configuration's problems as events",
        TIMEOUT,
        || async {
            let events: Api<Event> = ns.api();
            let notes: Vec<(String, String)> = events
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("NotificationConfigInvalid"))
                .map(|e| {
                    let on = e
                        .regarding
                        .as_ref()
                        .and_then(|r| r.kind.clone())
                        .unwrap_or_default();
                    if on == "ConfigMap" {
                        assert_eq!(e.regarding.as_ref().unwrap().uid, cm_uid);
                    }
                    (on, e.note.unwrap_or_default())
                })
                .collect();
            let has =
                |kind: &str, text: &str| notes.iter().any(|(k, n)| k == kind && n.contains(text));
            if has("ConfigMap", "template.broken: bad template")
                && has("ConfigMap", "service type 'irc' is not supported")
                && has(
                    "ConfigMap",
                    "trigger.on-rollout-step-completed: bad trigger: cannot compile when",
                )
                && has("Rollout", "notification service 'pager' is not configured")
            {
                assert!(notes.iter().all(|(_, n)| !n.contains("xoxb-e2e-secret")));
                Ok(())
            } else {
                anyhow::bail!("{notes:#?}")
            }
        },
    )
    .await
    .unwrap();
}

/// A campaigning replica for `ns` with short leader-election timings.
async fn start_replica(
    env: &TestEnv,
    ns: &TestNamespace,
    identity: &str,
) -> sluice_controller::ControllerHandle {
    sluice_controller::install_crypto_provider();
    let mut args = controller_args(ns.name());
    args.leader_elect = true;
    args.leader_election_lease_name = Some("sluice-notify-lock".into());
    args.leader_election_namespace = Some(ns.name().to_string());
    args.leader_election_identity = Some(identity.into());
    args.leader_election_lease_duration = Duration::from_secs(3);
    args.leader_election_renew_deadline = Duration::from_secs(2);
    args.leader_election_retry_period = Duration::from_millis(500);
    sluice_controller::init_logging(&args);
    sluice_controller::start(env.config().clone(), &args, Default::default())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_go_out_once_across_a_change_of_leader() {
    let env = TestEnv::with_crds().await.expect("control plane");
    let ns = TestNamespace::create(&env, "notify-leader").await.unwrap();
    let (url, inbox) = local_server().await;
    apply_config(&ns, &url, &[]).await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout("web", 2, "app:v1", steps(), json!({})))
        .await
        .unwrap();
    let a = start_replica(&env, &ns, "notify-a").await;
    let b = start_replica(&env, &ns, "notify-b").await;
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    subscribe(&api, "web", &[]).await;
    set_image(&api, "web", "app:v2").await;
    wait_phase(&api, "web", RolloutPhase::Paused, TIMEOUT).await;
    wait_messages(&inbox, 3).await;

    // Once what was sent is recorded (a send whose record a change of leader refuses is sent
    // again by the next leader: at least once), the leader goes; the other replica takes over
    // and sends what comes after, once.
    wait_recorded(&api, 4).await;
    let (leader, follower) = if a.is_leader() { (a, b) } else { (b, a) };
    let first = leader.metrics();
    leader.shutdown().await.unwrap();
    tokio::time::timeout(TIMEOUT, follower.gate().wait_for(true))
        .await
        .expect("the other replica leads");
    promote(&api, "web").await;
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    wait_messages(&inbox, 5).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut got = inbox.webhook_messages();
    got.sort();
    assert_eq!(
        got,
        [
            "Rollout web has been completed.",
            "Rollout web has been paused.",
            "Rollout web has been updated.",
            "Rollout web step number 1/2 has been completed.",
            "Rollout web step number 2/2 has been completed.",
        ]
    );
    assert_eq!(inbox.slack_posts().len(), 2);
    // Each replica counted what it sent, under Argo's metric names and labels.
    let sent = |text: &str, reason: &str| {
        text.lines()
            .filter(|l| {
                l.starts_with("notification_send_success{")
                    && l.contains(&format!("reason=\"{reason}\""))
            })
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum::<u64>()
    };
    let (before, after) = (first.render(), follower.metrics().render());
    assert_eq!(sent(&before, "RolloutUpdated"), 1, "{before}");
    assert_eq!(sent(&before, "RolloutPaused"), 2, "{before}");
    assert_eq!(sent(&after, "RolloutCompleted"), 2, "{after}");
    assert_eq!(sent(&after, "RolloutPaused"), 0, "{after}");
    follower.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_analysis_notifies_the_failure_and_the_abort_once_each() {
    let env = TestEnv::with_crds().await.expect("control plane");
    let ns = TestNamespace::create(&env, "notify-analysis")
        .await
        .unwrap();
    let (url, inbox) = local_server().await;
    // The failure's notification is made from its AnalysisRuns (`analysisRuns`) and the
    // engine's helpers, in the condition and in the template.
    apply_config(
        &ns,
        &url,
        &[
            (
                "trigger.on-analysis-run-failed",
                "- when: any(analysisRuns, {.status.phase == 'Failed'}) && time.Now().After(time.Parse(rollout.metadata.creationTimestamp))\n  send: [analysis-run-failed, metric-detail]\n",
            ),
            (
                "template.metric-detail",
                "webhook:\n  hook:\n    method: POST\n    path: /detail\n    body: '{{call .strings.ToUpper .rollout.metadata.name}}:{{range .analysisRuns}} {{.status.phase}}{{range .status.metricResults}} {{.name}}={{.phase}}{{end}}{{end}} in {{call .time.Now | date \"2006\"}}'\n",
            ),
        ],
    )
    .await;
    ns.apply_yaml(
        &json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AnalysisTemplate",
            "metadata": {"name": "health"},
            "spec": {"metrics": [{
                "name": "web", "interval": "1s", "count": 1,
                "successCondition": "result.status == 'ok'",
                "failureCondition": "result.status == 'bad'",
                "provider": {"web": {"url": format!("{url}/metric")}}
            }]}
        })
        .to_string(),
    )
    .await
    .unwrap();
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout(
        "web",
        2,
        "app:v1",
        json!([{"setWeight": 50}, {"analysis": {"templates": [{"templateName": "health"}]}}]),
        json!({}),
    ))
    .await
    .unwrap();
    let _controller = start_controller(&env, &ns);
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    let mut annotations = serde_json::Map::new();
    for trigger in [
        "on-rollout-updated",
        "on-analysis-run-failed",
        "on-rollout-aborted",
    ] {
        annotations.insert(
            format!("notifications.argoproj.io/subscribe.{trigger}.hook"),
            json!(""),
        );
    }
    api.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": annotations}})),
    )
    .await
    .unwrap();
    set_image(&api, "web", "app:v2").await;
    wait_phase(&api, "web", RolloutPhase::Degraded, TIMEOUT).await;
    wait_messages(&inbox, 3).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut got = inbox.webhook_messages();
    got.sort();
    let year = jiff::Zoned::now().year();
    assert_eq!(
        got,
        [
            "Rollout web has been aborted.".to_owned(),
            "Rollout web has been updated.".to_owned(),
            format!("WEB: Failed web=Failed in {year}"),
        ]
    );
    assert_eq!(inbox.paths("/hook/detail").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_still_failing_at_a_change_of_leader_is_sent_by_the_next_leader() {
    let env = TestEnv::with_crds().await.expect("control plane");
    let ns = TestNamespace::create(&env, "notify-handover")
        .await
        .unwrap();
    let (url, inbox) = local_server().await;
    inbox.down.lock().unwrap().0 = true;
    let down = format!("url: {url}/down\n");
    apply_config(&ns, &url, &[("service.webhook.down", &down)]).await;
    let api = rollouts(&ns);
    ns.apply_yaml(&canary_rollout("web", 2, "app:v1", steps(), json!({})))
        .await
        .unwrap();
    let a = start_replica(&env, &ns, "handover-a").await;
    let b = start_replica(&env, &ns, "handover-b").await;
    wait_phase(&api, "web", RolloutPhase::Healthy, TIMEOUT).await;
    subscribe(
        &api,
        "web",
        &[(
            "notifications.argoproj.io/subscribe.on-rollout-paused.down",
            "",
        )],
    )
    .await;
    set_image(&api, "web", "app:v2").await;
    wait_phase(&api, "web", RolloutPhase::Paused, TIMEOUT).await;
    // The leader keeps failing to reach the webhook; the notification is pending on the Rollout.
    wait_for("the leader to have tried twice", TIMEOUT, || async {
        let tries = inbox.down.lock().unwrap().1;
        if tries >= 2 {
            Ok(())
        } else {
            anyhow::bail!("{tries} tries")
        }
    })
    .await
    .unwrap();
    let ro = api.get("web").await.unwrap();
    let pending =
        ro.metadata.annotations.as_ref().unwrap()["rollouts.sluice.dev/notifications-pending"]
            .clone();
    assert!(
        pending.contains("on-rollout-paused") && pending.contains(":down:"),
        "{pending}"
    );

    let (leader, follower) = if a.is_leader() { (a, b) } else { (b, a) };
    leader.shutdown().await.unwrap();
    inbox.down.lock().unwrap().0 = false;
    tokio::time::timeout(TIMEOUT, follower.gate().wait_for(true))
        .await
        .expect("the other replica leads");
    wait_for(
        "the next leader to send the pending notification",
        TIMEOUT,
        || async {
            let got = inbox.paths("/down");
            if got.len() == 1 {
                Ok(())
            } else {
                anyhow::bail!("{got:?}")
            }
        },
    )
    .await
    .unwrap();
    wait_for("the pending record to be cleared", TIMEOUT, || async {
        let ro = api.get("web").await?;
        let annotations = ro.metadata.annotations.unwrap_or_default();
        if annotations.contains_key("rollouts.sluice.dev/notifications-pending") {
            anyhow::bail!("{annotations:?}")
        }
        Ok(())
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(inbox.paths("/down").len(), 1);
    // The other notifications went out once each.
    assert_eq!(
        inbox.webhook_messages().len(),
        3,
        "{:#?}",
        inbox.webhook_messages()
    );
    follower.shutdown().await.unwrap();
}
