//! The layer rule, checked on the source itself (unit tests: `cargo test -p
//! schedlat --lib layers`), from the imports syn reads in every file
//! (graph.rs): every import of schedlat/src points to its own layer or a
//! lower one ([`LAYERS`]), no files import each other in a cycle (inside a
//! folder too), and no command imports another command, only the skeleton
//! they share ([`SKELETON`]), and nothing below cli/ uses clap. The eBPF
//! crate's modules import only those its main.rs lists before them, the
//! list docs/architecture.md shows too.
//! xtask/src and schedlat-common/src have no cycles either, and xtask's
//! top-level modules import only what they build on (workspace.rs).
//! docs/architecture.md says what each layer owns.

mod graph;
mod workspace;

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    sync::OnceLock,
};

use graph::{File, Graph};

/// The layers of schedlat/src, lowest first: a file may import its own
/// layer and those before it. The crate root (lib.rs) and the test-only
/// modules at the top (fuzz.rs, this one) sit above them all.
const LAYERS: &[&str] = &[
    "histogram",
    "sys",
    "kernel",
    "collect",
    "analysis",
    "output",
    "recorder",
    "export",
    "commands",
    "cli",
];

/// The modules of commands/ that every command may import: the run
/// skeleton (commands/mod.rs, session.rs, stdout.rs).
const SKELETON: &[&[&str]] = &[
    &["commands"],
    &["commands", "session"],
    &["commands", "stdout"],
];

/// What breaks the rule, in words, one line each.
#[derive(Debug, Default, PartialEq)]
struct Breaches {
    upward: Vec<String>,
    cycles: Vec<String>,
    cross_command: Vec<String>,
}

fn layer_of(module: &[String]) -> usize {
    module
        .first()
        .and_then(|top| LAYERS.iter().position(|l| l == top))
        .unwrap_or(LAYERS.len())
}

/// The command a module belongs to (`commands::top::x` is `top`); None
/// outside commands/ and for the skeleton.
fn command_of(module: &[String]) -> Option<&str> {
    if module.first().map(String::as_str) != Some("commands")
        || SKELETON.iter().any(|s| s.iter().eq(module.iter().take(2)))
    {
        return None;
    }
    module.get(1).map(String::as_str)
}

fn check(graph: &Graph) -> Breaches {
    let mut out = Breaches::default();
    for (from, to) in graph
        .edges
        .iter()
        .flat_map(|(f, ts)| ts.iter().map(move |t| (f, t)))
    {
        let (fm, tm) = (&graph.modules[from], &graph.modules[to]);
        if layer_of(tm) > layer_of(fm) {
            out.upward.push(format!("{from} -> {to}"));
        }
        if let (Some(a), Some(b)) = (command_of(fm), command_of(tm))
            && a != b
        {
            out.cross_command.push(format!("{from} -> {to}"));
        }
    }
    out.cycles = graph::cycles(&graph.edges)
        .into_iter()
        .map(|c| c.join(" <-> "))
        .collect();
    out
}

/// Every .rs file under `dir`, with its path relative to it.
fn sources(dir: &Path) -> Vec<(File, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            let text = fs::read_to_string(&p).unwrap();
            (rel, text)
        })
        .collect()
}

fn crate_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

/// What breaks the rule in schedlat/src (main.rs is the binary, another
/// crate), read once for the three tests below.
fn schedlat_breaches() -> &'static Breaches {
    static BREACHES: OnceLock<Breaches> = OnceLock::new();
    BREACHES.get_or_init(|| {
        let sources: Vec<_> = sources(&crate_dir("schedlat/src"))
            .into_iter()
            .filter(|(f, _)| f != "main.rs")
            .collect();
        let graph = graph::build(&sources).unwrap();
        assert!(graph.modules.len() > 100, "found too few files");
        check(&graph)
    })
}

#[test]
fn imports_point_down_the_layers() {
    let b = schedlat_breaches();
    assert!(
        b.upward.is_empty(),
        "imports up the layers ({LAYERS:?}, lowest first):\n{}",
        b.upward.join("\n")
    );
}

