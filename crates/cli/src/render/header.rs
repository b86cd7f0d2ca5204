//! The summary blocks at the top of `get rollout` and `get experiment`.

use super::columns::{Cell, align};
use super::style::{Style, phase_with_icon, status_with_icon};
use crate::info::experiment::ExperimentInfo;
use crate::info::{RolloutInfo, Strategy};

/// `Name:`, `Status:`, strategy progress, images and replica counts, values aligned.
pub fn render_header(info: &RolloutInfo, style: &Style) -> String {
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    let mut line = |label: &str, value: Cell| rows.push(vec![Cell::plain(label), value]);

    line("Name:", Cell::plain(&info.name));
    line("Namespace:", Cell::plain(&info.namespace));
    let (status, color) = status_with_icon(info.phase.as_str());
    line("Status:", Cell::colored(status, color));
    if !info.message.is_empty() {
        line("Message:", Cell::plain(&info.message));
    }
    line("Strategy:", Cell::plain(info.strategy.as_str()));
    if info.strategy == Strategy::Canary {
        if let Some(step) = &info.step {
            line("  Step:", Cell::plain(step));
        }
        let weight = |w: Option<i32>| w.map(|w| w.to_string()).unwrap_or_default();
        line("  SetWeight:", Cell::plain(weight(info.set_weight)));
        line("  ActualWeight:", Cell::plain(weight(info.actual_weight)));
    }
    if info.images.is_empty() {
        line("Images:", Cell::plain(""));
    }
    for (i, image) in info.images.iter().enumerate() {
        let text = if image.tags.is_empty() {
            image.image.clone()
        } else {
            format!("{} ({})", image.image, image.tags.join(", "))
        };
        line(if i == 0 { "Images:" } else { "" }, Cell::plain(text));
    }
    let counts = info.replicas;
    line("Replicas:", Cell::plain(""));
    line("  Desired:", Cell::plain(counts.desired.to_string()));
    line("  Current:", Cell::plain(counts.current.to_string()));
    line("  Updated:", Cell::plain(counts.updated.to_string()));
    line("  Ready:", Cell::plain(counts.ready.to_string()));
    line("  Available:", Cell::plain(counts.available.to_string()));
    align(&rows, style)
}

