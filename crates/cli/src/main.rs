//! `kubectl-sluice`: the kubectl plugin for Sluice Rollouts, command-compatible with
//! `kubectl argo rollouts`. Installed on the PATH it runs as `kubectl sluice ...`.

mod cli;
mod cmd;
mod info;
mod kube_target;
mod phase;
mod render;

use std::process::ExitCode;

/// jemalloc rather than the system allocator, as in the controller: `dashboard` keeps caches
/// of a namespace's Rollouts, ReplicaSets and pods for hours while every watch event replaces
/// an object, and glibc's allocator keeps the freed pieces, so the resident size creeps up
/// past what is live (docs/benchmarks.md, the dashboard's soak).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    // kube's rustls transport needs a process-wide crypto provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = match cli::parse_invoked(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cmd::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", error_text(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, `outer: inner: root`. Causes whose text the line
/// already holds are left out, since many library errors repeat their source in their own
/// message.
fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let message = cause.to_string();
        let message = message.strip_prefix("error: ").unwrap_or(&message);
        if text.contains(message) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(message);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_chain_without_repeats() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let error = anyhow::Error::new(io)
            .context("failed to read '/x': No such file or directory")
            .context("reading kubeconfig /x");
        assert_eq!(
            error_text(&error),
            "reading kubeconfig /x: failed to read '/x': No such file or directory"
        );
        let plain = anyhow::anyhow!("error: bad input").context("lint");
        assert_eq!(error_text(&plain), "lint: bad input");
    }
}
