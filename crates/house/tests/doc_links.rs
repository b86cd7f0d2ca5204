//! Every relative link of the documentation leads somewhere: `README.md`, `docs/**/*.md` and
//! `manifests/**/README.md`.
//!
//! A link is `[text](target)` (or an image, `![alt](target)`, or a reference definition
//! `[label]: target`) outside fenced code blocks and inline code. Its target, a path relative
//! to the linking file (or to the repository root when it starts with `/`), must exist; its
//! `#anchor`, in the same file or in another Markdown file, must be the slug of one of that
//! file's headings as GitHub makes it: the heading's text lowercased, spaces turned into `-`,
//! every other character but letters, digits, `-` and `_` dropped, and `-1`, `-2`, ... added
//! to repeats. An `<a id="...">` or `<a name="...">` counts as an anchor too. Links with a
//! scheme (`https:`, `mailto:`, ...) are not followed.
//!
//! Hand-written rather than a Markdown parser: ATX headings (`# ...`) only, no setext ones.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A link found in a document: its 1-based line and its target as written.
#[derive(Debug, PartialEq)]
struct Link {
    line: usize,
    target: String,
}

/// The fence a line opens: its character and length, if it starts a code fence.
fn fence(line: &str) -> Option<(char, usize)> {
    let t = line.trim_start();
    let c = t.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = t.chars().take_while(|&x| x == c).count();
    (n >= 3).then_some((c, n))
}

/// The document's lines with those inside fenced code blocks (fences included) emptied, so
/// that line numbers stay as they are.
fn outside_fences(text: &str) -> Vec<String> {
    let mut open: Option<(char, usize)> = None;
    let mut lines = Vec::new();
    for line in text.lines() {
        match (open, fence(line)) {
            (None, Some(f)) => {
                open = Some(f);
                lines.push(String::new());
            }
            (Some((c, n)), Some((c2, n2)))
                if c == c2 && n2 >= n && line.trim().chars().all(|x| x == c) =>
            {
                open = None;
                lines.push(String::new());
            }
            (Some(_), _) => lines.push(String::new()),
            (None, None) => lines.push(line.to_string()),
        }
    }
    lines
}

/// `text` with the content of every code span (`` `...` ``, `` ``...`` ``) replaced by spaces,
/// newlines kept. An unmatched run of backticks is literal.
fn blank_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = chars.clone();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let n = run_at(i);
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = run_at(j);
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                for c in &mut out[i..j + n] {
                    if *c != '\n' {
                        *c = ' ';
                    }
                }
                i = j + n;
            }
            None => i += n,
        }
    }
    out.into_iter().collect()
}

/// The link destination that starts `s` (just after `](`), if the parenthesis closes.
fn destination(s: &str) -> Option<String> {
    let s = s.trim_start_matches([' ', '\t', '\n']);
    if let Some(rest) = s.strip_prefix('<') {
        return rest.find('>').map(|end| rest[..end].to_string());
    }
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(s[..i].to_string()),
            ')' => depth -= 1,
            c if c.is_whitespace() => {
                // A title may follow; the parenthesis must still close.
                return s[i..].contains(')').then(|| s[..i].to_string());
            }
            _ => {}
        }
    }
    None
}

/// Every link of a Markdown document, outside code.
fn links(text: &str) -> Vec<Link> {
    let lines = outside_fences(text);
    let mut found = Vec::new();
    // Paragraphs, so that a code span or a link's text may run over a line break.
    let mut start = 0;
    while start < lines.len() {
        if lines[start].trim().is_empty() {
            start += 1;
            continue;
        }
        let end = (start..lines.len())
            .find(|&i| lines[i].trim().is_empty())
            .unwrap_or(lines.len());
        let para = blank_code_spans(&lines[start..end].join("\n"));
        let line_of = |pos: usize| start + 1 + para[..pos].matches('\n').count();
        for (pos, _) in para.match_indices("](") {
            if let Some(target) = destination(&para[pos + 2..]) {
                found.push(Link {
                    line: line_of(pos),
                    target,
                });
            }
        }
        for (k, line) in para.lines().enumerate() {
            // Reference definitions: `[label]: target`.
            let t = line.trim_start();
            if line.len() - t.len() <= 3
                && t.starts_with('[')
                && let Some(close) = t.find("]:")
                && let Some(target) = t[close + 2..].split_whitespace().next()
            {
                let target = target.trim_start_matches('<').trim_end_matches('>');
                found.push(Link {
                    line: start + 1 + k,
                    target: target.to_string(),
                });
            }
        }
        start = end;
    }
    found
}

