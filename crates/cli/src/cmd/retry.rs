//! `retry rollout`: start an aborted update again.

use serde_json::{Value, json};

use super::{emit, merge_patch_status, rollouts};
use crate::kube_target::Target;

pub async fn run(target: &Target, name: &str) -> anyhow::Result<()> {
    merge_patch_status(&rollouts(target), name, &retry_patch()).await?;
    emit(&format!("rollout '{name}' retried\n"))
}

/// Status merge patch that lifts an abort.
pub fn retry_patch() -> Value {
    json!({"status": {"abort": false}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clears_status_abort() {
        assert_eq!(retry_patch().to_string(), r#"{"status":{"abort":false}}"#);
    }
}
