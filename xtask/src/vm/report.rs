//! The cost report of a vm-test run: what each mode costs at load on each
//! kernel, from the `SCHEDLAT-VM-COST` lines the guest test
//! `load_cost_per_mode_is_reported` (tests/guest.rs) prints: per mode the
//! time from exec to the banner, and each program's BPF_PROG_LOAD time and
//! verified_insns. Printed and written to target/vm-test/report.md whether
//! or not the kernels passed; a kernel without the lines says so.

use std::{fmt::Write, fs, path::Path};

use anyhow::{Context, Result};

const MARKER: &str = "SCHEDLAT-VM-COST ";

/// The report for `kernels` (matrix name, console log), as markdown.
pub(super) fn render(kernels: &[(String, String)], accel: &str) -> String {
    let mut out = format!(
        "# vm-test: load cost per kernel and mode\n\n\
         Accelerator: {accel}. Each figure is the median of the guest test's \
         starts (`load_cost_per_mode_is_reported`); under TCG the times are the \
         emulator's, comparable between modes and kernels of one run only.\n"
    );
    for (name, console) in kernels {
        let rows = rows(console);
        let _ = write!(out, "\n## {name}");
        let Some((release, ..)) = rows.first() else {
            let _ = writeln!(
                out,
                "\n\nno cost lines on the console (the guest failed first?)"
            );
            continue;
        };
        let _ = writeln!(out, " ({release})\n");
        out.push_str("| mode | what | load ms | verified_insns |\n|---|---|---|---|\n");
        for (_, mode, what, figures) in &rows {
            let _ = writeln!(out, "| {mode} | {what} | {figures} |");
        }
    }
    out
}

/// (release, mode, "ready" or program, "ms | insns") per cost line.
fn rows(console: &str) -> Vec<(String, String, String, String)> {
    console
        .lines()
        .filter_map(|l| l.split_once(MARKER).map(|(_, rest)| rest))
        .filter_map(|rest| {
            let words: Vec<&str> = rest.split_whitespace().collect();
            match words[..] {
                [release, mode, "ready_ms", ms] => Some((
                    release.into(),
                    mode.into(),
                    "ready (exec to banner)".into(),
                    format!("{ms} | "),
                )),
                [
                    release,
                    mode,
                    program,
                    "load_ms",
                    ms,
                    "verified_insns",
                    insns,
                ] => Some((
                    release.into(),
                    mode.into(),
                    format!("`{program}`"),
                    format!("{ms} | {insns}"),
                )),
                _ => None,
            }
        })
        .collect()
}

/// Reads each kernel's console log from `logs`, prints the report and
/// writes it to `out`.
pub(super) fn write(names: &[String], logs: &Path, accel: &str, out: &Path) -> Result<()> {
    let kernels: Vec<(String, String)> = names
        .iter()
        .map(|n| {
            let log = fs::read_to_string(logs.join(format!("{n}.log"))).unwrap_or_default();
            (n.clone(), log)
        })
        .collect();
    let report = render(&kernels, accel);
    eprint!("{report}");
    fs::create_dir_all(out.parent().expect("a file under target/"))?;
    fs::write(out, &report).with_context(|| format!("writing {}", out.display()))?;
    eprintln!("vm-test: cost report in {}", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_lines_become_rows_and_a_silent_kernel_says_so() {
        let console = "noise\n\
            SCHEDLAT-VM-COST 6.1.0-9 default ready_ms 812\n\
            [  12.3] SCHEDLAT-VM-COST 6.1.0-9 default sched_switch_decision load_ms 40.25 verified_insns 10570\n\
            SCHEDLAT-VM-COST 6.1.0-9 broken line\n";
        let report = render(
            &[
                ("6.1".into(), console.into()),
                ("5.10".into(), "panic".into()),
            ],
            "TCG",
        );
        assert!(report.contains("## 6.1 (6.1.0-9)"), "{report}");
        assert!(
            report.contains("| default | ready (exec to banner) | 812 |  |"),
            "{report}"
        );
        assert!(
            report.contains("| default | `sched_switch_decision` | 40.25 | 10570 |"),
            "{report}"
        );
        assert!(!report.contains("broken"), "{report}");
        assert!(report.contains("## 5.10\n\nno cost lines"), "{report}");
    }
}
