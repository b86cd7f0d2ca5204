//! Go's `time.ParseDuration` syntax for flags (`15s`, `1m30s`, `500ms`, `0.5h`), which Argo
//! Rollouts' manifests use for the leader-election settings.

use std::time::Duration;

/// Parses a non-negative Go duration. As in Go, every number needs a unit except a bare `0`.
pub fn parse_go_duration(input: &str) -> Result<Duration, String> {
    let s = input.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.is_empty() {
        return Err(format!("invalid duration {input:?}"));
    }
    if s.starts_with('-') {
        return Err(format!("duration {input:?} must not be negative"));
    }
    let mut rest = s;
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let nanos_per_unit: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("missing unit in duration {input:?}")),
            other => return Err(format!("unknown unit {other:?} in duration {input:?}")),
        };
        total_nanos +=
            scaled(number, nanos_per_unit).ok_or_else(|| format!("invalid duration {input:?}"))?;
        rest = tail;
    }
    let secs = u64::try_from(total_nanos / 1_000_000_000)
        .map_err(|_| format!("duration {input:?} is too long"))?;
    Ok(Duration::new(secs, (total_nanos % 1_000_000_000) as u32))
}

/// `number` (decimal, with an optional fraction) times `unit` nanoseconds, exactly (fractions
/// of a nanosecond are dropped, as Go does).
fn scaled(number: &str, unit: u128) -> Option<u128> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let digits_ok = |d: &str| d.chars().all(|c| c.is_ascii_digit());
    if !digits_ok(whole) || !digits_ok(fraction) {
        return None;
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut value = whole.checked_mul(unit)?;
    let mut scale = unit;
    for digit in fraction.chars().take(30) {
        scale /= 10;
        value += u128::from(digit.to_digit(10)?) * scale;
    }
    Some(value)
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
