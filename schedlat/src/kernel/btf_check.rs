//! Offsets from a BTF file the user gave (`--btf`) are checked before the
//! programs use them: the programs read task_struct at these offsets
//! through bpf_probe_read-free loads the verifier only bounds by the
//! struct's size, so a BTF file for another kernel, or a damaged one, would
//! not fail: it would read the wrong bytes and report nothing.

use std::path::Path;

use schedlat_common::kconfig::TaskOffsets;

use crate::kernel::btf::{self, BtfError, VMLINUX_BTF};

/// Checks offsets against facts that hold in every kernel schedlat runs on:
/// `pid` and `tgid` are adjacent pid_t fields well inside the struct, and
/// `comm`'s 16 bytes fit in it without overlapping them.
pub(crate) fn check_plausible(
    offsets: &TaskOffsets,
    size: u64,
    path: &Path,
) -> Result<(), BtfError> {
    let bad = |what: String| BtfError::Layout {
        path: path.to_path_buf(),
        what: format!("implausible task_struct layout: {what}; is this the BTF of a Linux kernel?"),
    };
    let o = offsets;
    if o.pid == 0 || !o.pid.is_multiple_of(4) {
        return Err(bad(format!("pid at byte {}", o.pid)));
    }
    if o.tgid != o.pid + 4 {
        return Err(bad(format!(
            "tgid at byte {}, not right after pid (byte {})",
            o.tgid, o.pid
        )));
    }
    if o.comm == 0 || (o.comm < o.pid + 8 && o.comm + 16 > o.pid) {
        return Err(bad(format!(
            "comm at byte {} overlaps pid and tgid",
            o.comm
        )));
    }
    let fields = [
        ("pid", o.pid, 4),
        ("tgid", o.tgid, 4),
        ("comm", o.comm, 16),
        ("state", o.state, 4),
        ("policy", o.policy, 4),
        ("static_prio", o.static_prio, 4),
        ("rt_priority", o.rt_priority, 4),
    ];
    if let Some((name, at, _)) = fields.iter().find(|(_, at, len)| at + len > size) {
        return Err(bad(format!(
            "{name} at byte {at} is past the struct's {size} bytes"
        )));
    }
    Ok(())
}

/// With `--btf` on a kernel that has its own BTF: the file must describe
/// the running kernel's task_struct, or it is for another kernel.
pub(crate) fn check_against_running(offsets: &TaskOffsets, path: &Path) -> Result<(), BtfError> {
    let running = Path::new(VMLINUX_BTF);
    if path == running || !running.exists() {
        return Ok(());
    }
    let Ok(kernel) =
        btf::open(running).and_then(|b| btf::task_offsets(&btf::Layouts::new(&b, running)))
    else {
        return Ok(());
    };
    compare(offsets, &kernel, path)
}

fn compare(given: &TaskOffsets, kernel: &TaskOffsets, path: &Path) -> Result<(), BtfError> {
    if given == kernel {
        return Ok(());
    }
    Err(BtfError::Layout {
        path: path.to_path_buf(),
        what: format!(
            "its task_struct layout (pid at byte {}, comm at {}) is not the running kernel's ({VMLINUX_BTF}: pid at {}, comm at {}): it was made for another kernel. Drop --btf to use the running kernel's",
            given.pid, given.comm, kernel.pid, kernel.comm
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn real() -> TaskOffsets {
        // The shape of 6.x x86-64 (values from this machine's kernel).
        TaskOffsets {
            pid: 2464,
            tgid: 2468,
            state: 24,
            comm: 3008,
            policy: 1212,
            static_prio: 168,
            rt_priority: 176,
        }
    }

    /// Regression: a `--btf` with pid/tgid/comm moved or zero loaded and
    /// reported 0 waits with exit 0.
    #[test]
    fn implausible_offsets_are_refused() {
        let p = Path::new("x.btf");
        check_plausible(&real(), 9000, p).unwrap();
        type Corrupt = fn(&mut TaskOffsets);
        let cases: [(Corrupt, &str); 5] = [
            (|o| o.pid = 0, "pid at byte 0"),
            (|o| o.tgid = 0, "tgid at byte 0"),
            (|o| o.tgid += 8, "not right after pid"),
            (|o| o.comm = o.pid, "overlaps pid"),
            (|o| o.comm = 8990, "past the struct"),
        ];
        for (corrupt, why) in cases {
            let mut o = real();
            corrupt(&mut o);
            let e = check_plausible(&o, 9000, p).unwrap_err().to_string();
            assert!(e.contains(why), "{why}: {e}");
        }
    }

    #[test]
    fn a_btf_for_another_kernel_is_named() {
        let p = Path::new("other.btf");
        compare(&real(), &real(), p).unwrap();
        let mut moved = real();
        moved.pid += 8;
        moved.tgid += 8;
        let e = compare(&moved, &real(), p).unwrap_err().to_string();
        assert!(e.contains("made for another kernel"), "{e}");
    }

    #[test]
    fn the_running_kernel_passes_both_checks() {
        let path = Path::new(VMLINUX_BTF);
        let b = btf::open(path).unwrap();
        let layouts = btf::Layouts::new(&b, path);
        let o = btf::task_offsets(&layouts).unwrap();
        check_plausible(&o, btf::task_struct_size(&layouts).unwrap(), path).unwrap();
        check_against_running(&o, path).unwrap();
    }
}
