//! Go duration strings, well and badly formed.

use proptest::prelude::*;

/// A string `time.ParseDuration` may or may not accept.
pub fn go_duration() -> impl Strategy<Value = String> {
    let unit = prop::sample::select(vec![
        "ns", "us", "µs", "μs", "ms", "s", "m", "h", "d", "", "S",
    ]);
    let number = prop_oneof![
        4 => (0u64..1000).prop_map(|n| n.to_string()),
        1 => Just("1.5".to_string()),
        1 => Just(".5".to_string()),
        1 => Just("5.".to_string()),
        1 => Just("9223372036854775807".to_string()),
        1 => Just("99999999999".to_string()),
        1 => Just("0.000000001".to_string()),
        1 => Just(".".to_string()),
    ];
    let part = (number, unit).prop_map(|(n, u)| format!("{n}{u}"));
    (
        prop::sample::select(vec!["", "", "", "-", "+", " "]),
        prop::collection::vec(part, 0..4),
    )
        .prop_map(|(sign, parts)| format!("{sign}{}", parts.concat()))
}
