//! The bodies below are the ones the engine's `teamsWorkflowsNotificationToReader` produces for
//! the same notifications.

use serde_json::{Value, json};

use super::{body, go_float};

fn sent(content: Value) -> Value {
    serde_json::from_str(&body(&content).unwrap()).unwrap()
}

fn envelope(card: Value) -> Value {
    json!({
        "type": "message",
        "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "content": card}]
    })
}

#[test]
fn a_message_alone_is_a_card_with_its_text() {
    assert_eq!(
        sent(json!({"message": "simple message"})),
        envelope(json!({
            "type": "AdaptiveCard", "version": "1.4",
            "body": [{"type": "TextBlock", "text": "simple message", "wrap": true}]
        }))
    );
    assert_eq!(
        sent(json!({"message": "", "teams-workflows": {}})),
        envelope(json!({"type": "AdaptiveCard", "version": "1.4", "body": []}))
    );
}

#[test]
fn the_fields_are_converted_as_the_engine_converts_them() {
    let content = json!({
        "message": "m",
        "teams-workflows": {
            "title": "Rollout web", "text": "Text", "themeColor": "Good", "summary": "s",
            "template": "{\"x\":1}",
            "facts": r#"[{"name":"Int","value":42},{"name":"Big","value":1234567},{"name":"Small","value":0.00001},{"name":"Frac","value":0.25},{"name":"B","value":true},{"name":"N","value":null},{"name":"L","value":[1,"a",2.5]},{"name":"M","value":{"b":1,"a":"x"}},{"name":"NoValue"},{"value":"no name"},{"name":5,"value":"x"},null,{"name":"E","value":1e21},{"name":"E2","value":123456},{"name":"neg","value":-0.0001}]"#,
            "sections": r#"[{"facts":[{"name":"Namespace","value":"default"},"junk",{"value":"x"}]},null,{"activityTitle":"t"},{"facts":[]}]"#,
            "potentialAction": r#"[{"@type":"OpenUri","name":"Open","targets":[{"os":"default","uri":"https://x"}]},{"@type":"OpenUri","targets":[{"uri":"https://noname"}]},{"@type":"OpenUri","name":"","targets":[{"uri":"https://emptyname"}]},{"@type":"OpenUri","name":"NoTargets","targets":[]},{"@type":"HttpPOST","name":"P","targets":[{"uri":"https://p"}]},{"@type":"OpenUri","name":"second","targets":[{"uri":""},{"uri":"https://second"}]}]"#
        }
    });
    assert_eq!(
        sent(content),
        envelope(json!({
            "type": "AdaptiveCard", "version": "1.4",
            "body": [
                {"type": "TextBlock", "text": "Rollout web", "size": "Large", "weight": "Bolder", "color": "Good", "wrap": true},
                {"type": "TextBlock", "text": "Text", "wrap": true},
                {"type": "FactSet", "facts": [
                    {"title": "Int", "value": "42"},
                    {"title": "Big", "value": "1.234567e+06"},
                    {"title": "Small", "value": "1e-05"},
                    {"title": "Frac", "value": "0.25"},
                    {"title": "B", "value": "true"},
                    {"title": "N", "value": "<nil>"},
                    {"title": "L", "value": "[1 a 2.5]"},
                    {"title": "M", "value": "map[a:x b:1]"},
                    {"title": "NoValue", "value": ""},
                    {"title": "E", "value": "1e+21"},
                    {"title": "E2", "value": "123456"},
                    {"title": "neg", "value": "-0.0001"}
                ]},
                {"type": "FactSet", "facts": [{"title": "Namespace", "value": "default"}]}
            ],
            "actions": [
                {"type": "Action.OpenUrl", "title": "Open", "url": "https://x"},
                {"type": "Action.OpenUrl", "url": "https://noname"},
                {"type": "Action.OpenUrl", "url": "https://emptyname"}
            ]
        }))
    );
}

#[test]
fn a_title_without_colour_and_no_usable_actions() {
    let content = json!({"message": "m", "teams-workflows": {
        "title": "T", "potentialAction": "[{\"@type\":\"HttpPOST\"}]", "facts": "null", "sections": "[]"
    }});
    assert_eq!(
        sent(content),
        envelope(json!({
            "type": "AdaptiveCard", "version": "1.4",
            "body": [
                {"type": "TextBlock", "text": "T", "size": "Large", "weight": "Bolder", "wrap": true},
                {"type": "TextBlock", "text": "m", "wrap": true}
            ]
        }))
    );
}

#[test]
fn an_adaptive_card_is_sent_as_written_and_wins() {
    let content = json!({"message": "m", "teams-workflows": {
        "adaptiveCard": "  {\"type\": \"AdaptiveCard\", \"z\": 1, \"a\": [1, 2]}\n",
        "title": "ignored"
    }});
    let raw = body(&content).unwrap();
    assert!(
        raw.ends_with(r#""content":{"type": "AdaptiveCard", "z": 1, "a": [1, 2]}}]}"#),
        "{raw}"
    );
    assert_eq!(
        serde_json::from_str::<Value>(&raw).unwrap(),
        envelope(json!({"type": "AdaptiveCard", "z": 1, "a": [1, 2]}))
    );
    // Any JSON value, as the engine's json.RawMessage takes it.
    assert_eq!(
        sent(json!({"teams-workflows": {"adaptiveCard": "5"}})),
        envelope(json!(5))
    );
}

#[test]
fn fields_that_are_not_lists_of_objects_are_refused_with_the_engines_words() {
    let refused =
        |part: Value| body(&json!({"message": "m", "teams-workflows": part})).unwrap_err();
    for (part, words) in [
        (
            json!({"facts": "{\"name\":\"x\"}"}),
            "teams-workflows facts unmarshalling error",
        ),
        (
            json!({"facts": "[1]"}),
            "teams-workflows facts unmarshalling error",
        ),
        (
            json!({"facts": "[{"}),
            "teams-workflows facts unmarshalling error",
        ),
        (
            json!({"sections": "x"}),
            "teams-workflows sections unmarshalling error",
        ),
        (
            json!({"potentialAction": "{}"}),
            "teams-workflows potential action unmarshalling error",
        ),
        (
            json!({"adaptiveCard": "invalid json {"}),
            "teams-workflows adaptiveCard unmarshalling error",
        ),
        (
            json!({"adaptiveCard": "{} {}"}),
            "teams-workflows adaptiveCard unmarshalling error",
        ),
    ] {
        let e = refused(part.clone());
        assert!(e.starts_with(words), "{part}: {e}");
    }
}

#[test]
fn numbers_print_as_gos_percent_v() {
    // Go's fmt.Sprintf("%v", f) of each.
    for (f, go) in [
        (42.0, "42"),
        (1234567.0, "1.234567e+06"),
        (0.00001, "1e-05"),
        (0.0001, "0.0001"),
        (0.25, "0.25"),
        (1e21, "1e+21"),
        (123456.0, "123456"),
        (999999.0, "999999"),
        (100000.0, "100000"),
        (1e6, "1e+06"),
        (-0.0001, "-0.0001"),
        (1.5e-7, "1.5e-07"),
        (1.23456, "1.23456"),
        (1e100, "1e+100"),
        (12345678901234567890.0, "1.2345678901234567e+19"),
        (5e-324, "5e-324"),
        (0.0, "0"),
    ] {
        assert_eq!(go_float(f), go, "{f}");
    }
}
