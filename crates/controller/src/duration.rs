//! Go's `time.ParseDuration` syntax for flags (`15s`, `1m30s`, `500ms`, `0.5h`), which Argo
//! Rollouts' manifests use for the leader-election settings. The syntax is
//! [`sluice_api::duration`]'s; flags add only surrounding whitespace and a refusal of any sign
//! of negativity (`-0s` included).

use std::time::Duration;

/// Parses a non-negative Go duration. As in Go, every number needs a unit except a bare `0`.
pub fn parse_go_duration(input: &str) -> Result<Duration, String> {
    let s = input.trim();
    if s.starts_with('-') {
        return Err(format!("duration {input:?} must not be negative"));
    }
    sluice_api::duration::parse_go_duration(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_syntax() {
        let ok = [
            ("15s", Duration::from_secs(15)),
            ("0", Duration::ZERO),
            ("1m30s", Duration::from_secs(90)),
            ("500ms", Duration::from_millis(500)),
            ("1.5s", Duration::from_millis(1500)),
            ("2h", Duration::from_secs(7200)),
            ("100us", Duration::from_micros(100)),
            ("+3s", Duration::from_secs(3)),
        ];
        for (s, want) in ok {
            assert_eq!(parse_go_duration(s), Ok(want), "{s}");
        }
        for bad in ["", "15", "-1s", "1x", "s", "1..2s"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
