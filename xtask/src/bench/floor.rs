//! The floor that aya 0.14 sets under schedlat's start-up: `EbpfLoader::new()`
//! always parses all of the kernel's BTF (and offers no way to skip or share
//! it). A process that does only that shows the least time and peak RSS any
//! aya-0.14-based loader can have, measured here in the same run as the
//! tracers, so the ready-time and RSS targets can be read against it.

use std::{process::Command, time::Instant};

use anyhow::{Context, Result, bail};

pub struct Floor {
    pub ms: f64,
    pub rss_mib: f64,
}

/// Median over `runs` of a child process that parses the BTF and exits.
pub fn measure(runs: usize) -> Result<Floor> {
    let exe = std::env::current_exe().context("finding the xtask binary")?;
    let mut samples = Vec::new();
    for _ in 0..runs {
        let started = Instant::now();
        let child = Command::new(&exe).arg("bench-btf-floor").spawn()?;
        let pid = child.id() as libc::pid_t;
        let mut status = 0;
        // SAFETY: all-zero is a valid rusage.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers; pid is our unreaped child.
        if unsafe { libc::wait4(pid, &mut status, 0, &mut usage) } != pid || status != 0 {
            bail!("the BTF floor process failed (status {status})");
        }
        samples.push((
            started.elapsed().as_secs_f64() * 1e3,
            usage.ru_maxrss as f64 / 1024.0,
        ));
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

/// Body of `cargo xtask bench-btf-floor`: what EbpfLoader::new() does first.
pub fn parse_once() -> Result<()> {
    aya::Btf::from_sys_fs().context("parsing /sys/kernel/btf/vmlinux")?;
    Ok(())
}
