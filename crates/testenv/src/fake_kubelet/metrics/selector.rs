//! Label selectors in their text form, as a `labelSelector` query parameter carries them
//! (`app=web,tier!=db,env in (a,b),!legacy`): what the HPA controller sends when it lists the
//! metrics of its target's pods.

use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; the empty one selects everything.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut requirements = Vec::new();
        for term in split_terms(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(
                requirement(term).ok_or_else(|| {
                    format!("cannot read {term:?} of the label selector {text:?}")
                })?,
            );
        }
        Ok(Selector(requirements))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

/// Splits at the commas outside parentheses.
fn split_terms(text: &str) -> Vec<&str> {
    let (mut terms, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

fn requirement(term: &str) -> Option<Requirement> {
    let key = |k: &str| {
        let k = k.trim();
        (!k.is_empty() && !k.contains(char::is_whitespace)).then(|| k.to_string())
    };
    if let Some((k, v)) = term.split_once("!=") {
        return Some(Requirement::NotIn(key(k)?, vec![v.trim().to_string()]));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Some(Requirement::In(key(k)?, vec![v.trim().to_string()]));
    }
    if let Some(k) = term.strip_prefix('!') {
        return Some(Requirement::DoesNotExist(key(k)?));
    }
    if let Some(open) = term.find('(') {
        let values = term[open + 1..].strip_suffix(')')?;
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
        let mut words = term[..open].split_whitespace();
        let (k, op) = (key(words.next()?)?, words.next()?);
        if words.next().is_some() {
            return None;
        }
        return match op {
            "in" => Some(Requirement::In(k, values)),
            "notin" => Some(Requirement::NotIn(k, values)),
            _ => None,
        };
    }
    Some(Requirement::Exists(key(term)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn reads_every_form() {
        let s = Selector::parse("app=web,tier!=db,env in (a, b),!legacy,team,x==1").unwrap();
        let base = [("app", "web"), ("env", "b"), ("team", "t"), ("x", "1")];
        assert!(s.matches(&labels(&base)));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("env", "c"),
            ("team", "t"),
            ("x", "1")
        ])));
        assert!(!s.matches(&labels(&[("app", "web"), ("env", "a"), ("x", "1")])));
        let mut with_legacy = labels(&base);
        with_legacy.insert("legacy".into(), "y".into());
        assert!(!s.matches(&with_legacy));
        let mut db = labels(&base);
        db.insert("tier".into(), "db".into());
        assert!(!s.matches(&db));
        assert!(
            Selector::parse("env notin (a)")
                .unwrap()
                .matches(&labels(&[]))
        );
    }

    #[test]
    fn the_empty_selector_selects_all_and_nonsense_is_refused() {
        assert!(Selector::parse("").unwrap().matches(&labels(&[("a", "b")])));
        assert!(Selector::parse("a b").is_err());
        assert!(Selector::parse("env within (a)").is_err());
        assert!(Selector::parse("=x").is_err());
    }
}
