//! Checks of the house rules that neither the compiler nor clippy makes, run by `make test`
//! through this crate's tests:
//!
//! - no import circle inside a crate ([`circles`]): sibling modules never depend on each other,
//!   directly or through others, so each module can be read, tested and moved with only what
//!   lies below it;
//! - no source file over [`sizes::MAX_LINES`] lines ([`sizes`]), generated files excepted.
//!
//! Both read the sources only; nothing is built or run.

pub mod circles;
pub mod modules;
pub mod paths;
pub mod sizes;
pub mod workspace;
