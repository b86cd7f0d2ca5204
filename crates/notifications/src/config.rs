//! The notifications configuration: the ConfigMap's data and the Secret's, parsed as the
//! notifications engine parses them (`trigger.<name>`, `template.<name>`,
//! `service.<type>[.<name>]`, `defaultTriggers`, `defaultTriggers.<service>`, `subscriptions`).
//!
//! Parsing never fails as a whole: an entry that cannot be used is left out and reported as a
//! [`Problem`] naming it, so that every valid trigger, template and service keeps working.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use crate::template::CompiledTemplate;
use crate::when::Condition;

/// One `trigger.<name>` condition: when it holds, the named templates are sent.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerCondition {
    #[serde(default)]
    pub when: String,
    #[serde(default)]
    pub send: Vec<String>,
    #[serde(default)]
    pub once_per: String,
    #[serde(default)]
    pub description: String,
}

/// A trigger's conditions, compiled.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub conditions: Vec<(TriggerCondition, Condition)>,
}

/// A service type Sluice can send through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceKind {
    Webhook(WebhookOptions),
    Slack(SlackOptions),
    Teams(TeamsOptions),
    Email(EmailOptions),
    Grafana(GrafanaOptions),
    /// One of [`more_services::table`](crate::more_services::table)'s.
    Other(OtherService),
}

/// A service of [`more_services::table`](crate::more_services::table), with the settings it was parsed
/// from (after `$key` substitution; never shown by `Debug`).
#[derive(Clone)]
pub struct OtherService {
    settings: Value,
    pub sender: std::sync::Arc<dyn crate::more_services::NotificationService>,
}

impl PartialEq for OtherService {
    fn eq(&self, other: &Self) -> bool {
        self.settings == other.settings
    }
}

impl Eq for OtherService {}

impl fmt::Debug for OtherService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The service's own Debug leaves its secrets out.
        self.sender.fmt(f)
    }
}

/// A configured service: `service.<type>` is named `<type>`, `service.<type>.<name>` `<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    pub name: String,
    pub type_: String,
    pub kind: ServiceKind,
}

/// A header a webhook sends.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct Header {
    pub name: String,
    pub value: String,
}

impl fmt::Debug for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values often carry tokens from the Secret.
        f.debug_struct("Header")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Basic authentication of a webhook.
#[derive(Clone, PartialEq, Eq, Deserialize)]
pub struct BasicAuth {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BasicAuth")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// `service.webhook.<name>` settings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WebhookOptions {
    pub url: String,
    #[serde(default)]
    pub headers: Vec<Header>,
    #[serde(default)]
    pub basic_auth: Option<BasicAuth>,
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

/// `service.slack[.<name>]` settings.
#[derive(Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct SlackOptions {
    #[serde(default)]
    pub token: String,
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub icon: String,
    #[serde(default, rename = "apiURL")]
    pub api_url: String,
    #[serde(default)]
    pub disable_unfurl: bool,
}

impl fmt::Debug for SlackOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlackOptions")
            .field("username", &self.username)
            .field("api_url", &self.api_url)
            .finish_non_exhaustive()
    }
}

/// `service.teams` settings: the incoming webhook URL of each recipient.
#[derive(Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TeamsOptions {
    #[serde(default)]
    pub recipient_urls: BTreeMap<String, String>,
}

impl fmt::Debug for TeamsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A webhook URL is its own credential.
        f.debug_struct("TeamsOptions")
            .field(
                "recipients",
                &self.recipient_urls.keys().collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// `service.email[.<name>]` settings, named as the engine names them.
#[derive(Clone, PartialEq, Eq, Deserialize, Default)]
pub struct EmailOptions {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub port: u16,
    #[serde(default)]
    pub insecure_skip_verify: bool,
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub password: String,
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub html: bool,
}

impl fmt::Debug for EmailOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmailOptions")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("from", &self.from)
            .field("html", &self.html)
            .finish_non_exhaustive()
    }
}

/// `service.grafana` settings.
#[derive(Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GrafanaOptions {
    #[serde(default)]
    pub api_url: String,
    #[serde(default)]
    pub api_key: String,
    #[serde(default)]
    pub insecure_skip_verify: bool,
}

