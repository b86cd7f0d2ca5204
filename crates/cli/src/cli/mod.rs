//! Command-line syntax: the commands and flags of `kubectl sluice`, mirroring
//! `kubectl argo rollouts` so scripts written for one work with the other.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand};

mod create;
mod dashboard;
mod notifications;

pub use create::{CreateAnalysisRunArgs, CreateArgs, CreateCommand};
pub use dashboard::{DashboardArgs, LoginWay};
pub use notifications::{NotificationsArgs, NotificationsCommand, TemplateCommand, TriggerCommand};

const ABOUT: &str = "Manage Sluice Rollouts (argoproj.io/v1alpha1) from kubectl";

const LONG_ABOUT: &str = "\
Manage Sluice Rollouts (argoproj.io/v1alpha1) from kubectl.

The commands and the changes they make to a Rollout are the same as those of
`kubectl argo rollouts`, so either tool can drive either controller.";

const EXAMPLES: &str = "\
Examples:
  # Show a rollout and follow its progress
  kubectl sluice get rollout guestbook -w

  # Move a paused canary to its next step, or skip all remaining steps
  kubectl sluice promote guestbook
  kubectl sluice promote guestbook --full

  # Abort an update and go back to the stable version, then try again
  kubectl sluice abort guestbook
  kubectl sluice retry rollout guestbook

  # Release a new image and wait until the rollout is healthy
  kubectl sluice set image guestbook guestbook=example/guestbook:v2
  kubectl sluice status guestbook --timeout 10m

  # Show an experiment, then end it before its duration is up
  kubectl sluice get experiment guestbook-exp
  kubectl sluice terminate experiment guestbook-exp

  # Check manifests before applying them
  kubectl sluice lint -f rollout.yaml";

/// `kubectl sluice`: inspect and operate Rollouts.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-sluice",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = EXAMPLES,
    subcommand_required = true,
    arg_required_else_help = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

const GLOBAL: &str = "Global options";

/// Where to find the cluster; accepted by every command.
#[derive(Debug, Clone, Default, Args)]
pub struct GlobalArgs {
    /// Path to the kubeconfig file [default: $KUBECONFIG, then ~/.kube/config, then in-cluster]
    #[arg(long, global = true, value_name = "PATH", help_heading = GLOBAL)]
    pub kubeconfig: Option<PathBuf>,
    /// Namespace of the rollout or experiment [default: the namespace of the kubeconfig context]
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE", help_heading = GLOBAL)]
    pub namespace: Option<String>,
    /// Kubeconfig context to use [default: the current context]
    #[arg(long, global = true, value_name = "CONTEXT", help_heading = GLOBAL)]
    pub context: Option<String>,
    /// Kubeconfig cluster to use [default: the cluster of the context]
    #[arg(long, global = true, value_name = "CLUSTER", help_heading = GLOBAL)]
    pub cluster: Option<String>,
    /// Kubeconfig user to use [default: the user of the context]
    #[arg(long, global = true, value_name = "USER", help_heading = GLOBAL)]
    pub user: Option<String>,
    /// The address and port of the Kubernetes API server
    #[arg(short = 's', long, global = true, value_name = "URL", help_heading = GLOBAL)]
    pub server: Option<String>,
    /// Bearer token for authentication to the API server
    #[arg(long, global = true, value_name = "TOKEN", help_heading = GLOBAL)]
    pub token: Option<String>,
    /// How long to wait for one server request before giving up, e.g. 1s, 2m, 3h, or a number
    /// of seconds; 0 waits forever
    #[arg(
        long,
        global = true,
        value_name = "DURATION",
        value_parser = parse_request_timeout,
        default_value = "0",
        hide_default_value = true,
        help_heading = GLOBAL
    )]
    pub request_timeout: Duration,
}

