//! Durations as Argo reads them: Go `time.ParseDuration` strings (`30s`, `1h30m`, `1.5h`) and the
//! int-or-string pause duration of a canary step.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Why a duration string was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("invalid duration {0:?}")]
    Invalid(String),
    #[error("missing unit in duration {0:?}")]
    MissingUnit(String),
    #[error("unknown unit {unit:?} in duration {input:?}")]
    UnknownUnit { unit: String, input: String },
    #[error("negative duration {0:?}")]
    Negative(String),
}

const NANOS_PER_SECOND: u64 = 1_000_000_000;
/// Go durations are int64 nanoseconds; magnitudes are checked against 2^63 as Go does.
const LIMIT: u64 = 1 << 63;

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        // Go accepts both the micro sign (U+00B5) and the Greek small letter mu (U+03BC).
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SECOND,
        "m" => 60 * NANOS_PER_SECOND,
        "h" => 3_600 * NANOS_PER_SECOND,
        _ => return None,
    })
}

/// Parses a Go duration string into signed nanoseconds, with the rules of Go's
/// `time.ParseDuration`: an optional sign, then one or more `<number><unit>` parts where the
/// number may have a fraction (`1.5h`, `.5s`, `2.m`), units `ns us µs ms s m h`, and `0` as the
/// only unit-less value. Values beyond the int64 nanosecond range are rejected.
pub fn parse_go_duration_nanos(input: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError::Invalid(input.to_owned());
    let (negative, mut rest) = match input.as_bytes().first() {
        Some(b'-') => (true, &input[1..]),
        Some(b'+') => (false, &input[1..]),
        _ => (false, input),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let first = rest.as_bytes()[0];
        if first != b'.' && !first.is_ascii_digit() {
            return Err(invalid());
        }
        let (whole, after_whole) = leading_int(rest).ok_or_else(invalid)?;
        let had_whole = after_whole.len() != rest.len();
        rest = after_whole;
        let (mut fraction, mut scale, mut had_fraction) = (0, 1.0, false);
        if let Some(after_dot) = rest.strip_prefix('.') {
            let (f, s, after_fraction) = leading_fraction(after_dot);
            (fraction, scale) = (f, s);
            had_fraction = after_fraction.len() != after_dot.len();
            rest = after_fraction;
        }
        if !had_whole && !had_fraction {
            return Err(invalid());
        }
        let unit_len = rest
            .bytes()
            .position(|c| c == b'.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        if unit_len == 0 {
            return Err(DurationError::MissingUnit(input.to_owned()));
        }
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let unit = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            unit: unit.to_owned(),
            input: input.to_owned(),
        })?;
        if whole > LIMIT / unit {
            return Err(invalid());
        }
        let mut part = whole * unit;
        if fraction > 0 {
            // Go scales the fraction in float64, which is exact to the nanosecond for hours.
            part += (fraction as f64 * (unit as f64 / scale)) as u64;
            if part > LIMIT {
                return Err(invalid());
            }
        }
        total += part;
        if total > LIMIT {
            return Err(invalid());
        }
    }
    if negative {
        // total <= 2^63, so the negation fits in an i64.
        return Ok((-i128::from(total)) as i64);
    }
    i64::try_from(total).map_err(|_| invalid())
}

/// Parses a Go duration string (see [`parse_go_duration_nanos`]) that must not be negative.
/// `-0` is accepted as zero.
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let nanos = parse_go_duration_nanos(input)?;
    let nanos = u64::try_from(nanos).map_err(|_| DurationError::Negative(input.to_owned()))?;
    Ok(Duration::from_nanos(nanos))
}

/// The length of a canary `pause.duration`: an integer is seconds, a string holding a base-10
/// integer is seconds, anything else is a Go duration. Argo counts pause time in whole seconds,
/// so a fractional duration is truncated (`1500ms` is one second). Negative values are rejected.
pub fn pause_duration(value: &IntOrString) -> Result<Duration, DurationError> {
    let seconds = match value {
        IntOrString::Int(seconds) => i64::from(*seconds),
        IntOrString::String(text) => match text.parse::<i32>() {
            Ok(seconds) => i64::from(seconds),
            Err(_) => {
                let parsed = parse_go_duration(text)?;
                return Ok(Duration::from_secs(parsed.as_secs()));
            }
        },
    };
    let seconds = u64::try_from(seconds).map_err(|_| {
        DurationError::Negative(match value {
            IntOrString::Int(n) => n.to_string(),
            IntOrString::String(s) => s.clone(),
        })
    })?;
    Ok(Duration::from_secs(seconds))
}

