//! JSON text as Go's `encoding/json` writes it, for annotation values that must read the same
//! whichever controller wrote them.
//!
//! With fields serialized in declaration order, serde_json's compact output differs from Go's
//! only in escaping: Go also escapes `<`, `>` and `&` (as `\u003c`, `\u003e`, `\u0026`) and
//! the line and paragraph separators U+2028 and U+2029. Those characters can only occur inside
//! strings of the output, so replacing them afterwards is exact. Control characters are escaped
//! alike by both (`\b`, `\f`, `\n`, `\r`, `\t`, else `\u00xx` in lower case).

use serde::Serialize;

/// `value` as compact JSON, escaped as Go escapes it. The values serialized here (structs of
/// strings and integers, string maps) cannot fail to serialize.
pub(crate) fn to_string<T: Serialize>(value: &T) -> String {
    let text = serde_json::to_string(value).unwrap_or_default();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn escapes_as_go_does() {
        let cases = [
            ("plain", r#""plain""#),
            ("a<b>&c", r#""a\u003cb\u003e\u0026c""#),
            ("line\u{2028}para\u{2029}", r#""line\u2028para\u2029""#),
            ("q\"b\\s/", r#""q\"b\\s/""#),
            ("\n\r\t\u{8}\u{c}", r#""\n\r\t\b\f""#),
            ("\u{1}\u{1f}\u{7f}", "\"\\u0001\\u001f\u{7f}\""),
            ("ünï", "\"ünï\""),
        ];
        for (input, want) in cases {
            assert_eq!(to_string(&input), want, "{input:?}");
        }
    }

    #[test]
    fn maps_are_compact_with_sorted_keys() {
        let map = BTreeMap::from([("b", vec!["x"]), ("a", vec![])]);
        assert_eq!(to_string(&map), r#"{"a":[],"b":["x"]}"#);
    }
}
