//! The import graph between a crate's source files, from the code itself,
//! parsed by syn: every `use` tree (nested, multi-line, `pub use`, renamed,
//! `self` in a group), every path in code (expressions, types, patterns,
//! struct literals), and `crate::`/`super::`/`self::` paths inside macro
//! calls. A path is resolved as rustc would resolve its first segment:
//! `crate`, `super` and `self`, a child module the file declares, or a name
//! a `use` bound to a module; anything else is another crate or a local
//! item. Declaring a child (`mod x;`) is not an import.

use std::collections::{BTreeMap, BTreeSet};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// A file, by its path under the source directory (`kernel/btf.rs`).
pub(super) type File = String;

/// A module path (`["kernel", "loader"]`; the crate root is empty).
pub(super) type ModPath = Vec<String>;

/// Every file's imports of other files.
#[derive(Debug, Default)]
pub(super) struct Graph {
    /// Each file's module path.
    pub modules: BTreeMap<File, ModPath>,
    pub edges: BTreeMap<File, BTreeSet<File>>,
}

/// The module path of a source file: `kernel/loader/plan.rs` is
/// `kernel::loader::plan`; `mod.rs` names its folder, and a crate root
/// (`lib.rs` or `main.rs` at the top, the crate's only one in a graph) is
/// the empty path. Below the top, `lib.rs` and `main.rs` are modules like
/// any other (`bench/main.rs` is `bench::main`).
pub(super) fn module_of(file: &str) -> ModPath {
    if matches!(file, "lib.rs" | "main.rs") {
        return ModPath::new();
    }
    let mut segments: ModPath = file
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if segments.last().map(String::as_str) == Some("mod") {
        segments.pop();
    }
    segments
}

/// What one module sees by name: its declared children, and the names its
/// `use` items bind to module paths.
#[derive(Debug, Default)]
struct Scope {
    children: BTreeSet<String>,
    bindings: BTreeMap<String, ModPath>,
}

/// Builds the graph of `sources` (file, text), one crate's files; an error
/// names a file that does not parse, or two files of one module (`a.rs`
/// and `a/mod.rs`, or two crate roots: a crate's lib.rs and its binary's
/// main.rs are two graphs).
/// The graph of `files`, each its path and its text (the tests' sources).
#[cfg(test)]
pub(super) fn of(files: &[(&str, &str)]) -> Graph {
    let sources: Vec<(File, String)> = files
        .iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect();
    build(&sources).unwrap()
}

pub(super) fn build(sources: &[(File, String)]) -> Result<Graph, String> {
    let mut parsed = Vec::new();
    let mut seen: BTreeMap<ModPath, &File> = BTreeMap::new();
    for (file, text) in sources {
        let module = module_of(file);
        if let Some(other) = seen.insert(module.clone(), file) {
            return Err(format!(
                "{other} and {file} are both module `{}`",
                module.join("::")
            ));
        }
        let ast = syn::parse_file(text).map_err(|e| format!("{file}: {e}"))?;
        parsed.push((file.clone(), module, ast));
    }
    // Pass 1: what each module declares and binds.
    let mut scopes: BTreeMap<ModPath, Scope> = BTreeMap::new();
    for (_, module, ast) in &parsed {
        let mut collect = Collect {
            stack: vec![module.clone()],
            scopes: &mut scopes,
        };
        collect.visit_file(ast);
    }
    // Pass 2: every path, resolved to a file.
    let modules: BTreeMap<File, ModPath> = parsed
        .iter()
        .map(|(f, m, _)| (f.clone(), m.clone()))
        .collect();
    let files_of: BTreeMap<ModPath, File> = modules
        .iter()
        .map(|(f, m)| (m.clone(), f.clone()))
        .collect();
    let mut graph = Graph {
        modules,
        ..Graph::default()
    };
    for (file, module, ast) in &parsed {
        let mut refs = Refs {
            stack: vec![module.clone()],
            scopes: &scopes,
            found: BTreeSet::new(),
        };
        refs.visit_file(ast);
        let edges = graph.edges.entry(file.clone()).or_default();
        for path in refs.found {
            if let Some(to) = file_of(&files_of, &path)
                && to != *file
            {
                edges.insert(to);
            }
        }
    }
    Ok(graph)
}

/// The file of the longest prefix of `path` that is a file's module.
fn file_of(files: &BTreeMap<ModPath, File>, path: &[String]) -> Option<File> {
    (0..=path.len())
        .rev()
        .find_map(|n| files.get(&path[..n]).cloned())
}

/// A `use` item's paths, each with the name it binds; a glob binds nothing.
fn use_paths(u: &syn::ItemUse) -> Vec<(ModPath, Option<String>)> {
    let mut out = Vec::new();
    expand(&u.tree, &mut Vec::new(), &mut out);
    out
}

