//! One module per command; each turns its arguments into requests and output. Patches and
//! texts are built by pure functions next to the command so they are unit-tested.

mod abort;
mod create;
mod create_analysis_run;
mod dashboard;
mod explain;
mod get;
mod get_experiment;
mod lint;
mod lint_refs;
mod list;
mod list_experiments;
mod notifications;
mod pause;
mod promote;
mod restart;
mod retry;
mod set_image;
mod status;
mod terminate;
mod undo;

use std::io::Write as _;

use anyhow::Context as _;
use kube::Api;
use kube::api::{Patch, PatchParams};
use sluice_api::Rollout;

use crate::cli::{
    Cli, Command, CreateCommand, GetCommand, ListCommand, RetryCommand, SetCommand,
    TerminateCommand,
};
use crate::kube_target::Target;

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let connect = || Target::connect(&cli.global);
    match cli.command {
        Command::Completion { shell } => completion(shell),
        Command::Explain(args) => explain::run(&connect().await?, &args).await,
        Command::Dashboard(args) => dashboard::run(&cli.global, &args).await,
        Command::Version => emit(&format!("kubectl-sluice {}\n", env!("CARGO_PKG_VERSION"))),
        Command::Lint(args) => lint::run(&args),
        Command::Create(args) => match &args.what {
            Some(CreateCommand::AnalysisRun(run)) => {
                create_analysis_run::run(&connect().await?, run).await
            }
            None => create::run(&connect().await?, &args).await,
        },
        Command::Notifications(args) => notifications::run(&cli.global, &args).await,
        Command::Get {
            what: GetCommand::Rollout(args),
        } => get::run(&connect().await?, &args).await,
        Command::Get {
            what: GetCommand::Experiment(args),
        } => get_experiment::run(&connect().await?, &args).await,
        Command::Terminate {
            what: TerminateCommand::Experiment(args),
        } => terminate::experiment(&connect().await?, &args.name).await,
        Command::Terminate {
            what: TerminateCommand::AnalysisRun(args),
        } => terminate::analysis_run(&connect().await?, &args.name).await,
        Command::List {
            what: ListCommand::Rollouts(args),
        } => list::run(&connect().await?, &args).await,
        Command::List {
            what: ListCommand::Experiments(args),
        } => list_experiments::run(&connect().await?, &args).await,
        Command::Status(args) => status::run(&connect().await?, &args).await,
        Command::Promote(args) => promote::run(&connect().await?, &args).await,
        Command::Abort(args) => abort::run(&connect().await?, &args.name).await,
        Command::Retry {
            what: RetryCommand::Rollout(args),
        } => retry::run(&connect().await?, &args.name).await,
        Command::Retry {
            what: RetryCommand::Experiment(args),
        } => retry::experiment(&connect().await?, &args.name).await,
        Command::Pause(args) => pause::run(&connect().await?, &args.name, true).await,
        Command::Resume(args) => pause::run(&connect().await?, &args.name, false).await,
        Command::Restart(args) => restart::run(&connect().await?, &args).await,
        Command::Set {
            what: SetCommand::Image(args),
        } => set_image::run(&connect().await?, &args).await,
        Command::Undo(args) => undo::run(&connect().await?, &args).await,
    }
}

/// `completion SHELL`: the script for the name the binary was invoked as, so that both
/// `kubectl-sluice` and `kubectl-argo-rollouts` complete.
fn completion(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let argv0 = std::env::args_os().next();
    let name = crate::cli::invoked_name(argv0.as_deref());
    let file = name.replace(' ', "-");
    // Completion is for the executable's own name (the shell completes `kubectl-sluice ...`).
    let mut script = Vec::new();
    if shell == clap_complete::Shell::Bash {
        // The bash generator names its cases inconsistently for a name with a hyphen, and
        // then completes nothing: the script is made for `kubectl_sluice` and registered for
        // the real name.
        let plain = file.replace('-', "_");
        let mut command = crate::cli::command_named(name).bin_name(&plain);
        clap_complete::generate(shell, &mut command, &plain, &mut script);
        let script = String::from_utf8_lossy(&script).replace(
            &format!(" -o default {plain}\n"),
            &format!(" -o default {file}\n"),
        );
        return emit(&script);
    }
    let mut command = crate::cli::command_named(name).bin_name(&file);
    clap_complete::generate(shell, &mut command, &file, &mut script);
    emit(&String::from_utf8_lossy(&script))
}

