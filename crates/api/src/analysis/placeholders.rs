//! `{{args.<name>}}` placeholders in AnalysisTemplate metrics, replaced as Argo replaces them.
//! The engine replaces them in the fields it judges by (count, interval, limits) and the metric
//! providers in the whole metric, each with its own argument values; the syntax is one.

/// Why a placeholder could not be replaced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlaceholderError {
    /// A `{{` without a closing `}}`; `snippet` is up to 32 characters of the text from the
    /// end of the last replaced tag (or the start) on.
    Unterminated { snippet: String },
    /// A tag (as written between the braces, untrimmed) that names no argument with a value.
    Unresolved { tag: String },
}

/// Replaces each `{{ tag }}` in `template`; `args.<name>` tags take `value(name)`. Whitespace
/// inside the braces is ignored (`{{ args.x }}` works).
pub fn substitute<'v>(
    template: &str,
    value: impl Fn(&str) -> Option<&'v str>,
) -> Result<String, PlaceholderError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            let snippet: String = rest.chars().take(32).collect();
            return Err(PlaceholderError::Unterminated { snippet });
        };
        let tag = &after[..close];
        let found = tag.trim().strip_prefix("args.").and_then(&value);
        let Some(found) = found else {
            return Err(PlaceholderError::Unresolved {
                tag: tag.to_owned(),
            });
        };
        out.push_str(found);
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(name: &str) -> Option<&'static str> {
        match name {
            "a" => Some("1"),
            "b-c" => Some("x\"y\n"),
            _ => None,
        }
    }

    #[test]
    fn tags_are_replaced_with_argument_values() {
        assert_eq!(substitute("{{args.a}}", args).unwrap(), "1");
        assert_eq!(
            substitute("p {{ args.a }}-{{args.b-c}} q", args).unwrap(),
            "p 1-x\"y\n q"
        );
        assert_eq!(substitute("no tags {", args).unwrap(), "no tags {");
    }

    #[test]
    fn unknown_and_unterminated_tags_are_errors() {
        assert_eq!(
            substitute("{{ args.zz }}", args),
            Err(PlaceholderError::Unresolved {
                tag: " args.zz ".into()
            })
        );
        assert_eq!(
            substitute("{{inputs.a}}", args),
            Err(PlaceholderError::Unresolved {
                tag: "inputs.a".into()
            })
        );
        assert_eq!(
            substitute("x {{args.a", args),
            Err(PlaceholderError::Unterminated {
                snippet: "x {{args.a".into()
            })
        );
    }
}
