//! Go's `time` as templates and conditions meet it: `time.Now()` and `time.Parse()` (the
//! notifications engine's `time` helpers), sprig's date functions, and Go layouts
//! (`2006-01-02T15:04:05Z07:00`).
//!
//! Decisions stay pure: "now" is the time the caller evaluates at, never the machine's clock.
//! A condition gets it as a variable; a template's functions (plain function pointers) read it
//! from [`at`]'s scope.

use std::cell::Cell;

use expr::{Context, Value};
use jiff::Timestamp;

thread_local! {
    static NOW: Cell<Timestamp> = const { Cell::new(Timestamp::UNIX_EPOCH) };
}

/// Runs `f` with "now" being `now` (for the template functions `now` and `.time.Now`).
pub fn at<T>(now: Timestamp, f: impl FnOnce() -> T) -> T {
    let before = NOW.replace(now);
    let out = f();
    NOW.set(before);
    out
}

/// "Now" in [`at`]'s scope.
pub fn now() -> Timestamp {
    NOW.get()
}

/// A time as Go prints a `time.Time` (`2006-01-02 15:04:05.999999999 -0700 MST`), in UTC.
pub fn go_string(t: Timestamp) -> String {
    let frac = t.subsec_nanosecond();
    let base = t.strftime("%Y-%m-%d %H:%M:%S").to_string();
    if frac == 0 {
        format!("{base} +0000 UTC")
    } else {
        let digits = format!("{frac:09}");
        format!("{base}.{} +0000 UTC", digits.trim_end_matches('0'))
    }
}

/// Reads a time as templates hand them around: Go's printed form, RFC 3339 (Kubernetes'
/// timestamps), or Unix seconds.
pub fn parse(text: &str) -> Result<Timestamp, String> {
    let text = text.trim();
    if let Ok(t) = text.parse::<Timestamp>() {
        return Ok(t);
    }
    if let Ok(secs) = text.parse::<i64>() {
        return Timestamp::from_second(secs).map_err(|e| e.to_string());
    }
    // Go's printed form; only UTC is printed by Sluice, other zones carry their offset.
    let mut parts = text.split_whitespace();
    if let (Some(date), Some(clock), Some(offset)) = (parts.next(), parts.next(), parts.next()) {
        // `+0100` as RFC 3339 wants it (`get`: user text may split a character there).
        let offset = match (offset.get(..3), offset.get(3..)) {
            (Some(hours), Some(minutes)) if offset.len() == 5 => format!("{hours}:{minutes}"),
            _ => offset.to_owned(),
        };
        if let Ok(t) = format!("{date}T{clock}{offset}").parse::<Timestamp>() {
            return Ok(t);
        }
    }
    Err(format!("cannot parse {text:?} as a time"))
}

/// Reads `text` with a Go layout (sprig's `toDate`); without a zone in the layout, UTC.
pub fn parse_layout(text: &str, layout: &str) -> Result<Timestamp, String> {
    let mut ctx = Context::default();
    ctx.insert("text", Value::String(text.to_owned()));
    ctx.insert("layout", Value::String(layout.to_owned()));
    match expr::eval(
        "date(text, layout).UTC().Format('2006-01-02T15:04:05.999999999Z07:00')",
        &ctx,
    ) {
        Ok(Value::String(t)) => t.parse().map_err(|e: jiff::Error| e.to_string()),
        Ok(other) => Err(format!("reading a time gave {other}")),
        Err(e) => Err(format!("cannot read {text:?} with layout {layout:?}: {e}")),
    }
}

/// Formats `t` with a Go layout, in `zone` (an IANA name, `UTC` or `Local`) or UTC.
pub fn format(t: Timestamp, layout: &str, zone: Option<&str>) -> Result<String, String> {
    let mut ctx = Context::default();
    ctx.insert("t", Value::String(t.to_string()));
    ctx.insert("layout", Value::String(layout.to_owned()));
    let code = match zone {
        Some(zone) => {
            ctx.insert("zone", Value::String(zone.to_owned()));
            "date(t).In(timezone(zone)).Format(layout)"
        }
        None => "date(t).Format(layout)",
    };
    match expr::eval(code, &ctx) {
        Ok(Value::String(s)) => Ok(s),
        Ok(other) => Err(format!("formatting a time gave {other}")),
        Err(e) => Err(e.to_string()),
    }
}

/// A Go duration as sprig's `duration` prints it (`1h2m3s`, `1.5s`, `0s`).
pub fn go_duration(nanos: i64) -> String {
    sluice_api::duration::format_go_duration(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn times_print_as_go_prints_them_and_read_back() {
        let at = t("2026-11-27T07:05:09.25Z");
        assert_eq!(go_string(at), "2026-11-27 07:05:09.25 +0000 UTC");
        assert_eq!(
            go_string(t("2026-11-27T07:05:09Z")),
            "2026-11-27 07:05:09 +0000 UTC"
        );
        assert_eq!(parse(&go_string(at)), Ok(at));
        assert_eq!(parse("2026-11-27T07:05:09.25Z"), Ok(at));
        assert_eq!(parse("0"), Ok(Timestamp::UNIX_EPOCH));
        assert_eq!(
            parse("2026-11-27 08:05:09 +0100 CET"),
            Ok(t("2026-11-27T07:05:09Z"))
        );
        assert!(parse("yesterday").is_err());
        // A character split where an offset's hours end is an error, not a panic.
        assert!(parse("2026-11-27 08:05:09 +0é0 CET").is_err());
    }

    #[test]
    fn go_layouts_format_as_go_formats_them() {
        let at = t("2026-11-27T07:05:09.25Z");
        for (layout, out) in [
            ("2006-01-02", "2026-11-27"),
            ("2006-01-02T15:04:05Z07:00", "2026-11-27T07:05:09Z"),
            (
                "Jan 2, 2006 at 3:04pm (MST)",
                "Nov 27, 2026 at 7:05am (UTC)",
            ),
            ("15:04:05.000", "07:05:09.250"),
            ("Monday", "Friday"),
        ] {
            assert_eq!(format(at, layout, None).as_deref(), Ok(out), "{layout}");
        }
        assert_eq!(
            format(at, "15:04 MST", Some("Europe/Berlin")).as_deref(),
            Ok("08:05 CET")
        );
        assert!(format(at, "15:04", Some("Nowhere/Atlantis")).is_err());
        assert_eq!(
            parse_layout("27/11/2026 07:05", "02/01/2006 15:04"),
            Ok(t("2026-11-27T07:05:00Z"))
        );
        assert!(parse_layout("tomorrow", "2006-01-02").is_err());
    }

    #[test]
    fn now_is_the_callers_time_within_its_scope() {
        let at = t("2026-11-27T07:05:09Z");
        assert_eq!(super::at(at, now), at);
        assert_eq!(now(), Timestamp::UNIX_EPOCH);
    }
}
