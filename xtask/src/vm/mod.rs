//! `cargo xtask vm-test`: boot other kernels in QEMU and run schedlat's
//! kernel-level checks (tests/guest.rs) inside each, so that "one binary,
//! offsets resolved at load time" is tested beyond the machine's own kernel.
//!
//! - kernels.rs: which kernels, resolved and fetched from Debian's archive
//! - bzimage.rs, elf.rs: unpack the ELF kernel for a faster emulated boot
//! - initramfs.rs: the static guest binaries, /init, the cpio image
//! - qemu.rs: one boot, bounded by a timeout, judged by a marker line
//! - report.rs: each kernel's load cost per mode (programs' load times
//!   and verified_insns, exec to banner), in target/vm-test/report.md
//! - rootfs.rs, systemd.rs: a Debian guest with systemd as PID 1 that
//!   installs the .deb and checks the unit (tests/unit.rs), on the kernels
//!   of [`systemd::KERNELS`]

mod bzimage;
mod elf;
mod initramfs;
mod kernels;
mod qemu;
mod report;
mod rootfs;
mod systemd;

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    sync::atomic::{AtomicUsize, Ordering},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Result, bail};

use crate::{apt, setup, util::workspace_root};

#[derive(clap::Args)]
pub(crate) struct Options {
    /// Kernel to boot: 5.10, 6.1, 6.12, 7.x (Debian unstable's current
    /// kernel), 7.x-rt (its PREEMPT_RT build), or a Debian linux-image-*
    /// package name (7.x and later ones from Debian unstable; 6.1's rt
    /// build is `linux-image-rt-amd64`); repeat for several [default: all
    /// five]
    #[arg(long = "kernel", value_name = "NAME")]
    kernels: Vec<String>,
    /// Which guests boot: the kernel-level tests (busybox initramfs), the
    /// packaged unit under systemd (on 5.10, 6.1 and 6.12 only), or both
    #[arg(long, value_enum, default_value_t = Guests::All)]
    guests: Guests,
    /// Build schedlat with its fault-injection feature and give every guest
    /// SCHEDLAT_FAULT_TASK_PID_OFFSET=BYTES (default 0), a wrong task_struct
    /// pid offset: every kernel must then FAIL, showing that vm-test catches it
    #[arg(long, value_name = "BYTES", num_args = 0..=1, default_missing_value = "0")]
    inject_bad_offset: Option<u64>,
    /// Seconds a guest may run before it is killed and counted as failed.
    /// Emulation shares the host's CPUs: a guest that takes a minute on a
    /// quiet 2-CPU host took 4-5 minutes with a load average of 29 there,
    /// so the bound is wide; a hang still ends the run, with the guest's
    /// own report of its stuck tasks
    #[arg(long, value_name = "SECONDS", default_value_t = 900)]
    timeout: u64,
    /// Guests booted at once [default: one host CPU is kept for the host;
    /// under emulation, one guest per other CPU (each guest's emulation is
    /// one host thread); under KVM, one per two (each guest has two virtual
    /// CPUs); so one at a time on a 2-CPU host]
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Guests {
    Tests,
    Systemd,
    All,
}

/// Where what vm-test downloads and makes from downloads is kept (the
/// kernel images, the private apt lists, the systemd guest's Debian root
/// file system): outside the checkout, so that a new clone on the same
/// machine (CI's) does not fetch and debootstrap them again; every piece
/// is checked (package versions, the recipe's stamp) and made again when
/// missing or stale, so a fresh machine needs nothing there.
/// `SCHEDLAT_VM_CACHE` overrides it; without root (which vm-test needs to
/// fetch and boot anyway) it is target/vm.
fn downloads_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SCHEDLAT_VM_CACHE") {
        return PathBuf::from(dir);
    }
    if crate::util::is_root() {
        PathBuf::from("/var/cache/schedlat-vm-test")
    } else {
        workspace_root().join("target/vm")
    }
}

