//! The paths a piece of source names, as written: `crate::a::B`, `super::c`, `Kind::Rollout`.
//! What they point at is decided later, once every module of the crate is known
//! ([`crate::circles`]); here they are only collected.

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// A path as written, one string per segment (`["super", "steps", "validate"]`).
pub type RawPath = Vec<String>;

/// One name a `use` brings into scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Import {
    /// `use a::b::C;` or `use a::b::C as D;`: the name (`C` or `D`) and the full path.
    Name { name: String, path: RawPath },
    /// `use a::b::*;`: the path of the module whose names all come into scope.
    Glob(RawPath),
}

/// Flattens a `use` tree into the names it imports.
pub fn imports(tree: &syn::UseTree) -> Vec<Import> {
    let mut out = Vec::new();
    flatten(tree, &mut Vec::new(), &mut out);
    out
}

fn flatten(tree: &syn::UseTree, prefix: &mut RawPath, out: &mut Vec<Import>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            // `use a::b::{self}` imports the module `b` itself.
            if name == "self" {
                if let Some(last) = prefix.last() {
                    let name = last.clone();
                    out.push(Import::Name {
                        name,
                        path: prefix.clone(),
                    });
                }
                return;
            }
            let mut path = prefix.clone();
            path.push(name.clone());
            out.push(Import::Name { name, path });
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            let ident = r.ident.to_string();
            if ident != "self" {
                path.push(ident);
            }
            out.push(Import::Name {
                name: r.rename.to_string(),
                path,
            });
        }
        syn::UseTree::Glob(_) => out.push(Import::Glob(prefix.clone())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten(t, prefix, out);
            }
        }
    }
}

/// Every path named inside `item` (types, expressions, patterns, trait bounds and the paths
/// inside macro calls), except in the parts compiled for tests only.
pub fn named_in_item(item: &syn::Item) -> Vec<RawPath> {
    let mut c = Collector::default();
    c.visit_item(item);
    c.paths
}

#[derive(Default)]
struct Collector {
    paths: Vec<RawPath>,
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        self.paths
            .push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        // A macro's arguments are tokens to syn: the paths in them are read off the tokens.
        scan_tokens(m.tokens.clone(), &mut self.paths);
    }

    fn visit_item(&mut self, i: &'ast syn::Item) {
        if !is_test_only(item_attrs(i)) {
            visit::visit_item(self, i);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            visit::visit_impl_item_fn(self, f);
        }
    }

    // The paths of a nested `use` are imports of a block, read like any other path.
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        for import in imports(&u.tree) {
            match import {
                Import::Name { path, .. } | Import::Glob(path) => self.paths.push(path),
            }
        }
    }
}

/// Paths of two segments or more in a token stream (`a::b`, `crate::a::B`), in groups too.
fn scan_tokens(tokens: TokenStream, out: &mut Vec<RawPath>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(g) => {
                scan_tokens(g.stream(), out);
                i += 1;
            }
            TokenTree::Ident(first) => {
                let mut path = vec![first.to_string()];
                let mut j = i + 1;
                while j + 2 < tokens.len()
                    && is_colon(&tokens[j])
                    && is_colon(&tokens[j + 1])
                    && let TokenTree::Ident(next) = &tokens[j + 2]
                {
                    path.push(next.to_string());
                    j += 3;
                }
                if path.len() > 1 {
                    out.push(path);
                }
                i = j.max(i + 1);
            }
            TokenTree::Punct(_) | TokenTree::Literal(_) => i += 1,
        }
    }
}

fn is_colon(t: &TokenTree) -> bool {
    matches!(t, TokenTree::Punct(p) if p.as_char() == ':')
}

/// Whether the attributes make an item exist in test builds only (`#[cfg(test)]`).
pub fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

/// An item's attributes (none for the kinds that carry none).
pub fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn use_tree(src: &str) -> syn::UseTree {
        syn::parse_str::<syn::ItemUse>(src).expect("a use").tree
    }

    fn names(src: &str) -> Vec<Import> {
        imports(&use_tree(src))
    }

    fn name(name: &str, path: &[&str]) -> Import {
        Import::Name {
            name: name.into(),
            path: path.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_use_group_is_flattened_with_renames_self_and_globs() {
        let got = names("use crate::a::{b::{self, C as D}, e::*, F};");
        assert_eq!(
            got,
            vec![
                name("b", &["crate", "a", "b"]),
                name("D", &["crate", "a", "b", "C"]),
                Import::Glob(vec!["crate".into(), "a".into(), "e".into()]),
                name("F", &["crate", "a", "F"]),
            ]
        );
    }

    #[test]
    fn paths_in_code_and_in_macro_arguments_are_collected() {
        let item: syn::Item = syn::parse_str(
            "fn f(x: super::a::T) -> crate::b::U { \
                 let y = self::c::make(); \
                 println!(\"{}\", crate::d::show(&y)); \
                 Kind::Rollout \
             }",
        )
        .expect("an fn");
        let got = named_in_item(&item);
        for want in [
            vec!["super", "a", "T"],
            vec!["crate", "b", "U"],
            vec!["self", "c", "make"],
            vec!["crate", "d", "show"],
            vec!["Kind", "Rollout"],
        ] {
            assert!(
                got.iter().any(|p| p == &want),
                "{want:?} not found in {got:?}"
            );
        }
    }

    #[test]
    fn test_only_methods_and_items_are_not_read() {
        let item: syn::Item = syn::parse_str(
            "impl S { #[cfg(test)] fn t() { crate::fixtures::make(); } fn f() { crate::a::g(); } }",
        )
        .expect("an impl");
        let got = named_in_item(&item);
        assert!(got.iter().any(|p| p == &["crate", "a", "g"]));
        assert!(!got.iter().any(|p| p.contains(&"fixtures".to_string())));
    }
}
