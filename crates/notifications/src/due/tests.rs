use super::*;
use crate::test_support::canary;
use serde_json::json;

fn catalog_with_services(extra: &[(&str, &str)]) -> Config {
    let mut data = crate::catalog::data();
    data.insert(
        "service.webhook.hook".into(),
        "url: http://127.0.0.1:1/hook\n".into(),
    );
    data.insert("service.slack".into(), "token: $slack-token\n".into());
    for (k, v) in extra {
        data.insert(k.to_string(), v.to_string());
    }
    let secret = [("slack-token".to_string(), "xoxb-1".to_string())].into();
    Config::parse(&data, &secret)
}

fn subject(rollout: &Json) -> Subject<'_> {
    Subject {
        rollout,
        analysis_runs: &Json::Null,
        now: "2026-11-27T07:30:00Z".parse().unwrap(),
    }
}

#[test]
fn an_event_sends_its_triggers_templates_to_each_subscriber_once() {
    let cfg = catalog_with_services(&[]);
    let ro = canary(1);
    let occ = occurrence(&ro, "Rollout step 2/3 completed (pause: )");
    let due1 = due(
        &cfg,
        subject(&ro),
        "RolloutStepCompleted",
        &occ,
        &NotifiedState::default(),
    );
    assert_eq!(due1.problems, vec![]);
    assert_eq!(due1.notifications.len(), 1);
    let n = &due1.notifications[0];
    assert_eq!(n.trigger, "on-rollout-step-completed");
    assert_eq!(
        n.destination,
        Destination {
            service: "hook".into(),
            recipient: String::new()
        }
    );
    assert_eq!(
        n.content["message"],
        "Rollout web step number 2/3 has been completed."
    );
    assert_eq!(
        n.key,
        format!("{occ}:on-rollout-step-completed:[0].2jmj7l5rSw0yVb_vlWAYkK_YBwk:hook:")
    );
    // Once recorded, the same occurrence is not due again; the next step is.
    let mut notified = NotifiedState::default();
    notified.record(&n.key, 1);
    let again = due(&cfg, subject(&ro), "RolloutStepCompleted", &occ, &notified);
    assert_eq!(again, Due::default());
    let next = canary(2);
    let occ2 = occurrence(&next, "Rollout step 3/3 completed (setWeight: 60)");
    assert_ne!(occ, occ2);
    let due2 = due(
        &cfg,
        subject(&next),
        "RolloutStepCompleted",
        &occ2,
        &notified,
    );
    assert_eq!(due2.notifications.len(), 1);
}

#[test]
fn events_nobody_subscribed_to_send_nothing_and_report_nothing() {
    let cfg = catalog_with_services(&[]);
    let ro = canary(0);
    let d = due(
        &cfg,
        subject(&ro),
        "RolloutAborted",
        "o",
        &NotifiedState::default(),
    );
    assert_eq!(d, Due::default());
    let d = due(
        &cfg,
        subject(&ro),
        "SwitchService",
        "o",
        &NotifiedState::default(),
    );
    assert_eq!(d, Due::default());
}

#[test]
fn a_subscription_to_an_unconfigured_trigger_or_service_is_a_problem() {
    let cfg = catalog_with_services(&[]);
    let mut ro = canary(0);
    ro["metadata"]["annotations"]["notifications.argoproj.io/subscribe.on-switch-service.hook"] =
        json!("");
    ro["metadata"]["annotations"]["notifications.argoproj.io/subscribe.on-rollout-completed.pager"] =
        json!("x");
    let d = due(
        &cfg,
        subject(&ro),
        "SwitchService",
        "o",
        &NotifiedState::default(),
    );
    assert_eq!(
        d.problems[0].message,
        "trigger 'on-switch-service' is not configured"
    );
    let d = due(
        &cfg,
        subject(&ro),
        "RolloutCompleted",
        "o",
        &NotifiedState::default(),
    );
    // The webhook still gets its notification.
    assert_eq!(d.notifications.len(), 1);
    assert_eq!(d.notifications[0].destination.service, "hook");
    assert_eq!(d.problems.len(), 1);
    assert!(d.problems[0].message.contains("'pager' is not configured"));
}

#[test]
fn conditions_with_when_and_once_per_decide_and_key_the_notification() {
    let cfg = catalog_with_services(&[(
        "trigger.on-rollout-paused",
        "- send: [rollout-paused]\n  when: rollout.spec.replicas > 2\n  oncePer: rollout.metadata.annotations['rollout.argoproj.io/revision']\n- send: [rollout-paused]\n  when: rollout.spec.replicas > 5\n- send: [rollout-paused]\n  when: rollout.nope.deeper == 1\n",
    )]);
    let ro = canary(1);
    let d = due(
        &cfg,
        subject(&ro),
        "RolloutPaused",
        "occ",
        &NotifiedState::default(),
    );
    assert_eq!(d.notifications.len(), 1);
    let n = &d.notifications[0];
    assert!(n.key.starts_with("2:on-rollout-paused:[0]."), "{}", n.key);
    assert!(n.key.ends_with(":slack:releases"), "{}", n.key);
    assert_eq!(n.content["message"], "Rollout web has been paused.");
    // The third condition fails to evaluate: reported, the first still sent.
    assert_eq!(d.problems.len(), 1, "{:?}", d.problems);
    assert!(d.problems[0].message.contains("condition [2]"));
}