/// Consumes leading ASCII digits; `None` when the value exceeds 2^63.
fn leading_int(s: &str) -> Option<(u64, &str)> {
    let mut value: u64 = 0;
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    for c in s.bytes().take(digits) {
        if value > LIMIT / 10 {
            return None;
        }
        value = value * 10 + u64::from(c - b'0');
        if value > LIMIT {
            return None;
        }
    }
    Some((value, &s[digits..]))
}

/// Consumes leading ASCII digits of a fraction, returning the digits kept and their scale.
/// Digits beyond what fits are dropped, as Go does.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let mut value: u64 = 0;
    let mut scale = 1.0;
    let mut overflow = false;
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    for c in s.bytes().take(digits) {
        if overflow {
            continue;
        }
        if value > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let next = value * 10 + u64::from(c - b'0');
        if next > LIMIT {
            overflow = true;
            continue;
        }
        value = next;
        scale *= 10.0;
    }
    (value, scale, &s[digits..])
}

/// A duration of `nanos` nanoseconds as Go prints a `time.Duration` (`1h2m3s`, `1.5s`,
/// `250ms`, `0s`).
pub fn format_go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000_000_000 {
        let (unit, div) = match n {
            0..1_000 => ("ns", 1),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{sign}{}{unit}", fraction(n, div));
    }
    let (h, rest) = (n / 3_600_000_000_000, n % 3_600_000_000_000);
    let (m, s) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let secs = format!("{}s", fraction(s, 1_000_000_000));
    match (h, m) {
        (0, 0) => format!("{sign}{secs}"),
        (0, m) => format!("{sign}{m}m{secs}"),
        (h, m) => format!("{sign}{h}h{m}m{secs}"),
    }
}

