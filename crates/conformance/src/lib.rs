//! Conformance by construction: Sluice's validation, replica arithmetic, pod-template hash,
//! analysis verdicts and duration parsing compared with Argo Rollouts' own functions on
//! generated cases. Argo's code answers through the oracle (`tools/argo-oracle`), built from
//! Argo's Go module at each release in [`oracle::ARGO_VERSIONS`].
//!
//! `make test` compares a couple of thousand cases per function and release, from a seed that
//! moves with every commit; `make conformance` a million in all. A difference fails the test
//! with the case shrunk to a minimal one, unless `docs/differences-from-argo.md` lists it
//! (see [`differences`]).

pub mod differences;
pub mod generate;
pub mod oracle;
pub mod run;
