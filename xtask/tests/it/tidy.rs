//! Code-shape policy, checked on every `cargo test`: no import circle among the modules of
//! either crate, and no long functions in the run pipeline and the threshold modules.
//!
//! Both checks read the sources as text. An import arrow goes from the file that names a path
//! (`use crate::a::b`, `crate::a::b::f(..)`, `super::x`, or `m::x` after `use crate::a::m`) to
//! the file of the deepest module that path reaches: a child that names an item of its parent's
//! `mod.rs` (or of `lib.rs`) is an arrow up, and with the parent's arrow down that is a circle.
//! `mod x;` declarations are not imports.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::repo_root;

/// Longest function body allowed in the modules the run pipeline and the thresholds live in.
const MAX_FN_LINES: usize = 120;

/// Files (relative to the repository root; a trailing `/` takes a whole folder) whose functions
/// are held to [`MAX_FN_LINES`].
const SHORT_FUNCTIONS: &[&str] = &[
    "bench/src/runner",
    "bench/src/ab/",
    "xtask/src/ab/",
    "bench/src/accept/",
    "bench/src/sweep.rs",
    "bench/src/strategy_compare.rs",
    "bench/src/client/",
    "bench/src/workload.rs",
    "bench/src/sim/server.rs",
    "bench/src/sim/engine/spec.rs",
    "xtask/src/thresholds",
    "xtask/src/gate.rs",
    "xtask/src/adr/",
    "xtask/src/bench",
    "xtask/src/sweep.rs",
    "xtask/src/strategies.rs",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a source file: `adr/check/mod.rs` -> `adr::check`, `lib.rs` -> ``.
fn module_of(rel: &Path) -> String {
    let mut parts: Vec<String> =
        rel.iter().map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts.join("::")
}

/// Source text with comments, string and char literals blanked out (line structure kept), so
/// braces and paths inside them are not read as code.
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        if text[i..].starts_with("//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if text[i..].starts_with("/*") {
            let end = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            out.extend(text[i..end].chars().filter(|&c| c == '\n'));
            i = end;
        } else if c == 'r' && (text[i..].starts_with("r\"") || text[i..].starts_with("r#")) {
            let hashes = text[i + 1..].chars().take_while(|&c| c == '#').count();
            if text[i + 1 + hashes..].starts_with('"') {
                let close = format!("\"{}", "#".repeat(hashes));
                let start = i + 2 + hashes;
                let end = text[start..].find(&close).map_or(b.len(), |e| start + e + close.len());
                out.push_str("\"\"");
                out.extend(text[i..end].chars().filter(|&c| c == '\n'));
                i = end;
            } else {
                out.push(c);
                i += 1;
            }
        } else if c == '"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            out.extend(text[i..j.min(b.len())].chars().filter(|&c| c == '\n'));
            i = j + 1;
        } else if c == '\''
            && (text[i..].starts_with("'\\") || text[i + 1..].chars().nth(1) == Some('\''))
        {
            // A char literal ('x', '\n', '\u{..}'), not a lifetime.
            let end = text[i + 1..].find('\'').map_or(b.len(), |e| i + 1 + e + 1);
            let end = if text[i..].starts_with("'\\''") { i + 4 } else { end };
            out.push_str("' '");
            i = end;
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// Expand a `use` tree (`a::{b, c::{d, e as f}}`) into full paths with their local names.
fn expand_use(tree: &str, prefix: &str, out: &mut Vec<(String, String)>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let base = join(prefix, head);
        let mut depth = 0;
        let mut start = 0;
        for (i, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_use(&inner[start..i], &base, out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand_use(&inner[start..], &base, out);
    } else if !tree.is_empty() {
        let (path, alias) = match tree.split_once(" as ") {
            Some((p, a)) => (p.trim(), a.trim()),
            None => (tree, tree.rsplit("::").next().unwrap_or(tree)),
        };
        let full = join(prefix, path);
        let alias = if alias == "self" { prefix.rsplit("::").next().unwrap_or("") } else { alias };
        out.push((full, alias.to_string()));
    }
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ if b == "self" => a.to_string(),
        _ => format!("{a}::{b}"),
    }
}

/// A path as written in module `module`, made absolute within the crate (`None`: another crate).
/// A path may start with `crate`, `self`, `super` or the name of a child module of `module`.
fn absolute(path: &str, module: &str, modules: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut segs: Vec<&str> = path.split("::").map(str::trim).collect();
    let mut base: Vec<&str> = if module.is_empty() { vec![] } else { module.split("::").collect() };
    match segs.first().copied() {
        Some("crate") => {
            segs.remove(0);
            base.clear();
        }
        Some("self") => {
            segs.remove(0);
        }
        Some("super") => {
            while segs.first() == Some(&"super") {
                segs.remove(0);
                base.pop();
            }
        }
        Some(first) if modules.contains_key(&join(module, first)) => {}
        _ => return None,
    }
    base.extend(segs);
    Some(base.join("::"))
}

/// Every path in `code` that starts with `head` (`crate::`, `m::`) at a word boundary.
fn paths_from(code: &str, head: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(head) {
        let start = from + at;
        from = start + head.len();
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let end = code[start..]
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .map_or(code.len(), |e| start + e);
        found.push(code[start..end].trim_end_matches(':').to_string());
    }
    found
}

/// The trees of every `use` item in `code`, whitespace normalised (`a::{b, c as d}`).
fn use_trees(code: &str) -> Vec<String> {
    let mut trees = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("use ") {
        let start = from + at;
        from = start + 4;
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = code[from..].find(';').map_or(code.len(), |e| from + e);
        let tree = code[from..end].split_whitespace().collect::<Vec<_>>().join(" ");
        let mut tidy = tree.clone();
        for sep in ["::", "{", "}", ","] {
            tidy = tidy.replace(&format!(" {sep}"), sep).replace(&format!("{sep} "), sep);
        }
        trees.push(tidy);
        from = end;
    }
    trees
}

/// `code` without its `#[cfg(test)] mod name { ... }` blocks: a unit-test module's
/// `use super::*` is not an arrow of the module it tests.
fn without_test_modules(code: &str) -> String {
    let mut out = code.to_string();
    while let Some(at) = out.find("#[cfg(test)]") {
        let after = at + "#[cfg(test)]".len();
        let rest = out[after..].trim_start();
        let Some(open) = rest.starts_with("mod ").then(|| rest.find(['{', ';'])).flatten() else {
            out.replace_range(at..after, "");
            continue;
        };
        let start = out.len() - rest.len();
        if rest.as_bytes()[open] == b';' {
            out.replace_range(at..start + open + 1, "");
            continue;
        }
        let mut depth = 0;
        let mut end = out.len();
        for (i, ch) in out[start + open..].char_indices() {
            depth += match ch {
                '{' => 1,
                '}' => -1,
                _ => 0,
            };
            if depth == 0 {
                end = start + open + i + 1;
                break;
            }
        }
        let lines = out[at..end].matches('\n').count();
        out.replace_range(at..end, &"\n".repeat(lines));
    }
    out
}

/// The import arrows of one crate: file module -> the modules it takes names from.
fn arrows(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<String, PathBuf> = files
        .iter()
        .filter(|f| {
            let name = f.file_name().unwrap().to_string_lossy();
            // Binaries and unit-test files are not part of the module structure.
            name != "main.rs" && name != "tests.rs" && !name.ends_with("_tests.rs")
        })
        .map(|f| (module_of(f.strip_prefix(src).unwrap()), f.clone()))
        .collect();
    // The deepest module file a path reaches.
    let target = |abs: &str| -> String {
        let segs: Vec<&str> = abs.split("::").filter(|s| !s.is_empty() && *s != "*").collect();
        (0..=segs.len())
            .rev()
            .map(|n| segs[..n].join("::"))
            .find(|m| modules.contains_key(m))
            .unwrap_or_default()
    };
    let mut graph = BTreeMap::new();
    for (module, file) in &modules {
        let code = without_test_modules(&code_only(&std::fs::read_to_string(file).unwrap()));
        let mut uses = Vec::new();
        for tree in use_trees(&code) {
            expand_use(&tree, "", &mut uses);
        }
        let mut to = BTreeSet::new();
        let mut heads: Vec<(String, String)> = ["crate", "super", "self"]
            .iter()
            .map(|h| (format!("{h}::"), String::new()))
            .chain(
                modules
                    .keys()
                    .filter_map(|m| m.strip_prefix(module.as_str()))
                    .filter_map(|rest| {
                        rest.strip_prefix("::").or(module.is_empty().then_some(rest))
                    })
                    .filter(|child| !child.is_empty() && !child.contains("::"))
                    .map(|child| (format!("{child}::"), String::new())),
            )
            .collect();
        for (path, alias) in &uses {
            let Some(abs) = absolute(path, module, &modules) else { continue };
            if modules.contains_key(&abs) {
                // A module: the paths through its local name say what is taken from it.
                heads.push((format!("{alias}::"), abs));
            } else {
                to.insert(target(&abs));
            }
        }
        for (head, module_path) in &heads {
            for p in paths_from(&code, head) {
                let abs = if module_path.is_empty() {
                    absolute(&p, module, &modules)
                } else {
                    Some(join(module_path, p.split_once("::").map_or("", |(_, r)| r)))
                };
                // Naming a module alone (`crate::adr` in a `use`) takes nothing from it.
                if let Some(abs) = abs.filter(|a| !modules.contains_key(a)) {
                    to.insert(target(&abs));
                }
            }
        }
        to.remove(module);
        graph.insert(module.clone(), to);
    }
    graph
}

/// Every circle of the graph, each as the modules along it.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan's strongly connected components: a component of more than one module is a circle.
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.graph.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                s.low.entry(v).and_modify(|l| *l = (*l).min(lw));
            } else if s.stack.contains(&w) {
                let iw = s.index[w];
                s.low.entry(v).and_modify(|l| *l = (*l).min(iw));
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn show(name: &str, graph: &BTreeMap<String, BTreeSet<String>>, circles: &[Vec<String>]) -> String {
    let mut text = format!("import circles among the modules of {name}:\n");
    for c in circles {
        text.push_str(&format!("  circle: {}\n", c.join(", ")));
        for m in c {
            let inside: Vec<&str> =
                graph[m].iter().filter(|t| c.contains(t)).map(String::as_str).collect();
            let label = |m: &str| if m.is_empty() { "(crate root)".to_string() } else { m.into() };
            let to: Vec<String> = inside.iter().map(|t| label(t)).collect();
            text.push_str(&format!("    {} -> {}\n", label(m), to.join(", ")));
        }
    }
    text
}

/// The graph with every module folded into its ancestor `depth` levels down (`sim::engine::kv`
/// into `sim` at depth 1).
fn folded(
    graph: &BTreeMap<String, BTreeSet<String>>,
    depth: usize,
) -> BTreeMap<String, BTreeSet<String>> {
    let fold = |m: &str| m.split("::").take(depth).collect::<Vec<_>>().join("::");
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in graph {
        let entry = out.entry(fold(from)).or_default();
        entry.extend(to.iter().map(|t| fold(t)).filter(|t| *t != fold(from)));
    }
    out
}

/// xtask: no circle among its files (a command module never takes from the crate root or
/// from another command; `adr`'s submodules never from `adr/mod.rs`). bench: no circle among
/// its top-level modules (`sim`, `accept`, `config`, `runner`, ...): inside one of them the
/// submodules share the types their parent defines (the engine model in `sim/engine/mod.rs`),
/// but between them the arrows run one way, down the data flow.
#[test]
fn no_import_circle_among_the_modules_of_either_crate() {
    for (krate, depth) in [("bench", 1), ("xtask", usize::MAX)] {
        let graph = folded(&arrows(&repo_root().join(krate).join("src")), depth);
        assert!(graph.len() > 10, "{krate}: read {} modules", graph.len());
        let found = circles(&graph);
        assert!(found.is_empty(), "{}", show(krate, &graph, &found));
    }
}

#[test]
fn the_circle_check_finds_circles() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("adr/check")).unwrap();
    let write = |p: &str, t: &str| std::fs::write(src.join(p), t).unwrap();
    write("lib.rs", "pub mod adr;\npub mod gate;\npub mod text;\npub fn main() { adr::run() }\n");
    write(
        "adr/mod.rs",
        "pub mod check;\nuse crate::text::plural;\npub fn run() { check::run() }\n",
    );
    write(
        "adr/check/mod.rs",
        "use crate::{gate::{self, Report}, text};\npub fn run() { text::plural(); }\n",
    );
    write("gate.rs", "// use crate::adr;\nuse super::adr::check as c;\nfn f() { c::run() }\n");
    write(
        "text.rs",
        "pub fn plural() -> &'static str { \"crate::gate::x\" }\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
    );
    let graph = arrows(src);
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(graph["gate"], set(&["adr::check"]), "{graph:?}");
    assert_eq!(graph["adr"], set(&["adr::check", "text"]));
    assert_eq!(graph["text"], set(&[]), "strings and unit-test modules are not imports");
    assert_eq!(graph["adr::check"], set(&["gate", "text"]));
    assert_eq!(graph[""], set(&["adr"]));
    assert_eq!(circles(&graph), vec![vec!["adr::check".to_string(), "gate".into()]]);
    // A module naming an item of the crate root, which names items of it: a circle.
    write("gate.rs", "\n");
    write("adr/check/mod.rs", "use crate::Status;\npub fn run() {}\n");
    write(
        "lib.rs",
        "pub mod adr;\npub mod gate;\npub mod text;\npub use text::Status;\npub fn main() { adr::run() }\n",
    );
    assert_eq!(
        circles(&arrows(src)),
        vec![vec!["".to_string(), "adr".into(), "adr::check".into()]]
    );
    write("adr/check/mod.rs", "use crate::text::Status;\npub fn run() {}\n");
    assert_eq!(circles(&arrows(src)), Vec::<Vec<String>>::new());
}

/// Functions of `code` longer than `max` lines: (name, first line, lines).
fn long_functions(code: &str, max: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            break; // unit tests sit at the end of a file
        }
        let Some(at) = t.find("fn ") else { continue };
        let head = &t[..at];
        let qualifiers = ["pub", "pub(crate)", "pub(super)", "async", "const", "unsafe", "extern"];
        if !head.split_whitespace().all(|w| qualifiers.contains(&w)) {
            continue;
        }
        let name: String =
            t[at + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        // The body: from the first `{` after the signature to its matching `}`.
        let (mut depth, mut opened) = (0i64, false);
        for (j, l) in lines.iter().enumerate().skip(i) {
            if !opened && j > i && l.trim_end().ends_with(';') && !l.contains('{') && depth == 0 {
                break; // a declaration without a body (trait method)
            }
            for ch in l.chars() {
                match ch {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if opened && depth <= 0 {
                let n = j - i + 1;
                if n > max {
                    out.push((name.clone(), i + 1, n));
                }
                break;
            }
            if !opened && l.trim_end().ends_with(';') {
                break;
            }
        }
    }
    out
}

#[test]
fn no_long_functions_in_the_pipeline_and_threshold_modules() {
    let root = repo_root();
    let mut files = Vec::new();
    for krate in ["bench", "xtask"] {
        rust_files(&root.join(krate).join("src"), &mut files);
    }
    let mut long = Vec::new();
    let mut checked = 0;
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        if !SHORT_FUNCTIONS.iter().any(|p| rel.starts_with(p)) || rel.ends_with("tests.rs") {
            continue;
        }
        checked += 1;
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for (name, line, n) in long_functions(&code, MAX_FN_LINES) {
            long.push(format!("{rel}:{line}: fn {name} has {n} lines"));
        }
    }
    assert!(checked >= 10, "only {checked} files matched the policy's paths");
    assert!(long.is_empty(), "functions over {MAX_FN_LINES} lines:\n{}", long.join("\n"));
}

#[test]
fn the_length_check_counts_bodies() {
    let body = |n: usize| (0..n).map(|i| format!("    let x{i} = 1;\n")).collect::<String>();
    let code = format!(
        "pub async fn long(a: u32)\n    -> u32\n{{\n{}}}\nfn short() {{ {{ }} }}\ntrait T {{\n    fn decl(&self);\n}}\nfn also_long() {{\n{}}}\n#[cfg(test)]\nmod tests {{ fn t() {{\n{}}} }}\n",
        body(10),
        body(4),
        body(50)
    );
    let found = long_functions(&code_only(&code), 5);
    assert_eq!(found, vec![("long".to_string(), 1, 14), ("also_long".to_string(), 19, 6)]);
    let braces_in_text = "fn f() {\n    let s = \"}}}\";\n    let c = '}';\n    g();\n}\n";
    assert_eq!(long_functions(&code_only(braces_in_text), 3), vec![("f".to_string(), 1, 5)]);
}

/// reqwest is built without a crypto provider of its own (rustls with `ring` is installed by
/// `bench::client::http_builder`), and panics on an HTTPS-capable client built any other way:
/// so no code outside that function starts a client itself.
#[test]
fn every_http_client_starts_from_http_builder() {
    let root = crate::support::repo_root();
    let mut files = Vec::new();
    for dir in ["bench/src", "bench/tests", "bench/benches", "xtask/src", "xtask/tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut found = Vec::new();
    for f in &files {
        let code = code_only(&std::fs::read_to_string(f).unwrap());
        for (i, line) in code.lines().enumerate() {
            let starts = ["reqwest::Client::builder(", "reqwest::Client::new(", "reqwest::get("];
            if starts.iter().any(|s| line.contains(s)) {
                let rel = f.strip_prefix(&root).unwrap().display().to_string();
                let inside =
                    rel == "bench/src/client/mod.rs" && line.trim() == "reqwest::Client::builder()";
                if !inside {
                    found.push(format!("{rel}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "use bench::client::http_builder():\n{}", found.join("\n"));
}
