//! Who is subscribed to a trigger: the Rollout's annotations
//! (`notifications.argoproj.io/subscribe.<trigger>.<service>: <recipient>;<recipient>`,
//! `notifications.argoproj.io/subscribe.<service>` for the default triggers, and the YAML list
//! of `notifications.argoproj.io/subscriptions`) and the ConfigMap's global `subscriptions`
//! whose selector matches the Rollout's labels.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::config::Config;

const PREFIX: &str = "notifications.argoproj.io/subscribe.";
const LIST: &str = "notifications.argoproj.io/subscriptions";

/// Where a notification goes: a configured service and a recipient (a Slack channel; empty
/// for a webhook).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Destination {
    pub service: String,
    pub recipient: String,
}

#[derive(Debug, Deserialize)]
struct ListedSubscription {
    #[serde(default)]
    trigger: Vec<String>,
    #[serde(default)]
    destinations: Vec<ListedDestination>,
}

#[derive(Debug, Deserialize)]
struct ListedDestination {
    service: String,
    #[serde(default)]
    recipients: Vec<String>,
}

fn recipients(value: &str) -> Vec<String> {
    if value.is_empty() {
        return vec![String::new()];
    }
    value
        .split(';')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The destinations of every trigger, deduplicated, in a stable order.
pub fn destinations(
    cfg: &Config,
    annotations: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> BTreeMap<String, Vec<Destination>> {
    let mut out: BTreeMap<String, Vec<Destination>> = BTreeMap::new();
    let mut add = |trigger: &str, service: &str, recipient: &str| {
        let dest = Destination {
            service: service.to_owned(),
            recipient: recipient.to_owned(),
        };
        let list = out.entry(trigger.to_owned()).or_default();
        if !list.contains(&dest) {
            list.push(dest);
        }
    };
    let defaults_of = |service: &str| -> Vec<String> {
        cfg.service_default_triggers
            .get(service)
            .cloned()
            .unwrap_or_else(|| cfg.default_triggers.clone())
    };
    // Global subscriptions first, as the engine merges them.
    for sub in &cfg.subscriptions {
        if !selector_matches(&sub.selector, labels) {
            continue;
        }
        let triggers = if sub.triggers.is_empty() {
            cfg.default_triggers.clone()
        } else {
            sub.triggers.clone()
        };
        for trigger in &triggers {
            for r in &sub.recipients {
                let (service, recipient) = r.split_once(':').unwrap_or((r.as_str(), ""));
                add(trigger, service, recipient);
            }
        }
    }
    for (key, value) in annotations {
        if let Some(rest) = key.strip_prefix(PREFIX) {
            let (triggers, service) = match rest.split_once('.') {
                Some((trigger, service)) => (vec![trigger.to_owned()], service),
                None => (defaults_of(rest), rest),
            };
            for trigger in &triggers {
                for r in recipients(value) {
                    add(trigger, service, &r);
                }
            }
        } else if key == LIST {
            let Ok(list) = serde_saphyr::from_str::<Vec<ListedSubscription>>(value) else {
                continue;
            };
            for sub in list {
                for dest in &sub.destinations {
                    let triggers = if sub.trigger.is_empty() {
                        defaults_of(&dest.service)
                    } else {
                        sub.trigger.clone()
                    };
                    for trigger in &triggers {
                        for r in &dest.recipients {
                            add(trigger, &dest.service, r);
                        }
                    }
                }
            }
        }
    }
    out
}

/// A label selector in its string form (`a=b,c!=d,e,!f,g in (h,i),j notin (k)`); an empty
/// selector matches everything, an unreadable one nothing.
pub fn selector_matches(selector: &str, labels: &BTreeMap<String, String>) -> bool {
    let mut rest = selector.trim();
    while !rest.is_empty() {
        // Split at the next comma outside parentheses.
        let mut depth = 0;
        let end = rest
            .char_indices()
            .find(|(_, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    ',' if depth == 0 => return true,
                    _ => {}
                }
                false
            })
            .map_or(rest.len(), |(i, _)| i);
        let term = rest[..end].trim();
        rest = rest.get(end + 1..).unwrap_or("").trim();
        if !term_matches(term, labels) {
            return false;
        }
    }
    true
}

fn term_matches(term: &str, labels: &BTreeMap<String, String>) -> bool {
    if let Some((k, v)) = term.split_once("!=") {
        return labels.get(k.trim()).map(String::as_str) != Some(v.trim());
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return labels.get(k.trim()).map(String::as_str) == Some(v.trim());
    }
    let set = |s: &str| -> Option<Vec<String>> {
        let s = s.trim().strip_prefix('(')?.strip_suffix(')')?;
        Some(s.split(',').map(|x| x.trim().to_owned()).collect())
    };
    if let Some((k, vs)) = term.split_once(" notin ") {
        let Some(vs) = set(vs) else { return false };
        return labels.get(k.trim()).is_none_or(|v| !vs.contains(v));
    }
    if let Some((k, vs)) = term.split_once(" in ") {
        let Some(vs) = set(vs) else { return false };
        return labels.get(k.trim()).is_some_and(|v| vs.contains(v));
    }
    match term.strip_prefix('!') {
        Some(k) => !labels.contains_key(k.trim()),
        None => labels.contains_key(term),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GlobalSubscription;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn dest(service: &str, recipient: &str) -> Destination {
        Destination {
            service: service.into(),
            recipient: recipient.into(),
        }
    }

    #[test]
    fn annotations_subscribe_recipients_to_triggers() {
        let cfg = Config {
            default_triggers: vec!["on-rollout-completed".into()],
            service_default_triggers: [("hook".to_string(), vec!["on-rollout-paused".to_string()])]
                .into(),
            ..Config::default()
        };
        let dests = destinations(
            &cfg,
            &map(&[
                (
                    "notifications.argoproj.io/subscribe.on-rollout-step-completed.slack",
                    "chan1; chan2;",
                ),
                (
                    "notifications.argoproj.io/subscribe.on-rollout-step-completed.webhook",
                    "",
                ),
                ("notifications.argoproj.io/subscribe.slack", "general"),
                ("notifications.argoproj.io/subscribe.hook", ""),
                (
                    "notifications.argoproj.io/subscriptions",
                    "- trigger: [on-rollout-aborted]\n  destinations:\n  - service: slack\n    recipients: [oncall]\n",
                ),
                ("other", "x"),
            ]),
            &BTreeMap::new(),
        );
        assert_eq!(
            dests["on-rollout-step-completed"],
            vec![
                dest("slack", "chan1"),
                dest("slack", "chan2"),
                dest("webhook", "")
            ]
        );
        assert_eq!(
            dests["on-rollout-completed"],
            vec![dest("slack", "general")]
        );
        assert_eq!(dests["on-rollout-paused"], vec![dest("hook", "")]);
        assert_eq!(dests["on-rollout-aborted"], vec![dest("slack", "oncall")]);
    }

    #[test]
    fn global_subscriptions_apply_to_rollouts_their_selector_matches() {
        let cfg = Config {
            subscriptions: vec![GlobalSubscription {
                recipients: vec!["slack:releases".into(), "webhook".into()],
                triggers: vec!["on-rollout-completed".into()],
                selector: "team=web,tier in (front, back),!legacy".into(),
            }],
            ..Config::default()
        };
        let web = map(&[("team", "web"), ("tier", "front")]);
        let dests = destinations(&cfg, &BTreeMap::new(), &web);
        assert_eq!(
            dests["on-rollout-completed"],
            vec![dest("slack", "releases"), dest("webhook", "")]
        );
        let legacy = map(&[("team", "web"), ("tier", "front"), ("legacy", "")]);
        assert!(destinations(&cfg, &BTreeMap::new(), &legacy).is_empty());
        assert!(selector_matches("", &legacy));
        assert!(selector_matches("team!=db", &web));
        assert!(selector_matches("tier notin (db)", &web));
        assert!(!selector_matches("tier", &BTreeMap::new()));
    }
}
