//! Keeping secret argument values and provider credentials out of AnalysisRun status.
//!
//! Argo replaces every secret value with `*****` in measurement messages. Error texts often echo
//! a request URL, where a secret may appear percent-encoded, or a JSON body, where it may appear
//! escaped, so each secret is also redacted in those spellings.

use std::collections::BTreeMap;

use sluice_api::analysis::Measurement;

/// What a secret value is replaced with.
pub const REDACTED: &str = "*****";

/// Replaces known secret values in text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Every spelling of every secret, longest first so that a secret containing another is
    /// replaced whole.
    needles: Vec<String>,
}

impl Redactor {
    /// A redactor for the given secret values. Empty values are ignored.
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut redactor = Self::default();
        for secret in secrets {
            redactor.add(secret.as_ref());
        }
        redactor
    }

    /// Adds a secret value (and its encoded spellings).
    pub fn add(&mut self, secret: &str) {
        if secret.is_empty() {
            return;
        }
        for needle in spellings(secret) {
            if !needle.is_empty() && !self.needles.contains(&needle) {
                self.needles.push(needle);
            }
        }
        self.needles
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    }

    /// Adds every secret of another redactor.
    pub fn extend(&mut self, other: &Redactor) {
        for needle in &other.needles {
            if !self.needles.contains(needle) {
                self.needles.push(needle.clone());
            }
        }
        self.needles
            .sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    }

    /// Whether no secret is known.
    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// `text` with every known secret replaced by [`REDACTED`].
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for needle in &self.needles {
            if out.contains(needle.as_str()) {
                out = out.replace(needle.as_str(), REDACTED);
            }
        }
        out
    }

    /// Redacts a measurement's message, value and metadata (keys and values).
    pub fn redact_measurement(&self, mut measurement: Measurement) -> Measurement {
        if self.is_empty() {
            return measurement;
        }
        measurement.message = measurement.message.map(|m| self.redact(&m));
        measurement.value = measurement.value.map(|v| self.redact(&v));
        measurement.metadata = measurement.metadata.map(|m| self.redact_map(m));
        measurement
    }

    /// Redacts the keys and values of a string map.
    pub fn redact_map(&self, map: BTreeMap<String, String>) -> BTreeMap<String, String> {
        map.into_iter()
            .map(|(k, v)| (self.redact(&k), self.redact(&v)))
            .collect()
    }
}

/// The forms a secret may take in a message: as is, percent-encoded (fully, and only where a
/// URL parser must encode), and escaped inside a JSON string.
fn spellings(secret: &str) -> Vec<String> {
    let mut out = vec![secret.to_owned()];
    out.push(percent_encode(secret, |b| !is_unreserved(b)));
    out.push(percent_encode(secret, |b| {
        b <= 0x20 || b >= 0x7f || matches!(b, b'"' | b'<' | b'>' | b'`' | b'{' | b'}' | b'#')
    }));
    if let Ok(json) = serde_json::to_string(secret) {
        out.push(json[1..json.len() - 1].to_owned());
    }
    out.dedup();
    out
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn percent_encode(text: &str, encode: impl Fn(u8) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    for &b in text.as_bytes() {
        if encode(b) {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push(b as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_api::common::AnalysisPhase;

    #[test]
    fn replaces_every_occurrence() {
        let r = Redactor::new(["s3cr3t"]);
        assert_eq!(
            r.redact("token s3cr3t and again s3cr3t."),
            "token ***** and again *****."
        );
        assert_eq!(r.redact("nothing here"), "nothing here");
    }

    #[test]
    fn empty_secret_is_ignored() {
        let r = Redactor::new([""]);
        assert!(r.is_empty());
        assert_eq!(r.redact("abc"), "abc");
    }

    #[test]
    fn longer_secret_wins_over_its_prefix() {
        let r = Redactor::new(["abc", "abcdef"]);
        assert_eq!(r.redact("x abcdef y abc"), "x ***** y *****");
    }

    #[test]
    fn encoded_spellings_are_redacted() {
        let r = Redactor::new(["p@ss word/\"q\""]);
        assert_eq!(
            r.redact("url http://h/p%40ss%20word%2F%22q%22"),
            "url http://h/*****"
        );
        assert_eq!(
            r.redact("url http://h/?k=p@ss%20word/%22q%22"),
            "url http://h/?k=*****"
        );
        assert_eq!(r.redact(r#"{"k":"p@ss word/\"q\""}"#), r#"{"k":"*****"}"#);
    }

    #[test]
    fn measurement_fields_are_redacted() {
        let r = Redactor::new(["hunter2"]);
        let m = Measurement {
            phase: Some(AnalysisPhase::Error),
            message: Some("GET http://x/hunter2 failed".into()),
            value: Some("\"hunter2\"".into()),
            metadata: Some(BTreeMap::from([("hunter2".into(), "v hunter2".into())])),
            ..Default::default()
        };
        let m = r.redact_measurement(m);
        assert_eq!(m.message.as_deref(), Some("GET http://x/***** failed"));
        assert_eq!(m.value.as_deref(), Some("\"*****\""));
        assert_eq!(
            m.metadata,
            Some(BTreeMap::from([("*****".into(), "v *****".into())]))
        );
    }

    #[test]
    fn extend_merges_secrets() {
        let mut a = Redactor::new(["one"]);
        a.extend(&Redactor::new(["two"]));
        assert_eq!(a.redact("one two"), "***** *****");
    }
}
