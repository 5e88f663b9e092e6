//! The layer rule, checked: every `crate::` path in schedlat/src (and every
//! top-level `use super::` that leaves its folder) points to a module of the
//! same layer or a lower one, and the modules do not import each other in a
//! cycle. The layers, lowest first, are in `LAYERS`; docs/architecture.md
//! says what each owns.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
};

/// Lowest first. A module may import its own layer and those before it.
const LAYERS: &[&str] = &[
    "sys", "kernel", "collect", "analysis", "output", "commands", "cli",
];

/// A module, as the first two segments of its path (`kernel::loader`,
/// `commands::diagnose`): imports inside one such module are its own
/// business.
type Node = String;

fn layer_of(node: &str) -> usize {
    let top = node.split("::").next().unwrap_or("");
    LAYERS
        .iter()
        .position(|l| *l == top)
        // The crate root (lib.rs) and anything unlisted sit on top.
        .unwrap_or(LAYERS.len())
}

fn node_of(segments: &[String]) -> Node {
    segments
        .iter()
        .take(2)
        .cloned()
        .collect::<Vec<_>>()
        .join("::")
}

/// The module path of a source file: kernel/loader/plan.rs is
/// kernel::loader::plan; mod.rs and lib.rs name their folder.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut segments: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        segments.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        segments.pop();
    }
    segments
}

/// Expands a use tree (`a::{b, c::{d, e}}`, `a::b::C`) into the paths it
/// names, each as its segments.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or("");
        return vec![
            path.split("::")
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty() && s != "self" && s != "*")
                .collect(),
        ];
    };
    let prefix: Vec<String> = tree[..open]
        .split("::")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let close = tree.rfind('}').unwrap_or(tree.len());
    let body = &tree[open + 1..close];
    let (mut items, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&body[start..]);
    items
        .into_iter()
        .filter(|item| !item.trim().is_empty())
        .flat_map(expand)
        .map(|rest| prefix.iter().cloned().chain(rest).collect())
        .collect()
}

/// The use tree or path that starts at `text` (just after `crate::`).
fn tree_at(text: &str) -> &str {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &text[..=i];
                }
            }
            c if depth == 0 && !(c.is_alphanumeric() || c == '_' || c == ':') => {
                return &text[..i];
            }
            _ => {}
        }
    }
    text
}

/// Every module `file` (of module `module`) refers to.
fn references(module: &[String], text: &str) -> BTreeSet<Node> {
    let mut out = BTreeSet::new();
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    for (i, _) in code.match_indices("crate::") {
        for path in expand(tree_at(&code[i + "crate::".len()..])) {
            if !path.is_empty() {
                out.insert(node_of(&path));
            }
        }
    }
    // `use super::` at the top of a file names its parent module; indented
    // ones (in `mod tests`) name the file itself.
    for line in code.lines().filter(|l| l.starts_with("use super::")) {
        let mut base = module.to_vec();
        let mut rest = &line["use ".len()..];
        while let Some(r) = rest.strip_prefix("super::") {
            base.pop();
            rest = r;
        }
        let tree = tree_at(rest.trim_end_matches(';'));
        for path in expand(tree) {
            let full: Vec<String> = base.iter().cloned().chain(path).collect();
            if !full.is_empty() {
                out.insert(node_of(&full));
            }
        }
    }
    out
}

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every module's imports of other modules, from the source tree.
fn graph() -> BTreeMap<Node, BTreeSet<Node>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut graph: BTreeMap<Node, BTreeSet<Node>> = BTreeMap::new();
    for file in files {
        let module = module_of(&src, &file);
        let from = node_of(&module);
        let text = fs::read_to_string(&file).unwrap();
        let edges = graph.entry(from.clone()).or_default();
        for to in references(&module, &text) {
            // Within one module, and a module's own children: its business.
            if to != from && !to.starts_with(&format!("{from}::")) && !from.is_empty() {
                edges.insert(to);
            }
        }
    }
    graph
}

/// A cycle through `node`, if any, as the modules on it.
fn cycle(
    graph: &BTreeMap<Node, BTreeSet<Node>>,
    node: &Node,
    path: &mut Vec<Node>,
    done: &mut BTreeSet<Node>,
) -> Option<Vec<Node>> {
    if let Some(at) = path.iter().position(|n| n == node) {
        return Some(path[at..].to_vec());
    }
    if done.contains(node) {
        return None;
    }
    path.push(node.clone());
    for next in graph.get(node).into_iter().flatten() {
        if let Some(c) = cycle(graph, next, path, done) {
            return Some(c);
        }
    }
    path.pop();
    done.insert(node.clone());
    None
}

#[test]
fn imports_point_down_the_layers() {
    let graph = graph();
    assert!(graph.len() > 20, "found too few modules: {graph:?}");
    let upward: Vec<String> = graph
        .iter()
        .flat_map(|(from, to)| to.iter().map(move |to| (from, to)))
        .filter(|(from, to)| layer_of(to) > layer_of(from))
        .map(|(from, to)| format!("{from} -> {to}"))
        .collect();
    assert!(
        upward.is_empty(),
        "imports up the layers ({LAYERS:?}, lowest first):\n{}",
        upward.join("\n")
    );
}

#[test]
fn modules_import_each_other_without_a_cycle() {
    let graph = graph();
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(c) = cycle(&graph, node, &mut Vec::new(), &mut done) {
            panic!("import cycle: {} -> {}", c.join(" -> "), c[0]);
        }
    }
}

#[test]
fn the_reader_sees_grouped_and_relative_imports() {
    let module = vec!["commands".to_string(), "top".to_string()];
    let refs = references(
        &module,
        "use super::victims::Row;\nuse crate::{kernel::{error::E, hook::H}, sys::procfs};\n\
         fn f() { crate::collect::histogram::Waits::default(); }\n    use super::*;\n",
    );
    let want = [
        "collect::histogram",
        "commands::victims",
        "kernel::error",
        "kernel::hook",
        "sys::procfs",
    ];
    assert_eq!(refs, want.iter().map(|s| s.to_string()).collect());
    // An upward edge and a cycle are caught.
    let mut graph = BTreeMap::new();
    graph.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    graph.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert!(
        cycle(
            &graph,
            &"a".to_string(),
            &mut Vec::new(),
            &mut BTreeSet::new()
        )
        .is_some()
    );
    assert!(layer_of("commands::top") > layer_of("kernel::loader"));
}