/// A heading's text as GitHub renders it for its slug: links and images reduced to their
/// text, backticks and HTML tags dropped.
fn heading_text(raw: &str) -> String {
    let mut out = String::new();
    let mut rest = raw;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let close = after
            .find("](")
            .filter(|&c| destination(&after[c + 2..]).is_some());
        match close.and_then(|c| after[c + 2..].find(')').map(|paren| (c, paren))) {
            Some((close, paren)) => {
                out.push_str(rest[..open].trim_end_matches('!'));
                out.push_str(&after[..close]);
                rest = &after[close + 2 + paren + 1..];
            }
            _ => {
                out.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    let mut text = String::new();
    let mut in_tag = false;
    for c in out.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            '`' => {}
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

/// GitHub's slug of a heading's text, before repeats are numbered.
fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors a Markdown document offers: its headings' slugs, repeats numbered as GitHub
/// numbers them, and the ids and names of its `<a>` tags.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut found = BTreeSet::new();
    for line in outside_fences(text) {
        let t = line.trim_start();
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if line.len() - t.len() <= 3
            && (1..=6).contains(&hashes)
            && (t.len() == hashes || t[hashes..].starts_with([' ', '\t']))
        {
            // A closing run of `#`s is not part of the heading.
            let raw = t[hashes..].trim();
            let raw = match raw.trim_end_matches('#') {
                r if r.is_empty() || r.ends_with([' ', '\t']) => r.trim_end(),
                _ => raw,
            };
            let base = slug(&heading_text(raw));
            let n = seen.entry(base.clone()).or_insert(0);
            found.insert(if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            });
            *n += 1;
        }
        for attr in ["id=\"", "name=\""] {
            for (pos, _) in line.match_indices(attr) {
                let inside_a = line[..pos]
                    .rfind("<a ")
                    .is_some_and(|a| !line[a..pos].contains('>'));
                let value = &line[pos + attr.len()..];
                if let (true, Some(end)) = (inside_a, value.find('"')) {
                    found.insert(value[..end].to_string());
                }
            }
        }
    }
    found
}

/// `%XX` escapes decoded (link targets may carry them, e.g. `%20`).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `path` with `.` and `..` resolved lexically; `None` when it climbs above where it starts.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            other => out.push(other),
        }
    }
    Some(out)
}

/// Whether a target names a scheme (`https:`, `mailto:`, ...): not ours to check.
fn is_external(target: &str) -> bool {
    match target.find(':') {
        Some(colon) => {
            let scheme = &target[..colon];
            !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        }
        None => false,
    }
}

/// What is wrong with the links of `docs` (paths relative to `root`), one line each:
/// `file:line: target: why`.
fn check(root: &Path, docs: &[PathBuf]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut anchor_cache: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut anchors_of = |file: &Path| -> BTreeSet<String> {
        anchor_cache
            .entry(file.to_path_buf())
            .or_insert_with(|| anchors(&fs::read_to_string(root.join(file)).unwrap_or_default()))
            .clone()
    };
    for doc in docs {
        let text = match fs::read_to_string(root.join(doc)) {
            Ok(text) => text,
            Err(e) => {
                problems.push(format!("{}: cannot be read: {e}", doc.display()));
                continue;
            }
        };
        for link in links(&text) {
            let mut report = |why: String| {
                problems.push(format!(
                    "{}:{}: ({}): {why}",
                    doc.display(),
                    link.line,
                    link.target
                ))
            };
            let target = link.target.as_str();
            if target.is_empty() {
                report("empty link".into());
                continue;
            }
            if is_external(target) {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(percent_decode(a))),
                None => (target, None),
            };
            let path = percent_decode(path.split('?').next().unwrap_or(""));
            let file = if path.is_empty() {
                Some(doc.clone())
            } else if let Some(from_root) = path.strip_prefix('/') {
                normalize(Path::new(from_root))
            } else {
                normalize(&doc.parent().unwrap_or(Path::new("")).join(&path))
            };
            let Some(file) = file else {
                report("leads out of the repository".into());
                continue;
            };
            if !root.join(&file).exists() {
                report(format!("no such file: {}", file.display()));
                continue;
            }
            let is_markdown = file
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("md"));
            match anchor {
                Some(a) if a.is_empty() => report("empty anchor".into()),
                Some(a) if is_markdown && !anchors_of(&file).contains(&a) => report(format!(
                    "no heading of {} has the anchor #{a}",
                    file.display()
                )),
                _ => {}
            }
        }
    }
    problems
}

/// Files under `dir` (relative to `root`) that `keep` accepts, recursively.
fn walk(root: &Path, dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(root.join(dir)) else {
        return;
    };
    for entry in entries.flatten() {
        let rel = dir.join(entry.file_name());
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(root, &rel, keep, out);
        } else if keep(&rel) {
            out.push(rel);
        }
    }
}