fn fraction(n: u64, div: u64) -> String {
    let (whole, rest) = (n / div, n % div);
    if rest == 0 {
        return whole.to_string();
    }
    let width = div.ilog10() as usize;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nanos(s: &str) -> i64 {
        parse_go_duration_nanos(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    const SEC: i64 = 1_000_000_000;

    #[test]
    fn simple_units() {
        assert_eq!(nanos("0"), 0);
        assert_eq!(nanos("5s"), 5 * SEC);
        assert_eq!(nanos("30s"), 30 * SEC);
        assert_eq!(nanos("1478s"), 1478 * SEC);
        assert_eq!(nanos("10ns"), 10);
        assert_eq!(nanos("11us"), 11_000);
        assert_eq!(nanos("12µs"), 12_000);
        assert_eq!(nanos("12μs"), 12_000);
        assert_eq!(nanos("13ms"), 13_000_000);
        assert_eq!(nanos("14s"), 14 * SEC);
        assert_eq!(nanos("15m"), 15 * 60 * SEC);
        assert_eq!(nanos("16h"), 16 * 3600 * SEC);
    }

    #[test]
    fn signs_and_zero() {
        assert_eq!(nanos("-5s"), -5 * SEC);
        assert_eq!(nanos("+5s"), 5 * SEC);
        assert_eq!(nanos("-0"), 0);
        assert_eq!(nanos("+0"), 0);
        assert_eq!(nanos("0s"), 0);
        assert_eq!(nanos("0.0s"), 0);
    }

    #[test]
    fn compound_and_fractions() {
        assert_eq!(nanos("3h30m"), (3 * 3600 + 30 * 60) * SEC);
        assert_eq!(nanos("1h30m"), 5400 * SEC);
        assert_eq!(nanos("10.5s4m"), 4 * 60 * SEC + 10 * SEC + SEC / 2);
        assert_eq!(nanos("-2m3.4s"), -(2 * 60 * SEC + 3 * SEC + 4 * SEC / 10));
        assert_eq!(nanos("1h2m3s4ms5us6ns"), 3723 * SEC + 4_005_006);
        assert_eq!(nanos("39h9m14.425s"), 140_954_425_000_000);
        assert_eq!(nanos("5.s"), 5 * SEC);
        assert_eq!(nanos(".5s"), SEC / 2);
        assert_eq!(nanos("1.0s"), SEC);
        assert_eq!(nanos("1.00s"), SEC);
        assert_eq!(nanos("1.004s"), SEC + 4_000_000);
        assert_eq!(nanos("100.00100s"), 100 * SEC + 1_000_000);
        assert_eq!(nanos("52763797000ns"), 52_763_797_000);
        // Fractions are exact to the nanosecond for hours.
        assert_eq!(nanos("0.3333333333333333333h"), 1_200_000_000_000);
        // Fraction digits beyond int64 precision are dropped, not rejected.
        assert_eq!(nanos("0.100000000000000000000h"), 360 * SEC);
        assert_eq!(nanos("0.830103483285477580700h"), 2_988_372_539_827);
    }

    #[test]
    fn int64_limits() {
        assert_eq!(nanos("9223372036854775807ns"), i64::MAX);
        assert_eq!(nanos("-9223372036854775808ns"), i64::MIN);
        assert_eq!(nanos("9223372036854775.807us"), i64::MAX);
        assert_eq!(nanos("2562047h47m16.854775807s"), i64::MAX);
        assert_eq!(nanos("-2562047h47m16.854775808s"), i64::MIN);
    }

    #[test]
    fn rejected_inputs() {
        for bad in [
            "",
            "3",
            "-",
            "s",
            ".",
            "-.",
            ".s",
            "+.s",
            "1d",
            "1.5",
            "1s ",
            " 1s",
            "1 s",
            "\u{1}",
            "9223372036854775808ns",
            "9223372036854775810ns",
            "-9223372036854775809ns",
            "9223372036854775.808us",
            "2562047h47m16.854775808s",
            "-2562047h47m16.854775809s",
            "3000000h",
        ] {
            assert!(parse_go_duration_nanos(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            parse_go_duration_nanos("3"),
            Err(DurationError::MissingUnit("3".into()))
        );
        assert_eq!(
            parse_go_duration_nanos("1d"),
            Err(DurationError::UnknownUnit {
                unit: "d".into(),
                input: "1d".into()
            })
        );
    }

    #[test]
    fn unsigned_parse_rejects_negative() {
        assert_eq!(parse_go_duration("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_go_duration("-0").unwrap(), Duration::ZERO);
        assert_eq!(
            parse_go_duration("-1s"),
            Err(DurationError::Negative("-1s".into()))
        );
        assert_eq!(
            parse_go_duration("250ms").unwrap(),
            Duration::from_millis(250)
        );
    }

    #[test]
    fn pause_durations() {
        let int = |n| pause_duration(&IntOrString::Int(n));
        let text = |s: &str| pause_duration(&IntOrString::String(s.into()));
        assert_eq!(int(30).unwrap(), Duration::from_secs(30));
        assert_eq!(int(0).unwrap(), Duration::ZERO);
        assert!(int(-1).is_err());
        assert_eq!(text("30").unwrap(), Duration::from_secs(30));
        assert_eq!(text("+30").unwrap(), Duration::from_secs(30));
        assert!(text("-30").is_err());
        assert_eq!(text("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(text("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(text("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(text("1500ms").unwrap(), Duration::from_secs(1));
        assert!(text("").is_err());
        assert!(text("soon").is_err());
        assert!(text("-5s").is_err());
    }

    #[test]
    fn durations_print_as_go_prints_them() {
        for (nanos, out) in [
            (0, "0s"),
            (1_500_000_000, "1.5s"),
            (90_000_000_000, "1m30s"),
            (3_723_000_000_000, "1h2m3s"),
            (-2_000_000_000, "-2s"),
            (1_500_000, "1.5ms"),
            (7, "7ns"),
        ] {
            assert_eq!(format_go_duration(nanos), out);
        }
    }
}
