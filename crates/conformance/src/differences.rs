//! The documented differences from Argo (`docs/differences-from-argo.md`), as the conformance
//! tests read them: a difference the page does not list fails its test, and a row no case
//! needed is reported, so the page and the code cannot drift apart.
//!
//! The page's validation table has rows `| Sluice | `pattern` | why |` or
//! `| Argo | `pattern` | why |`: a case where Sluice refuses a Rollout with a message containing
//! the pattern (step and list indexes written `[*]`), or where Argo refuses one with such a
//! message and Sluice runs it or says something else, is a documented difference.

use std::path::PathBuf;

/// Who refuses the Rollout in a documented validation difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Argo,
    Sluice,
}

#[derive(Debug, Clone)]
pub struct Row {
    /// The `## ` heading the row is under.
    pub section: String,
    pub side: Side,
    pub pattern: String,
}

#[derive(Debug, Clone, Default)]
pub struct Differences {
    pub rows: Vec<Row>,
}

/// The page, from the repository's root.
pub fn page() -> PathBuf {
    crate::oracle::repo_root().join("docs/differences-from-argo.md")
}

impl Differences {
    /// Reads the page's table under the heading `## <section>`.
    pub fn load(section: &str) -> Self {
        let path = page();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let table = Self::parse(&text).section(section);
        assert!(
            !table.rows.is_empty(),
            "{} has no rows under \"## {section}\"",
            path.display()
        );
        table
    }

    /// The rows of one section.
    pub fn section(self, section: &str) -> Self {
        Differences {
            rows: self
                .rows
                .into_iter()
                .filter(|r| r.section == section)
                .collect(),
        }
    }

    pub fn parse(text: &str) -> Self {
        let mut section = String::new();
        let rows = text
            .lines()
            .filter_map(|line| {
                if let Some(heading) = line.strip_prefix("## ") {
                    section = heading.trim().to_string();
                    return None;
                }
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                // "", side, `pattern`, why, ""
                let side = match *cells.get(1)? {
                    "Sluice" => Side::Sluice,
                    "Argo" => Side::Argo,
                    _ => return None,
                };
                let pattern = cells.get(2)?.strip_prefix('`')?.strip_suffix('`')?;
                Some(Row {
                    section: section.clone(),
                    side,
                    pattern: pattern.to_string(),
                })
            })
            .collect();
        Differences { rows }
    }

    /// The row that explains a case where Argo says `argo` and Sluice `sluice` (`None`: runs
    /// it), if the page has one.
    pub fn explains(&self, argo: Option<&str>, sluice: Option<&str>) -> Option<String> {
        let argo = argo.map(normalize);
        let sluice = sluice.map(normalize);
        self.rows
            .iter()
            .find(|row| {
                let message = match row.side {
                    Side::Argo => &argo,
                    Side::Sluice => &sluice,
                };
                message.as_deref().is_some_and(|m| m.contains(&row.pattern))
            })
            .map(|row| row.pattern.clone())
    }
}

/// Indexes written `[*]`, so that one row covers every step and list entry.
pub fn normalize(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '[' && chars.peek().is_some_and(char::is_ascii_digit) {
            while chars.peek().is_some_and(char::is_ascii_digit) {
                chars.next();
            }
            out.push('*');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_indexes() {
        let d = Differences::parse(
            "## Validation\n| who | pattern | why |\n|---|---|---|\n| Sluice | `steps[*].experiment.templates[*].specRef: Required` | x |\n| Argo | `spec.template: Invalid` | y |\n",
        );
        assert_eq!(d.rows.len(), 2);
        assert_eq!(d.clone().section("Validation").rows.len(), 2);
        assert!(d.clone().section("Other").rows.is_empty());
        assert!(
            d.explains(
                None,
                Some(
                    "spec.strategy.canary.steps[12].experiment.templates[0].specRef: Required value"
                )
            )
            .is_some()
        );
        assert!(
            d.explains(Some("spec.template: Invalid value: x"), None)
                .is_some()
        );
        assert!(
            d.explains(None, Some("spec.replicas: Invalid value"))
                .is_none()
        );
        assert_eq!(normalize("a[1][23].b[x]"), "a[*][*].b[x]");
    }
}
