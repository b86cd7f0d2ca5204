//! The CLI's tests against the local control plane, one module each, in one binary (as the
//! end-to-end tests are: `crates/e2e/tests/e2e/main.rs` says why). `sluice-test-runner` runs each
//! module as a process of its own; `cargo test -p kubectl-sluice --test cli explain_` runs some.

mod create_makes_argos_objects;
mod dashboard_in_a_browser;
mod dashboard_logins_in_a_browser;
mod explain_names_what_a_rollout_waits_for;
mod get_rollout_watch_redraws_in_a_terminal;
mod kubectl_flags_and_argo_name_reach_the_cluster;
mod lint_checks_referenced_objects;
mod list_experiments_shows_argos_columns;
mod list_rollouts_watch_and_completion;
mod retry_experiment_clears_its_status;
mod undo_fast_skips_steps_and_analysis;
