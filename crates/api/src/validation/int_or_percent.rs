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
    /// Parses the value; the error is the detail of a field error saying what is wrong.
    pub(super) fn parse(value: &IntOrString) -> Result<Self, &'static str> {
        let parsed = match value {
            IntOrString::Int(n) => IntOrPercent::Int(*n),
            IntOrString::String(text) => {
                let digits = text.strip_suffix('%').unwrap_or(text);
                let percent = digits
                    .parse::<i32>()
                    .map_err(|_| "must be an integer or percentage (e.g. '5%')")?;
                IntOrPercent::Percent(percent)
            }
        };
        if parsed.amount() < 0 {
            return Err(super::NOT_NEGATIVE);
        }
        Ok(parsed)
    }

    /// The value as Argo reads it when checking that maxSurge and maxUnavailable are not
    /// both zero: a percentage only with the `%` sign, any other string as an integer, and
    /// what is neither as zero.
    pub(super) fn argo_amount(value: &IntOrString) -> i64 {
        match value {
            IntOrString::Int(n) => i64::from(*n),
            IntOrString::String(text) => {
                let percent = text
                    .strip_suffix('%')
                    .filter(|digits| {
                        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
                    })
                    .and_then(|digits| digits.parse::<i64>().ok());
                percent.or_else(|| text.parse::<i64>().ok()).unwrap_or(0)
            }
        }
    }

    fn amount(self) -> i32 {
        match self {
            IntOrPercent::Int(n) | IntOrPercent::Percent(n) => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: IntOrString) -> Result<IntOrPercent, &'static str> {
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
    }

    #[test]
    fn rejects_garbage_and_negatives() {
        assert_eq!(
            parse(IntOrString::String("a lot".into())),
            Err("must be an integer or percentage (e.g. '5%')")
        );
        assert!(parse(IntOrString::String("%".into())).is_err());
        assert!(parse(IntOrString::String("1.5%".into())).is_err());
        assert_eq!(
            parse(IntOrString::Int(-1)),
            Err("must be greater than or equal to 0")
        );
        assert_eq!(
            parse(IntOrString::String("-5%".into())),
            Err("must be greater than or equal to 0")
        );
    }

    #[test]
    fn argo_reads_bare_strings_as_integers_and_garbage_as_zero() {
        let amount = |v: IntOrString| IntOrPercent::argo_amount(&v);
        assert_eq!(amount(IntOrString::Int(3)), 3);
        assert_eq!(amount(IntOrString::String("25%".into())), 25);
        assert_eq!(amount(IntOrString::String("0".into())), 0);
        assert_eq!(amount(IntOrString::String("7".into())), 7);
        assert_eq!(amount(IntOrString::String("lots".into())), 0);
        assert_eq!(amount(IntOrString::String("-5%".into())), 0);
    }
}
