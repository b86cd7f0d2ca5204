//! Arguments of `notifications`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

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
