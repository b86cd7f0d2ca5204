//! Schema helpers for fields whose content is defined by someone else (plugins, request bodies).

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

/// Schema stand-in for a free-form JSON object that the API server must store as given.
/// Used with `#[schemars(with = "Option<FreeFormObject>")]` on `serde_json::Value` or map fields.
pub(crate) struct FreeFormObject;

impl JsonSchema for FreeFormObject {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FreeFormObject".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        })
    }
}