impl fmt::Debug for GrafanaOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrafanaOptions")
            .field("api_url", &self.api_url)
            .finish_non_exhaustive()
    }
}

/// A global subscription (`subscriptions` key): recipients `<service>:<recipient>` of the
/// listed triggers (or the default triggers) for Rollouts whose labels match `selector`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct GlobalSubscription {
    #[serde(default)]
    pub recipients: Vec<String>,
    #[serde(default)]
    pub triggers: Vec<String>,
    #[serde(default)]
    pub selector: String,
}

/// The Secret's values: shown by `Debug` as their keys only.
#[derive(Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct Secrets(pub BTreeMap<String, String>);

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// Something in the configuration that cannot be used: the key it is under and why. The
/// message never carries a secret's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// The parsed configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub triggers: BTreeMap<String, Trigger>,
    pub templates: BTreeMap<String, CompiledTemplate>,
    pub services: BTreeMap<String, Service>,
    /// Services of a type Sluice does not send through: name -> type. A notification to one
    /// is reported, the others still go out.
    pub unsupported_services: BTreeMap<String, String>,
    pub default_triggers: Vec<String>,
    pub service_default_triggers: BTreeMap<String, Vec<String>>,
    pub subscriptions: Vec<GlobalSubscription>,
    /// The Secret's data, for `$key` references and the templates' `.secrets`.
    pub secrets: Secrets,
    pub problems: Vec<Problem>,
    /// The namespace of a Rollout's own configuration, read with
    /// `--self-service-notification-enabled` besides the controller's: its notifications are
    /// recorded under keys naming it. None for the controller's namespace configuration.
    pub self_service_namespace: Option<String>,
}

impl Config {
    /// Parses the ConfigMap's `data` with the Secret's (decoded) `data`.
    pub fn parse(data: &BTreeMap<String, String>, secret: &BTreeMap<String, String>) -> Config {
        let mut cfg = Config {
            secrets: Secrets(secret.clone()),
            ..Config::default()
        };
        for (key, value) in data {
            if key == "subscriptions" {
                match yaml::<Vec<GlobalSubscription>>(value) {
                    Ok(subs) => cfg.subscriptions = subs,
                    Err(e) => cfg.problem(key, format!("cannot parse subscriptions: {e}")),
                }
            } else if key == "defaultTriggers" {
                match yaml::<Vec<String>>(value) {
                    Ok(t) => cfg.default_triggers = t,
                    Err(e) => cfg.problem(key, format!("cannot parse default triggers: {e}")),
                }
            } else if let Some(service) = key.strip_prefix("defaultTriggers.") {
                match yaml::<Vec<String>>(value) {
                    Ok(t) => {
                        cfg.service_default_triggers.insert(service.to_owned(), t);
                    }
                    Err(e) => cfg.problem(key, format!("cannot parse default triggers: {e}")),
                }
            } else if let Some(name) = key.strip_prefix("template.") {
                match CompiledTemplate::parse(value) {
                    Ok(t) => {
                        cfg.templates.insert(name.to_owned(), t);
                    }
                    Err(e) => cfg.problem(key, format!("bad template: {e}")),
                }
            } else if let Some(name) = key.strip_prefix("trigger.") {
                match parse_trigger(value) {
                    Ok(t) => {
                        cfg.triggers.insert(name.to_owned(), t);
                    }
                    Err(e) => cfg.problem(key, format!("bad trigger: {e}")),
                }
            } else if let Some(rest) = key.strip_prefix("service.") {
                cfg.add_service(key, rest, value);
            }
        }
        // A trigger sending a template that does not exist cannot send that template.
        let missing: Vec<(String, String)> = cfg
            .triggers
            .iter()
            .flat_map(|(name, t)| {
                t.conditions
                    .iter()
                    .flat_map(|(c, _)| c.send.iter())
                    .filter(|s| !cfg.templates.contains_key(*s))
                    .map(move |s| (name.clone(), s.clone()))
            })
            .collect();
        for (trigger, template) in missing {
            cfg.problem(
                &format!("trigger.{trigger}"),
                format!("sends template '{template}', which is not configured"),
            );
        }
        cfg
    }

