//! One answer from the weights of several routes of one object, for `observed_weight`.

use crate::ObservedWeight;

/// The weights the routes agree on; when they disagree (a route edited by hand, a write half
/// done), the largest canary weight and the smallest stable weight of any route: the traffic
/// the canary may be receiving somewhere and the least the stable is guaranteed everywhere,
/// so that a safety check built on it errs on the side of keeping pods. `None` without routes.
pub(crate) fn combine(weights: &[ObservedWeight]) -> Option<ObservedWeight> {
    let first = *weights.first()?;
    Some(ObservedWeight {
        canary: weights
            .iter()
            .map(|w| w.canary)
            .max()
            .unwrap_or(first.canary),
        stable: weights
            .iter()
            .map(|w| w.stable)
            .min()
            .unwrap_or(first.stable),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_or_the_cautious_pair() {
        let w = |canary, stable| ObservedWeight { canary, stable };
        let cases = [
            (vec![], None),
            (vec![w(10, 90)], Some(w(10, 90))),
            (vec![w(10, 90), w(10, 90)], Some(w(10, 90))),
            (vec![w(10, 90), w(30, 70)], Some(w(30, 70))),
            (vec![w(30, 80), w(10, 60)], Some(w(30, 60))),
        ];
        for (weights, want) in cases {
            assert_eq!(combine(&weights), want, "{weights:?}");
        }
    }
}
