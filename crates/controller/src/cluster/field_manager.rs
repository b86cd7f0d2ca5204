//! How the controller names itself on the objects it writes (`metadata.managedFields`).

use kube::api::PostParams;

/// Field manager recorded on every write.
pub const FIELD_MANAGER: &str = "sluice-controller";

/// Create and replace options naming the field manager.
pub(super) fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    }
}
