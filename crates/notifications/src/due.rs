//! Which notifications an event of a Rollout makes due.
//!
//! Argo Rollouts fires the trigger named after an event's reason (`RolloutPaused` fires
//! `on-rollout-paused`) when the controller records the event; each condition of the trigger
//! that holds sends its templates to every destination subscribed to the trigger. An empty
//! `when` holds on every event.
//!
//! Each notification has the engine's key ([`crate::state::key`]), with the event's
//! occurrence (or the condition's `oncePer` value) in front: one already in the Rollout's
//! `notified` record is not due again. That is what makes a notification go out once per
//! occurrence across restarts, leader changes and repeated events.

use std::collections::BTreeMap;

use serde_json::{Value as Json, json};

use crate::config::{Config, Problem};
use crate::state::{self, NotifiedState};
use crate::subscriptions::{self, Destination};

/// One notification to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The key it is recorded under once sent.
    pub key: String,
    pub trigger: String,
    pub templates: Vec<String>,
    pub destination: Destination,
    /// The rendered templates, merged in the order the condition lists them (`message`,
    /// `slack`, `webhook`, ...).
    pub content: Json,
}

/// What an event makes due, and what is wrong in the configuration for it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Due {
    pub notifications: Vec<Notification>,
    pub problems: Vec<Problem>,
}

/// What an event is about: the Rollout as the controller saw it when it recorded the event,
/// and the AnalysisRuns of its current revision.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub rollout: &'a Json,
    /// The Rollout's AnalysisRuns of its current revision (`analysisRuns` in conditions and
    /// templates), as a JSON array.
    pub analysis_runs: &'a Json,
    /// The time the event is decided at (`time.Now()` in conditions and templates).
    pub now: jiff::Timestamp,
}

/// The occurrence of an event: the Rollout's revision and step, and a digest of the event's
/// message (which tells one step, pause or scaling from another).
pub fn occurrence(rollout: &Json, message: &str) -> String {
    let revision = rollout
        .pointer("/metadata/annotations/rollout.argoproj.io~1revision")
        .and_then(Json::as_str)
        .unwrap_or("0");
    let step = rollout
        .pointer("/status/currentStepIndex")
        .and_then(Json::as_i64)
        .map_or_else(|| "-".to_owned(), |s| s.to_string());
    let digest = crate::when::hash(message);
    format!("r{revision}.s{step}.{}", &digest[..8])
}

/// The notifications due for an event with `reason` and `occurrence` of `subject`, leaving
/// out those `notified` records.
pub fn due(
    cfg: &Config,
    subject: Subject<'_>,
    reason: &str,
    occurrence: &str,
    notified: &NotifiedState,
) -> Due {
    let mut out = Due::default();
    let trigger_name = crate::trigger_of_reason(reason);
    let annotations = string_map(subject.rollout.pointer("/metadata/annotations"));
    let labels = string_map(subject.rollout.pointer("/metadata/labels"));
    let mut by_trigger = subscriptions::destinations(cfg, &annotations, &labels);
    let Some(destinations) = by_trigger.remove(&trigger_name) else {
        return out;
    };
    let Some(trigger) = cfg.triggers.get(&trigger_name) else {
        out.problems.push(Problem {
            key: format!("trigger.{trigger_name}"),
            message: format!("trigger '{trigger_name}' is not configured"),
        });
        return out;
    };
    let rollout = go_shape(subject.rollout);
    let subject = Subject {
        rollout: &rollout,
        ..subject
    };
    let base_vars = json!({
        "rollout": subject.rollout,
        "analysisRuns": subject.analysis_runs,
    });
    for (i, (condition, compiled)) in trigger.conditions.iter().enumerate() {
        let outcome = match compiled.evaluate(&base_vars, subject.now) {
            Ok(o) => o,
            Err(e) => {
                out.problems.push(Problem {
                    key: format!("trigger.{trigger_name}"),
                    message: format!(
                        "condition [{i}] ({}) cannot be evaluated: {e}",
                        condition.when
                    ),
                });
                continue;
            }
        };
        if !outcome.triggered {
            continue;
        }
        let condition_key = format!("[{i}].{}", compiled.when_hash);
        let once_per = outcome.once_per.as_deref().unwrap_or(occurrence);
        for dest in &destinations {
            if cfg.unsupported_services.contains_key(&dest.service) {
                // Reported with the configuration's problems; nothing is sent to it.
                continue;
            }
            if !cfg.services.contains_key(&dest.service) {
                out.problems.push(Problem {
                    key: format!("service.{}", dest.service),
                    message: format!(
                        "notification service '{}' is not configured (subscribed to '{trigger_name}')",
                        dest.service
                    ),
                });
                continue;
            }
            let key = state::key(
                Some(once_per),
                cfg.self_service_namespace.as_deref(),
                &trigger_name,
                &condition_key,
                &dest.service,
                &dest.recipient,
            );
            if notified.contains(&key) {
                continue;
            }
            match render(cfg, &condition.send, subject, dest) {
                Ok(content) => out.notifications.push(Notification {
                    key,
                    trigger: trigger_name.clone(),
                    templates: condition.send.clone(),
                    destination: dest.clone(),
                    content,
                }),
                Err(problem) => out.problems.push(problem),
            }
        }
    }
    out
}

