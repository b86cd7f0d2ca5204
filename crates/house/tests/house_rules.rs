//! The house rules, checked over the whole workspace.
//!
//! A few breaches were known when these checks came in and are being removed by the changes
//! named beside them ([`PENDING_CIRCLES`], [`PENDING_SIZES`]). A breach not listed fails, and so
//! does a listed one that is gone: the lists only shrink, and must be empty once those
//! changes are in.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use sluice_house::modules::{Disk, display, load};
use sluice_house::{circles, sizes, workspace};

/// Circles still being broken: `crate label: parent::{members}`.
const PENDING_CIRCLES: &[&str] = &[];

/// Files still being split, relative to the workspace root.
const PENDING_SIZES: &[&str] = &[];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What is found and not pending, and what is pending and not found.
fn compare(found: &BTreeSet<String>, pending: &[&str]) -> (Vec<String>, Vec<String>) {
    let pending: BTreeSet<String> = pending.iter().map(|s| s.to_string()).collect();
    (
        found.difference(&pending).cloned().collect(),
        pending.difference(found).cloned().collect(),
    )
}

#[test]
fn no_crate_has_an_import_circle() {
    let root = workspace_root();
    let roots = workspace::crate_roots(&root).expect("the workspace's crates");
    assert!(roots.len() > 10, "found only {roots:?}");
    let mut found = BTreeSet::new();
    let mut details = String::new();
    for r in roots {
        let krate = load(&r.file, &Disk).unwrap_or_else(|e| panic!("{}: {e}", r.label));
        for circle in circles::find(&krate) {
            let key = format!(
                "{}: {}::{{{}}}",
                r.label,
                display(&circle.parent),
                circle.members.join(", ")
            );
            details.push_str(&format!("{}: {circle}", r.label));
            found.insert(key);
        }
    }
    let (new, gone) = compare(&found, PENDING_CIRCLES);
    assert!(
        new.is_empty(),
        "import circles (siblings that depend on each other; move the shared helper down to \
         their parent or into a module below both): {new:#?}\n{details}"
    );
    assert!(
        gone.is_empty(),
        "these circles are gone: take them off PENDING_CIRCLES: {gone:#?}"
    );
}

#[test]
fn no_source_file_is_over_the_limit() {
    let root = workspace_root();
    let over = sizes::oversized(&root, &["crates", "scripts", "tools"]).expect("the sources");
    let found: BTreeSet<String> = over.iter().map(|(f, _)| f.display().to_string()).collect();
    let (new, gone) = compare(&found, PENDING_SIZES);
    let lines: Vec<String> = over
        .iter()
        .map(|(f, n)| format!("  {} ({n} lines)", f.display()))
        .collect();
    assert!(
        new.is_empty(),
        "source files over {} lines (split them by job; a generated file carries `{}` in its \
         first lines): {new:#?}\nall over the limit:\n{}",
        sizes::MAX_LINES,
        sizes::GENERATED_MARKER,
        lines.join("\n")
    );
    assert!(
        gone.is_empty(),
        "these files keep the limit now: take them off PENDING_SIZES: {gone:#?}"
    );
}
