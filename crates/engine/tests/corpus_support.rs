//! How many of the Rollouts in Argo's own examples and end-to-end fixtures Sluice drives: the
//! figure the README states. Each Rollout the engine refuses is listed
//! with the reason, so the figure can only change on purpose.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sluice_api::Rollout;

/// Every Rollout document in `examples/` and `test/e2e/`, except Argo's deliberately
/// malformed ones (`expectedfailures`).
fn corpus_rollouts() -> Vec<(String, Rollout)> {
    let root = sluice_api::corpus::require_argo_corpus_dir().unwrap_or_else(|e| panic!("{e}"));
    let mut files = Vec::new();
    for sub in ["examples", "test/e2e"] {
        collect(&root.join(sub), &mut files);
    }
    files.sort();
    let mut out = Vec::new();
    for file in files {
        if file
            .components()
            .any(|c| c.as_os_str() == "expectedfailures")
        {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        if !text.contains("kind: Rollout") {
            continue;
        }
        let Ok(docs) = serde_saphyr::from_multiple::<Value>(&text) else {
            continue;
        };
        for (i, doc) in docs.into_iter().enumerate() {
            if doc["kind"] == "Rollout"
                && let Ok(ro) = serde_json::from_value::<Rollout>(doc)
            {
                let rel = file.strip_prefix(&root).unwrap_or(&file);
                out.push((format!("{}#{i}", rel.display()), ro));
            }
        }
    }
    out
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            files.push(path);
        }
    }
}

/// The README states these figures; change both together.
const CORPUS_ROLLOUTS: usize = 73;
const SUPPORTED: usize = 73;

#[test]
fn sluice_runs_the_documented_share_of_argos_corpus() {
    let rollouts = corpus_rollouts();
    let refused: Vec<String> = rollouts
        .iter()
        .filter_map(|(label, ro)| {
            sluice_engine::supports(ro)
                .err()
                .map(|e| format!("{label}: {e}"))
        })
        .collect();
    let supported = rollouts.len() - refused.len();
    println!(
        "{supported} of {} corpus Rollouts run; refused:",
        rollouts.len()
    );
    for r in &refused {
        println!("  {r}");
    }
    assert_eq!(rollouts.len(), CORPUS_ROLLOUTS, "corpus Rollouts");
    assert_eq!(supported, SUPPORTED, "supported corpus Rollouts");
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md");
    let figure = format!("{SUPPORTED} of the {CORPUS_ROLLOUTS} Rollouts");
    assert!(readme.contains(&figure), "README must say \"{figure}\"");
}
