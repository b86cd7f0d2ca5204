//! A base Mapping must leave the weight to its canary copy.

use serde_json::Value;

use super::name_of;
use crate::RouterError;

/// The reference validation of a base Mapping, also checked before its canary copy is
/// created: a base that defines a weight would split traffic on its own, so it is refused
/// with Argo's `Ambassador mapping "<base>" can not define weight`. A weight of 0 (or null)
/// reads as undefined, as it does in Argo.
pub fn check_base(base: &Value) -> Result<(), RouterError> {
    match base.pointer("/spec/weight") {
        None | Some(Value::Null) => Ok(()),
        Some(w) if w.as_i64() == Some(0) => Ok(()),
        Some(_) => Err(RouterError::new(format!(
            "Ambassador mapping {:?} can not define weight",
            name_of(base)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ambassador::fixtures::base_mapping;

    #[test]
    fn weight_is_refused() {
        let with = |weight: Value| {
            let mut base = base_mapping();
            base["spec"]["weight"] = weight;
            base
        };
        let refused = Err(RouterError::new(
            "Ambassador mapping \"echo\" can not define weight",
        ));
        let cases = [
            (base_mapping(), Ok(())),
            (with(Value::Null), Ok(())),
            (with(json!(0)), Ok(())),
            (with(json!(10)), refused.clone()),
            (with(json!("10")), refused.clone()),
            (with(json!(-1)), refused),
            (json!({}), Ok(())),
            (json!("junk"), Ok(())),
        ];
        for (base, want) in cases {
            assert_eq!(check_base(&base), want, "{base}");
        }
    }
}
