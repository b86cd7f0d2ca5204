//! A `setHeaderRoute` match as APISIX route expressions.

use serde_json::{Value, json};
use sluice_api::rollout::HeaderRoutingMatch;

use crate::RouterError;

/// One `match.exprs` entry per header condition, in the step's order; APISIX requires all of
/// them to hold. An exact value compares with `Equal`, a regex with `RegexMatch`, and a prefix
/// with `RegexMatch` on `^<prefix>.*`. The prefix is not escaped, as in Argo, so that the route
/// is the one Argo writes; a prefix with regex metacharacters matches as a regex. When several
/// of exact, regex and prefix are set (validation refuses that), the first of them in that
/// order wins; empty strings count as unset.
pub(super) fn header_exprs(matches: &[HeaderRoutingMatch]) -> Result<Vec<Value>, RouterError> {
    matches
        .iter()
        .map(|m| {
            let name = m
                .header_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .ok_or_else(|| RouterError::new("SetHeaderRoute match has no headerName"))?;
            let value = m.header_value.as_ref();
            let (op, value) = if let Some(exact) = value.and_then(|v| set(&v.exact)) {
                ("Equal", exact.to_string())
            } else if let Some(regex) = value.and_then(|v| set(&v.regex)) {
                ("RegexMatch", regex.to_string())
            } else if let Some(prefix) = value.and_then(|v| set(&v.prefix)) {
                ("RegexMatch", format!("^{prefix}.*"))
            } else {
                return Err(RouterError::new(
                    "StringMatch value missed, match value must have one of the following: \
                     exact, regex, prefix",
                ));
            };
            Ok(json!({
                "subject": {"scope": "Header", "name": name},
                "op": op,
                "value": value,
            }))
        })
        .collect()
}

/// The value when set and not empty.
fn set(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use sluice_api::rollout::StringMatch;

    use super::*;

    fn header(name: &str, exact: &str, regex: &str, prefix: &str) -> HeaderRoutingMatch {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        HeaderRoutingMatch {
            header_name: opt(name),
            header_value: Some(StringMatch {
                exact: opt(exact),
                regex: opt(regex),
                prefix: opt(prefix),
            }),
        }
    }

    fn expr(name: &str, op: &str, value: &str) -> Value {
        json!({"subject": {"scope": "Header", "name": name}, "op": op, "value": value})
    }

    #[test]
    fn one_expression_per_condition() {
        let got = header_exprs(&[
            header("trace", "debug", "", ""),
            header("agent", "", "^Mozilla/5\\.0.*", ""),
            header("version", "", "", "v2"),
        ]);
        assert_eq!(
            got,
            Ok(vec![
                expr("trace", "Equal", "debug"),
                expr("agent", "RegexMatch", "^Mozilla/5\\.0.*"),
                expr("version", "RegexMatch", "^v2.*"),
            ])
        );
        assert_eq!(header_exprs(&[]), Ok(vec![]));
    }

    #[test]
    fn first_set_value_wins() {
        let cases = [
            (header("h", "e", "r", "p"), expr("h", "Equal", "e")),
            (header("h", "", "r", "p"), expr("h", "RegexMatch", "r")),
            (
                header("h", "", "", "p.q"),
                expr("h", "RegexMatch", "^p.q.*"),
            ),
        ];
        for (m, want) in cases {
            assert_eq!(
                header_exprs(std::slice::from_ref(&m)),
                Ok(vec![want]),
                "{m:?}"
            );
        }
    }

    #[test]
    fn incomplete_conditions_are_errors() {
        let missed = Err(RouterError::new(
            "StringMatch value missed, match value must have one of the following: exact, \
             regex, prefix",
        ));
        let no_value = HeaderRoutingMatch {
            header_name: Some("h".into()),
            header_value: None,
        };
        let cases = [
            (header("h", "", "", ""), missed.clone()),
            (no_value, missed),
            (
                header("", "e", "", ""),
                Err(RouterError::new("SetHeaderRoute match has no headerName")),
            ),
        ];
        for (m, want) in cases {
            assert_eq!(header_exprs(std::slice::from_ref(&m)), want, "{m:?}");
        }
    }
}
