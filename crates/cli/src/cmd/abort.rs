//! `abort`: stop the update and go back to the stable version.

use serde_json::{Value, json};

use super::{emit, merge_patch_status, rollouts};
use crate::kube_target::Target;

pub async fn run(target: &Target, name: &str) -> anyhow::Result<()> {
    merge_patch_status(&rollouts(target), name, &abort_patch()).await?;
    emit(&format!("rollout '{name}' aborted\n"))
}

/// Status merge patch that aborts.
pub fn abort_patch() -> Value {
    json!({"status": {"abort": true}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_status_abort() {
        assert_eq!(abort_patch().to_string(), r#"{"status":{"abort":true}}"#);
    }
}
