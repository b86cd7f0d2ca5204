//! What a finished test binary's log says: its counts, and the part worth showing when it
//! failed.

/// The sums of the binary's `test result:` lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub passed: u64,
    pub failed: u64,
    pub ignored: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.passed += o.passed;
        self.failed += o.failed;
        self.ignored += o.ignored;
    }
}

/// Adds up every `test result: ok. 3 passed; 0 failed; 1 ignored; …` line of `log`.
pub fn counts(log: &str) -> Counts {
    let mut c = Counts::default();
    for line in log.lines().filter(|l| l.starts_with("test result:")) {
        let mut words = line.split_whitespace().peekable();
        while let Some(w) = words.next() {
            let Ok(n) = w.parse::<u64>() else { continue };
            match words.peek().map(|s| s.trim_end_matches([';', ','])) {
                Some("passed") => c.passed += n,
                Some("failed") => c.failed += n,
                Some("ignored") => c.ignored += n,
                _ => {}
            }
        }
    }
    c
}

/// What to print of a failed binary's log: from the first `failures:` line (each failed test's
/// output and the list of their names), or, if the binary died before its summary, the last
/// `tail` lines; at most `max` lines, the last ones.
pub fn failure_excerpt(log: &str, tail: usize, max: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let from = lines
        .iter()
        .position(|l| *l == "failures:")
        .unwrap_or(lines.len().saturating_sub(tail));
    let shown = &lines[from..];
    let shown = &shown[shown.len().saturating_sub(max)..];
    shown.join("\n")
}

/// `45.8 s`, or `1m 35s` from a minute.
pub fn duration(secs: f64) -> String {
    if secs < 60.0 {
        format!("{secs:.1} s")
    } else {
        format!("{}m {:02}s", (secs / 60.0) as u64, (secs % 60.0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_every_summary() {
        let log = "running 2 tests\ntest a ... ok\n\
            test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 1.0s\n\
            test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out\n";
        assert_eq!(
            counts(log),
            Counts {
                passed: 5,
                failed: 2,
                ignored: 1
            }
        );
        assert_eq!(counts("thread 'main' panicked"), Counts::default());
    }

    #[test]
    fn the_excerpt_starts_at_the_failures_or_keeps_the_tail() {
        let log = "running 1 test\nnoise\nfailures:\n\n---- t stdout ----\nboom\n\nfailures:\n    t\n\ntest result: FAILED.";
        let e = failure_excerpt(log, 2, 100);
        assert!(e.starts_with("failures:\n\n---- t stdout"), "{e}");
        assert!(e.ends_with("test result: FAILED."));
        assert_eq!(failure_excerpt("a\nb\nc\nd", 2, 100), "c\nd");
        assert_eq!(failure_excerpt(log, 2, 2), "\ntest result: FAILED.");
    }

    #[test]
    fn durations_read_as_people_do() {
        assert_eq!(duration(45.84), "45.8 s");
        assert_eq!(duration(95.84), "1m 35s");
        assert_eq!(duration(754.0), "12m 34s");
    }
}
