//! The command line parses as `kubectl argo rollouts` does.

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
    let Command::Status(args) = parse(&["status", "demo", "--watch=false", "-t", "1m30s"]).command
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
                all_namespaces: true,
                ..
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

#[test]
fn kubectl_global_flags() {
    let cli = parse(&[
        "list",
        "rollouts",
        "--cluster",
        "prod",
        "--user",
        "ci",
        "-s",
        "https://k:6443",
        "--token",
        "abc",
        "--request-timeout",
        "5",
    ]);
    assert_eq!(cli.global.cluster.as_deref(), Some("prod"));
    assert_eq!(cli.global.user.as_deref(), Some("ci"));
    assert_eq!(cli.global.server.as_deref(), Some("https://k:6443"));
    assert_eq!(cli.global.token.as_deref(), Some("abc"));
    assert_eq!(cli.global.request_timeout, Duration::from_secs(5));
    let cli = parse(&["--request-timeout=1m30s", "version"]);
    assert_eq!(cli.global.request_timeout, Duration::from_secs(90));
    assert_eq!(parse(&["version"]).global.request_timeout, Duration::ZERO);
    let bad = Cli::try_parse_from(["kubectl-sluice", "--request-timeout", "soon", "version"]);
    assert!(
        bad.unwrap_err()
            .to_string()
            .contains("invalid timeout value \"soon\"")
    );
}

#[test]
fn answers_to_the_name_it_is_installed_as() {
    use std::ffi::OsStr;
    assert_eq!(
        invoked_name(Some(OsStr::new("/usr/local/bin/kubectl-argo-rollouts"))),
        "kubectl argo rollouts"
    );
    assert_eq!(
        invoked_name(Some(OsStr::new("kubectl-argo-rollouts.exe"))),
        "kubectl argo rollouts"
    );
    assert_eq!(
        invoked_name(Some(OsStr::new("kubectl-sluice"))),
        "kubectl sluice"
    );
    assert_eq!(invoked_name(None), "kubectl sluice");
    let help = command_named("kubectl argo rollouts")
        .render_long_help()
        .to_string();
    assert!(help.contains("Usage: kubectl argo rollouts"), "{help}");
    assert!(
        help.contains("kubectl argo rollouts promote guestbook"),
        "{help}"
    );
    assert!(!help.contains("kubectl sluice"), "{help}");
    let cli = parse_invoked(["kubectl-argo-rollouts", "pause", "demo"]).unwrap();
    assert!(matches!(cli.command, Command::Pause(_)));
    command_named("kubectl argo rollouts").debug_assert();
}