/// Parses kubectl's `--request-timeout`: a Go duration, or a bare number of seconds.
fn parse_request_timeout(value: &str) -> Result<Duration, String> {
    if let Ok(seconds) = value.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    sluice_api::parse_go_duration(value).map_err(|_| {
        format!(
            "invalid timeout value {value:?}: the timeout must be an integer number of seconds \
             or a duration with a unit (e.g. 1s, 2m, 3h)"
        )
    })
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show a rollout or an experiment: status, and its ReplicaSets, pods and analysis as a tree
    Get {
        #[command(subcommand)]
        what: GetCommand,
    },
    /// List rollouts or experiments as a table
    List {
        #[command(subcommand)]
        what: ListCommand,
    },
    /// Show the status of a rollout, and by default wait until it is healthy or degraded
    #[command(long_about = STATUS_LONG_ABOUT)]
    Status(StatusArgs),
    /// Promote a rollout: leave a pause, or with --full skip all remaining steps
    #[command(long_about = PROMOTE_LONG_ABOUT)]
    Promote(PromoteArgs),
    /// Abort the update of a rollout and scale back to the stable version
    #[command(
        long_about = "Abort the update of a rollout.\n\nSets status.abort=true. The controller \
                      then scales the stable ReplicaSet back up, sends all traffic to it and \
                      scales the canary or preview down. The rollout stays Degraded until it \
                      is retried or its spec changes."
    )]
    Abort(NameArgs),
    /// Retry an aborted rollout
    Retry {
        #[command(subcommand)]
        what: RetryCommand,
    },
    /// End an experiment or an analysis run now
    Terminate {
        #[command(subcommand)]
        what: TerminateCommand,
    },
    /// Pause a rollout (sets spec.paused=true)
    Pause(NameArgs),
    /// Resume a rollout paused with `pause` (sets spec.paused=false)
    #[command(
        visible_alias = "unpause",
        long_about = "Resume a rollout paused with `pause` (sets spec.paused=false).\n\nThis does \
                      not leave a pause step of a canary or a blue-green promotion pause: use \
                      `promote` for those."
    )]
    Resume(NameArgs),
    /// Restart the pods of a rollout, now or after a delay
    #[command(
        long_about = "Restart the pods of a rollout, now or after a delay.\n\nSets \
                      spec.restartAt; the controller then evicts every pod created before \
                      that time, a few at a time, respecting PodDisruptionBudgets."
    )]
    Restart(RestartArgs),
    /// Change fields of a rollout
    Set {
        #[command(subcommand)]
        what: SetCommand,
    },
    /// Roll back to an earlier revision of the pod template
    #[command(
        long_about = "Roll back to an earlier revision of the pod template.\n\nCopies the pod \
                      template of that revision's ReplicaSet into the rollout (or into the \
                      Deployment a workloadRef points at), which starts a new update."
    )]
    Undo(UndoArgs),
    /// Check Rollout manifests offline, without a cluster
    Lint(LintArgs),
    /// Create a Rollout, Experiment, AnalysisTemplate, ClusterAnalysisTemplate, or AnalysisRun
    /// resource
    #[command(
        long_about = "This command creates a new Rollout, Experiment, AnalysisTemplate, \
                      ClusterAnalysisTemplate, or AnalysisRun resource from a file.",
        after_help = create::CREATE_EXAMPLES
    )]
    Create(CreateArgs),
    /// Notification templates and triggers: list them, evaluate a trigger, send a template
    Notifications(NotificationsArgs),
    /// Say in plain words what a rollout waits for and why, and what moves it on
    #[command(long_about = EXPLAIN_LONG_ABOUT, after_help = EXPLAIN_EXAMPLES)]
    Explain(ExplainArgs),
    /// Serve a web dashboard and Argo's dashboard API for the Rollouts, on 127.0.0.1:3100
    #[command(
        long_about = dashboard::DASHBOARD_LONG_ABOUT,
        after_help = dashboard::DASHBOARD_EXAMPLES
    )]
    Dashboard(DashboardArgs),
    /// Print the version
    Version,
    /// Generate the autocompletion script for the specified shell
    #[command(
        long_about = "Generate the autocompletion script for kubectl sluice for the specified \
                      shell.",
        after_help = COMPLETION_EXAMPLES
    )]
    Completion {
        /// The shell
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

const COMPLETION_EXAMPLES: &str = "\
Examples:
  # Load completion for the current bash session
  source <(kubectl-sluice completion bash)

  # Install zsh completion
  kubectl-sluice completion zsh > \"${fpath[1]}/_kubectl-sluice\"

  # Fish and PowerShell
  kubectl-sluice completion fish > ~/.config/fish/completions/kubectl-sluice.fish
  kubectl-sluice completion powershell | Out-String | Invoke-Expression";

const EXPLAIN_LONG_ABOUT: &str = "\
Say in plain words what a rollout waits for and why, and the command that moves it on.

The rollout and its objects are read as the controller reads them and decided on by the
controller's own engine, so the answer is the controller's reason, not a guess from the
status: the pods not yet available (and since when), a pause step and until when, a pause
a user set and who, an analysis still measuring or Inconclusive with its metrics' last
values, an experiment running, a blue-green preview awaiting promotion, a traffic weight
not yet read back, an invalid spec and its field, and when the progress deadline fires.
Nothing is written.";

const EXPLAIN_EXAMPLES: &str = "\
Examples:
  # Why is my rollout stuck?
  kubectl sluice explain guestbook

  # In another namespace
  kubectl sluice explain guestbook -n shop";

const STATUS_LONG_ABOUT: &str = "\
Show the status of a rollout.

Prints `Phase - Message` each time it changes, until the rollout is Healthy (exit
code 0) or Degraded (exit code 1). With --watch=false it prints the current status
once and exits.";

const PROMOTE_LONG_ABOUT: &str = "\
Promote a rollout.

Leaves the current pause: clears spec.paused and the pause conditions the
controller set. A canary that is not paused (for example while an analysis or
experiment step runs) moves on to its next step. With --full the rollout skips
all remaining steps and analysis and becomes the new stable version at once.";

#[derive(Debug, Subcommand)]
pub enum GetCommand {
    /// Show a rollout as a header and a tree of revisions, ReplicaSets and pods
    #[command(visible_alias = "ro", visible_alias = "rollouts")]
    Rollout(GetRolloutArgs),
    /// Show an experiment: its status, templates and their replicas, and a tree of its
    /// ReplicaSets, pods and AnalysisRuns
    #[command(
        visible_alias = "exp",
        visible_alias = "experiments",
        long_about = GET_EXPERIMENT_LONG_ABOUT
    )]
    Experiment(GetExperimentArgs),
}

