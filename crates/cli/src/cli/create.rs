//! Arguments of `create` and `create analysisrun`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

pub const CREATE_EXAMPLES: &str = "\
Examples:
  # Create an experiment and watch it
  kubectl sluice create -f my-experiment.yaml -w

  # Create a rollout and the analysis template it uses
  kubectl sluice create -f analysis-template.yaml -f rollout.yaml";

pub const CREATE_ANALYSIS_RUN_EXAMPLES: &str = "\
Examples:
  # Create an AnalysisRun from a local AnalysisTemplate file
  kubectl sluice create analysisrun --from-file my-analysis-template.yaml

  # Create an AnalysisRun from an AnalysisTemplate in the cluster, with an argument
  kubectl sluice create analysisrun --from my-analysis-template -a service-name=guestbook

  # Create an AnalysisRun from a local ClusterAnalysisTemplate file
  kubectl sluice create analysisrun --global --from-file my-analysis-cluster-template.yaml

  # Create an AnalysisRun from a ClusterAnalysisTemplate in the cluster
  kubectl sluice create analysisrun --global --from my-analysis-cluster-template";

/// `create -f FILE...`, or `create analysisrun ...`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CreateArgs {
    #[command(subcommand)]
    pub what: Option<CreateCommand>,
    /// Files to use to create the resource (repeatable); `-` reads standard input
    #[arg(short, long = "filename", value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Watch live updates to the resource after creating
    #[arg(short, long)]
    pub watch: bool,
    /// Do not colorize output
    #[arg(long)]
    pub no_color: bool,
}

#[derive(Debug, Subcommand)]
pub enum CreateCommand {
    /// Create an AnalysisRun from an AnalysisTemplate or a ClusterAnalysisTemplate
    #[command(
        name = "analysisrun",
        visible_alias = "ar",
        long_about = CREATE_ANALYSIS_RUN_LONG_ABOUT,
        after_help = CREATE_ANALYSIS_RUN_EXAMPLES
    )]
    AnalysisRun(CreateAnalysisRunArgs),
}

const CREATE_ANALYSIS_RUN_LONG_ABOUT: &str = "\
Create an AnalysisRun from an AnalysisTemplate or a ClusterAnalysisTemplate, in the
cluster (--from) or in a local file (--from-file).

The run gets the template's metrics and arguments; -a NAME=VALUE gives an argument
its value (arguments the template does not declare are ignored), and an argument
left without a value is an error naming it. The run is named --name, or generated
from --generate-name, or by default from the template's name.";

#[derive(Debug, Args)]
pub struct CreateAnalysisRunArgs {
    /// Use the specified name for the run
    #[arg(long, conflicts_with = "generate_name")]
    pub name: Option<String>,
    /// Use the specified generateName for the run
    #[arg(long, value_name = "PREFIX")]
    pub generate_name: Option<String>,
    /// Instance-ID for the AnalysisRun (the controller-instance-id label)
    #[arg(long, value_name = "ID")]
    pub instance_id: Option<String>,
    /// Arguments to the parameter template, as NAME=VALUE (repeatable)
    #[arg(short = 'a', long = "argument", value_name = "NAME=VALUE")]
    pub arguments: Vec<String>,
    /// Create an AnalysisRun from an AnalysisTemplate or ClusterAnalysisTemplate in the cluster
    #[arg(long, value_name = "TEMPLATE")]
    pub from: Option<String>,
    /// Create an AnalysisRun from an AnalysisTemplate or ClusterAnalysisTemplate in a local file
    #[arg(long, value_name = "FILE")]
    pub from_file: Option<PathBuf>,
    /// Use a ClusterAnalysisTemplate instead of an AnalysisTemplate
    #[arg(long, visible_alias = "from-cluster-template")]
    pub global: bool,
}
