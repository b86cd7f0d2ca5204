//! Command-line syntax: the commands and flags of `kubectl sluice`, mirroring
//! `kubectl argo rollouts` so scripts written for one work with the other.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand};

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
    bin_name = "kubectl sluice",
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
    /// Notification templates and triggers: list them, evaluate a trigger, send a template
    Notifications(NotificationsArgs),
    /// Print the version
    Version,
}

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
    #[command(visible_alias = "rollout", visible_alias = "ro")]
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
    /// List rollouts of all namespaces
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
}

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
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("kubectl-sluice").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = parse(&["promote", "demo", "-n", "shop", "--context", "dev"]);
        assert_eq!(cli.global.namespace.as_deref(), Some("shop"));
        assert_eq!(cli.global.context.as_deref(), Some("dev"));
        let cli = parse(&["--kubeconfig", "/tmp/kc", "abort", "demo"]);
        assert_eq!(cli.global.kubeconfig, Some(PathBuf::from("/tmp/kc")));
    }

    #[test]
    fn status_watches_by_default() {
        let Command::Status(args) = parse(&["status", "demo"]).command else {
            panic!("not status")
        };
        assert!(args.watch);
        assert_eq!(args.timeout, Duration::ZERO);
        let Command::Status(args) =
            parse(&["status", "demo", "--watch=false", "-t", "1m30s"]).command
        else {
            panic!("not status")
        };
        assert!(!args.watch);
        assert_eq!(args.timeout, Duration::from_secs(90));
    }

    #[test]
    fn set_image_takes_container_image_pairs() {
        let Command::Set {
            what: SetCommand::Image(args),
        } = parse(&["set", "image", "demo", "app=nginx:1.2", "*=busybox:latest"]).command
        else {
            panic!("not set image")
        };
        assert_eq!(
            args.images,
            [
                ImageUpdate {
                    container: "app".into(),
                    image: "nginx:1.2".into()
                },
                ImageUpdate {
                    container: "*".into(),
                    image: "busybox:latest".into()
                },
            ]
        );
        let parsed = Cli::try_parse_from(["kubectl-sluice", "set", "image", "demo", "nginx"]);
        assert!(parsed.is_err());
    }

    #[test]
    fn restart_delay_and_bad_durations() {
        let Command::Restart(args) = parse(&["restart", "demo", "-i", "10s"]).command else {
            panic!("not restart")
        };
        assert_eq!(args.delay, Duration::from_secs(10));
        assert!(Cli::try_parse_from(["kubectl-sluice", "restart", "demo", "-i", "ten"]).is_err());
    }

    #[test]
    fn aliases_of_argo_rollouts_are_accepted() {
        assert!(matches!(
            parse(&["unpause", "demo"]).command,
            Command::Resume(_)
        ));
        assert!(matches!(
            parse(&["list", "ro", "-A"]).command,
            Command::List {
                what: ListCommand::Rollouts(ListRolloutsArgs {
                    all_namespaces: true
                })
            }
        ));
        assert!(matches!(
            parse(&["get", "ro", "demo", "-w"]).command,
            Command::Get {
                what: GetCommand::Rollout(GetRolloutArgs { watch: true, .. })
            }
        ));
    }

    #[test]
    fn experiment_commands_and_their_aliases() {
        assert!(matches!(
            parse(&["get", "experiment", "demo-exp", "-w", "--no-color"]).command,
            Command::Get {
                what: GetCommand::Experiment(GetExperimentArgs {
                    watch: true,
                    no_color: true,
                    ..
                })
            }
        ));
        let Command::Get {
            what: GetCommand::Experiment(args),
        } = parse(&["get", "exp", "demo-exp", "-n", "shop"]).command
        else {
            panic!("not get experiment")
        };
        assert_eq!(args.name, "demo-exp");
        let Command::Terminate {
            what: TerminateCommand::Experiment(args),
        } = parse(&["terminate", "exp", "demo-exp"]).command
        else {
            panic!("not terminate experiment")
        };
        assert_eq!(args.name, "demo-exp");
        assert!(matches!(
            parse(&["terminate", "analysisrun", "demo-run"]).command,
            Command::Terminate {
                what: TerminateCommand::AnalysisRun(_)
            }
        ));
        assert!(matches!(
            parse(&["terminate", "ar", "demo-run"]).command,
            Command::Terminate {
                what: TerminateCommand::AnalysisRun(_)
            }
        ));
        assert!(Cli::try_parse_from(["kubectl-sluice", "terminate", "experiment"]).is_err());
    }

    #[test]
    fn promote_flags_exclude_each_other() {
        assert!(
            Cli::try_parse_from([
                "kubectl-sluice",
                "promote",
                "demo",
                "--full",
                "--skip-all-steps"
            ])
            .is_err()
        );
        let Command::Promote(args) = parse(&["promote", "demo", "--full"]).command else {
            panic!("not promote")
        };
        assert!(args.full);
    }
}

/// `notifications`: the configuration is the cluster's `argo-rollouts-notification-configmap`
/// and `argo-rollouts-notification-secret` in the namespace, or the given files.
#[derive(Debug, Args)]
pub struct NotificationsArgs {
    /// argo-rollouts-notification-configmap.yaml file path [default: the cluster's]
    #[arg(long, global = true, value_name = "PATH")]
    pub config_map: Option<PathBuf>,
    /// argo-rollouts-notification-secret.yaml file path; `:empty` for an empty secret
    /// [default: the cluster's]
    #[arg(long, global = true, value_name = "PATH")]
    pub secret: Option<String>,
    #[command(subcommand)]
    pub command: NotificationsCommand,
}

#[derive(Debug, Subcommand)]
pub enum NotificationsCommand {
    /// Notification templates related commands
    #[command(subcommand)]
    Template(TemplateCommand),
    /// Notification triggers related commands
    #[command(subcommand)]
    Trigger(TriggerCommand),
}

#[derive(Debug, Subcommand)]
pub enum TemplateCommand {
    /// Prints information about configured templates
    Get {
        /// Only this template
        name: Option<String>,
    },
    /// Generates the notification of a template for a rollout and sends it to the recipients
    Notify {
        /// Template name
        name: String,
        /// Rollout name
        rollout: String,
        /// Recipient as service:recipient (repeatable) [default: console:stdout, which prints it]
        #[arg(long)]
        recipient: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum TriggerCommand {
    /// Prints information about configured triggers
    Get {
        /// Only this trigger
        name: Option<String>,
    },
    /// Evaluates the conditions of a trigger for a rollout and prints the results
    Run {
        /// Trigger name
        name: String,
        /// Rollout name
        rollout: String,
    },
}
