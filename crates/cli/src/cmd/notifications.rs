//! `kubectl sluice notifications`: Argo's `kubectl argo rollouts notifications` commands.
//!
//! - `template get [NAME]`: the templates, each with a preview (its message's first line);
//! - `template notify NAME ROLLOUT [--recipient service:recipient]...`: renders the template for
//!   the Rollout and sends it (`console`, the default recipient, prints it as YAML);
//! - `trigger get [NAME]`: the triggers, their templates and conditions;
//! - `trigger run NAME ROLLOUT`: evaluates the trigger's conditions for the Rollout.
//!
//! The configuration is the cluster's ConfigMap and Secret in the namespace (`-n`), or the
//! files of `--config-map` and `--secret` (`--secret :empty` for none).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use serde_json::Value as Json;
use sluice_notifications::Config;
use sluice_notifications::due::{Subject, render};
use sluice_notifications::services::{Sender, slack_threads};
use sluice_notifications::subscriptions::Destination;
use sluice_notifications::{CONFIG_MAP, Notification, SECRET};

use super::{emit, explain, get_rollout, rollouts, warn};
use crate::cli::{NotificationsArgs, NotificationsCommand, TemplateCommand, TriggerCommand};
use crate::kube_target::Target;

pub async fn run(global: &crate::cli::GlobalArgs, args: &NotificationsArgs) -> anyhow::Result<()> {
    let needs_cluster = args.config_map.is_none()
        || args.secret.is_none()
        || matches!(
            args.command,
            NotificationsCommand::Template(TemplateCommand::Notify { .. })
                | NotificationsCommand::Trigger(TriggerCommand::Run { .. })
        );
    let target = if needs_cluster {
        Some(Target::connect(global).await?)
    } else {
        None
    };
    let cfg = load_config(target.as_ref(), args).await?;
    for problem in &cfg.problems {
        warn(&problem.to_string());
    }
    match &args.command {
        NotificationsCommand::Template(TemplateCommand::Get { name }) => {
            emit(&template_table(&cfg, name.as_deref())?)
        }
        NotificationsCommand::Trigger(TriggerCommand::Get { name }) => {
            emit(&trigger_table(&cfg, name.as_deref())?)
        }
        NotificationsCommand::Trigger(TriggerCommand::Run { name, rollout }) => {
            let target = target.as_ref().expect("connected");
            let ro = rollout_json(target, rollout).await?;
            emit(&trigger_run(&cfg, name, &ro)?)
        }
        NotificationsCommand::Template(TemplateCommand::Notify {
            name,
            rollout,
            recipient,
        }) => {
            let target = target.as_ref().expect("connected");
            let ro = rollout_json(target, rollout).await?;
            notify(&cfg, name, &ro, recipient).await
        }
    }
}

async fn rollout_json(target: &Target, name: &str) -> anyhow::Result<Json> {
    let ro = get_rollout(&rollouts(target), name).await?;
    Ok(serde_json::to_value(ro)?)
}

async fn load_config(target: Option<&Target>, args: &NotificationsArgs) -> anyhow::Result<Config> {
    let data = match &args.config_map {
        Some(path) => config_map_file(path)?,
        None => {
            let target = target.expect("connected");
            let api: Api<ConfigMap> = Api::namespaced(target.client.clone(), &target.namespace);
            let cm = api
                .get(CONFIG_MAP)
                .await
                .map_err(explain)
                .with_context(|| format!("reading configmap {CONFIG_MAP:?}"))?;
            cm.data.unwrap_or_default().into_iter().collect()
        }
    };
    let secret = match args.secret.as_deref() {
        Some(":empty") => BTreeMap::new(),
        Some(path) => secret_file(Path::new(path))?,
        None => {
            let target = target.expect("connected");
            let api: Api<Secret> = Api::namespaced(target.client.clone(), &target.namespace);
            match api.get_opt(SECRET).await.map_err(explain)? {
                Some(s) => secret_data(&s),
                None => BTreeMap::new(),
            }
        }
    };
    Ok(Config::parse(&data, &secret))
}