/// Writes to standard output. A closed pipe (`| head`) ends the output quietly.
pub fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to standard output"),
    }
}

/// A note on standard error that does not stop the command.
pub fn warn(message: &str) {
    let _ = writeln!(std::io::stderr(), "warning: {message}");
}

/// A plain line on standard error, as kubectl prints "No resources found.".
pub fn warn_plain(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// Rollouts of the target namespace.
fn rollouts(target: &Target) -> Api<Rollout> {
    Api::namespaced(target.client.clone(), &target.namespace)
}

/// Makes a kube error readable: an API error becomes the server's message
/// (`rollouts.argoproj.io "demo" not found`), keeping its HTTP code for the dashboard to pass on.
pub fn explain(err: kube::Error) -> anyhow::Error {
    match err {
        kube::Error::Api(status) if !status.message.is_empty() => {
            anyhow::Error::new(ServerRefusal {
                code: status.code,
                message: status.message,
            })
        }
        other => anyhow::Error::new(other),
    }
}

/// An answer of the API server that refused a request: its message, shown as it is, and its
/// HTTP code.
#[derive(Debug)]
pub struct ServerRefusal {
    pub code: u16,
    pub message: String,
}

impl std::fmt::Display for ServerRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ServerRefusal {}

/// Reads one Rollout.
async fn get_rollout(api: &Api<Rollout>, name: &str) -> anyhow::Result<Rollout> {
    api.get(name)
        .await
        .map_err(explain)
        .with_context(|| format!("reading rollout {name:?}"))
}

/// JSON merge patch of the Rollout itself.
async fn merge_patch(
    api: &Api<Rollout>,
    name: &str,
    patch: &serde_json::Value,
) -> anyhow::Result<Rollout> {
    api.patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
        .map_err(explain)
        .with_context(|| format!("patching rollout {name:?}"))
}

/// JSON merge patch of the status subresource. A cluster whose CRD lacks the subresource
/// answers 404; the same patch then goes to the object, as Argo's client does.
async fn merge_patch_status(
    api: &Api<Rollout>,
    name: &str,
    patch: &serde_json::Value,
) -> anyhow::Result<Rollout> {
    match try_patch_status(api, name, patch).await? {
        Some(rollout) => Ok(rollout),
        None => merge_patch(api, name, patch).await,
    }
}

/// JSON merge patch of the status subresource; `None` on a 404, which means no such
/// subresource (or no such Rollout, which a following patch of the object then reports).
async fn try_patch_status(
    api: &Api<Rollout>,
    name: &str,
    patch: &serde_json::Value,
) -> anyhow::Result<Option<Rollout>> {
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(rollout) => Ok(Some(rollout)),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
        Err(e) => Err(explain(e)).with_context(|| format!("patching status of rollout {name:?}")),
    }
}

/// The Rollout's pod selector in label-selector syntax, to list its ReplicaSets and pods.
/// `None` when there is none (ownership then decides alone).
fn label_selector(rollout: &Rollout) -> Option<String> {
    let selector = kube::core::Selector::try_from(rollout.spec.selector.clone()?).ok()?;
    (!selector.selects_all()).then(|| selector.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selector_of_a_rollout() {
        let ro: Rollout = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "demo"},
            "spec": {"selector": {"matchLabels": {"app": "demo"},
                                  "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]}}
        }))
        .unwrap();
        assert_eq!(
            label_selector(&ro).as_deref(),
            Some("app=demo,tier in (web)")
        );
        let none: Rollout =
            serde_json::from_value(serde_json::json!({"metadata": {}, "spec": {}})).unwrap();
        assert_eq!(label_selector(&none), None);
    }
}