const GET_EXPERIMENT_LONG_ABOUT: &str = "\
Show an experiment.

The header gives its phase and message, when all its templates became available
(AvailableAt), the images of its templates, and a table of the templates: their
status (Progressing, Running, Successful, Failed, Error), the replicas they ask for
and have, and their ReplicaSet. The tree below shows the experiment's ReplicaSets
with their pods, then its AnalysisRuns with their phase and measurement counts.

Experiments started by a rollout's experiment step also show in `get rollout`,
under the revision they were started for.";

#[derive(Debug, Args)]
pub struct GetExperimentArgs {
    /// Name of the experiment
    pub name: String,
    /// Keep watching and show the experiment again each time it, its pods or its runs change
    #[arg(short, long)]
    pub watch: bool,
    /// Never colour the output (colour is only used on a terminal anyway)
    #[arg(long)]
    pub no_color: bool,
}

#[derive(Debug, Subcommand)]
pub enum TerminateCommand {
    /// End an experiment: its analyses stop and its ReplicaSets are scaled down
    #[command(
        visible_alias = "exp",
        visible_alias = "experiments",
        long_about = TERMINATE_EXPERIMENT_LONG_ABOUT
    )]
    Experiment(ExperimentNameArgs),
    /// End an analysis run: no more measurements are taken
    #[command(
        visible_alias = "ar",
        visible_alias = "analysisruns",
        name = "analysisrun",
        long_about = TERMINATE_ANALYSIS_RUN_LONG_ABOUT
    )]
    AnalysisRun(AnalysisRunNameArgs),
}

const TERMINATE_EXPERIMENT_LONG_ABOUT: &str = "\
End an experiment before its duration is up, or one that has no duration.

Sets spec.terminate=true. The controller then terminates the experiment's running
AnalysisRuns, scales its ReplicaSets down after scaleDownDelaySeconds, deletes the
Services it created, and gives the experiment its final phase: Successful unless a
template or an analysis had already failed.

An experiment started by a rollout's experiment step ends that step the same way.";

const TERMINATE_ANALYSIS_RUN_LONG_ABOUT: &str = "\
End an analysis run.

Sets spec.terminate=true. The controller takes no more measurements and gives the
run the phase its measurements so far earn.";

#[derive(Debug, Args)]
pub struct ExperimentNameArgs {
    /// Name of the experiment
    pub name: String,
}

#[derive(Debug, Args)]
pub struct AnalysisRunNameArgs {
    /// Name of the analysis run
    pub name: String,
}

#[derive(Debug, Args)]
pub struct GetRolloutArgs {
    /// Name of the rollout
    pub name: String,
    /// Keep watching and show the rollout again each time it or its pods change
    #[arg(short, long)]
    pub watch: bool,
    /// Never colour the output (colour is only used on a terminal anyway)
    #[arg(long)]
    pub no_color: bool,
}

