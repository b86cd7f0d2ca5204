use super::*;

fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_catalog_parses_without_a_problem() {
    let cfg = Config::parse(&crate::catalog::data(), &BTreeMap::new());
    assert_eq!(cfg.problems, vec![]);
    assert_eq!(
        cfg.triggers.keys().collect::<Vec<_>>(),
        [
            "on-analysis-run-error",
            "on-analysis-run-failed",
            "on-analysis-run-running",
            "on-rollout-aborted",
            "on-rollout-completed",
            "on-rollout-paused",
            "on-rollout-step-completed",
            "on-rollout-updated",
            "on-scaling-replica-set"
        ]
    );
    assert_eq!(cfg.templates.len(), 9);
    let completed = &cfg.triggers["on-rollout-completed"].conditions;
    assert_eq!(completed.len(), 1);
    assert_eq!(completed[0].0.send, ["rollout-completed"]);
    assert!(!completed[0].1.has_when());
}

#[test]
fn services_are_named_by_their_key_and_read_secrets() {
    let secret = data(&[
        ("slack-token", "xoxb-secret"),
        ("hook-pass", "pw"),
        ("teams-url", "https://teams.example/hook/s3cr3t"),
        ("email-password", "m41lpw"),
        ("grafana-api-key", "glsa_k3y"),
    ]);
    let cfg = Config::parse(
        &data(&[
            ("service.slack", "token: $slack-token\nusername: bot\n"),
            (
                "service.webhook.hook",
                "url: http://127.0.0.1:1/x\nheaders:\n- name: X-Token\n  value: $hook-pass\nbasicAuth:\n  username: u\n  password: $hook-pass\n",
            ),
            ("service.webhook.other", "url: $missing/path\n"),
            ("service.teams", "recipientUrls:\n  ops: $teams-url\n"),
            (
                "service.email",
                "host: smtp.example.com\nport: 587\nfrom: rollouts@example.com\nusername: bot\npassword: $email-password\n",
            ),
            (
                "service.grafana",
                "apiUrl: http://grafana:3000/api\napiKey: $grafana-api-key\n",
            ),
            ("service.irc", "server: x\n"),
            ("service.a.b.c", "x: 1\n"),
            ("defaultTriggers", "[on-rollout-completed]"),
            ("defaultTriggers.hook", "- on-rollout-paused\n"),
            (
                "subscriptions",
                "- recipients: [slack:releases]\n  triggers: [on-rollout-aborted]\n  selector: team=web\n",
            ),
        ]),
        &secret,
    );
    let ServiceKind::Slack(slack) = &cfg.services["slack"].kind else {
        panic!()
    };
    assert_eq!(slack.token, "xoxb-secret");
    assert_eq!(slack.username, "bot");
    let ServiceKind::Webhook(hook) = &cfg.services["hook"].kind else {
        panic!()
    };
    assert_eq!(hook.headers[0].value, "pw");
    assert_eq!(hook.basic_auth.as_ref().unwrap().password, "pw");
    let ServiceKind::Webhook(other) = &cfg.services["other"].kind else {
        panic!()
    };
    assert_eq!(other.url, "$missing/path");
    let ServiceKind::Teams(teams) = &cfg.services["teams"].kind else {
        panic!()
    };
    assert_eq!(
        teams.recipient_urls["ops"],
        "https://teams.example/hook/s3cr3t"
    );
    let ServiceKind::Email(email) = &cfg.services["email"].kind else {
        panic!()
    };
    assert_eq!(
        (email.host.as_str(), email.port, email.password.as_str()),
        ("smtp.example.com", 587, "m41lpw")
    );
    let ServiceKind::Grafana(grafana) = &cfg.services["grafana"].kind else {
        panic!()
    };
    assert_eq!(grafana.api_key, "glsa_k3y");
    assert_eq!(cfg.unsupported_services["irc"], "irc");
    assert_eq!(cfg.default_triggers, ["on-rollout-completed"]);
    assert_eq!(cfg.service_default_triggers["hook"], ["on-rollout-paused"]);
    assert_eq!(cfg.subscriptions[0].selector, "team=web");
    let keys: Vec<&str> = cfg.problems.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, ["service.a.b.c", "service.irc"]);
    // Nothing of the Secret is in a debug print or a problem.
    let printed = format!("{cfg:?}");
    assert!(!printed.contains("xoxb-secret"));
    assert!(!printed.contains("\"pw\""));
    for secret in ["s3cr3t", "m41lpw", "glsa_k3y"] {
        assert!(!printed.contains(secret), "{secret} in {printed}");
    }
    assert!(cfg.problems.iter().all(|p| !p.to_string().contains("xoxb")));
}

#[test]
fn a_bad_entry_is_a_problem_and_the_rest_still_works() {
    let cfg = Config::parse(
        &data(&[
            ("template.good", "message: hi {{.rollout.metadata.name}}\n"),
            ("template.bad", "message: '{{.rollout.metadata.name'\n"),
            ("trigger.on-good", "- send: [good]\n"),
            (
                "trigger.on-bad-when",
                "- send: [good]\n  when: rollout.status.phase ==\n",
            ),
            ("trigger.on-missing", "- send: [nope]\n"),
            ("trigger.on-not-yaml", "send: [good]\n"),
            ("service.webhook.hook", "url: http://127.0.0.1:1\n"),
            ("service.webhook.broken", "headers: 3\n"),
        ]),
        &BTreeMap::new(),
    );
    assert!(cfg.templates.contains_key("good"));
    assert!(cfg.triggers.contains_key("on-good"));
    assert!(cfg.services.contains_key("hook"));
    let problems: Vec<String> = cfg.problems.iter().map(ToString::to_string).collect();
    for (key, text) in [
        ("template.bad", "bad template"),
        ("trigger.on-bad-when", "cannot compile when"),
        (
            "trigger.on-missing",
            "sends template 'nope', which is not configured",
        ),
        ("trigger.on-not-yaml", "bad trigger"),
        ("service.webhook.broken", "bad webhook service settings"),
    ] {
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with(key) && p.contains(text)),
            "{key}: {text} not in {problems:#?}"
        );
    }
    assert_eq!(problems.len(), 5, "{problems:#?}");
}
