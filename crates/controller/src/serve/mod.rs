//! What the controller serves besides its work: `/healthz` and `/readyz` (`health`), and
//! `/metrics` with Argo's metric names (`metrics`).

pub mod health;
pub mod metrics;