#[test]
fn a_template_that_fails_to_render_is_a_problem_for_its_notification_only() {
    let cfg = catalog_with_services(&[
        ("template.broken", "message: '{{div 1 0}}'\n"),
        (
            "trigger.on-rollout-completed",
            "- send: [broken]\n- send: [rollout-completed]\n  when: 'true'\n",
        ),
    ]);
    let ro = canary(3);
    let d = due(
        &cfg,
        subject(&ro),
        "RolloutCompleted",
        "occ",
        &NotifiedState::default(),
    );
    assert_eq!(d.notifications.len(), 1);
    assert_eq!(
        d.notifications[0].content["message"],
        "Rollout web has been completed."
    );
    assert_eq!(d.problems.len(), 1);
    assert!(
        d.problems[0]
            .message
            .contains("cannot render template 'broken'")
    );
}

#[test]
fn templates_merge_in_order_and_see_recipient_and_secrets() {
    let cfg = catalog_with_services(&[
        (
            "template.a",
            "message: first\nwebhook:\n  hook:\n    method: POST\n    body: 'a'\n",
        ),
        (
            "template.b",
            "webhook:\n  hook:\n    body: '{{.recipient}}|{{.serviceType}}|{{index .secrets \"slack-token\" | len}}'\n",
        ),
    ]);
    let ro = canary(0);
    let dest = Destination {
        service: "hook".into(),
        recipient: "r".into(),
    };
    let content = render(&cfg, &["a".into(), "b".into()], subject(&ro), &dest).unwrap();
    assert_eq!(
        content,
        json!({"message": "first", "webhook": {"hook": {"method": "POST", "body": "r|webhook|6"}}})
    );
}

#[test]
fn a_rollout_without_status_renders_as_go_encodes_it() {
    let cfg = catalog_with_services(&[]);
    // A Rollout's first reconcile: no status yet.
    let ro = json!({"metadata": {"name": "fresh"}, "spec": {"replicas": 2,
        "strategy": {"canary": {"steps": [{"setWeight": 50}]}},
        "template": {"spec": {"containers": [{"name": "app", "image": "app:v1"}]}}}});
    let dest = Destination {
        service: "hook".into(),
        recipient: String::new(),
    };
    for template in [
        "scaling-replicaset",
        "rollout-step-completed",
        "rollout-updated",
    ] {
        let out = render(&cfg, &[template.into()], subject(&ro), &dest)
            .unwrap_or_else(|p| panic!("{template}: {p}"));
        assert!(out["message"].as_str().unwrap().contains("fresh"), "{out}");
    }
    let out = render(&cfg, &["scaling-replicaset".into()], subject(&ro), &dest).unwrap();
    assert_eq!(out["message"], "Scaling Rollout fresh's replicaset to 2.");
}

#[test]
fn a_self_service_configuration_keys_its_notifications_by_its_namespace() {
    let mut own = catalog_with_services(&[]);
    own.self_service_namespace = Some("team-a".into());
    let global = catalog_with_services(&[]);
    let ro = canary(1);
    let occ = occurrence(&ro, "Rollout step 2/3 completed (pause: )");
    let reason = "RolloutStepCompleted";
    let mine = due(&own, subject(&ro), reason, &occ, &NotifiedState::default());
    let theirs = due(
        &global,
        subject(&ro),
        reason,
        &occ,
        &NotifiedState::default(),
    );
    assert_eq!(
        mine.notifications[0].key,
        format!("{occ}:team-a:on-rollout-step-completed:[0].2jmj7l5rSw0yVb_vlWAYkK_YBwk:hook:")
    );
    // Each configuration's record is its own: one sent does not hold back the other.
    let mut notified = NotifiedState::default();
    notified.record(&theirs.notifications[0].key, 1);
    assert_eq!(
        due(&own, subject(&ro), reason, &occ, &notified).notifications,
        mine.notifications
    );
    assert_eq!(
        due(&global, subject(&ro), reason, &occ, &notified),
        Due::default()
    );
}

#[test]
fn under_several_configurations_each_sends_its_own_and_what_one_lacks_is_no_problem() {
    // The namespace's own configuration has a Teams service and the paused trigger; the
    // controller's has neither.
    let mut own = catalog_with_services(&[(
        "service.teams",
        "recipientUrls:\n  ops: http://127.0.0.1:1/t\n",
    )]);
    own.self_service_namespace = Some("team-a".into());
    let mut data = crate::catalog::data();
    data.remove("trigger.on-rollout-paused");
    let global = Config::parse(&data, &BTreeMap::new());
    let mut ro = canary(1);
    ro["metadata"]["annotations"]["notifications.argoproj.io/subscribe.on-rollout-paused.teams"] =
        json!("ops");
    let occ = occurrence(&ro, "Rollout is paused");
    let notified = NotifiedState::default();
    let (due, problems) = due_in_all(
        &[&own, &global],
        subject(&ro),
        "RolloutPaused",
        &occ,
        &notified,
    );
    assert_eq!(problems, vec![]);
    let sent: Vec<(Option<&str>, &str)> = due
        .iter()
        .map(|(ns, n)| (ns.as_deref(), n.destination.service.as_str()))
        .collect();
    assert_eq!(sent, [(Some("team-a"), "slack"), (Some("team-a"), "teams")]);
    // Alone, the controller's configuration reports the trigger it lacks.
    let (due, problems) = due_in_all(&[&global], subject(&ro), "RolloutPaused", &occ, &notified);
    assert!(due.is_empty());
    assert!(
        problems
            .iter()
            .any(|p| p.key == "trigger.on-rollout-paused"),
        "{problems:?}"
    );
}
