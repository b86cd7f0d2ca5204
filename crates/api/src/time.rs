//! Times as Kubernetes stores them: `metav1.Time` has whole seconds, so a time the controller
//! records or compares with a recorded one is cut to the second first, or a value would read
//! back different from what was written.

use jiff::Timestamp;

/// `t` without its fraction of a second (`t` itself in the impossible case that the second is
/// out of range).
pub fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fraction_is_dropped() {
        let t: Timestamp = "2026-01-01T00:00:07.999Z".parse().unwrap();
        assert_eq!(whole_seconds(t).to_string(), "2026-01-01T00:00:07Z");
    }
}
