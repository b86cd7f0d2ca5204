use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;
use crate::modules::load;

/// The circles of a crate given as `(file, source)` pairs, rooted at `src/lib.rs`, one line per
/// circle: `parent::{members}`.
fn circles(files: &[(&str, &str)]) -> Vec<String> {
    found(files)
        .iter()
        .map(|c| format!("{}::{{{}}}", display(&c.parent), c.members.join(", ")))
        .collect()
}

fn found(files: &[(&str, &str)]) -> Vec<Circle> {
    let src: BTreeMap<PathBuf, String> = files
        .iter()
        .map(|(p, s)| (PathBuf::from(p), s.to_string()))
        .collect();
    find(&load(Path::new("src/lib.rs"), &src).expect("loads"))
}

#[test]
fn two_siblings_using_each_other_are_a_circle_with_the_places_that_make_it() {
    let got = found(&[
        ("src/lib.rs", "mod a; mod b;"),
        ("src/a.rs", "use crate::b::B; pub struct A(B);"),
        ("src/b.rs", "pub struct B; pub fn f(_: super::a::A) {}"),
    ]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].members, ["a", "b"]);
    let text = got[0].to_string();
    assert!(
        text.contains("a -> b: crate::a names `crate::b::B`"),
        "{text}"
    );
    assert!(
        text.contains("b -> a: crate::b names `super::a::A`"),
        "{text}"
    );
}

#[test]
fn a_circle_through_a_third_sibling_is_found_and_a_one_way_chain_is_not() {
    let three = [
        ("src/lib.rs", "mod a; mod b; mod c;"),
        ("src/a.rs", "pub fn a() { crate::b::b() }"),
        ("src/b.rs", "pub fn b() { crate::c::c() }"),
        ("src/c.rs", "pub fn c() { crate::a::a() }"),
    ];
    assert_eq!(circles(&three), ["crate::{a, b, c}"]);
    let chain = [three[0], three[1], three[2], ("src/c.rs", "pub fn c() {}")];
    assert!(circles(&chain).is_empty());
}

#[test]
fn descendants_count_for_the_sibling_they_are_under() {
    let got = circles(&[
        ("src/lib.rs", "mod a; mod b;"),
        ("src/a/mod.rs", "mod deep;"),
        ("src/a/deep.rs", "pub fn f() { crate::b::inner::g() }"),
        ("src/b/mod.rs", "pub mod inner;"),
        ("src/b/inner.rs", "pub fn g() { crate::a::deep::f() }"),
    ]);
    assert_eq!(got, ["crate::{a, b}"]);
}

#[test]
fn test_modules_and_test_only_items_are_no_dependency() {
    let got = circles(&[
        ("src/lib.rs", "mod a; mod b;"),
        (
            "src/a.rs",
            "pub fn f() { crate::b::g() } \
             #[cfg(test)] mod tests { use super::*; use crate::b::*; }",
        ),
        (
            "src/b.rs",
            "pub fn g() {} #[cfg(test)] fn fixture() { crate::a::f() } \
             #[cfg(test)] mod tests;",
        ),
    ]);
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn a_parent_and_its_children_using_each_other_is_no_circle() {
    // The shape a shared helper moved down a level gives: children use the parent's helper,
    // the parent re-exports and calls its children.
    let got = circles(&[
        ("src/lib.rs", "mod v;"),
        (
            "src/v/mod.rs",
            "mod rollout; mod steps; pub use rollout::check; \
             fn non_negative(x: i32) -> bool { x >= 0 } \
             pub fn all() { rollout::check(); steps::check(); }",
        ),
        (
            "src/v/rollout.rs",
            "use super::non_negative; pub fn check() { non_negative(1); super::steps::check(); }",
        ),
        (
            "src/v/steps.rs",
            "pub fn check() { super::non_negative(2); }",
        ),
    ]);
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn a_parent_item_that_names_a_sibling_carries_the_dependency() {
    let got = circles(&[
        ("src/lib.rs", "mod a; mod b; pub fn helper() { a::f() }"),
        ("src/a.rs", "pub fn f() { crate::b::g() }"),
        ("src/b.rs", "pub fn g() { super::helper() }"),
    ]);
    assert_eq!(got, ["crate::{a, b}"]);
}

#[test]
fn re_exports_and_globs_are_followed_to_the_module_that_defines_the_item() {
    let reexport = circles(&[
        ("src/lib.rs", "mod a; mod b; pub use b::B;"),
        ("src/a.rs", "pub struct A(crate::B);"),
        ("src/b.rs", "pub struct B; pub fn f(_: crate::a::A) {}"),
    ]);
    assert_eq!(reexport, ["crate::{a, b}"]);
    let glob = circles(&[
        ("src/lib.rs", "mod a; mod b;"),
        ("src/a.rs", "use crate::b::*; pub struct A(B);"),
        ("src/b.rs", "pub struct B; pub fn f(_: crate::a::A) {}"),
    ]);
    assert_eq!(glob, ["crate::{a, b}"]);
}

#[test]
fn paths_in_macro_arguments_count() {
    let got = circles(&[
        ("src/lib.rs", "mod a; mod b;"),
        (
            "src/a.rs",
            "pub fn f() { println!(\"{}\", crate::b::g()); }",
        ),
        ("src/b.rs", "pub fn g() -> u8 { crate::a::f(); 1 }"),
    ]);
    assert_eq!(got, ["crate::{a, b}"]);
}

#[test]
fn names_from_outside_the_crate_are_not_resolved_into_it() {
    // `serde::Value` and `std::fmt` start with no module of this crate.
    let got = circles(&[
        ("src/lib.rs", "mod a; mod serde_like;"),
        (
            "src/a.rs",
            "pub fn f(_: serde::Value) -> std::fmt::Result { Ok(()) }",
        ),
        ("src/serde_like.rs", "pub fn g() { crate::a::f(todo!()); }"),
    ]);
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn using_a_parent_type_is_not_using_every_method_of_it() {
    // The registry shape: children take the parent's type, whose methods call each child.
    let got = circles(&[
        (
            "src/lib.rs",
            "mod a; mod b; pub struct Env; impl Env { fn all(&self) { a::f(self); b::g(self); } }",
        ),
        ("src/a.rs", "pub fn f(_: &super::Env) {}"),
        ("src/b.rs", "pub fn g(_: &super::Env) {}"),
    ]);
    assert!(got.is_empty(), "{got:?}");
}