fn config_map_file(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let cm: ConfigMap =
        serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    Ok(cm.data.unwrap_or_default().into_iter().collect())
}

fn secret_file(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let secret: Secret =
        serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    Ok(secret_data(&secret))
}

fn secret_data(secret: &Secret) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
        .collect();
    out.extend(secret.string_data.clone().unwrap_or_default());
    out
}

/// Left-aligned columns, three spaces apart, as kubectl prints tables.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let last = cells.len() - 1;
        let mut out = String::new();
        for (i, cell) in cells.into_iter().enumerate() {
            if i == last {
                out.push_str(&cell);
            } else {
                out.push_str(&format!("{cell:<w$}   ", w = widths[i]));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        out.push_str(&line(row.clone()));
    }
    out
}

/// `template get`: NAME and PREVIEW (the raw message's first line, 100 characters at most).
pub fn template_table(cfg: &Config, name: Option<&str>) -> anyhow::Result<String> {
    if let Some(n) = name
        && !cfg.templates.contains_key(n)
    {
        bail!("template '{n}' is not configured");
    }
    let rows: Vec<Vec<String>> = cfg
        .templates
        .iter()
        .filter(|(n, _)| name.is_none_or(|want| want == n.as_str()))
        .map(|(n, t)| vec![n.clone(), t.preview()])
        .collect();
    Ok(table(&["NAME", "PREVIEW"], &rows))
}

/// `trigger get`: NAME, TEMPLATE and CONDITION of each condition of each trigger.
pub fn trigger_table(cfg: &Config, name: Option<&str>) -> anyhow::Result<String> {
    if let Some(n) = name
        && !cfg.triggers.contains_key(n)
    {
        bail!("trigger '{n}' is not configured");
    }
    let mut rows = Vec::new();
    for (n, trigger) in &cfg.triggers {
        if name.is_some_and(|want| want != n) {
            continue;
        }
        for (condition, _) in &trigger.conditions {
            rows.push(vec![
                n.clone(),
                condition.send.join(", "),
                condition.when.clone(),
            ]);
        }
    }
    Ok(table(&["NAME", "TEMPLATE", "CONDITION"], &rows))
}

/// `trigger run`: CONDITION and RESULT of each condition for the Rollout.
pub fn trigger_run(cfg: &Config, name: &str, rollout: &Json) -> anyhow::Result<String> {
    let Some(trigger) = cfg.triggers.get(name) else {
        bail!("trigger '{name}' is not configured");
    };
    let vars = serde_json::json!({"rollout": rollout, "analysisRuns": null});
    let mut rows = Vec::new();
    for (condition, compiled) in &trigger.conditions {
        let result = match compiled.evaluate(&vars, jiff::Timestamp::now()) {
            Ok(o) => o.triggered.to_string(),
            Err(e) => format!("error: {e}"),
        };
        rows.push(vec![condition.when.clone(), result]);
    }
    Ok(table(&["CONDITION", "RESULT"], &rows))
}

/// The notification `template` makes for the Rollout and `dest`, as the console prints it.
pub fn console_text(
    cfg: &Config,
    template: &str,
    rollout: &Json,
    dest: &Destination,
) -> anyhow::Result<String> {
    let subject = Subject {
        rollout,
        analysis_runs: &Json::Null,
        now: jiff::Timestamp::now(),
    };
    let content =
        render(cfg, &[template.to_owned()], subject, dest).map_err(|p| anyhow::anyhow!("{p}"))?;
    Ok(serde_saphyr::to_string(&content)?)
}