/// Console lines shown under a failed kernel.
const TAIL_LINES: usize = 40;

pub(crate) fn run(opts: &Options) -> Result<()> {
    let started = Instant::now();
    // The eBPF toolchain first (the guest binaries embed the object), then
    // QEMU and friends, which only this command needs.
    setup::run()?;
    setup::vm_tools()?;
    let accel = qemu::accelerator();
    let accel_name = match &accel {
        qemu::Accel::Kvm => "KVM".to_string(),
        qemu::Accel::Tcg(why) => format!("TCG (emulation: {why})"),
    };
    let jobs = opts.jobs.unwrap_or_else(|| default_jobs(&accel)).max(1);
    eprintln!("vm-test: accelerator {accel_name}, {jobs} guest(s) at once");

    let packages: Vec<(String, (&str, apt::Archive))> = if opts.kernels.is_empty() {
        kernels::MATRIX
            .iter()
            .map(|(name, package, archive)| (name.to_string(), (*package, *archive)))
            .collect()
    } else {
        let packages = opts.kernels.iter().map(|n| kernels::package_for(n));
        opts.kernels
            .iter()
            .cloned()
            .zip(packages.collect::<Result<Vec<_>>>()?)
            .collect()
    };

    let vm_dir = workspace_root().join("target/vm");
    let downloads = downloads_dir();
    // Every kernel first: the guest tests' initramfs carries their
    // configurations (HZ, the preemption model), as the hosts they stand
    // for have them.
    let kernels_dir = downloads.join("kernels");
    fs::create_dir_all(&kernels_dir)?;
    let fetched: Vec<Fetched> = packages
        .iter()
        .map(|(name, (package, archive))| {
            let kernel = kernels::prepare(package, *archive, &kernels_dir);
            (name.clone(), kernel.map_err(|e| format!("{e:#}")))
        })
        .collect();
    let configs: Vec<(&str, &Path)> = fetched
        .iter()
        .filter_map(|(_, kernel)| kernel.as_ref().ok())
        .map(|k| (k.release(), k.config.as_path()))
        .collect();
    let build_started = Instant::now();
    let binaries = initramfs::build(opts.inject_bad_offset.is_some())?;
    // The guests run the packaged binary, except with fault injection (a
    // feature only the test build has).
    let artifacts = match opts.inject_bad_offset {
        Some(_) => None,
        None => {
            crate::util::build_release()?;
            Some(crate::dist::run()?)
        }
    };
    let packaged = artifacts.as_ref().map(|a| a.binary.clone());
    let initrd = vm_dir.join("initramfs.cpio");
    let timeout = Duration::from_secs(opts.timeout);
    // The guest gives up first, so that a hang is reported from inside.
    let watchdog = timeout
        .saturating_sub(Duration::from_secs(30))
        .max(timeout / 2);
    initramfs::pack(
        &binaries,
        packaged.as_deref(),
        &configs,
        &vm_dir.join("initramfs"),
        &initrd,
        watchdog,
    )?;
    eprintln!(
        "vm-test: guest tests built and packed ({:.1} MiB) in {:.1} s",
        fs::metadata(&initrd)?.len() as f64 / (1 << 20) as f64,
        build_started.elapsed().as_secs_f64()
    );
    match &packaged {
        Some(binary) => eprintln!("vm-test: the guests run the packaged {}", binary.display()),
        None => eprintln!("vm-test: the guests run the static test build of schedlat"),
    }
    let extra_cmdline = match opts.inject_bad_offset {
        Some(bytes) => {
            eprintln!(
                "vm-test: fault injection: task_struct.pid offset forced to {bytes}; every kernel should FAIL"
            );
            format!("SCHEDLAT_FAULT_TASK_PID_OFFSET={bytes}")
        }
        None => String::new(),
    };

    let matrix = Matrix {
        logs: vm_dir.join("logs"),
        initrd,
        extra_cmdline,
        timeout,
        accel,
    };
    fs::create_dir_all(&matrix.logs)?;
    let tests_guests: &[Fetched] = match opts.guests {
        Guests::Systemd => &[],
        Guests::Tests | Guests::All => &fetched,
    };
    let mut failed: Vec<String> = matrix
        .test_all(tests_guests.iter().collect(), &matrix.initrd, "", jobs)
        .into_iter()
        .map(|(name, _)| name.clone())
        .collect();
    let mut boots = tests_guests.len();
    // The cost report, also when kernels failed (a failed one says so).
    let tested: Vec<String> = tests_guests.iter().map(|(n, _)| n.clone()).collect();
    if !tested.is_empty() {
        let out = workspace_root().join("target/vm-test/report.md");
        report::write(&tested, &matrix.logs, &accel_name, &out)?;
    }

    // The packaged unit under systemd, on the kernels of systemd::KERNELS
    // that were asked for (not with fault injection: the .deb has none).
    let systemd_kernels: Vec<&Fetched> = fetched
        .iter()
        .filter(|(name, _)| systemd::KERNELS.contains(&name.as_str()))
        .filter(|_| opts.guests != Guests::Tests)
        .collect();
    if let (Some(artifacts), false) = (&artifacts, systemd_kernels.is_empty()) {
        let built = Instant::now();
        let rootfs = rootfs::archive(&downloads.join("rootfs"))?;
        let initrd = systemd::initrd_path(&vm_dir);
        systemd::pack(
            &rootfs,
            &artifacts.deb,
            &binaries.unit_tests,
            &vm_dir.join("systemd-stage"),
            &initrd,
            watchdog,
        )?;
        eprintln!(
            "vm-test: systemd guest ready ({:.0} MiB) in {:.1} s",
            fs::metadata(&initrd)?.len() as f64 / (1 << 20) as f64,
            built.elapsed().as_secs_f64()
        );
        boots += systemd_kernels.len();
        let systemd_failed = matrix.test_all(systemd_kernels, &initrd, "systemd", jobs);
        failed.extend(
            systemd_failed
                .into_iter()
                .map(|(name, _)| format!("{name} (systemd)")),
        );
    }

    let total = started.elapsed().as_secs_f64();
    let passed = boots - failed.len();
    eprintln!(
        "vm-test: {passed} passed, {} failed, in {total:.1} s",
        failed.len()
    );
    if !failed.is_empty() {
        bail!("vm-test failed on {}", failed.join(", "));
    }
    Ok(())
}

