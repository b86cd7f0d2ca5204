//! `pause` and `resume`: the user's own pause, `spec.paused`.

use serde_json::{Value, json};

use super::{emit, merge_patch, rollouts};
use crate::kube_target::Target;

pub async fn run(target: &Target, name: &str, paused: bool) -> anyhow::Result<()> {
    merge_patch(&rollouts(target), name, &paused_patch(paused)).await?;
    let done = if paused { "paused" } else { "resumed" };
    emit(&format!("rollout '{name}' {done}\n"))
}

/// Merge patch setting `spec.paused`.
pub fn paused_patch(paused: bool) -> Value {
    json!({"spec": {"paused": paused}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_spec_paused() {
        assert_eq!(
            paused_patch(true).to_string(),
            r#"{"spec":{"paused":true}}"#
        );
        assert_eq!(
            paused_patch(false).to_string(),
            r#"{"spec":{"paused":false}}"#
        );
    }
}