async fn notify(
    cfg: &Config,
    template: &str,
    rollout: &Json,
    recipients: &[String],
) -> anyhow::Result<()> {
    let recipients = if recipients.is_empty() {
        vec!["console:stdout".to_owned()]
    } else {
        recipients.to_vec()
    };
    for r in &recipients {
        let (service, recipient) = r.split_once(':').unwrap_or((r.as_str(), ""));
        let dest = Destination {
            service: service.to_owned(),
            recipient: recipient.to_owned(),
        };
        if service == "console" {
            emit(&console_text(cfg, template, rollout, &dest)?)?;
            continue;
        }
        let subject = Subject {
            rollout,
            analysis_runs: &Json::Null,
            now: jiff::Timestamp::now(),
        };
        let content = render(cfg, &[template.to_owned()], subject, &dest)
            .map_err(|p| anyhow::anyhow!("{p}"))?;
        let notification = Notification {
            key: String::new(),
            trigger: String::new(),
            templates: vec![template.to_owned()],
            destination: dest,
            content,
        };
        let annotations: BTreeMap<String, String> = rollout
            .pointer("/metadata/annotations")
            .and_then(|a| serde_json::from_value(a.clone()).ok())
            .unwrap_or_default();
        let sender = Sender::new().map_err(|e| anyhow::anyhow!("{e}"))?;
        sender
            .send(cfg, &notification, &slack_threads(&annotations))
            .await
            .map_err(|e| anyhow::anyhow!("failed to notify '{r}': {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn catalog() -> Config {
        Config::parse(&sluice_notifications::catalog::data(), &BTreeMap::new())
    }

    fn rollout() -> Json {
        json!({"metadata": {"name": "web"},
               "spec": {"replicas": 3, "strategy": {"canary": {"steps": [{"setWeight": 50}, {"pause": {}}]}},
                        "template": {"spec": {"containers": [{"name": "app", "image": "app:v2"}]}}},
               "status": {"phase": "Paused", "currentStepIndex": 1}})
    }

    #[test]
    fn template_get_lists_names_and_previews() {
        let out = template_table(&catalog(), Some("rollout-paused")).unwrap();
        assert_eq!(
            out,
            "NAME             PREVIEW\nrollout-paused   Rollout {{.rollout.metadata.name}} has been paused.\n"
        );
        assert_eq!(
            template_table(&catalog(), None).unwrap().lines().count(),
            10
        );
        assert!(template_table(&catalog(), Some("nope")).is_err());
    }

    #[test]
    fn trigger_get_lists_templates_and_conditions() {
        let mut data = sluice_notifications::catalog::data();
        data.insert(
            "trigger.on-purple".into(),
            "- send: [rollout-updated]\n  when: rollout.spec.template.spec.containers[0].image == 'argoproj/rollouts-demo:purple'\n".into(),
        );
        let cfg = Config::parse(&data, &BTreeMap::new());
        let out = trigger_table(&cfg, Some("on-purple")).unwrap();
        assert_eq!(
            out,
            "NAME        TEMPLATE          CONDITION\non-purple   rollout-updated   rollout.spec.template.spec.containers[0].image == 'argoproj/rollouts-demo:purple'\n"
        );
        assert_eq!(trigger_table(&cfg, None).unwrap().lines().count(), 11);
    }

    #[test]
    fn trigger_run_evaluates_each_condition() {
        let mut data = sluice_notifications::catalog::data();
        data.insert(
            "trigger.on-paused-web".into(),
            "- send: [rollout-paused]\n  when: rollout.status.phase == 'Paused'\n- send: [rollout-paused]\n  when: rollout.spec.replicas > 5\n".into(),
        );
        let cfg = Config::parse(&data, &BTreeMap::new());
        let out = trigger_run(&cfg, "on-paused-web", &rollout()).unwrap();
        assert_eq!(
            out,
            "CONDITION                          RESULT\nrollout.status.phase == 'Paused'   true\nrollout.spec.replicas > 5          false\n"
        );
        assert!(
            trigger_run(&cfg, "on-rollout-paused", &rollout())
                .unwrap()
                .contains("true")
        );
    }

    #[test]
    fn template_notify_to_the_console_prints_the_rendered_notification() {
        let dest = Destination {
            service: "console".into(),
            recipient: "stdout".into(),
        };
        let out = console_text(&catalog(), "rollout-step-completed", &rollout(), &dest).unwrap();
        assert!(
            out.contains("message: Rollout web step number 2/2 has been completed."),
            "{out}"
        );
        assert!(out.contains("slack:"), "{out}");
    }
}