#[test]
fn no_files_import_each_other_in_a_cycle() {
    let b = schedlat_breaches();
    assert!(
        b.cycles.is_empty(),
        "files that import each other in a cycle:\n{}",
        b.cycles.join("\n")
    );
}

#[test]
fn no_command_imports_another() {
    let b = schedlat_breaches();
    assert!(
        b.cross_command.is_empty(),
        "commands importing another command (share it through the skeleton, {SKELETON:?}, or the layer it belongs to):\n{}",
        b.cross_command.join("\n")
    );
}

/// Whether `tokens` name clap in code (a path, a `use`, a derive): the
/// identifier anywhere but in comments and literals.
fn names_clap(tokens: proc_macro2::TokenStream) -> bool {
    tokens.into_iter().any(|t| match t {
        proc_macro2::TokenTree::Ident(i) => i == "clap",
        proc_macro2::TokenTree::Group(g) => names_clap(g.stream()),
        _ => false,
    })
}

/// The command line is cli/'s: below it no file uses clap (a type a flag
/// takes gets its clap mirror in cli/values.rs).
#[test]
fn nothing_below_cli_uses_clap() {
    let cli = layer_of(&["cli".to_string()]);
    let found: Vec<String> = sources(&crate_dir("schedlat/src"))
        .into_iter()
        .filter(|(f, _)| layer_of(&graph::module_of(f)) < cli)
        .filter(|(_, text)| names_clap(text.parse().unwrap()))
        .map(|(f, _)| f)
        .collect();
    assert!(found.is_empty(), "clap below cli/:\n{}", found.join("\n"));
}

/// The eBPF crate's modules, lowest first, as main.rs's doc lists them
/// (`//! - atomic, bpf: ...`, after "Modules, lowest first").
fn ebpf_order(main_rs: &str) -> Vec<String> {
    main_rs
        .lines()
        .skip_while(|l| !l.contains("Modules, lowest first"))
        .skip(1)
        .take_while(|l| l.starts_with("//! - ") || l.starts_with("//!   "))
        .filter_map(|l| l.strip_prefix("//! - "))
        .flat_map(|l| l.split(':').next().unwrap_or("").split(','))
        .map(|m| m.trim().to_string())
        .collect()
}

/// The same list in docs/architecture.md's eBPF section: the first word of
/// each line of its code block (`atomic.rs, bpf.rs  ...`), main.rs last.
fn documented_ebpf_order(architecture: &str) -> Vec<String> {
    architecture
        .lines()
        .skip_while(|l| !l.starts_with("## The eBPF crate"))
        .skip_while(|l| !l.starts_with("```"))
        .skip(1)
        .take_while(|l| !l.starts_with("```"))
        .filter(|l| !l.starts_with(' '))
        .flat_map(|l| {
            l.split("  ")
                .next()
                .unwrap_or("")
                .split(',')
                .map(|m| m.trim().trim_end_matches(".rs").to_string())
                .collect::<Vec<_>>()
        })
        .filter(|m| !m.is_empty() && m != "main")
        .collect()
}

