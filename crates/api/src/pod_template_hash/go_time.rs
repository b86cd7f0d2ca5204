//! `metav1.Time` in JSON: parsed as RFC 3339, written back in UTC with whole seconds.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::{Offset, TimeZone};

/// Why a time string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an RFC 3339 time Go can read back: {0}")]
pub struct TimeError(String);

/// Go's JSON for a `metav1.Time` given as `text`: `null` for the zero time (year 1),
/// otherwise the quoted UTC time without fractional seconds.
pub fn go_json(text: &str) -> Result<String, TimeError> {
    let ts = parse_rfc3339(text).ok_or_else(|| TimeError(text.to_owned()))?;
    let utc = TimeZone::UTC.to_datetime(ts);
    if utc == DateTime::constant(1, 1, 1, 0, 0, 0, 0) {
        return Ok("null".to_owned());
    }
    if !(0..=9999).contains(&utc.year()) {
        return Err(TimeError(text.to_owned()));
    }
    Ok(format!(
        "\"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z\"",
        utc.year(),
        utc.month(),
        utc.day(),
        utc.hour(),
        utc.minute(),
        utc.second()
    ))
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, as Go's `time.Parse(time.RFC3339, ...)`.
fn parse_rfc3339(text: &str) -> Option<Timestamp> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i32> {
        let digits = b.get(range)?;
        digits.iter().all(u8::is_ascii_digit).then(|| {
            digits
                .iter()
                .fold(0, |acc, d| acc * 10 + i32::from(d - b'0'))
        })
    };
    let lit = |at: usize, c: u8| b.get(at) == Some(&c);
    if !(lit(4, b'-') && lit(7, b'-') && lit(10, b'T') && lit(13, b':') && lit(16, b':')) {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut pos = 19;
    let mut nanos = 0i32;
    if matches!(b.get(pos), Some(b'.' | b',')) {
        let start = pos + 1;
        let mut end = start;
        while b.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        if end == start {
            return None;
        }
        // Go keeps nanoseconds; finer digits are dropped. The output has whole seconds,
        // so only the zero-time check looks at this.
        for i in 0..9 {
            let d = b
                .get(start + i)
                .filter(|_| start + i < end)
                .map_or(0, |d| d - b'0');
            nanos = nanos * 10 + i32::from(d);
        }
        pos = end;
    }
    let offset_seconds = match &b[pos..] {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let hours = i32::from((h1 - b'0') * 10 + (h2 - b'0'));
            let minutes = i32::from((m1 - b'0') * 10 + (m2 - b'0'));
            if hours > 23 || minutes > 59 {
                return None;
            }
            let seconds = hours * 3600 + minutes * 60;
            if *sign == b'-' { -seconds } else { seconds }
        }
        _ => return None,
    };
    let civil = DateTime::new(
        i16::try_from(year).ok()?,
        i8::try_from(month).ok()?,
        i8::try_from(day).ok()?,
        i8::try_from(hour).ok()?,
        i8::try_from(minute).ok()?,
        i8::try_from(second).ok()?,
        nanos,
    )
    .ok()?;
    let offset = Offset::from_seconds(offset_seconds).ok()?;
    offset.to_timestamp(civil).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_whole_seconds() {
        assert_eq!(
            go_json("2024-05-06T07:08:09Z").unwrap(),
            "\"2024-05-06T07:08:09Z\""
        );
        assert_eq!(
            go_json("2024-05-06T07:08:09.999999999Z").unwrap(),
            "\"2024-05-06T07:08:09Z\""
        );
        assert_eq!(
            go_json("2024-01-01T01:30:00+02:00").unwrap(),
            "\"2023-12-31T23:30:00Z\""
        );
    }

    #[test]
    fn zero_time_is_null() {
        assert_eq!(go_json("0001-01-01T00:00:00Z").unwrap(), "null");
        assert_eq!(
            go_json("0001-01-01T00:00:00.5Z").unwrap(),
            "\"0001-01-01T00:00:00Z\""
        );
    }

    #[test]
    fn rejects_non_rfc3339() {
        for bad in [
            "",
            "2024-05-06",
            "2024-05-06 07:08:09Z",
            "2024-05-06T07:08:09",
            "2024-02-30T00:00:00Z",
            "2024-05-06T24:00:00Z",
            "2024-05-06T07:08:09+24:00",
            "2024-05-06T07:08:09.Z",
        ] {
            assert!(go_json(bad).is_err(), "{bad}");
        }
    }
}
