//! The hooks' floor: what a tracer costs per switch when its programs do
//! nothing. `cargo xtask bench-noop` (hidden; the bench runs it as its
//! `noop` mode) attaches three tp_btf programs, on sched_switch,
//! sched_wakeup and sched_wakeup_new, each `r0 = 0; exit`, and waits for
//! SIGINT. Their run time is what the kernel charges any program on these
//! hooks before it does a thing (the call through the tracepoint, and the
//! clock reads of the run-time stats themselves), measured in the same run
//! as runqlat and schedlat: no ratio of schedlat's below noop/runqlat is
//! reachable. Built from raw instructions with the bpf system call, so it
//! ships in no schedlat binary and needs no second eBPF object.

use std::{
    ffi::CString,
    io::Write as _,
    os::fd::{FromRawFd, OwnedFd},
};

use anyhow::{Context, Result, bail};
use btf_rs::{Btf, Type};

/// The line the bench waits for, as it waits for runqlat's and schedlat's.
pub(crate) const BANNER: &str = "Tracing run queue latency (noop: programs that return at once)";

/// (program name, tracepoint): names with "switch" count the switches
/// (progs.rs ns_per_switch), as schedlat's and runqlat's do.
const PROGRAMS: [(&str, &str); 3] = [
    ("noop_wakeup", "sched_wakeup"),
    ("noop_wakeup_new", "sched_wakeup_new"),
    ("noop_switch", "sched_switch"),
];

// include/uapi/linux/bpf.h
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;
const BPF_PROG_TYPE_TRACING: u32 = 26;
const BPF_TRACE_RAW_TP: u32 = 23;

/// `r0 = 0` (BPF_ALU64 | BPF_MOV | BPF_K), `exit` (BPF_JMP | BPF_EXIT).
static RETURN_AT_ONCE: [u64; 2] = [0xb7, 0x95];

/// The BPF_PROG_LOAD part of `union bpf_attr`, up to attach_prog_fd (the
/// kernel zero-fills what a shorter attr leaves out).
#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
    attach_prog_fd: u32,
    _pad: u32,
}

/// The BPF_RAW_TRACEPOINT_OPEN part: a tp_btf program needs no name.
#[repr(C)]
struct RawTracepointOpen {
    name: u64,
    prog_fd: u32,
    _pad: u32,
}

fn bpf<T>(cmd: libc::c_long, attr: &T) -> Result<OwnedFd> {
    // SAFETY: `attr` is a valid, initialised attr of the command's layout
    // and size; the kernel copies it in and returns a new fd or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            std::ptr::from_ref(attr),
            size_of::<T>() as u32,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: a new fd the kernel returned to us, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// The kernel's BTF id of tracepoint `tp`'s `btf_trace_<tp>` typedef,
/// which a tp_btf program names as its attach point.
fn attach_id(btf: &Btf, tp: &str) -> Result<u32> {
    let name = format!("btf_trace_{tp}");
    let ids = btf
        .resolve_ids_by_name(&name)
        .with_context(|| format!("{name} is not in the kernel's BTF"))?;
    ids.into_iter()
        .find(|&id| matches!(btf.resolve_type_by_id(id), Ok(Type::Typedef(_))))
        .with_context(|| format!("{name} is not a typedef in the kernel's BTF"))
}

/// Loads and attaches one program; its fds (program, link).
fn attach(name: &str, attach_btf_id: u32) -> Result<(OwnedFd, OwnedFd)> {
    let license = CString::new("GPL").expect("no NUL");
    let mut prog_name = [0u8; 16];
    prog_name[..name.len()].copy_from_slice(name.as_bytes());
    let load = ProgLoad {
        prog_type: BPF_PROG_TYPE_TRACING,
        insn_cnt: RETURN_AT_ONCE.len() as u32,
        insns: RETURN_AT_ONCE.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name,
        expected_attach_type: BPF_TRACE_RAW_TP,
        attach_btf_id,
        ..ProgLoad::default()
    };
    let prog = bpf(BPF_PROG_LOAD, &load).with_context(|| format!("loading {name}"))?;
    let open = RawTracepointOpen {
        name: 0,
        prog_fd: std::os::fd::AsRawFd::as_raw_fd(&prog) as u32,
        _pad: 0,
    };
    let link = bpf(BPF_RAW_TRACEPOINT_OPEN, &open).with_context(|| format!("attaching {name}"))?;
    Ok((prog, link))
}

/// Body of `cargo xtask bench-noop`: attach, say so, hold until SIGINT or
/// SIGTERM, detach by exiting.
pub(crate) fn run() -> Result<()> {
    crate::util::require_root("the noop programs are eBPF programs")?;
    // Blocked before anything: the signal waits for sigwait below.
    // SAFETY: plain libc signal-set calls on a local set.
    let set = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            bail!("blocking SIGINT and SIGTERM");
        }
        set
    };
    let btf = Btf::from_file_with_backend("/sys/kernel/btf/vmlinux", btf_rs::Backend::Mmap)
        .or_else(|_| Btf::from_file("/sys/kernel/btf/vmlinux"))
        .context("reading /sys/kernel/btf/vmlinux")?;
    let mut held = Vec::new();
    for (name, tp) in PROGRAMS {
        held.push(attach(name, attach_id(&btf, tp)?)?);
    }
    drop(btf);
    let mut out = std::io::stdout();
    writeln!(out, "{BANNER}")?;
    out.flush()?;
    let mut signal = 0;
    // SAFETY: a valid set and out-pointer.
    if unsafe { libc::sigwait(&set, &mut signal) } != 0 {
        bail!("waiting for SIGINT");
    }
    drop(held);
    Ok(())
}
