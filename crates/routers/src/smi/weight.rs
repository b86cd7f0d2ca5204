//! Backend weights in both forms TrafficSplit versions use: a Quantity string (`"10"`) in
//! v1alpha1, an integer later.

use serde_json::Value;

/// The weight as the given version writes it.
pub(super) fn weight_value(weight: i32, quantity: bool) -> Value {
    if quantity {
        Value::String(weight.to_string())
    } else {
        Value::from(weight)
    }
}

/// A weight read back in either form. Quantity strings may be plain numbers, decimals
/// (rounded) or milli-units (`"500m"`); anything else is `None`.
pub(super) fn parse_weight(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().and_then(round)),
        Value::String(s) => {
            let s = s.trim();
            if let Some(milli) = s.strip_suffix('m') {
                return milli.parse::<f64>().ok().and_then(|m| round(m / 1000.0));
            }
            s.parse::<i64>()
                .ok()
                .or_else(|| s.parse::<f64>().ok().and_then(round))
        }
        _ => None,
    }
}

/// A finite float rounded to the nearest integer, when it fits.
fn round(f: f64) -> Option<i64> {
    let r = f.round();
    // i32 is ample for a weight; larger values are not weights.
    (r.is_finite() && r.abs() <= f64::from(i32::MAX)).then_some(r as i64)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn both_forms_round_trip() {
        assert_eq!(weight_value(10, true), json!("10"));
        assert_eq!(weight_value(10, false), json!(10));
        let cases = [
            (json!("10"), Some(10)),
            (json!(" 7 "), Some(7)),
            (json!(10), Some(10)),
            (json!(10.0), Some(10)),
            (json!("2.5"), Some(3)),
            (json!("500m"), Some(1)),
            (json!("90000m"), Some(90)),
            (json!("1e99"), None),
            (json!("ten"), None),
            (json!(null), None),
            (json!([10]), None),
        ];
        for (value, want) in cases {
            assert_eq!(parse_weight(&value), want, "{value}");
        }
    }
}