    fn problem(&mut self, key: &str, message: String) {
        self.problems.push(Problem {
            key: key.to_owned(),
            message,
        });
    }

    fn add_service(&mut self, key: &str, rest: &str, value: &str) {
        let parts: Vec<&str> = rest.split('.').collect();
        let (type_, name) = match parts.as_slice() {
            [t] => (*t, *t),
            [t, n] => (*t, *n),
            _ => {
                self.problem(
                    key,
                    "invalid service key; expected 'service.<type>(.<name>)'".into(),
                );
                return;
            }
        };
        let settings = match yaml::<Value>(value) {
            Ok(v) => substitute_secrets(v, &self.secrets.0),
            Err(e) => {
                // The YAML parser's message may quote the text; it is the ConfigMap's, but a
                // value substituted from the Secret is never part of it.
                self.problem(key, format!("cannot parse service settings: {e}"));
                return;
            }
        };
        let kind = match type_ {
            "webhook" => {
                serde_json::from_value::<WebhookOptions>(settings).map(ServiceKind::Webhook)
            }
            "slack" => serde_json::from_value::<SlackOptions>(settings).map(ServiceKind::Slack),
            "teams" => serde_json::from_value::<TeamsOptions>(settings).map(ServiceKind::Teams),
            "email" => serde_json::from_value::<EmailOptions>(settings).map(ServiceKind::Email),
            "grafana" => {
                serde_json::from_value::<GrafanaOptions>(settings).map(ServiceKind::Grafana)
            }
            other => match crate::more_services::table::parse(other, settings.clone()) {
                Some(Ok(sender)) => Ok(ServiceKind::Other(OtherService { settings, sender })),
                Some(Err(e)) => {
                    self.problem(key, format!("bad {type_} service settings: {e}"));
                    return;
                }
                None => {
                    self.unsupported_services
                        .insert(name.to_owned(), other.to_owned());
                    self.problem(
                    key,
                    format!("service type '{other}' is not supported by this controller; notifications to '{name}' are not sent"),
                );
                    return;
                }
            },
        };
        match kind {
            Ok(kind) => {
                self.services.insert(
                    name.to_owned(),
                    Service {
                        name: name.to_owned(),
                        type_: type_.to_owned(),
                        kind,
                    },
                );
            }
            Err(e) => self.problem(
                key,
                format!(
                    "bad {type_} service settings: {}",
                    crate::more_services::redact(&e)
                ),
            ),
        }
    }
}

fn parse_trigger(value: &str) -> Result<Trigger, String> {
    let conditions: Vec<TriggerCondition> = yaml(value).map_err(|e| e.to_string())?;
    let mut compiled = Vec::with_capacity(conditions.len());
    for c in conditions {
        let condition = Condition::compile(&c.when, &c.once_per)?;
        compiled.push((c, condition));
    }
    Ok(Trigger {
        conditions: compiled,
    })
}

fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_saphyr::from_str::<T>(text).map_err(|e| e.to_string())
}

/// Replaces `$key` in every string of the settings with the Secret's value of `key` (a
/// reference to a key the Secret lacks stays as written, as the engine leaves it).
pub fn substitute_secrets(value: Value, secrets: &BTreeMap<String, String>) -> Value {
    match value {
        Value::String(s) => Value::String(substitute(&s, secrets)),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| substitute_secrets(v, secrets))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, substitute_secrets(v, secrets)))
                .collect(),
        ),
        other => other,
    }
}

/// `$[\w-]+` references in one string.
fn substitute(s: &str, secrets: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let len = after
            .char_indices()
            .find(|(_, c)| !(c.is_alphanumeric() || *c == '_' || *c == '-'))
            .map_or(after.len(), |(i, _)| i);
        let name = &after[..len];
        match secrets.get(name) {
            Some(v) if len > 0 => out.push_str(v),
            _ => {
                out.push('$');
                out.push_str(name);
            }
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests;
