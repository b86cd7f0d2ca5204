use super::*;
use crate::test_support::canary;
use serde_json::json;

fn at() -> jiff::Timestamp {
    "2026-11-27T07:05:09Z".parse().unwrap()
}

fn catalog_template(name: &str) -> CompiledTemplate {
    let data = crate::catalog::data();
    CompiledTemplate::parse(&data[&format!("template.{name}")]).unwrap()
}

#[test]
fn every_catalog_template_parses_and_renders() {
    let data = crate::catalog::data();
    let templates: Vec<_> = data.keys().filter(|k| k.starts_with("template.")).collect();
    assert_eq!(templates.len(), 9);
    for key in templates {
        let t = CompiledTemplate::parse(&data[key]).unwrap_or_else(|e| panic!("{key}: {e}"));
        let out = t
            .render(&json!({"rollout": canary(1)}), at())
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        let message = out["message"].as_str().unwrap();
        assert!(message.contains("web"), "{key}: {message}");
        // The Slack attachments render to JSON Slack accepts.
        let attachments: serde_json::Value =
            serde_json::from_str(out["slack"]["attachments"].as_str().unwrap())
                .unwrap_or_else(|e| panic!("{key}: {e}"));
        assert_eq!(attachments[0]["title"], "web", "{key}");
    }
}

#[test]
fn the_step_completed_template_counts_steps_as_argo_does() {
    let out = catalog_template("rollout-step-completed")
        .render(&json!({"rollout": canary(1)}), at())
        .unwrap();
    assert_eq!(
        out["message"],
        "Rollout web step number 2/3 has been completed."
    );
    assert_eq!(
        out["email"]["subject"],
        "Rollout web step number 2/3 has been completed."
    );
    let attachments: serde_json::Value =
        serde_json::from_str(out["slack"]["attachments"].as_str().unwrap()).unwrap();
    assert_eq!(
        attachments[0]["fields"],
        json!([
            {"title": "Strategy", "value": "Canary", "short": true},
            {"title": "Step completed", "value": "2/3", "short": true},
            {"title": "app", "value": "shop/web:2", "short": true},
            {"title": "proxy", "value": "envoy:1", "short": true}
        ])
    );
}

#[test]
fn the_scaling_template_reads_numbers_from_spec_and_status() {
    let out = catalog_template("scaling-replicaset")
        .render(&json!({"rollout": canary(0)}), at())
        .unwrap();
    assert_eq!(out["message"], "Scaling Rollout web's replicaset to 3.");
}

#[test]
fn missing_keys_render_no_value_and_are_false() {
    let ctx = to_gtmpl(&json!({"a": {}}));
    assert_eq!(render("{{.a.b}}", &ctx).unwrap(), "<no value>");
    assert_eq!(
        render("{{if .a.b}}yes{{else}}no{{end}}", &ctx).unwrap(),
        "no"
    );
}

#[test]
fn sprig_helpers_behave_as_sprigs() {
    let ctx = to_gtmpl(&json!({"n": 2, "s": " Hello World ", "l": ["a", "b"], "e": ""}));
    for (template, expected) in [
        ("{{add .n 1 2}}", "5"),
        ("{{sub .n 3}}", "-1"),
        ("{{mul .n 4}}", "8"),
        ("{{div 7 .n}}", "3"),
        ("{{mod 7 .n}}", "1"),
        ("{{add1 .n}}", "3"),
        ("{{upper .s}}", " HELLO WORLD "),
        ("{{lower .s | trim}}", "hello world"),
        ("{{trim .s | title}}", "Hello World"),
        ("{{replace \"World\" \"There\" .s | trim}}", "Hello There"),
        ("{{if contains \"World\" .s}}y{{end}}", "y"),
        ("{{if hasPrefix \" H\" .s}}y{{end}}", "y"),
        ("{{trimPrefix \"a\" \"abc\"}}", "bc"),
        ("{{trimSuffix \"c\" \"abc\"}}", "ab"),
        ("{{quote \"x\"}}", "\"x\""),
        ("{{squote \"x\"}}", "'x'"),
        ("{{default \"none\" .e}}", "none"),
        ("{{default \"none\" .n}}", "2"),
        ("{{.missing | default \"dflt\"}}", "dflt"),
        ("{{if empty .e}}y{{end}}", "y"),
        ("{{toJson .l}}", "[\"a\",\"b\"]"),
        ("{{join \",\" .l}}", "a,b"),
        ("{{repeat 3 \"ab\"}}", "ababab"),
        ("{{trunc 3 \"abcdef\"}}", "abc"),
        ("{{substr 1 3 \"abcdef\"}}", "bc"),
        ("{{b64enc \"hi\"}}", "aGk="),
        ("{{b64dec \"aGk=\"}}", "hi"),
        ("{{len .l}}", "2"),
        ("{{index .l 1}}", "b"),
        ("{{range $i, $x := .l}}{{$i}}={{$x}};{{end}}", "0=a;1=b;"),
        ("{{toString .n}}", "2"),
        ("{{coalesce .e .missing \"z\"}}", "z"),
        ("{{max 1 5 3}}/{{min 4 2}}", "5/2"),
        ("{{(dict \"k\" \"v\").k}}", "v"),
        ("{{len (list 1 2 3)}}", "3"),
        ("{{indent 2 \"a\"}}", "  a"),
    ] {
        assert_eq!(render(template, &ctx).unwrap(), expected, "{template}");
    }
}

