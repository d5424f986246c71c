//! The modules of `edgerec-format` depend on each other without a cycle.
//!
//! A cycle (`info` used `recover`, which used `info` to rewrite
//! `metadata.yaml`) means neither module can be read, tested or moved on its
//! own. This test reads `src/*.rs`, collects each module's references to
//! its siblings (`crate::<module>`, `super::<module>` from the module's own
//! level, and grouped `use crate::{a, b::c}`), and fails naming the cycle.
//! Comments and string literals are skipped, so a doc link is no edge. The
//! crate root (`lib.rs`) is left out: it declares every module and holds
//! the shared error type that every module may use.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Tokens of Rust source that matter for paths: identifiers, `::`, braces
/// and commas. Comments, strings and char literals are dropped.
fn tokens(src: &str) -> Vec<String> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            // Block comments nest in Rust.
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
        } else if ch == '\'' {
            if c.get(i + 1) == Some(&'\\') {
                // An escaped char literal: '\n', '\'', '\u{..}'.
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                // A lifetime or label.
                i += 1;
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let hashes = c[i..].iter().take_while(|&&x| x == '#').count();
            let raw_string = (word == "r" || word == "br") && c.get(i + hashes) == Some(&'"');
            if raw_string {
                i += hashes + 1;
                loop {
                    if i >= c.len() {
                        break;
                    }
                    if c[i] == '"' && c[i + 1..].iter().take(hashes).all(|&x| x == '#') {
                        i += 1 + hashes;
                        break;
                    }
                    i += 1;
                }
            } else {
                out.push(word);
            }
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else if matches!(ch, '{' | '}' | ',' | ';') {
            out.push(ch.to_string());
            i += 1;
        } else {
            if !ch.is_whitespace() {
                out.push(ch.to_string());
            }
            i += 1;
        }
    }
    out
}

/// The first segment of every path that starts at token `at` (just after
/// `crate::` or the right number of `super::`): `a` for `a::b`, `a` and
/// `b` for `{a, b::c}`.
fn heads(t: &[String], at: usize, into: &mut BTreeSet<String>) {
    match t.get(at).map(String::as_str) {
        Some("{") => {
            let mut i = at + 1;
            let mut element_start = true;
            let mut depth = 0;
            while i < t.len() {
                match t[i].as_str() {
                    "{" => depth += 1,
                    "}" if depth == 0 => break,
                    "}" => depth -= 1,
                    "," if depth == 0 => {
                        element_start = true;
                        i += 1;
                        continue;
                    }
                    w if element_start && depth == 0 => {
                        into.insert(w.to_string());
                    }
                    _ => {}
                }
                element_start = false;
                i += 1;
            }
        }
        Some(w) => {
            into.insert(w.to_string());
        }
        None => {}
    }
}

/// The names a module's source refers to at the crate's top level.
fn top_level_refs(src: &str) -> BTreeSet<String> {
    let t = tokens(src);
    let mut refs = BTreeSet::new();
    // Braces opened by inline modules (`mod tests {`), to resolve `super`.
    let mut braces: Vec<bool> = Vec::new();
    let mut i = 0;
    while i < t.len() {
        match t[i].as_str() {
            "{" => {
                let is_mod = i >= 2 && t[i - 2] == "mod";
                braces.push(is_mod);
            }
            "}" => {
                braces.pop();
            }
            "crate" if t.get(i + 1).map(String::as_str) == Some("::") => {
                heads(&t, i + 2, &mut refs);
            }
            "super" if i == 0 || t[i - 1] != "::" => {
                let mut k = 0;
                let mut j = i;
                while t.get(j).map(String::as_str) == Some("super")
                    && t.get(j + 1).map(String::as_str) == Some("::")
                {
                    k += 1;
                    j += 2;
                }
                // From inside n inline modules, n + 1 `super`s reach the
                // crate root; fewer stay inside this file.
                let depth = braces.iter().filter(|&&m| m).count();
                if k == depth + 1 {
                    heads(&t, j, &mut refs);
                }
            }
            _ => {}
        }
        i += 1;
    }
    refs
}