fn expand(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(ModPath, Option<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            expand(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) if n.ident == "self" => {
            out.push((prefix.clone(), prefix.last().cloned()));
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push((path, Some(n.ident.to_string())));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((path, Some(r.rename.to_string())));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), None)),
        syn::UseTree::Group(g) => {
            for item in &g.items {
                expand(item, prefix, out);
            }
        }
    }
}

/// `path` seen from module `here`, as an absolute module path; None for
/// another crate's path or a local item. Bindings are only followed when
/// `bindings` (a `use` path is resolved without them).
fn resolve(
    here: &[String],
    path: &[String],
    scopes: &BTreeMap<ModPath, Scope>,
    bindings: bool,
) -> Option<ModPath> {
    let first = path.first()?;
    let mut base: ModPath = here.to_vec();
    let mut rest = path;
    match first.as_str() {
        "crate" => {
            base.clear();
            rest = &path[1..];
        }
        "super" | "self" => {
            while let Some(s) = rest.first() {
                match s.as_str() {
                    "super" => {
                        base.pop()?;
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        name => {
            let scope = scopes.get(here)?;
            if scope.children.contains(name) {
                // A child module: relative to here.
            } else if let Some(to) = bindings.then(|| scope.bindings.get(name)).flatten() {
                base.clone_from(to);
                rest = &path[1..];
            } else {
                return None;
            }
        }
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Pass 1: the modules each file declares (files and inline ones) and the
/// names its `use` items bind.
struct Collect<'a> {
    stack: Vec<ModPath>,
    scopes: &'a mut BTreeMap<ModPath, Scope>,
}

impl Collect<'_> {
    fn here(&self) -> &ModPath {
        self.stack.last().expect("a module")
    }
}

impl<'ast> Visit<'ast> for Collect<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let here = self.here().clone();
        let name = m.ident.to_string();
        self.scopes
            .entry(here.clone())
            .or_default()
            .children
            .insert(name.clone());
        if m.content.is_some() {
            let mut inner = here;
            inner.push(name);
            self.stack.push(inner);
            visit::visit_item_mod(self, m);
            self.stack.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let here = self.here().clone();
        for (path, name) in use_paths(u) {
            let (Some(name), Some(to)) = (name, resolve(&here, &path, self.scopes, false)) else {
                continue;
            };
            self.scopes
                .entry(here.clone())
                .or_default()
                .bindings
                .insert(name, to);
        }
    }
}

/// Pass 2: every path that names a module of the crate.
struct Refs<'a> {
    stack: Vec<ModPath>,
    scopes: &'a BTreeMap<ModPath, Scope>,
    found: BTreeSet<ModPath>,
}

impl Refs<'_> {
    fn add(&mut self, path: &[String], bindings: bool) {
        let here = self.stack.last().expect("a module");
        if let Some(to) = resolve(here, path, self.scopes, bindings) {
            self.found.insert(to);
        }
    }

    /// `a::b::c` sequences in a macro's tokens (`format!`, `json!`, ...).
    fn scan(&mut self, tokens: TokenStream) {
        let mut run: Vec<String> = Vec::new();
        let mut colons = 0;
        let flush = |this: &mut Self, run: &mut Vec<String>| {
            if run.len() > 1 {
                this.add(run, true);
            }
            run.clear();
        };
        for tree in tokens {
            match tree {
                TokenTree::Ident(i) if run.is_empty() || colons == 2 => {
                    run.push(i.to_string());
                    colons = 0;
                }
                TokenTree::Punct(p) if p.as_char() == ':' && !run.is_empty() && colons < 2 => {
                    colons += 1;
                }
                TokenTree::Group(g) => {
                    flush(self, &mut run);
                    colons = 0;
                    self.scan(g.stream());
                }
                TokenTree::Ident(i) => {
                    flush(self, &mut run);
                    run.push(i.to_string());
                    colons = 0;
                }
                _ => {
                    flush(self, &mut run);
                    colons = 0;
                }
            }
        }
        flush(self, &mut run);
    }
}

impl<'ast> Visit<'ast> for Refs<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_some() {
            let mut inner = self.stack.last().expect("a module").clone();
            inner.push(m.ident.to_string());
            self.stack.push(inner);
            visit::visit_item_mod(self, m);
            self.stack.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        for (path, _) in use_paths(u) {
            self.add(&path, false);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 {
            self.add(&segments, true);
        }
        visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.scan(m.tokens.clone());
        visit::visit_macro(self, m);
    }
}

/// The files in cycles: each strongly connected component of more than one
/// file (Tarjan's algorithm), its files sorted.
pub(super) fn cycles(edges: &BTreeMap<File, BTreeSet<File>>) -> Vec<Vec<File>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<File, BTreeSet<File>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<File>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.found.sort();
    t.found
}