#[test]
fn ebpf_modules_import_only_those_listed_before_them() {
    let src = crate_dir("schedlat-ebpf/src");
    let sources: Vec<_> = sources(&src)
        .into_iter()
        .filter(|(f, _)| f != "lib.rs")
        .collect();
    let main_rs = &sources.iter().find(|(f, _)| f == "main.rs").unwrap().1;
    let order = ebpf_order(main_rs);
    let architecture = fs::read_to_string(crate_dir("docs/architecture.md")).unwrap();
    assert_eq!(
        documented_ebpf_order(&architecture),
        order,
        "docs/architecture.md lists the eBPF modules in another order than main.rs"
    );
    let graph = graph::build(&sources).unwrap();
    let rank = |file: &str| {
        let module = graph::module_of(file);
        match module.first() {
            None => Some(order.len()),
            Some(m) => order.iter().position(|o| o == m),
        }
    };
    let mut breaches = Vec::new();
    for (from, tos) in &graph.edges {
        let Some(f) = rank(from) else {
            breaches.push(format!("{from} is not in main.rs's list of modules"));
            continue;
        };
        for to in tos {
            if rank(to).is_none_or(|t| t >= f) {
                breaches.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(
        breaches.is_empty(),
        "eBPF imports not pointing up main.rs's list ({order:?}):\n{}",
        breaches.join("\n")
    );
    assert!(graph::cycles(&graph.edges).is_empty());
}

#[cfg(test)]
mod tests {
    use graph::of as graph_of;

    use super::*;

    fn imports<'a>(g: &'a Graph, file: &str) -> Vec<&'a str> {
        g.edges[file].iter().map(String::as_str).collect()
    }

    /// Every form an import takes is seen, and only imports count.
    #[test]
    fn the_reader_sees_every_form_of_import() {
        let g = graph_of(&[
            ("lib.rs", "mod kernel; mod sys; mod commands;"),
            ("sys/mod.rs", "pub mod procfs; pub mod clock;"),
            ("sys/procfs.rs", ""),
            ("sys/clock.rs", ""),
            (
                "kernel/mod.rs",
                "pub mod btf; pub mod hook; pub mod modes; pub mod error; mod inner { pub fn f() {} }",
            ),
            ("kernel/btf.rs", ""),
            ("kernel/hook.rs", ""),
            ("kernel/modes.rs", ""),
            ("kernel/error.rs", ""),
            (
                "commands/mod.rs",
                "pub mod top; pub mod run; pub mod session;",
            ),
            ("commands/session.rs", ""),
            ("commands/run.rs", ""),
            (
                "commands/top/mod.rs",
                // Multi-line nested trees, a rename, `self` in a group.
                "mod view;
                 use crate::{
                     kernel::{
                         btf::{self, X},
                         hook as h,
                     },
                 };
                 // A child module, and a path through a `use` binding.
                 use view::draw;
                 use crate::sys;
                 fn f() {
                     // Paths in code, and in a macro.
                     let _ = crate::kernel::modes::Modes::HISTOGRAM;
                     sys::procfs::parse();
                     println!(\"{}\", crate::kernel::error::E);
                 }
                 #[cfg(test)]
                 mod tests {
                     use super::*;
                     use super::super::session::Signals;
                 }",
            ),
            (
                "commands/top/view.rs",
                "pub use super::super::run::Ended; use self::x::Y; mod x {}
                 // Not imports: another crate, a local item, a comment: crate::sys::clock
                 use std::fmt; fn g() { let _ = fmt::Error; let s = \"crate::sys::clock\"; }",
            ),
        ]);
        assert_eq!(
            imports(&g, "commands/top/mod.rs"),
            [
                "commands/session.rs",
                "commands/top/view.rs",
                "kernel/btf.rs",
                "kernel/error.rs",
                "kernel/hook.rs",
                "kernel/modes.rs",
                "sys/mod.rs",
                "sys/procfs.rs",
            ]
        );
        assert_eq!(imports(&g, "commands/top/view.rs"), ["commands/run.rs"]);
        // Declaring modules is not importing them.
        assert!(imports(&g, "lib.rs").is_empty());
        assert!(imports(&g, "kernel/mod.rs").is_empty());
    }

    /// Injected breaches are each caught and named.
    #[test]
    fn an_upward_import_a_cycle_and_a_cross_command_import_fail() {
        let g = graph_of(&[
            ("lib.rs", "mod sys; mod commands;"),
            ("sys/mod.rs", "pub mod a; pub mod b;"),
            // Upward: sys importing a command.
            ("sys/a.rs", "use crate::commands::top::X; use super::b::B;"),
            // A cycle inside sys/: a.rs <-> b.rs, one of them multi-line.
            ("sys/b.rs", "use super::{\n    a::A,\n};"),
            (
                "commands/mod.rs",
                "pub mod top; pub mod victims; pub mod stdout;",
            ),
            ("commands/stdout.rs", ""),
            // The skeleton is allowed; another command is not.
            (
                "commands/top/mod.rs",
                "use crate::commands::{stdout, victims::Row};",
            ),
            ("commands/victims/mod.rs", ""),
        ]);
        let b = check(&g);
        assert_eq!(b.upward, ["sys/a.rs -> commands/top/mod.rs"]);
        assert_eq!(b.cycles, ["sys/a.rs <-> sys/b.rs"]);
        assert_eq!(
            b.cross_command,
            ["commands/top/mod.rs -> commands/victims/mod.rs"]
        );
    }

    #[test]
    fn clap_is_seen_in_code_only() {
        let names = |text: &str| names_clap(text.parse().unwrap());
        assert!(names("#[derive(Debug, clap::ValueEnum)] enum E { A }"));
        assert!(names("use clap::Parser;"));
        assert!(names("fn f() { let _ = clap::value_parser!(u32); }"));
        assert!(!names(
            "/// clap value parser for `--comm`\n// clap::X\nfn f() { let _ = \"clap::\"; }"
        ));
    }

    #[test]
    fn the_ebpf_order_is_read_from_main_and_the_docs() {
        let main_rs = "//! Modules, lowest first; each imports only from those above it:\n\
                       //! - atomic, bpf: helpers,\n//!   two.\n//! - wait: the measurement.\n\
                       //!\n//! More.\n";
        assert_eq!(ebpf_order(main_rs), ["atomic", "bpf", "wait"]);
        let docs = "## The eBPF crate\n\ntext\n\n```\natomic.rs, bpf.rs  helpers\n                   more\n\
                    wait.rs            the measurement\nmain.rs            programs\n```\n";
        assert_eq!(documented_ebpf_order(docs), ["atomic", "bpf", "wait"]);
    }

    /// Only a crate root at the top is the empty path; two files of one
    /// module are refused rather than one silently dropped.
    #[test]
    fn crate_roots_and_modules_are_told_by_their_path() {
        let m = |s: &str| graph::module_of(s);
        assert!(m("lib.rs").is_empty());
        assert!(m("main.rs").is_empty());
        assert_eq!(m("bench/mod.rs"), ["bench"]);
        assert_eq!(m("bench/main.rs"), ["bench", "main"]);
        assert_eq!(m("vm/lib.rs"), ["vm", "lib"]);
        let g = graph_of(&[
            ("main.rs", "mod bench; fn f() { bench::main::run(); }"),
            ("bench/mod.rs", "pub mod main; fn g() { crate::f(); }"),
            ("bench/main.rs", "pub fn run() {}"),
        ]);
        assert_eq!(imports(&g, "main.rs"), ["bench/main.rs"]);
        assert_eq!(imports(&g, "bench/mod.rs"), ["main.rs"]);
        for pair in [("lib.rs", "main.rs"), ("a.rs", "a/mod.rs")] {
            let sources = [
                (pair.0.to_string(), String::new()),
                (pair.1.to_string(), String::new()),
            ];
            assert!(graph::build(&sources).is_err(), "{pair:?}");
        }
    }

    #[test]
    fn layers_and_commands_are_told_by_their_path() {
        let m = |s: &str| graph::module_of(s);
        assert!(layer_of(&m("commands/top/mod.rs")) > layer_of(&m("kernel/loader/plan.rs")));
        assert_eq!(layer_of(&m("lib.rs")), LAYERS.len());
        assert_eq!(command_of(&m("commands/top/state.rs")), Some("top"));
        assert_eq!(command_of(&m("commands/session.rs")), None);
        assert_eq!(command_of(&m("commands/mod.rs")), None);
        assert_eq!(command_of(&m("output/top/mod.rs")), None);
        let _: BTreeSet<&str> = LAYERS.iter().copied().collect();
    }
}