/// A kernel of the matrix by its short name, ready to boot or why not.
type Fetched = (String, std::result::Result<kernels::Kernel, String>);

/// What every kernel's run shares.
struct Matrix {
    logs: PathBuf,
    initrd: PathBuf,
    extra_cmdline: String,
    timeout: Duration,
    accel: qemu::Accel,
}

/// Guests at once when `--jobs` is not given: as many as the host has
/// CPUs for, one CPU kept for the host's own work. Each emulated guest is
/// one host thread (single-threaded TCG), a KVM guest two (two virtual
/// CPUs). With no CPU spare, whatever else the host runs comes out of the
/// guests' time, and the guests' checks that compare the tracer with the
/// kernel's own counts under load miss (on the 2-CPU VM, two guests
/// beside a release build failed two of 7.x's checks): a 2-CPU host
/// boots one at a time.
fn default_jobs(accel: &qemu::Accel) -> usize {
    let spare = thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    match accel {
        qemu::Accel::Tcg(_) => spare,
        qemu::Accel::Kvm => spare / 2,
    }
}

impl Matrix {
    /// Boots `kernels` with `initrd`, `jobs` guests at a time, each as
    /// [`Matrix::test_kernel`] does; the ones that failed, in the order
    /// given.
    fn test_all<'a>(
        &self,
        kernels: Vec<&'a Fetched>,
        initrd: &Path,
        guest_name: &str,
        jobs: usize,
    ) -> Vec<&'a Fetched> {
        let next = AtomicUsize::new(0);
        let passed: Vec<bool> = thread::scope(|scope| {
            let workers: Vec<_> = (0..jobs.min(kernels.len()))
                .map(|_| {
                    scope.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some((name, kernel)) = kernels.get(i) else {
                                return done;
                            };
                            done.push((i, self.test_kernel(name, kernel, initrd, guest_name)));
                        }
                    })
                })
                .collect();
            let mut passed = vec![false; kernels.len()];
            for worker in workers {
                for (i, ok) in worker.join().expect("a guest's thread panicked") {
                    passed[i] = ok;
                }
            }
            passed
        });
        (kernels.into_iter().zip(passed))
            .filter(|(_, ok)| !ok)
            .map(|(kernel, _)| kernel)
            .collect()
    }

    /// Fetches, boots and judges one kernel; prints its result line (and,
    /// on failure, why, with the console's tail) in one piece, so that
    /// guests run at once do not interleave their reports. True when it
    /// passed. `guest` names the guest in logs and result lines ("" for
    /// the initramfs of the guest tests).
    fn test_kernel(
        &self,
        name: &str,
        kernel: &std::result::Result<kernels::Kernel, String>,
        initrd: &Path,
        guest_name: &str,
    ) -> bool {
        let mut report = String::new();
        let passed = self.boot_and_judge(name, kernel, initrd, guest_name, &mut report);
        eprint!("{report}");
        passed
    }

    fn boot_and_judge(
        &self,
        name: &str,
        kernel: &std::result::Result<kernels::Kernel, String>,
        initrd: &Path,
        guest_name: &str,
        out: &mut String,
    ) -> bool {
        let kernel = match kernel {
            Ok(kernel) => kernel,
            Err(e) => {
                let _ = writeln!(out, "vm-test: {name:<7} FAIL: no kernel: {e}");
                return false;
            }
        };
        let log = match guest_name {
            "" => format!("{name}.log"),
            guest_name => format!("{name}-{guest_name}.log"),
        };
        let guest = qemu::Guest {
            kernel: &kernel.image,
            initrd,
            extra_cmdline: &self.extra_cmdline,
            log: self.logs.join(log),
            timeout: self.timeout,
        };
        let what = format!(
            "{name:<7} {} {} {guest_name}",
            kernel.package, kernel.version
        );
        let what = what.trim_end();
        let run = match qemu::boot(&guest, &self.accel) {
            Ok(run) => run,
            Err(e) => {
                let _ = writeln!(out, "vm-test: {what}: FAIL: {e:#}");
                return false;
            }
        };
        let secs = run.elapsed.as_secs_f64();
        let reason = match run.verdict {
            qemu::Verdict::Pass => {
                let _ = writeln!(out, "vm-test: {what}: PASS ({secs:.1} s)");
                return true;
            }
            qemu::Verdict::Fail(reason) => reason,
        };
        let _ = writeln!(out, "vm-test: {what}: FAIL ({secs:.1} s): {reason}");
        for panic in panics(&run.console) {
            let _ = writeln!(out, "    {panic}");
        }
        let _ = writeln!(
            out,
            "    --- last {TAIL_LINES} console lines (all of them: {}) ---",
            guest.log.display()
        );
        let lines: Vec<&str> = run.console.lines().collect();
        for line in &lines[lines.len().saturating_sub(TAIL_LINES)..] {
            let _ = writeln!(out, "    | {line}");
        }
        false
    }
}

/// `test: message` for each failed guest test, from the test harness's
/// `thread 'test' panicked at file:line:` line and the line after it.
fn panics(console: &str) -> Vec<String> {
    let lines: Vec<&str> = console.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter_map(|(i, line)| {
            let rest = line.strip_prefix("thread '")?;
            let (test, _) = rest.split_once("' ")?;
            line.contains(" panicked at ").then_some(())?;
            // The first line of the message; the tail below has the rest.
            let message: String = lines.get(i + 1)?.chars().take(400).collect();
            Some(format!("{test}: {message}"))
        })
        .collect()
}
