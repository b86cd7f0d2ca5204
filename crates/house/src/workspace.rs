//! The workspace's crates and their root files, found on disk the way Cargo finds them by
//! default (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`).

use std::path::{Path, PathBuf};

/// One crate root: a label (`api` for the library of `crates/api`, `api/bin/crdgen` for a
/// binary) and its root file.
#[derive(Debug, Clone)]
pub struct Root {
    pub label: String,
    pub file: PathBuf,
}

/// The crate roots of every member under `root/crates`, in order.
pub fn crate_roots(root: &Path) -> std::io::Result<Vec<Root>> {
    let mut members: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    members.sort();
    let mut out = Vec::new();
    for member in members {
        let name = member
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string();
        let src = member.join("src");
        for (file, label) in [
            ("lib.rs", name.clone()),
            ("main.rs", format!("{name}/main")),
        ] {
            if src.join(file).is_file() {
                out.push(Root {
                    label,
                    file: src.join(file),
                });
            }
        }
        let bin = src.join("bin");
        if bin.is_dir() {
            let mut bins: Vec<PathBuf> = std::fs::read_dir(&bin)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            bins.sort();
            for b in bins {
                let file = if b.is_dir() { b.join("main.rs") } else { b };
                let stem = file
                    .with_extension("")
                    .strip_prefix(&bin)
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                if file.extension().is_some_and(|e| e == "rs") && file.is_file() {
                    out.push(Root {
                        label: format!("{name}/bin/{}", stem.trim_end_matches("/main")),
                        file,
                    });
                }
            }
        }
    }
    Ok(out)
}
