//! The I/O side of Argo-compatible analysis: metric providers, argument resolution and the
//! evaluation of `successCondition` / `failureCondition`.
//!
//! A run's measurement goes through these steps:
//!
//! 1. [`resolve_args`] turns the AnalysisRun's `args` into values (reading Secrets), and
//!    [`resolve_metric`] substitutes `{{args.<name>}}` in the metric;
//! 2. [`Providers::measure`] queries the provider and judges the result with the conditions
//!    (see [`expression`]); Job measurements come back Running and are polled with
//!    [`Providers::resume`];
//! 3. secret values are redacted from every measurement ([`Redactor`]).
//!
//! The state machine that decides when to measure lives elsewhere; this crate only measures.

pub mod args;
pub mod expression;
pub mod providers;
pub mod redact;
pub mod secrets;

pub use args::{ArgsError, ResolvedArgs, resolve_args, resolve_metric, substitute};
pub use expr::Value;
pub use expression::{ConditionError, eval_condition, evaluate, evaluate_metric, json_to_value};
pub use providers::{
    DatadogCredentials, ProviderError, ProviderSettings, Providers, RunContext, metric_metadata,
};
pub use redact::{REDACTED, Redactor};
pub use secrets::{KubeSecrets, MemorySecrets, SecretData, SecretError, SecretSource};
