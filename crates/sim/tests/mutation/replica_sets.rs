//! (being written)

/// Each invariant shown able to fail in this module, and the test that shows it.
pub(crate) const CAUGHT_BY: &[(&str, &str)] = &[];
