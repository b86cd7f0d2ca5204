//! Import circles inside a crate.
//!
//! **What counts.** Every path a module names (in `use` declarations, code, types and macro
//! arguments) is resolved, through `use` declarations and re-exports, to the module that
//! defines what it names. A reference from a module inside sibling `a` to one inside sibling
//! `b` (two children of the same parent, each with all its descendants) is an edge `a -> b`
//! at that parent. A circle is a set of siblings that reach each other through such edges,
//! directly or through other siblings.
//!
//! **A parent and its children.** A parent's own items are a level below its children: a child
//! may use them (that is where a helper shared by siblings belongs), and the parent may use its
//! children (its `pub use`s and the functions that tie them together); neither is a circle.
//! But a parent's item is not a way around the rule: when a child uses an item of an ancestor
//! that itself names a sibling of the child (or something under one), the child depends on
//! that sibling.
//!
//! Method calls (`x.f()`) name no path and are not seen; modules and items compiled for tests
//! only are left out ([`crate::modules`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::modules::{Crate, ModPath, display};
use crate::paths::RawPath;

/// What a path names: an item of a module (or the module itself).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Target {
    module: ModPath,
    item: Option<String>,
}

/// The siblings of one parent: sibling -> sibling it uses -> the first place that makes the
/// edge (the module, and the path it names).
type Graph = BTreeMap<String, BTreeMap<String, (ModPath, String)>>;

/// How deep re-exports are followed before giving up (re-exports of re-exports are rare).
const MAX_HOPS: usize = 16;

/// One circle: the siblings (children of `parent`) in it, and for each edge between them one
/// place that makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circle {
    pub parent: ModPath,
    pub members: Vec<String>,
    pub edges: Vec<Edge>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: String,
    pub to: String,
    /// The module whose code makes the edge, and the path it names there.
    pub at: ModPath,
    pub path: String,
}

impl std::fmt::Display for Circle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parent = display(&self.parent);
        writeln!(f, "{parent}::{{{}}}", self.members.join(", "))?;
        for e in &self.edges {
            writeln!(
                f,
                "    {} -> {}: {} names `{}`",
                e.from,
                e.to,
                display(&e.at),
                e.path
            )?;
        }
        Ok(())
    }
}

/// The circles of one crate, in the order of their parents.
pub fn find(krate: &Crate) -> Vec<Circle> {
    let mut graphs: BTreeMap<ModPath, Graph> = BTreeMap::new();
    for (at, module) in &krate.modules {
        for raw in module.all_paths() {
            let Some(target) = resolve(krate, at, raw, 0) else {
                continue;
            };
            let mut seen = BTreeSet::new();
            for (parent, from, to) in edges(krate, at, &target, &mut seen) {
                graphs
                    .entry(parent)
                    .or_default()
                    .entry(from)
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| (at.clone(), raw.join("::")));
            }
        }
    }
    let mut circles = Vec::new();
    for (parent, graph) in graphs {
        for members in strongly_connected(&graph) {
            let mut edges = Vec::new();
            for from in &members {
                for (to, (at, path)) in graph.get(from).into_iter().flatten() {
                    if members.contains(to) {
                        edges.push(Edge {
                            from: from.clone(),
                            to: to.clone(),
                            at: at.clone(),
                            path: path.clone(),
                        });
                    }
                }
            }
            circles.push(Circle {
                parent: parent.clone(),
                members,
                edges,
            });
        }
    }
    circles
}

/// The sibling edges `(parent, from, to)` that a reference from module `at` to `target` makes.
fn edges(
    krate: &Crate,
    at: &ModPath,
    target: &Target,
    seen: &mut BTreeSet<Target>,
) -> Vec<(ModPath, String, String)> {
    let t = &target.module;
    if t == at || t.starts_with(at) {
        // Its own items, or below it: a parent uses its children freely.
        return Vec::new();
    }
    if at.starts_with(t) {
        // An ancestor's own item: the child depends on what that item names.
        let Some(item) = &target.item else {
            return Vec::new();
        };
        if !seen.insert(target.clone()) {
            return Vec::new();
        }
        let Some(paths) = krate.modules.get(t).and_then(|m| m.items.get(item)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for raw in paths {
            if let Some(next) = resolve(krate, t, raw, 0) {
                out.extend(edges(krate, at, &next, seen));
            }
        }
        return out;
    }
    let common = at.iter().zip(t).take_while(|(a, b)| a == b).count();
    vec![(at[..common].to_vec(), at[common].clone(), t[common].clone())]
}

/// What `raw`, written in module `at`, names inside the crate (`None`: something outside it,
/// a local variable, or the prelude).
fn resolve(krate: &Crate, at: &ModPath, raw: &[String], hops: usize) -> Option<Target> {
    if hops > MAX_HOPS || raw.is_empty() {
        return None;
    }
    let mut here = at.clone();
    let mut rest = raw;
    let mut anchored = false;
    if rest[0] == "crate" {
        here.clear();
        rest = &rest[1..];
        anchored = true;
    } else {
        while let Some(first) = rest.first() {
            match first.as_str() {
                "self" => {}
                "super" => {
                    here.pop()?;
                }
                _ => break,
            }
            rest = &rest[1..];
            anchored = true;
        }
    }
    walk(krate, here, rest, anchored, hops)
}

/// Follows `rest` down from module `here`. `anchored`: the path is known to start inside the
/// crate, so a name not found is still an item of `here` (made by a macro, say).
fn walk(
    krate: &Crate,
    mut here: ModPath,
    mut rest: &[String],
    mut anchored: bool,
    hops: usize,
) -> Option<Target> {
    if hops > MAX_HOPS {
        return None;
    }
    loop {
        let Some(first) = rest.first() else {
            return Some(Target {
                module: here,
                item: None,
            });
        };
        let module = krate.modules.get(&here)?;
        if module.children.contains(first) {
            here.push(first.clone());
            rest = &rest[1..];
            anchored = true;
            continue;
        }
        if let Some(import) = module.imports.get(first) {
            let mut path = import.clone();
            path.extend(rest[1..].iter().cloned());
            return resolve(krate, &here, &path, hops + 1);
        }
        if module.items.contains_key(first) {
            return Some(Target {
                module: here,
                item: Some(first.clone()),
            });
        }
        for glob in &module.globs {
            if let Some(from) = glob_module(krate, &here, glob, hops)
                && krate.modules.get(&from).is_some_and(|m| defines(m, first))
            {
                return walk(krate, from, rest, true, hops + 1);
            }
        }
        return anchored.then(|| Target {
            module: here,
            item: Some(first.clone()),
        });
    }
}

/// The module a glob import reads from.
fn glob_module(krate: &Crate, at: &ModPath, glob: &RawPath, hops: usize) -> Option<ModPath> {
    resolve(krate, at, glob, hops + 1)
        .filter(|t| t.item.is_none())
        .map(|t| t.module)
}

/// Whether a module has a name of its own (a child, an import or an item) called `name`.
fn defines(m: &crate::modules::Module, name: &str) -> bool {
    m.children.iter().any(|c| c == name)
        || m.imports.contains_key(name)
        || m.items.contains_key(name)
}

/// Tarjan's strongly connected components of more than one node, each sorted, in order.
fn strongly_connected(graph: &Graph) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g Graph,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        let next: Vec<&'g str> = s
            .graph
            .get(v)
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        for w in next {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut members = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                members.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if members.len() > 1 {
                members.sort();
                s.out.push(members);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

#[cfg(test)]
mod tests;