#[derive(Debug, Subcommand)]
pub enum ListCommand {
    /// List the rollouts of a namespace, or of all namespaces with -A
    #[command(
        visible_alias = "rollout",
        visible_alias = "ro",
        after_help = LIST_ROLLOUTS_EXAMPLES
    )]
    Rollouts(ListRolloutsArgs),
    /// List the experiments of a namespace, or of all namespaces with -A
    #[command(
        visible_alias = "experiment",
        visible_alias = "exp",
        after_help = "Examples:\n  # List experiments\n  kubectl sluice list experiments\n\n  # List experiments from all namespaces\n  kubectl sluice list experiments --all-namespaces"
    )]
    Experiments(ListExperimentsArgs),
}

#[derive(Debug, Args)]
pub struct ListExperimentsArgs {
    /// Include all namespaces
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}

#[derive(Debug, Args)]
pub struct ListRolloutsArgs {
    /// Include all namespaces
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only show rollout with specified name
    #[arg(long)]
    pub name: Option<String>,
    /// Watch for changes: after the table, print a rollout's line again each time it changes
    #[arg(short, long)]
    pub watch: bool,
    /// Print timestamps on updates (a TIMESTAMP column, in UTC)
    #[arg(long)]
    pub timestamps: bool,
}

const LIST_ROLLOUTS_EXAMPLES: &str = "\
Examples:
  # List rollouts
  kubectl sluice list rollouts

  # List rollouts with a specific name
  kubectl sluice list rollouts --name my-rollout

  # List rollouts from all namespaces
  kubectl sluice list rollouts --all-namespaces

  # List rollouts and watch for changes, with the time of each change
  kubectl sluice list rollouts --watch --timestamps";

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Name of the rollout
    pub name: String,
    /// Wait until the rollout is Healthy or Degraded; --watch=false prints the status once
    #[arg(
        short,
        long,
        default_value_t = true,
        action = ArgAction::Set,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        hide_possible_values = true,
        value_name = "BOOL"
    )]
    pub watch: bool,
    /// Give up after this long, e.g. 90s, 5m, 1h30m (0 waits forever)
    #[arg(short, long, value_parser = parse_duration, default_value = "0", value_name = "DURATION")]
    pub timeout: Duration,
}

#[derive(Debug, Args)]
pub struct PromoteArgs {
    /// Name of the rollout
    pub name: String,
    /// Skip all remaining steps and analysis and make the update the stable version now
    #[arg(long, conflicts_with_all = ["skip_current_step", "skip_all_steps"])]
    pub full: bool,
    /// Deprecated: skip the current canary step
    #[arg(short = 'c', long, hide = true, conflicts_with = "skip_all_steps")]
    pub skip_current_step: bool,
    /// Deprecated: move to the end of the canary steps
    #[arg(short = 'a', long, hide = true)]
    pub skip_all_steps: bool,
}

#[derive(Debug, Args)]
pub struct NameArgs {
    /// Name of the rollout
    pub name: String,
}

#[derive(Debug, Subcommand)]
pub enum RetryCommand {
    /// Retry an aborted rollout: clears status.abort so the update starts again
    #[command(visible_alias = "ro", visible_alias = "rollouts")]
    Rollout(NameArgs),
    /// Retry a failed experiment: clears its status so that it runs again
    #[command(
        visible_alias = "exp",
        visible_alias = "experiments",
        after_help = "Examples:\n  # Retry an experiment\n  kubectl sluice retry experiment my-experiment"
    )]
    Experiment(ExperimentNameArgs),
}

#[derive(Debug, Args)]
pub struct RestartArgs {
    /// Name of the rollout
    pub name: String,
    /// Restart after this delay instead of now, e.g. 30s, 10m
    #[arg(short = 'i', long = "in", value_parser = parse_duration, default_value = "0", value_name = "DURATION")]
    pub delay: Duration,
}

#[derive(Debug, Subcommand)]
pub enum SetCommand {
    /// Update container images of a rollout's pod template
    #[command(
        long_about = "Update container images of a rollout's pod template.\n\nEach \
                      CONTAINER=IMAGE names a container, init container or ephemeral \
                      container; `*` stands for all of them. A rollout with a workloadRef \
                      has the referenced Deployment updated instead.",
        after_help = "Examples:\n  kubectl sluice set image guestbook guestbook=example/guestbook:v2\n  \
                      kubectl sluice set image guestbook '*=example/guestbook:v2'"
    )]
    Image(SetImageArgs),
}

