//! Status icons and colours. Colour is plain ANSI, used only when asked for (a terminal and
//! no `--no-color`), so piped output stays clean text.

/// Colour of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Color {
    Plain,
    Green,
    Yellow,
    Red,
    Gray,
}

impl Color {
    fn ansi_code(self) -> Option<&'static str> {
        match self {
            Color::Plain => None,
            Color::Green => Some("32"),
            Color::Yellow => Some("33"),
            Color::Red => Some("31"),
            Color::Gray => Some("90"),
        }
    }
}

/// Whether output is coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
}

impl Style {
    pub const PLAIN: Style = Style { color: false };

    /// `text` in `color`, or as is without colour.
    pub fn paint(&self, text: &str, color: Color) -> String {
        match color.ansi_code() {
            Some(code) if self.color && !text.is_empty() => format!("\x1b[{code}m{text}\x1b[0m"),
            _ => text.to_owned(),
        }
    }
}

pub const ICON_OK: &str = "✔";
pub const ICON_PROGRESSING: &str = "◌";
pub const ICON_PAUSED: &str = "॥";
pub const ICON_BAD: &str = "✖";
pub const ICON_WARNING: &str = "⚠";
pub const ICON_WAITING: &str = "◷";
pub const ICON_NEUTRAL: &str = "•";
pub const ICON_UNKNOWN: &str = "?";

pub const ICON_ROLLOUT: &str = "⟳";
pub const ICON_REPLICA_SET: &str = "⧉";
pub const ICON_POD: &str = "□";
pub const ICON_ANALYSIS_RUN: &str = "α";
pub const ICON_EXPERIMENT: &str = "Σ";

/// Icon and colour for a status word of a Rollout, ReplicaSet or pod.
pub fn status_icon(status: &str) -> (&'static str, Color) {
    match status {
        "Healthy" | "Successful" | "Running" | "Completed" | "Succeeded" => (ICON_OK, Color::Green),
        "Progressing" | "ContainerCreating" | "PodInitializing" | "Terminating" => {
            (ICON_PROGRESSING, Color::Yellow)
        }
        "Paused" => (ICON_PAUSED, Color::Gray),
        "Pending" => (ICON_WAITING, Color::Yellow),
        "Inconclusive" => (ICON_WARNING, Color::Yellow),
        "ScaledDown" => (ICON_NEUTRAL, Color::Plain),
        "Unknown" => (ICON_UNKNOWN, Color::Plain),
        "Degraded" | "Failed" | "Error" => (ICON_BAD, Color::Red),
        // `Init:1/2` is progress; `Init:CrashLoopBackOff` and the like are failures.
        other if is_init_progress(other) => (ICON_PROGRESSING, Color::Yellow),
        other if is_failure_reason(other) => (ICON_BAD, Color::Red),
        _ => (ICON_UNKNOWN, Color::Plain),
    }
}

/// `Init:<done>/<total>`.
fn is_init_progress(status: &str) -> bool {
    let counts = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    status
        .strip_prefix("Init:")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(done, total)| counts(done) && counts(total))
}

/// Container waiting or termination reasons that mean something went wrong.
fn is_failure_reason(reason: &str) -> bool {
    let reason = reason.strip_prefix("Init:").unwrap_or(reason);
    reason.contains("Err")
        || reason.contains("BackOff")
        || reason.contains("Error")
        || reason.contains("Invalid")
        || reason.starts_with("ExitCode:")
        || reason.starts_with("Signal:")
        || matches!(
            reason,
            "OOMKilled" | "Evicted" | "DeadlineExceeded" | "NodeLost"
        )
}

/// Icon and colour for the phase of an AnalysisRun or Experiment: as [`status_icon`], except
/// that a run still going is in progress (a pod that runs is fine, an analysis that runs has
/// not decided yet).
pub fn phase_icon(phase: &str) -> (&'static str, Color) {
    match phase {
        "Running" => (ICON_PROGRESSING, Color::Yellow),
        other => status_icon(other),
    }
}

/// `icon phase` of an AnalysisRun or Experiment, e.g. `◌ Running`.
pub fn phase_with_icon(phase: &str) -> (String, Color) {
    let (icon, color) = phase_icon(phase);
    (format!("{icon} {phase}"), color)
}

/// `icon status`, e.g. `✔ Healthy`.
pub fn status_with_icon(status: &str) -> (String, Color) {
    let (icon, color) = status_icon(status);
    (format!("{icon} {status}"), color)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icons_by_status() {
        let icon = |s| status_icon(s).0;
        assert_eq!(icon("Healthy"), "✔");
        assert_eq!(icon("Running"), "✔");
        assert_eq!(icon("Progressing"), "◌");
        assert_eq!(icon("Paused"), "॥");
        assert_eq!(icon("Degraded"), "✖");
        assert_eq!(icon("ScaledDown"), "•");
        assert_eq!(icon("Pending"), "◷");
        assert_eq!(icon("Inconclusive"), "⚠");
        assert_eq!(icon("Init:0/1"), "◌");
        assert_eq!(icon("Init:ErrImagePull"), "✖");
        assert_eq!(icon("CrashLoopBackOff"), "✖");
        assert_eq!(icon("ImagePullBackOff"), "✖");
        assert_eq!(icon("ExitCode:1"), "✖");
        assert_eq!(icon("SomethingNew"), "?");
        assert_eq!(phase_icon("Running").0, "◌");
        assert_eq!(phase_icon("Successful").0, "✔");
        assert_eq!(phase_icon("Failed").0, "✖");
        assert_eq!(phase_with_icon("Pending").0, "◷ Pending");
    }

    #[test]
    fn paint_only_with_color() {
        assert_eq!(Style::PLAIN.paint("x", Color::Red), "x");
        let colored = Style { color: true };
        assert_eq!(colored.paint("x", Color::Red), "\x1b[31mx\x1b[0m");
        assert_eq!(colored.paint("x", Color::Plain), "x");
        assert_eq!(colored.paint("", Color::Red), "");
    }
}