/// Module name to the sibling modules it refers to.
fn graph(src_dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut sources = BTreeMap::new();
    for e in std::fs::read_dir(src_dir).expect("read src/") {
        let p = e.expect("read src/ entry").path();
        if p.extension().is_some_and(|x| x == "rs") {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            if name != "lib" && name != "main" {
                let text = std::fs::read_to_string(&p).expect("read a module");
                sources.insert(name, text);
            }
        }
    }
    let names: BTreeSet<String> = sources.keys().cloned().collect();
    sources
        .iter()
        .map(|(m, src)| {
            let deps = top_level_refs(src)
                .into_iter()
                .filter(|d| d != m && names.contains(d))
                .collect();
            (m.clone(), deps)
        })
        .collect()
}

/// A cycle of `g` as `a -> b -> a`, if there is one.
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        mark: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        mark.insert(n.to_string(), Mark::OnPath);
        path.push(n.to_string());
        for d in g.get(n).into_iter().flatten() {
            match mark.get(d).copied().unwrap_or(Mark::New) {
                Mark::OnPath => {
                    let from = path.iter().position(|p| p == d).unwrap_or(0);
                    let mut cycle = path[from..].to_vec();
                    cycle.push(d.clone());
                    return Some(cycle);
                }
                Mark::New => {
                    if let Some(c) = visit(d, g, mark, path) {
                        return Some(c);
                    }
                }
                Mark::Done => {}
            }
        }
        path.pop();
        mark.insert(n.to_string(), Mark::Done);
        None
    }
    let mut mark = BTreeMap::new();
    for n in g.keys() {
        if mark.get(n).copied().unwrap_or(Mark::New) == Mark::New {
            if let Some(c) = visit(n, g, &mut mark, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn format_modules_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src);
    assert!(
        g.len() > 5,
        "found only {:?} in {}",
        g.keys(),
        src.display()
    );
    let edges: Vec<String> = g
        .iter()
        .map(|(m, d)| {
            format!(
                "  {m} -> {}",
                d.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    // Shown with --nocapture: the graph as it stands.
    println!("module edges:\n{}", edges.join("\n"));
    if let Some(cycle) = find_cycle(&g) {
        panic!(
            "module cycle in crates/format/src: {}\nall edges:\n{}",
            cycle.join(" -> "),
            edges.join("\n")
        );
    }
}

/// The scanner sees the ways a module names a sibling, and only those.
#[test]
fn scanner_finds_sibling_references_and_skips_the_rest() {
    let src = r####"
        //! See [`crate::ignored_doc`].
        use crate::{alpha, beta::{X, Y}, gamma::Z};
        use crate::delta;
        use super::epsilon;
        fn f() -> crate::zeta::T { let _ = "crate::in_string"; let _ = '"'; let _ = r#"crate::raw"#; todo!() }
        /* crate::in_block /* nested */ crate::still_in_block */
        fn g<'a>(x: &'a str) -> &'a str { x }
        #[cfg(test)]
        mod tests {
            use super::*;
            use super::super::eta;
        }
    "####;
    let refs = top_level_refs(src);
    let want: BTreeSet<String> = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(refs, want);
}

#[test]
fn a_two_module_cycle_is_named() {
    let mut g = BTreeMap::new();
    g.insert("info".to_string(), BTreeSet::from(["recover".to_string()]));
    g.insert(
        "recover".to_string(),
        BTreeSet::from(["info".to_string(), "bag".to_string()]),
    );
    g.insert("bag".to_string(), BTreeSet::new());
    assert_eq!(
        find_cycle(&g),
        Some(vec!["info".into(), "recover".into(), "info".into()])
    );
    g.get_mut("recover").unwrap().remove("info");
    assert_eq!(find_cycle(&g), None);
}