#[derive(Debug, Args)]
pub struct SetImageArgs {
    /// Name of the rollout
    pub name: String,
    /// New images, as CONTAINER=IMAGE
    #[arg(required = true, value_name = "CONTAINER=IMAGE", value_parser = parse_image_update)]
    pub images: Vec<ImageUpdate>,
}

/// One `CONTAINER=IMAGE` argument of `set image`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageUpdate {
    /// Container name, or `*` for every container.
    pub container: String,
    pub image: String,
}

#[derive(Debug, Args)]
pub struct UndoArgs {
    /// Name of the rollout
    pub name: String,
    /// Revision to go back to [default: the revision before the latest]
    #[arg(long, value_name = "N")]
    pub to_revision: Option<i64>,
    /// For incidents: skip the steps, pauses and analyses of the update back, and make the
    /// earlier revision stable as soon as its pods are up (Sluice only; Argo's controller walks
    /// the steps). On an undo already under way, fast-tracks it
    #[arg(long)]
    pub fast: bool,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Name of the rollout
    pub name: String,
}

#[derive(Debug, Args)]
pub struct LintArgs {
    /// Manifest file to check (multi-document YAML); `-` reads standard input
    #[arg(short, long, value_name = "FILE")]
    pub filename: PathBuf,
}

/// Parses a Go-style duration (`30s`, `5m`, `1h30m`, `0`).
fn parse_duration(value: &str) -> Result<Duration, String> {
    sluice_api::parse_go_duration(value).map_err(|e| e.to_string())
}

fn parse_image_update(value: &str) -> Result<ImageUpdate, String> {
    match value.split_once('=') {
        Some((container, image)) if !container.is_empty() && !image.is_empty() => Ok(ImageUpdate {
            container: container.to_owned(),
            image: image.to_owned(),
        }),
        _ => Err(format!("expected CONTAINER=IMAGE, got {value:?}")),
    }
}

#[cfg(test)]
mod tests;

/// The command name the binary answers to: `kubectl argo rollouts` when installed as
/// `kubectl-argo-rollouts` (so scripts written for Argo's plugin keep working), else
/// `kubectl sluice`.
pub fn invoked_name(argv0: Option<&std::ffi::OsStr>) -> &'static str {
    let file = argv0
        .map(std::path::Path::new)
        .and_then(|path| path.file_stem())
        .and_then(|stem| stem.to_str());
    match file {
        Some("kubectl-argo-rollouts") => "kubectl argo rollouts",
        _ => "kubectl sluice",
    }
}

/// The command definition with its usage and examples under the name it was invoked as.
pub fn command_named(name: &str) -> clap::Command {
    // The usage line reads `kubectl sluice ...` (or the Argo name), as kubectl runs it.
    let command = <Cli as clap::CommandFactory>::command();
    if name == "kubectl sluice" {
        return command.bin_name(name);
    }
    let file = name.replace(' ', "-");
    let command = renamed(command, "kubectl sluice", name);
    renamed(command, "kubectl-sluice", &file).bin_name(name)
}

/// Rewrites the command's own name in every help text of the command and its subcommands.
fn renamed(mut command: clap::Command, from: &str, to: &str) -> clap::Command {
    let texts = (
        command.get_about().map(|t| t.to_string().replace(from, to)),
        command
            .get_long_about()
            .map(|t| t.to_string().replace(from, to)),
        command
            .get_after_help()
            .map(|t| t.to_string().replace(from, to)),
        command
            .get_after_long_help()
            .map(|t| t.to_string().replace(from, to)),
    );
    if let Some(text) = texts.0 {
        command = command.about(text);
    }
    if let Some(text) = texts.1 {
        command = command.long_about(text);
    }
    if let Some(text) = texts.2 {
        command = command.after_help(text);
    }
    if let Some(text) = texts.3 {
        command = command.after_long_help(text);
    }
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    for name in names {
        command = command.mut_subcommand(name, |sub| renamed(sub, from, to));
    }
    command
}

/// Parses the command line, answering to the name in `argv[0]`.
pub fn parse_invoked<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let name = invoked_name(args.first().map(|a| a.as_os_str()));
    let mut command = command_named(name);
    let matches = command.try_get_matches_from_mut(args)?;
    <Cli as clap::FromArgMatches>::from_arg_matches(&matches).map_err(|e| e.format(&mut command))
}