/// What an event makes due under several configurations at once (with self-service: the
/// Rollout's own namespace's and the controller's), each deciding for itself as the engine's
/// APIs do, with the self-service namespace of the configuration each notification is sent
/// with. A trigger or service one configuration lacks is a problem only when none has it.
pub fn due_in_all(
    cfgs: &[&Config],
    subject: Subject<'_>,
    reason: &str,
    occurrence: &str,
    notified: &NotifiedState,
) -> (Vec<(Option<String>, Notification)>, Vec<Problem>) {
    let mut notifications = Vec::new();
    let mut problems: Vec<Problem> = Vec::new();
    for cfg in cfgs {
        let due = due(cfg, subject, reason, occurrence, notified);
        let ns = cfg.self_service_namespace.clone();
        notifications.extend(due.notifications.into_iter().map(|n| (ns.clone(), n)));
        for problem in due.problems {
            let elsewhere = |has: &dyn Fn(&Config) -> bool| {
                cfgs.iter()
                    .any(|other| !std::ptr::eq(*other, *cfg) && has(other))
            };
            let missing_here = match (
                problem.key.strip_prefix("service."),
                problem.key.strip_prefix("trigger."),
            ) {
                (Some(service), _) => elsewhere(&|c: &Config| {
                    c.services.contains_key(service) || c.unsupported_services.contains_key(service)
                }),
                (_, Some(trigger)) => {
                    !cfg.triggers.contains_key(trigger)
                        && elsewhere(&|c: &Config| c.triggers.contains_key(trigger))
                }
                _ => false,
            };
            if !missing_here && !problems.contains(&problem) {
                problems.push(problem);
            }
        }
    }
    (notifications, problems)
}

/// Renders `templates` for `dest`, merged in order.
pub fn render(
    cfg: &Config,
    templates: &[String],
    subject: Subject<'_>,
    dest: &Destination,
) -> Result<Json, Problem> {
    let rollout = go_shape(subject.rollout);
    let vars = json!({
        "rollout": rollout,
        "analysisRuns": subject.analysis_runs,
        "secrets": cfg.secrets,
        "recipient": dest.recipient,
        "serviceType": cfg.services.get(&dest.service).map(|s| s.type_.as_str()).unwrap_or(""),
    });
    let mut content = Json::Object(serde_json::Map::new());
    for name in templates {
        let template = cfg.templates.get(name).ok_or_else(|| Problem {
            key: format!("template.{name}"),
            message: format!("template '{name}' is not configured"),
        })?;
        let problem = |e: String| Problem {
            key: format!("template.{name}"),
            message: format!("cannot render template '{name}': {e}"),
        };
        let mut rendered = template.render(&vars, subject.now).map_err(problem)?;
        // The engine's templater fills in an Alertmanager alert knowing the template's name.
        crate::more_services::alertmanager::complete(
            name,
            template.tree(),
            &mut rendered,
            subject.now,
        )
        .map_err(problem)?;
        merge(&mut content, rendered);
    }
    Ok(content)
}

/// The Rollout as Go's JSON encoding gives it to the engine: `metadata`, `spec`,
/// `spec.strategy`, `spec.template` and `status` are structs there, present even when empty,
/// so that a template reading `.rollout.status.currentStepIndex` of a Rollout without a status
/// renders `<no value>` instead of failing.
pub fn go_shape(rollout: &Json) -> Json {
    let mut ro = rollout.clone();
    if let Some(obj) = ro.as_object_mut() {
        for key in ["metadata", "spec", "status"] {
            let slot = obj.entry(key).or_insert_with(|| json!({}));
            if slot.is_null() {
                *slot = json!({});
            }
        }
        if let Some(spec) = obj.get_mut("spec").and_then(Json::as_object_mut) {
            for key in ["strategy", "template", "selector"] {
                let slot = spec.entry(key).or_insert_with(|| json!({}));
                if slot.is_null() {
                    *slot = json!({});
                }
            }
            if let Some(template) = spec.get_mut("template").and_then(Json::as_object_mut) {
                for key in ["metadata", "spec"] {
                    let slot = template.entry(key).or_insert_with(|| json!({}));
                    if slot.is_null() {
                        *slot = json!({});
                    }
                }
            }
        }
    }
    ro
}

fn merge(into: &mut Json, from: Json) {
    match (into, from) {
        (Json::Object(a), Json::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(&k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        a.insert(k, v);
                    }
                }
            }
        }
        (slot, v) => *slot = v,
    }
}

fn string_map(v: Option<&Json>) -> BTreeMap<String, String> {
    v.and_then(Json::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
