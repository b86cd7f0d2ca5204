//! A crate's module tree, read from its root file: every module with its child modules, the
//! names its `use` declarations bring in, and its own items with the paths each one names.
//! Modules and items compiled for tests only (`#[cfg(test)]`) are left out: a test module's
//! `use super::*` is how tests are written, not a dependency of the code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::paths::{self, Import, RawPath};

/// A module's place in its crate: `[]` is the crate root, `["validation", "steps"]` is
/// `crate::validation::steps`.
pub type ModPath = Vec<String>;

#[derive(Debug, Default)]
pub struct Module {
    /// The file the module's items are written in.
    pub file: PathBuf,
    /// Child modules (compiled outside tests).
    pub children: Vec<String>,
    /// `use` declarations: the name brought in and the path it stands for.
    pub imports: BTreeMap<String, RawPath>,
    /// `use ...::*` declarations.
    pub globs: Vec<RawPath>,
    /// The module's own named items, each with the paths its definition names.
    pub items: BTreeMap<String, Vec<RawPath>>,
    /// Paths named outside any named item: in `impl` blocks and item-level macro calls.
    pub loose: Vec<RawPath>,
}

impl Module {
    /// Every path the module names: its `use` declarations first (the clearest witness of a
    /// dependency), then its items and loose code.
    pub fn all_paths(&self) -> impl Iterator<Item = &RawPath> {
        self.imports
            .values()
            .chain(&self.globs)
            .chain(self.items.values().flatten())
            .chain(&self.loose)
    }
}

/// All the modules of one crate, by their place.
#[derive(Debug, Default)]
pub struct Crate {
    pub modules: BTreeMap<ModPath, Module>,
}

/// How the sources are read: from the disk, or from a map in tests.
pub trait Sources {
    fn read(&self, path: &Path) -> Option<String>;
}

impl Sources for BTreeMap<PathBuf, String> {
    fn read(&self, path: &Path) -> Option<String> {
        self.get(path).cloned()
    }
}

/// The file system.
pub struct Disk;

impl Sources for Disk {
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
}

/// Why a crate could not be read.
#[derive(Debug)]
pub enum LoadError {
    Missing { module: String, tried: Vec<PathBuf> },
    Parse { file: PathBuf, error: String },
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Missing { module, tried } => {
                write!(f, "module {module}: none of {tried:?} exists")
            }
            LoadError::Parse { file, error } => write!(f, "{}: {error}", file.display()),
        }
    }
}

/// Reads the crate whose root file (`src/lib.rs`, `src/main.rs`, a binary's file) is `root`.
pub fn load(root: &Path, sources: &dyn Sources) -> Result<Crate, LoadError> {
    let mut krate = Crate::default();
    let dir = root.parent().unwrap_or(Path::new("")).to_path_buf();
    load_file(&mut krate, sources, Vec::new(), root, dir)?;
    Ok(krate)
}

fn load_file(
    krate: &mut Crate,
    sources: &dyn Sources,
    at: ModPath,
    file: &Path,
    dir: PathBuf,
) -> Result<(), LoadError> {
    let text = sources.read(file).ok_or_else(|| LoadError::Missing {
        module: display(&at),
        tried: vec![file.to_path_buf()],
    })?;
    let parsed = syn::parse_file(&text).map_err(|e| LoadError::Parse {
        file: file.to_path_buf(),
        error: e.to_string(),
    })?;
    load_items(krate, sources, at, file, dir, &parsed.items)
}

