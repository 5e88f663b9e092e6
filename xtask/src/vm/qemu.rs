//! One guest run: QEMU boots a kernel with the initramfs, the serial console
//! goes to a file, a timeout bounds the run, and the verdict is the marker
//! line /init prints (initramfs.rs). QEMU's own exit status says nothing
//! about the tests: a guest that panics exits just as cleanly.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

/// Prefix of the result line /init prints: `PASS`, or `FAIL <reason>`.
pub(super) const MARKER: &str = "SCHEDLAT-VM-RESULT:";

pub(super) enum Accel {
    Kvm,
    /// Emulation, and why KVM is not used.
    Tcg(&'static str),
}

/// KVM only where it can run a stock kernel: hardware virtualization in
/// /proc/cpuinfo, and not the nested PVM flavour of /dev/kvm (kvm_pvm),
/// which only runs PVM-enabled guest kernels.
pub(super) fn accelerator() -> Accel {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let hardware = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    if Path::new("/sys/module/kvm_pvm").exists() {
        Accel::Tcg("/dev/kvm is kvm_pvm, which cannot run stock kernels")
    } else if !hardware {
        Accel::Tcg("no vmx/svm in /proc/cpuinfo")
    } else if fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_err()
    {
        Accel::Tcg("/dev/kvm cannot be opened")
    } else {
        Accel::Kvm
    }
}

pub(super) struct Guest<'a> {
    pub kernel: &'a Path,
    pub initrd: &'a Path,
    /// Appended to the kernel command line; `NAME=value` words that the
    /// kernel does not know become /init's environment.
    pub extra_cmdline: &'a str,
    /// Serial console output (QEMU writes it; we strip the \r).
    pub log: PathBuf,
    pub timeout: Duration,
}

pub(super) enum Verdict {
    Pass,
    Fail(String),
}

pub(super) struct Run {
    pub verdict: Verdict,
    /// The console, \r stripped.
    pub console: String,
    pub elapsed: Duration,
}

pub(super) fn boot(guest: &Guest, accel: &Accel) -> Result<Run> {
    let started = Instant::now();
    let mut cmd = Command::new("qemu-system-x86_64");
    cmd.args(["-nodefaults", "-no-user-config", "-display", "none"])
        .args(["-monitor", "none", "-m", "1G", "-smp", "2"])
        .arg("-serial")
        .arg(format!("file:{}", guest.log.display()))
        // A guest panic reboots (panic=-1), and -no-reboot turns that into
        // an exit: a dead guest ends the run at once instead of at timeout.
        .arg("-no-reboot")
        .arg("-kernel")
        .arg(guest.kernel)
        .arg("-initrd")
        .arg(guest.initrd)
        .arg("-append")
        .arg(format!(
            "console=ttyS0 panic=-1 quiet {}",
            guest.extra_cmdline
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    match accel {
        Accel::Kvm => cmd.args(["-accel", "kvm", "-cpu", "host"]),
        // Single-threaded TCG: with one host thread per vCPU (MTTCG) on
        // this 2-CPU host, 2 of 10 boots of 6.1 went wrong (an RCU stall
        // that hung the guest while it attached tracepoints, and a lost
        // race); single-threaded, none in over 40 boots, and no slower: the
        // workloads pin themselves to one CPU anyway.
        Accel::Tcg(_) => cmd.args(["-accel", "tcg,thread=single"]),
    };
    let mut child = cmd.spawn().context("cannot run qemu-system-x86_64")?;
    let mut stderr = child.stderr.take().expect("piped");
    let stderr = thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() > guest.timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(100));
    };
    let stderr = stderr.join().unwrap_or_default();
    let console = fs::read_to_string(&guest.log)
        .unwrap_or_default()
        .replace('\r', "");
    // Keep the cleaned console for whoever reads the log file.
    fs::write(&guest.log, &console)?;
    let verdict = match (status, result_line(&console)) {
        (_, Some("PASS")) => Verdict::Pass,
        (_, Some(line)) => Verdict::Fail(line.strip_prefix("FAIL").unwrap_or(line).trim().into()),
        (None, None) => Verdict::Fail(format!(
            "no result within {} s: the guest was killed (hung?)",
            guest.timeout.as_secs()
        )),
        (Some(status), None) if !status.success() => {
            Verdict::Fail(format!("qemu failed ({status}): {}", stderr.trim()))
        }
        (Some(_), None) if console.contains("Kernel panic") => {
            Verdict::Fail("kernel panic before a result line".into())
        }
        (Some(_), None) => Verdict::Fail("the guest stopped without a result line".into()),
    };
    Ok(Run {
        verdict,
        console,
        elapsed: started.elapsed(),
    })
}

/// What follows the marker on its line, if /init got that far.
fn result_line(console: &str) -> Option<&str> {
    console
        .lines()
        .find_map(|l| l.split_once(MARKER).map(|(_, rest)| rest.trim()))
}