/// The documents checked: `README.md`, `docs/**/*.md`, `manifests/**/README.md`.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs = vec![PathBuf::from("README.md")];
    let markdown = |p: &Path| p.extension().is_some_and(|e| e == "md");
    let readme = |p: &Path| p.file_name().is_some_and(|n| n == "README.md");
    walk(root, Path::new("docs"), &markdown, &mut docs);
    walk(root, Path::new("manifests"), &readme, &mut docs);
    docs.sort();
    docs
}

#[test]
fn every_link_and_anchor_of_the_documentation_resolves() {
    let root = repo_root();
    let docs = documents(&root);
    assert!(
        docs.contains(&PathBuf::from("docs/README.md"))
            && docs.contains(&PathBuf::from("manifests/install/README.md")),
        "the documents were not found: {docs:?}"
    );
    let count: usize = docs
        .iter()
        .map(|d| links(&fs::read_to_string(root.join(d)).unwrap_or_default()).len())
        .sum();
    assert!(count > 50, "only {count} links found in {docs:?}");
    let problems = check(&root, &docs);
    assert!(
        problems.is_empty(),
        "{} broken links:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn slugs_are_githubs() {
    let slugs = |text: &str| anchors(text).into_iter().collect::<Vec<_>>();
    assert_eq!(slugs("## Helm: `charts/sluice`"), ["helm-chartssluice"]);
    assert_eq!(
        slugs("### The CLI at scale (2026-11-27)"),
        ["the-cli-at-scale-2026-11-27"]
    );
    assert_eq!(
        slugs("# Replicas, leader election and probes #"),
        ["replicas-leader-election-and-probes"]
    );
    assert_eq!(slugs("## A_b c--d. Ünïcode!"), ["a_b-c--d-ünïcode"]);
    assert_eq!(
        slugs("## [Linked](x.md) `code` <em>tag</em>"),
        ["linked-code-tag"]
    );
    assert_eq!(
        slugs("# Same\n## Same\n### Same"),
        ["same", "same-1", "same-2"]
    );
    assert_eq!(
        slugs("#hashtag\n    code\n```\n# in a fence\n```"),
        Vec::<String>::new()
    );
    assert_eq!(
        slugs("<a id=\"here\"></a> and <a name=\"there\">"),
        ["here", "there"]
    );
}

#[test]
fn links_in_code_are_not_links() {
    let text = [
        "[a](one.md) `[b](two.md)` and ``[c](`three`.md)``",
        "```sh",
        "[d](four.md)",
        "```",
        "[e",
        "f](five.md#x \"title\") ![g](six.png)",
        "",
        "[ref]: seven.md",
        "  ~~~",
        "[h](eight.md)",
        "  ~~~",
    ]
    .join("\n");
    let found: Vec<(usize, String)> = links(&text)
        .into_iter()
        .map(|l| (l.line, l.target))
        .collect();
    let expected: Vec<(usize, String)> = [
        (1, "one.md"),
        (6, "five.md#x"),
        (6, "six.png"),
        (8, "seven.md"),
    ]
    .into_iter()
    .map(|(line, target)| (line, target.to_string()))
    .collect();
    assert_eq!(found, expected);
}

#[test]
fn a_broken_link_and_a_broken_anchor_fail_the_check() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("doc_links_sample_{}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(root.join("docs/images")).unwrap();
    fs::write(root.join("docs/images/shot.png"), b"").unwrap();
    fs::write(
        root.join("README.md"),
        "# Sample\n\n## Here (and there)\n\n\
         [fine](docs/page.md#good-part), [fine too](#here-and-there), [external](https://example.com/x.md#nope)\n\
         [missing file](docs/nope.md) and [missing anchor](docs/page.md#bad-part)\n\
         `[in code](docs/gone.md)`\n",
    )
    .unwrap();
    fs::write(
        root.join("docs/page.md"),
        "# Page\n\n## Good part\n\n![shot](images/shot.png) [back](../README.md#sample)\n\
         [nowhere here](#nowhere) [above the root](../../outside.md)\n",
    )
    .unwrap();
    let docs = [PathBuf::from("README.md"), PathBuf::from("docs/page.md")];
    let problems = check(&root, &docs);
    assert_eq!(
        problems,
        [
            "README.md:6: (docs/nope.md): no such file: docs/nope.md",
            "README.md:6: (docs/page.md#bad-part): no heading of docs/page.md has the anchor #bad-part",
            "docs/page.md:6: (#nowhere): no heading of docs/page.md has the anchor #nowhere",
            "docs/page.md:6: (../../outside.md): leads out of the repository",
        ],
        "{problems:#?}"
    );
    fs::remove_dir_all(&root).unwrap();
}