/// Reads one module's items; `dir` is where the files of its child modules are.
fn load_items(
    krate: &mut Crate,
    sources: &dyn Sources,
    at: ModPath,
    file: &Path,
    dir: PathBuf,
    items: &[syn::Item],
) -> Result<(), LoadError> {
    let mut module = Module {
        file: file.to_path_buf(),
        ..Module::default()
    };
    let mut children = Vec::new();
    for item in items {
        if paths::is_test_only(paths::item_attrs(item)) {
            continue;
        }
        match item {
            syn::Item::Mod(m) => {
                let name = m.ident.to_string();
                module.children.push(name.clone());
                children.push((name, m));
            }
            syn::Item::Use(u) => {
                for import in paths::imports(&u.tree) {
                    match import {
                        Import::Name { name, path } => {
                            module.imports.insert(name, path);
                        }
                        Import::Glob(path) => module.globs.push(path),
                    }
                }
            }
            other => {
                let named = paths::named_in_item(other);
                match item_name(other) {
                    Some(name) => module.items.entry(name).or_default().extend(named),
                    None => module.loose.extend(named),
                }
            }
        }
    }
    krate.modules.insert(at.clone(), module);
    for (name, m) in children {
        let mut child = at.clone();
        child.push(name.clone());
        let child_dir = dir.join(&name);
        match &m.content {
            Some((_, items)) => load_items(krate, sources, child, file, child_dir, items)?,
            None => {
                let flat = dir.join(format!("{name}.rs"));
                let nested = child_dir.join("mod.rs");
                let chosen = [&flat, &nested]
                    .into_iter()
                    .find(|p| sources.read(p).is_some())
                    .cloned()
                    .ok_or_else(|| LoadError::Missing {
                        module: display(&child),
                        tried: vec![flat.clone(), nested.clone()],
                    })?;
                load_file(krate, sources, child, &chosen, child_dir)?;
            }
        }
    }
    Ok(())
}

/// The name under which an item's paths are kept. An `impl` block has none: a type used is its
/// definition, not every method of it (a method is reached by a call, which names no path).
fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

/// `crate::a::b` for `["a", "b"]`.
pub fn display(at: &[String]) -> String {
    std::iter::once("crate")
        .chain(at.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("::")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(files: &[(&str, &str)]) -> BTreeMap<PathBuf, String> {
        files
            .iter()
            .map(|(p, s)| (PathBuf::from(p), s.to_string()))
            .collect()
    }

    #[test]
    fn modules_are_found_in_flat_nested_and_inline_form_and_test_modules_are_left_out() {
        let src = sources(&[
            (
                "src/lib.rs",
                "mod a; mod b; mod c { pub mod d; } #[cfg(test)] mod tests;",
            ),
            ("src/a.rs", "pub fn f() {}"),
            ("src/b/mod.rs", "mod e;"),
            ("src/b/e.rs", "pub struct E;"),
            ("src/c/d.rs", "use super::super::a::f; pub fn g() { f() }"),
        ]);
        let krate = load(Path::new("src/lib.rs"), &src).expect("loads");
        let places: Vec<String> = krate.modules.keys().map(|p| display(p)).collect();
        assert_eq!(
            places,
            [
                "crate",
                "crate::a",
                "crate::b",
                "crate::b::e",
                "crate::c",
                "crate::c::d"
            ]
        );
        let d = &krate.modules[&vec!["c".to_string(), "d".to_string()]];
        assert_eq!(d.file, PathBuf::from("src/c/d.rs"));
        assert_eq!(d.imports["f"], ["super", "super", "a", "f"]);
        assert!(d.items["g"].iter().any(|p| p == &["f"]));
    }

    #[test]
    fn an_impl_block_is_loose_code_of_its_module_not_part_of_its_type() {
        let src = sources(&[(
            "src/lib.rs",
            "pub struct S(x::T); impl S { fn f() { crate::x::g() } } mod x { pub fn g() {} }",
        )]);
        let krate = load(Path::new("src/lib.rs"), &src).expect("loads");
        let root = &krate.modules[&vec![]];
        assert_eq!(root.items["S"], [vec!["x".to_string(), "T".to_string()]]);
        assert!(root.loose.iter().any(|p| p == &["crate", "x", "g"]));
    }

    #[test]
    fn a_missing_module_file_is_an_error_naming_the_module() {
        let src = sources(&[("src/lib.rs", "mod gone;")]);
        let err = load(Path::new("src/lib.rs"), &src).expect_err("fails");
        assert!(err.to_string().contains("crate::gone"), "{err}");
    }
}
