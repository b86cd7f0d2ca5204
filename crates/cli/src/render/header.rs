//! The summary block at the top of `get rollout`.

use super::columns::{Cell, align};
use super::style::{Style, status_with_icon};
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
        let info = RolloutInfo::new(&ro, &[], &[], now());
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
}