#[test]
fn the_engines_time_and_strings_helpers_and_sprigs_dates_render_at_the_callers_time() {
    let rollout = json!({"metadata": {"name": "web", "creationTimestamp": "2026-11-27T06:00:00Z"}});
    for (template, expected) in [
        ("{{ call .time.Now }}", "2026-11-27 07:05:09 +0000 UTC"),
        (
            "{{ call .time.Now | date \"15:04 Jan 2\" }}",
            "07:05 Nov 27",
        ),
        (
            "{{ call .time.Parse .rollout.metadata.creationTimestamp | date \"2006-01-02T15:04:05Z07:00\" }}",
            "2026-11-27T06:00:00Z",
        ),
        ("{{ now | unixEpoch }}", "1795763109"),
        ("{{ now | htmlDate }}", "2026-11-27"),
        (
            "{{ dateInZone \"15:04 MST\" (now) \"Europe/Berlin\" }}",
            "08:05 CET",
        ),
        ("{{ .rollout.metadata.creationTimestamp | ago }}", "1h5m9s"),
        (
            "{{ toDate \"02/01/2006\" \"01/12/2026\" | date \"Jan 2\" }}",
            "Dec 1",
        ),
        ("{{ duration 95 }}", "1m35s"),
        ("{{ call .strings.ToUpper .rollout.metadata.name }}", "WEB"),
        ("{{ call .strings.ToLower \"WEB\" }}", "web"),
        (
            "{{ call .strings.ReplaceAll .rollout.metadata.name \"w\" \"W\" }}",
            "Web",
        ),
    ] {
        let t = CompiledTemplate::parse(&format!("message: '{template}'"))
            .unwrap_or_else(|e| panic!("{template}: {e}"));
        let out = t
            .render(&json!({"rollout": rollout}), at())
            .unwrap_or_else(|e| panic!("{template}: {e}"));
        assert_eq!(out["message"], expected, "{template}");
    }
    // A time that cannot be read is the template's error, named.
    let t = CompiledTemplate::parse("message: '{{ call .time.Parse \"soon\" }}'").unwrap();
    let err = t.render(&json!({}), at()).unwrap_err();
    assert!(
        err.starts_with("message:") && err.contains("Parse"),
        "{err}"
    );
}

#[test]
fn a_bad_template_is_refused_with_the_field_that_is_bad() {
    let err =
        CompiledTemplate::parse("message: ok\nslack:\n  attachments: '{{.rollout.metadata.name'\n")
            .unwrap_err();
    assert!(err.starts_with("slack.attachments:"), "{err}");
    let err = CompiledTemplate::parse("message: '{{nosuchfunc .x}}'").unwrap_err();
    assert!(err.contains("message"), "{err}");
    assert!(CompiledTemplate::parse("- a list").is_err());
}

#[test]
fn the_fields_the_engine_copies_are_kept_as_written() {
    let t = CompiledTemplate::parse(
        "message: '{{.rollout.metadata.name}}'\ngithub:\n  pullRequestComment:\n    content: '{{.rollout.metadata.name}} is out'\n    commentTag: 'cd/{{.app.metadata.name}}'\n  deployment:\n    requiredContexts: ['{{.x', ci]\n",
    )
    .unwrap();
    let out = t.render(&json!({"rollout": canary(1)}), at()).unwrap();
    assert_eq!(out["message"], "web");
    assert_eq!(out["github"]["pullRequestComment"]["content"], "web is out");
    assert_eq!(
        out["github"]["pullRequestComment"]["commentTag"],
        "cd/{{.app.metadata.name}}"
    );
    assert_eq!(
        out["github"]["deployment"]["requiredContexts"],
        json!(["{{.x", "ci"])
    );
}
