//! Which stable Ingresses a Rollout routes through, and the name of each one's canary.

use sluice_api::rollout::NginxTrafficRouting;

use crate::RouterError;

/// Longest `<rollout>-<stableIngress>` prefix kept, so that the name with `-canary` fits the
/// 253 characters of an object name.
const MAX_PREFIX_LEN: usize = 246;

/// `<rollout>-<stableIngress>-canary`, the prefix cut to 246 bytes (at a character boundary,
/// so that no input makes this panic).
pub fn canary_ingress_name(rollout: &str, stable_ingress: &str) -> String {
    let mut prefix = format!("{rollout}-{stable_ingress}");
    if prefix.len() > MAX_PREFIX_LEN {
        let mut cut = MAX_PREFIX_LEN;
        while !prefix.is_char_boundary(cut) {
            cut -= 1;
        }
        prefix.truncate(cut);
    }
    format!("{prefix}-canary")
}

/// The stable Ingresses: `stableIngress` or `stableIngresses`, exactly one of them. Empty
/// values count as unset.
pub fn stable_ingresses(cfg: &NginxTrafficRouting) -> Result<Vec<String>, RouterError> {
    let single = cfg.stable_ingress.as_deref().filter(|s| !s.is_empty());
    let list = cfg.stable_ingresses.as_deref().filter(|l| !l.is_empty());
    match (single, list) {
        (Some(_), Some(_)) => Err(RouterError::new(
            "Either StableIngress or StableIngresses must be configured. Both are configured.",
        )),
        (None, None) => Err(RouterError::new(
            "Either StableIngress or StableIngresses must be configured. Neither are configured.",
        )),
        (Some(one), None) => Ok(vec![one.to_string()]),
        (None, Some(many)) => Ok(many.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canary_name_is_rollout_stable_canary() {
        assert_eq!(
            canary_ingress_name("web", "web-ingress"),
            "web-web-ingress-canary"
        );
    }

    #[test]
    fn long_names_are_cut_to_253() {
        let rollout = "r".repeat(200);
        let stable = "s".repeat(100);
        let name = canary_ingress_name(&rollout, &stable);
        assert_eq!(name.len(), 253);
        assert!(name.starts_with(&format!("{rollout}-sss")));
        assert!(name.ends_with("s-canary"));
        // Exactly at the limit nothing is cut.
        let name = canary_ingress_name(&"r".repeat(200), &"s".repeat(45));
        assert_eq!(name.len(), 253);
        assert!(name.ends_with(&format!("{}-canary", "s".repeat(45))));
    }

    #[test]
    fn multibyte_names_are_cut_at_a_character_boundary() {
        let name = canary_ingress_name(&"é".repeat(200), "x");
        assert!(name.len() <= 253);
        assert!(name.ends_with("-canary"));
    }

    /// `stableIngress`, `stableIngresses` and the expected list or error.
    type Case<'a> = (
        Option<&'a str>,
        Option<Vec<&'a str>>,
        Result<Vec<&'a str>, &'a str>,
    );

    #[test]
    fn exactly_one_of_stable_ingress_and_stable_ingresses() {
        let cases: [Case; 6] = [
            (Some("a"), None, Ok(vec!["a"])),
            (None, Some(vec!["a", "b"]), Ok(vec!["a", "b"])),
            (Some(""), Some(vec!["b"]), Ok(vec!["b"])),
            (
                Some("a"),
                Some(vec!["b"]),
                Err(
                    "Either StableIngress or StableIngresses must be configured. Both are configured.",
                ),
            ),
            (
                None,
                None,
                Err(
                    "Either StableIngress or StableIngresses must be configured. Neither are configured.",
                ),
            ),
            (
                Some(""),
                Some(vec![]),
                Err(
                    "Either StableIngress or StableIngresses must be configured. Neither are configured.",
                ),
            ),
        ];
        for (single, list, want) in cases {
            let cfg = NginxTrafficRouting {
                stable_ingress: single.map(str::to_string),
                stable_ingresses: list
                    .clone()
                    .map(|l| l.into_iter().map(str::to_string).collect()),
                ..NginxTrafficRouting::default()
            };
            let got = stable_ingresses(&cfg);
            let want = want
                .map(|l| l.into_iter().map(str::to_string).collect::<Vec<_>>())
                .map_err(RouterError::new);
            assert_eq!(got, want, "{single:?} {list:?}");
        }
    }
}
