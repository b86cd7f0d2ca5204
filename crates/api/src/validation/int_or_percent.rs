//! `maxSurge` / `maxUnavailable` values: an integer, or a string read as a percentage (with or
//! without the `%` sign, as Kubernetes reads any string there).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// A parsed int-or-percent value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum IntOrPercent {
    Int(i32),
    Percent(i32),
}

impl IntOrPercent {
    /// Parses the value; the error says what is wrong with it.
    pub(super) fn parse(value: &IntOrString) -> Result<Self, String> {
        let parsed = match value {
            IntOrString::Int(n) => IntOrPercent::Int(*n),
            IntOrString::String(text) => {
                let digits = text.strip_suffix('%').unwrap_or(text);
                let percent = digits
                    .parse::<i32>()
                    .map_err(|_| format!("must be an integer or a percentage, got {text:?}"))?;
                IntOrPercent::Percent(percent)
            }
        };
        if parsed.amount() < 0 {
            return Err(format!("must not be negative, got {}", parsed));
        }
        Ok(parsed)
    }

    fn amount(self) -> i32 {
        match self {
            IntOrPercent::Int(n) | IntOrPercent::Percent(n) => n,
        }
    }

    /// Whether the value is literally zero (`0`, `"0"` or `"0%"`).
    pub(super) fn is_zero(self) -> bool {
        self.amount() == 0
    }
}

impl std::fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IntOrPercent::Int(n) => write!(f, "{n}"),
            IntOrPercent::Percent(n) => write!(f, "{n}%"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: IntOrString) -> Result<IntOrPercent, String> {
        IntOrPercent::parse(&value)
    }

    #[test]
    fn integers_and_percentages() {
        assert_eq!(parse(IntOrString::Int(3)), Ok(IntOrPercent::Int(3)));
        assert_eq!(
            parse(IntOrString::String("25%".into())),
            Ok(IntOrPercent::Percent(25))
        );
        // A bare numeric string is a percentage too.
        assert_eq!(
            parse(IntOrString::String("25".into())),
            Ok(IntOrPercent::Percent(25))
        );
        assert!(parse(IntOrString::String("0%".into())).unwrap().is_zero());
        assert!(parse(IntOrString::Int(0)).unwrap().is_zero());
        assert!(!parse(IntOrString::Int(1)).unwrap().is_zero());
    }

    #[test]
    fn rejects_garbage_and_negatives() {
        assert_eq!(
            parse(IntOrString::String("a lot".into())),
            Err("must be an integer or a percentage, got \"a lot\"".into())
        );
        assert!(parse(IntOrString::String("%".into())).is_err());
        assert!(parse(IntOrString::String("1.5%".into())).is_err());
        assert_eq!(
            parse(IntOrString::Int(-1)),
            Err("must not be negative, got -1".into())
        );
        assert_eq!(
            parse(IntOrString::String("-5%".into())),
            Err("must not be negative, got -5%".into())
        );
    }
}