/// `Name:`, `Status:`, `Message:`, `AvailableAt:` and images (with the templates running
/// them), values aligned; then a table of the templates: status, replica counts and
/// ReplicaSet, and the template's message when there is one.
pub fn render_experiment_header(info: &ExperimentInfo, style: &Style) -> String {
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    let mut line = |label: &str, value: Cell| rows.push(vec![Cell::plain(label), value]);
    line("Name:", Cell::plain(&info.name));
    line("Namespace:", Cell::plain(&info.namespace));
    let (status, color) = phase_with_icon(&info.phase);
    line("Status:", Cell::colored(status, color));
    if !info.message.is_empty() {
        line("Message:", Cell::plain(&info.message));
    }
    if let Some(at) = info.available_at {
        line("AvailableAt:", Cell::plain(at.to_string()));
    }
    if info.images.is_empty() {
        line("Images:", Cell::plain(""));
    }
    for (i, image) in info.images.iter().enumerate() {
        let text = format!("{} ({})", image.image, image.templates.join(", "));
        line(if i == 0 { "Images:" } else { "" }, Cell::plain(text));
    }
    line("Templates:", Cell::plain(""));
    let mut out = align(&rows, style);

    let with_messages = info.templates.iter().any(|t| !t.message.is_empty());
    let mut header = vec![
        "  NAME",
        "STATUS",
        "DESIRED",
        "CURRENT",
        "UPDATED",
        "READY",
        "AVAILABLE",
        "REPLICASET",
    ];
    if with_messages {
        header.push("MESSAGE");
    }
    let mut table: Vec<Vec<Cell>> = vec![header.into_iter().map(Cell::plain).collect()];
    for t in &info.templates {
        let (status, color) = if t.status.is_empty() {
            (String::new(), super::style::Color::Plain)
        } else {
            status_with_icon(&t.status)
        };
        let mut row = vec![
            Cell::plain(format!("  {}", t.name)),
            Cell::colored(status, color),
            Cell::plain(t.desired.to_string()),
            Cell::plain(t.current.to_string()),
            Cell::plain(t.updated.to_string()),
            Cell::plain(t.ready.to_string()),
            Cell::plain(t.available.to_string()),
            Cell::plain(t.replica_set.clone().unwrap_or_default()),
        ];
        if with_messages {
            row.push(Cell::plain(&t.message));
        }
        table.push(row);
    }
    if !info.templates.is_empty() {
        out.push_str(&align(&table, style));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::RolloutInfo;
    use crate::info::fixtures::{canary_world, now, routed_canary_world};

    #[test]
    fn canary_header() {
        let (ro, rss, pods) = canary_world();
        let info = RolloutInfo::new(&ro, &rss, &pods, now());
        let expected = "\
Name:            demo
Namespace:       shop
Status:          ॥ Paused
Message:         CanaryPauseStep
Strategy:        Canary
  Step:          1/3
  SetWeight:     20
  ActualWeight:  20
Images:          demo:v1 (stable)
                 demo:v2 (canary)
Replicas:
  Desired:       4
  Current:       5
  Updated:       1
  Ready:         5
  Available:     5
";
        assert_eq!(render_header(&info, &Style::PLAIN), expected);
    }

    #[test]
    fn routed_canary_header_shows_the_router_weight() {
        let (ro, rss, pods) = routed_canary_world();
        let info = RolloutInfo::new(&ro, &rss, &pods, now());
        let expected = "\
Name:            demo
Namespace:       shop
Status:          ◌ Progressing
Message:         more replicas need to be updated
Strategy:        Canary
  Step:          2/3
  SetWeight:     60
  ActualWeight:  20
Images:          demo:v1 (stable)
                 demo:v2 (canary)
Replicas:
  Desired:       4
  Current:       5
  Updated:       1
  Ready:         5
  Available:     5
";
        assert_eq!(render_header(&info, &Style::PLAIN), expected);
    }

    #[test]
    fn healthy_blue_green_header_has_no_message_or_steps() {
        let ro = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "bg", "namespace": "web", "generation": 1},
            "spec": {"replicas": 2, "strategy": {"blueGreen": {"activeService": "a"}}},
            "status": {"observedGeneration": "1", "phase": "Healthy",
                       "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2}
        }))
        .unwrap();
        let info = RolloutInfo::alone(&ro, now());
        let expected = "\
Name:         bg
Namespace:    web
Status:       ✔ Healthy
Strategy:     BlueGreen
Images:
Replicas:
  Desired:    2
  Current:    2
  Updated:    2
  Ready:      2
  Available:  2
";
        assert_eq!(render_header(&info, &Style::PLAIN), expected);
    }

    #[test]
    fn experiment_header_lists_templates() {
        use crate::info::experiment::fixtures::experiment_world;
        use crate::info::fixtures::now;
        let (exp, rss, pods, runs) = experiment_world();
        let info = ExperimentInfo::new(&exp, &rss, &pods, &runs, now());
        let expected = "\
Name:         demo-exp
Namespace:    shop
Status:       ◌ Running
AvailableAt:  2024-05-01T11:59:00Z
Images:       demo:v1 (baseline)
              demo:v2 (canary)
Templates:
  NAME      STATUS         DESIRED  CURRENT  UPDATED  READY  AVAILABLE  REPLICASET         MESSAGE
  baseline  ✔ Running      1        1        1        1      1          demo-exp-baseline
  canary    ◌ Progressing  2        2        2        1      1          demo-exp-canary    waiting for 1 pod
";
        assert_eq!(render_experiment_header(&info, &Style::PLAIN), expected);
    }

    #[test]
    fn pending_experiment_header() {
        use crate::info::experiment::fixtures::experiment;
        use crate::info::fixtures::now;
        let mut exp = experiment();
        exp.status = None;
        exp.spec.templates = None;
        let info = ExperimentInfo::new::<k8s_openapi::api::apps::v1::ReplicaSet>(
            &exp,
            &[],
            &[],
            &[],
            now(),
        );
        let expected = "\
Name:       demo-exp
Namespace:  shop
Status:     ◷ Pending
Images:
Templates:
";
        assert_eq!(render_experiment_header(&info, &Style::PLAIN), expected);
    }
}
