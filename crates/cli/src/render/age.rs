//! Ages as kubectl prints them (`45s`, `3m12s`, `5h`, `2d3h`, `3y`): precise when young,
//! coarser as they grow.

use jiff::Timestamp;

/// Age of something created at `created`, as seen at `now`; empty when unknown.
pub fn age(created: Option<Timestamp>, now: Timestamp) -> String {
    created
        .map(|at| human_duration(now.as_second() - at.as_second()))
        .unwrap_or_default()
}

/// A whole number of seconds in kubectl's short form.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let seconds = seconds.max(0);
    let minutes = seconds / 60;
    let hours = minutes / 60;
    let days = hours / 24;
    let years = days / 365;
    let pair = |big: i64, big_unit: &str, small: i64, small_unit: &str| {
        if small == 0 {
            format!("{big}{big_unit}")
        } else {
            format!("{big}{big_unit}{small}{small_unit}")
        }
    };
    if seconds < 120 {
        format!("{seconds}s")
    } else if minutes < 10 {
        pair(minutes, "m", seconds % 60, "s")
    } else if minutes < 180 {
        format!("{minutes}m")
    } else if hours < 8 {
        pair(hours, "h", minutes % 60, "m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        pair(days, "d", hours % 24, "h")
    } else if days < 365 * 2 {
        format!("{days}d")
    } else if days < 365 * 8 {
        pair(years, "y", days % 365, "d")
    } else {
        format!("{years}y")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_coarser_with_age() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (125, "2m5s"),
            (180, "3m"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600 + 60, "3h1m"),
            (5 * 3600, "5h"),
            (47 * 3600, "47h"),
            (2 * 86400 + 3 * 3600, "2d3h"),
            (20 * 86400, "20d"),
            (3 * 365 * 86400 + 86400, "3y1d"),
            (10 * 365 * 86400, "10y"),
        ];
        for (seconds, expected) in cases {
            assert_eq!(human_duration(seconds), expected, "{seconds}s");
        }
    }

    #[test]
    fn unknown_creation_has_no_age() {
        let now: Timestamp = "2024-05-01T12:00:00Z".parse().unwrap();
        assert_eq!(age(None, now), "");
        assert_eq!(
            age(Some("2024-05-01T11:59:30Z".parse().unwrap()), now),
            "30s"
        );
    }
}
