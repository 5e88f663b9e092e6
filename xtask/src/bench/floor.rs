//! What parsing all of the kernel's BTF costs a process: the floor that the
//! published aya 0.14 sets under every loader, since its `EbpfLoader::new()`
//! does it before anything else. schedlat's patched aya (vendor/aya) skips
//! it; this stays as the reference for what the patch saves, measured in the
//! same run as the tracers.

use std::{
    io::Read,
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context, Result, bail};

pub(crate) struct Floor {
    pub ms: f64,
    pub rss_mib: f64,
}

/// Median over `runs` of a child process that parses the BTF and exits.
pub(crate) fn measure(runs: usize) -> Result<Floor> {
    let exe = std::env::current_exe().context("finding the xtask binary")?;
    let mut samples = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let child = Command::new(&exe)
            .arg("bench-btf-floor")
            .stdout(Stdio::piped())
            .spawn()?;
        let pid = child.id() as libc::pid_t;
        let mut status = 0;
        // SAFETY: all-zero is a valid rusage.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers; pid is our unreaped child.
        if unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid || status != 0 {
            bail!("the BTF floor process failed (status {status})");
        }
        let elapsed = started.elapsed();
        // Its own VmHWM (ru_maxrss would include this process's: see tracer.rs).
        let mut out = String::new();
        child.stdout.expect("piped").read_to_string(&mut out)?;
        let hwm_kib: f64 = out
            .trim()
            .parse()
            .with_context(|| format!("the BTF floor process printed `{out}`"))?;
        samples.push((elapsed.as_secs_f64() * 1e3, hwm_kib / 1024.0));
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok(Floor {
        ms: median(samples.iter().map(|s| s.0).collect()),
        rss_mib: median(samples.iter().map(|s| s.1).collect()),
    })
}

/// Body of `cargo xtask bench-btf-floor`: what the published
/// EbpfLoader::new() does first; prints its VmHWM in KiB.
pub(crate) fn parse_once() -> Result<()> {
    let btf = aya::Btf::from_sys_fs().context("parsing /sys/kernel/btf/vmlinux")?;
    let status = std::fs::read_to_string("/proc/self/status")?;
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .context("no VmHWM in /proc/self/status")?;
    println!("{}", hwm.trim());
    drop(btf);
    Ok(())
}
