//! The workspace's other userspace crates, read as schedlat/src is
//! (graph.rs): in xtask/src and schedlat-common/src no files import each
//! other in a cycle (inside a folder too), and each of xtask's top-level
//! modules imports only the top-level modules [`XTASK`] allows it; its
//! crate root (main.rs, the command line and the dispatch) may import any
//! and is imported by none. schedlat-common's modules have no order to
//! check beyond that: they share the crate root's constants (lib.rs) and
//! one another's types as the kernel and userspace both need them.

use std::collections::BTreeMap;

use super::{
    crate_dir,
    graph::{self, Graph},
    sources,
};

/// xtask's top-level modules, each with the other top-level modules it
/// may import. The helpers (util: commands, paths, root; steps: a task's
/// timed steps; apt: a private apt configuration) import none; the tools'
/// installers (prometheus3, setup) import the helpers; each task imports
/// the helpers and only the tasks it builds on: image and vm take the
/// package dist makes, vm installs its tools through setup. bench imports
/// no other task: it measures the release binary main.rs builds, and no
/// bench file reaches into packaging or the VMs.
const XTASK: &[(&str, &[&str])] = &[
    ("util", &[]),
    ("steps", &[]),
    ("apt", &[]),
    ("prometheus3", &["apt", "util"]),
    ("setup", &["prometheus3", "util"]),
    ("clippy_ebpf", &["util"]),
    ("fuzz", &["util"]),
    ("dist", &["util"]),
    ("image", &["dist", "util"]),
    ("bench", &["util"]),
    ("vm", &["apt", "dist", "setup", "util"]),
];

/// The edges of `graph` that [`XTASK`] does not allow, one line each.
fn xtask_breaches(graph: &Graph) -> Vec<String> {
    let allowed: BTreeMap<&str, &[&str]> = XTASK.iter().copied().collect();
    let mut out = Vec::new();
    for (from, tos) in &graph.edges {
        let Some(top) = graph.modules[from].first().map(String::as_str) else {
            continue; // main.rs
        };
        let Some(may) = allowed.get(top) else {
            out.push(format!("{from}: `{top}` is not in XTASK"));
            continue;
        };
        for to in tos {
            match graph.modules[to].first().map(String::as_str) {
                None => out.push(format!("{from} -> {to} (the crate root)")),
                Some(t) if t == top || may.contains(&t) => {}
                Some(_) => out.push(format!("{from} -> {to}")),
            }
        }
    }
    out
}

fn graph_of(dir: &str) -> Graph {
    let graph = graph::build(&sources(&crate_dir(dir))).unwrap();
    assert!(graph.modules.len() > 5, "found too few files in {dir}");
    graph
}

fn cycles(graph: &Graph) -> String {
    graph::cycles(&graph.edges)
        .iter()
        .map(|c| c.join(" <-> "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn xtask_modules_import_only_what_they_build_on() {
    let graph = graph_of("xtask/src");
    let breaches = xtask_breaches(&graph);
    assert!(
        breaches.is_empty(),
        "xtask imports that XTASK does not allow ({XTASK:?}):\n{}",
        breaches.join("\n")
    );
}

#[test]
fn no_xtask_files_import_each_other_in_a_cycle() {
    let cycles = cycles(&graph_of("xtask/src"));
    assert!(
        cycles.is_empty(),
        "xtask files that import each other in a cycle:\n{cycles}"
    );
}

#[test]
fn no_common_files_import_each_other_in_a_cycle() {
    let cycles = cycles(&graph_of("schedlat-common/src"));
    assert!(
        cycles.is_empty(),
        "schedlat-common files that import each other in a cycle:\n{cycles}"
    );
}

#[cfg(test)]
mod tests {
    use graph::of as graph_of;

    use super::*;

    /// xtask's shape: main.rs is the root, dispatching to every module; a
    /// module calling back into it, a bench file reaching vm/, and a
    /// module missing from the table are each caught; a cycle through the
    /// root too.
    #[test]
    fn the_xtask_rule_catches_the_root_a_task_and_a_stranger() {
        let g = graph_of(&[
            (
                "main.rs",
                "mod util; mod bench; mod vm; mod dist; mod extra;
                 fn build_release() {}
                 fn main() { vm::run(); bench::run(); dist::run(); }",
            ),
            ("util.rs", ""),
            ("dist/mod.rs", "use crate::util::cargo;"),
            ("bench/mod.rs", "mod scrape; pub fn run() {}"),
            ("bench/scrape.rs", "use crate::{util, vm::qemu};"),
            (
                "vm/mod.rs",
                "pub mod qemu; fn f() { crate::build_release(); crate::dist::run(); }",
            ),
            ("vm/qemu.rs", ""),
            ("extra.rs", "use crate::util;"),
        ]);
        assert_eq!(
            xtask_breaches(&g),
            [
                "bench/scrape.rs -> vm/qemu.rs",
                "extra.rs: `extra` is not in XTASK",
                "vm/mod.rs -> main.rs (the crate root)",
            ]
        );
        assert_eq!(graph::cycles(&g.edges), [["main.rs", "vm/mod.rs"]]);
    }
}
