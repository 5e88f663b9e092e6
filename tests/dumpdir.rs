//! Root: the flight recorder's dump directory against another local user
//! (uid 65534, nobody), on this machine only (issue 29 item 1). A user who
//! could rename entries in the directory swapped the hidden temporary
//! dump for one of their own whose files were links to any file, and root
//! overwrote that file (21 of 21 trigger dumps, 339 of 425 HTTP ones).

use std::{
    fs,
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::{SCHEDLAT, require_root};

use crate::common;

const NOBODY: u32 = 65534;

fn scratch(name: &str, mode: u32, owner: u32) -> PathBuf {
    let d = std::env::temp_dir().join(format!("schedlat-dumpdir-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    std::os::unix::fs::chown(&d, Some(owner), Some(owner)).unwrap();
    fs::set_permissions(&d, fs::Permissions::from_mode(mode)).unwrap();
    d
}

/// A root-owned 0600 file outside the dump directory: what the racer
/// points its links at.
fn victim(dir: &Path) -> PathBuf {
    let v = dir.join("victim");
    fs::write(&v, "root's data\n").unwrap();
    fs::set_permissions(&v, fs::Permissions::from_mode(0o600)).unwrap();
    v
}

/// As nobody, for at most `secs`: every hidden temporary dump directory
/// that appears in `dir` is renamed away and replaced by one of nobody's
/// own holding links to `victim` under the names the dump's files take.
fn racer(dir: &Path, victim: &Path, secs: u64) -> Child {
    let script = r#"
import os, sys, time
d, victim, until = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
files = ("dump.jsonl", "waits.hlog", "slow.perfetto-trace")
n = 0
while time.time() < until:
    try:
        names = os.listdir(d)
    except OSError:
        break
    for name in names:
        if not (name.startswith(".schedlat-") and name.endswith(".tmp")):
            continue
        try:
            n += 1
            os.rename(os.path.join(d, name), os.path.join(d, "moved-%d" % n))
            os.mkdir(os.path.join(d, name))
            for f in files:
                os.symlink(victim, os.path.join(d, name, f))
        except OSError:
            pass
"#;
    Command::new("setpriv")
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            // Debian's: a python3 under /root (pyenv) is not nobody's to run.
            "/usr/bin/python3",
            "-c",
            script,
        ])
        .arg(dir)
        .arg(victim)
        .arg(secs.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("setpriv and python3 run")
}

/// `record --ring` in `dir`, sent `hups` SIGHUPs 300 ms apart, then
/// SIGINT; its status and stderr. Bounded: 60 s at most.
fn record_with_dumps(dir: &Path, hups: usize) -> (Option<i32>, String) {
    // Few slow waits (this machine may be busy): small dumps.
    record_with(dir, hups, &["--slow-threshold", "100ms"], Duration::ZERO)
}

/// `record --ring` in `dir` with `extra` arguments, sent `hups` SIGHUPs
/// 300 ms apart, left running `linger` more, then sent SIGINT; its status
/// and stderr. Bounded: 60 s at most.
fn record_with(dir: &Path, hups: usize, extra: &[&str], linger: Duration) -> (Option<i32>, String) {
    let log = dir.with_extension("stderr");
    let mut child = Command::new(SCHEDLAT)
        .args(["record", "--ring", "10s"])
        .args(extra)
        .arg("--dump-dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let text = || fs::read_to_string(&log).unwrap_or_default();
    while !text().contains("recording the last") {
        if let Some(status) = child.try_wait().unwrap() {
            let out = text();
            let _ = fs::remove_file(&log);
            return (status.code(), out);
        }
        assert!(Instant::now() < deadline, "not recording: {}", text());
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..hups {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
        std::thread::sleep(Duration::from_millis(300));
    }
    std::thread::sleep(Duration::from_secs(1) + linger);
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = child.wait().unwrap();
    let out = text();
    let _ = fs::remove_file(&log);
    (status.code(), out)
}

/// A dump directory nobody owns: before, root wrote into it, and nobody's
/// racer turned its dumps into writes to a root-owned file. Now it is
/// refused at start, with the reason, and nothing is written.
#[test]
fn a_directory_another_user_owns_is_refused_and_nothing_is_overwritten() {
    if !require_root() {
        return;
    }
    let outside = scratch("outside-owned", 0o755, 0);
    let victim = victim(&outside);
    let dir = scratch("owned-by-nobody", 0o755, NOBODY);
    let mut racer = racer(&dir, &victim, 20);
    let (status, log) = record_with_dumps(&dir, 10);
    let _ = racer.kill();
    let _ = racer.wait();
    assert!(
        fs::read(&victim).unwrap() == b"root's data\n",
        "the root-owned {} was overwritten through a planted link: {log}",
        victim.display()
    );
    assert_eq!(status, Some(1), "{log}");
    assert!(
        log.contains(&format!("is owned by uid {NOBODY}, not by uid 0")),
        "{log}"
    );
    fs::remove_dir_all(&dir).unwrap();
    fs::remove_dir_all(&outside).unwrap();
}

/// A group- or world-writable directory without the sticky bit is
/// refused too; with it (as /tmp), another user cannot rename root's
/// entries, so the racer never wins: every dump is root's, whole, and the
/// root-owned file is untouched.
#[test]
fn a_shared_directory_needs_the_sticky_bit_and_then_holds() {
    if !require_root() {
        return;
    }
    let open = scratch("world-writable", 0o777, 0);
    let (status, log) = record_with_dumps(&open, 0);
    assert_eq!(status, Some(1), "{log}");
    assert!(
        log.contains("can be written by every user (mode 0777)"),
        "{log}"
    );
    fs::remove_dir_all(&open).unwrap();

    let outside = scratch("outside-sticky", 0o755, 0);
    let victim = victim(&outside);
    let dir = scratch("sticky", 0o1777, 0);
    let mut racer = racer(&dir, &victim, 20);
    let (status, log) = record_with_dumps(&dir, 8);
    let _ = racer.kill();
    let _ = racer.wait();
    assert_eq!(status, Some(0), "{log}");
    assert!(
        fs::read(&victim).unwrap() == b"root's data\n",
        "the root-owned {} was overwritten through a planted link: {log}",
        victim.display()
    );
    let dumps: Vec<PathBuf> = fs::read_dir(private_of(&dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("schedlat-")
        })
        .collect();
    assert!(!dumps.is_empty(), "no dump written: {log}");
    assert_roots_and_whole(&dumps);
    fs::remove_dir_all(&dir).unwrap();
    fs::remove_dir_all(&outside).unwrap();
}

/// Where root's dumps go in the shared sticky directory `dir`: its
/// private subdirectory there.
fn private_of(dir: &Path) -> PathBuf {
    dir.join("schedlat-dumps-uid0")
}

/// Issue 48 item 4: in a sticky shared directory (accepted as /tmp is),
/// nobody could take the final name a hidden temporary dump announced
/// (29 of 30 dumps lost), and a dump of nobody's numbered 2^64-1 made the
/// sequence wrap to 0, so every real dump was the oldest and pruned as
/// soon as written (0 of 5 kept). Root's dumps now go into a private 0700
/// subdirectory of root's, which nobody can list or write; entries root
/// does not own are never taken for dumps, and the sequence never wraps.
#[test]
fn a_sticky_directory_lets_nobody_squat_names_or_wrap_the_sequence() {
    if !require_root() {
        return;
    }
    let dir = scratch("sticky-squat", 0o1777, 0);
    let planted = dir.join(format!(
        "schedlat-20990101T000000.000Z-{}-1-sighup",
        u64::MAX
    ));
    let script = r#"
import os, sys, time
d, planted, until = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
os.mkdir(planted)
open(os.path.join(planted, "dump.jsonl"), "w").write("nobody's\n")
while time.time() < until:
    try:
        names = os.listdir(d)
    except OSError:
        break
    for name in names:
        if name.startswith(".schedlat-") and name.endswith(".tmp"):
            try:
                os.mkdir(os.path.join(d, name[1:-4]))
            except OSError:
                pass
"#;
    let mut squatter = Command::new("setpriv")
        .args([&format!("--reuid={NOBODY}"), &format!("--regid={NOBODY}")])
        .args(["--clear-groups", "/usr/bin/python3", "-c", script])
        .arg(&dir)
        .arg(&planted)
        .arg("20")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("setpriv and python3 run");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !planted.join("dump.jsonl").exists() {
        assert!(Instant::now() < deadline, "nobody's dump was not planted");
        std::thread::sleep(Duration::from_millis(20));
    }
    const HUPS: usize = 5;
    let (status, log) = record_with(
        &dir,
        HUPS,
        &["--slow-threshold", "100ms", "--keep", "100"],
        Duration::ZERO,
    );
    let _ = squatter.kill();
    let _ = squatter.wait();
    assert_eq!(status, Some(0), "{log}");
    let private = private_of(&dir);
    let meta = fs::symlink_metadata(&private).unwrap();
    assert!(meta.is_dir() && meta.uid() == 0, "{log}");
    assert_eq!(meta.mode() & 0o7777, 0o700, "{log}");
    let dumps = whole_dumps(&private);
    let refused = log.matches("not taken").count();
    assert_eq!(
        dumps.len() + refused,
        HUPS,
        "{} whole dumps of {HUPS} SIGHUPs, {refused} refused: {log}",
        dumps.len()
    );
    assert!(
        dumps.len() >= HUPS - 1,
        "{} whole dumps: {log}",
        dumps.len()
    );
    assert_roots_and_whole(&dumps);
    assert_eq!(
        fs::read_to_string(planted.join("dump.jsonl")).unwrap(),
        "nobody's\n",
        "{log}"
    );
    // A private directory someone else made first is refused, not used.
    let taken = scratch("sticky-taken", 0o1777, 0);
    let theirs = private_of(&taken);
    fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let (status, log) = record_with_dumps(&taken, 0);
    assert_eq!(status, Some(1), "{log}");
    assert!(
        log.contains("was made by someone else: it is owned by uid 65534"),
        "{log}"
    );
    assert!(!log.contains("dumps go to"), "refused after loading: {log}");
    for d in [dir, taken] {
        fs::remove_dir_all(&d).unwrap();
    }
}

/// Issue 48 item 15: a refused dump directory was refused only after the
/// programs were loaded and "dumps go to ..." was printed.
#[test]
fn a_refused_dump_directory_is_refused_before_loading() {
    if !require_root() {
        return;
    }
    let open = scratch("refused-early", 0o777, 0);
    for command in [
        &["record", "--ring", "10s"][..],
        &["serve", "--ring", "10s", "--listen", "127.0.0.1:0"],
    ] {
        let out = Command::new(SCHEDLAT)
            .args(command)
            .arg("--dump-dir")
            .arg(&open)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{command:?}: {log}");
        assert!(
            log.contains("can be written by every user"),
            "{command:?}: {log}"
        );
        for late in ["dumps go to", "recording the last", "Serving", "per-cgroup"] {
            assert!(
                !log.contains(late),
                "{command:?} said {late:?} before refusing: {log}"
            );
        }
    }
    fs::remove_dir_all(&open).unwrap();
}

/// Every dump is a directory of root's holding root's regular files,
/// whole.
fn assert_roots_and_whole(dumps: &[PathBuf]) {
    for d in dumps {
        assert_eq!(fs::symlink_metadata(d).unwrap().uid(), 0, "{}", d.display());
        for f in ["dump.jsonl", "waits.hlog", "slow.perfetto-trace"] {
            let meta = fs::symlink_metadata(d.join(f)).unwrap();
            assert!(meta.is_file(), "{}/{f} is not a regular file", d.display());
            assert_eq!(meta.uid(), 0);
        }
        let text = fs::read_to_string(d.join("dump.jsonl")).unwrap();
        assert!(
            text.ends_with("\"type\":\"end\"}\n"),
            "{}: cut short",
            d.display()
        );
    }
}

/// `n` busy loops as nobody, for at most `secs`: on this 2-CPU machine
/// they make waits of several milliseconds, as the hostile probe did to
/// fire a trigger.
fn busy_as_nobody(n: usize, secs: u64) -> Vec<Child> {
    let script =
        "import sys, time\nend = time.time() + float(sys.argv[1])\nwhile time.time() < end: pass";
    (0..n)
        .map(|_| {
            Command::new("setpriv")
                .args([&format!("--reuid={NOBODY}"), &format!("--regid={NOBODY}")])
                .args(["--clear-groups", "/usr/bin/python3", "-c", script])
                .arg(secs.to_string())
                .spawn()
                .expect("setpriv and python3 run")
        })
        .collect()
}

/// The trigger's dumps, fired by another user's busy loops: before, with
/// `--trigger 'slow>2ms'` and the racer, 21 of 21 went into the
/// root-owned file. In nobody's directory the recorder now refuses to
/// start; in a sticky one every trigger dump is root's and whole.
#[test]
fn trigger_dumps_fired_by_another_user_hold_too() {
    if !require_root() {
        return;
    }
    let outside = scratch("outside-trigger", 0o755, 0);
    let victim = victim(&outside);
    let trigger = [
        "--slow-threshold",
        "2ms",
        "--trigger",
        "slow>2ms",
        "--cooldown",
        "1",
        "--keep",
        "100",
    ];
    let mut hogs = busy_as_nobody(3, 30);
    let run = |dir: &Path| {
        let mut racer = racer(dir, &victim, 20);
        let ran = record_with(dir, 0, &trigger, Duration::from_secs(5));
        let _ = racer.kill();
        let _ = racer.wait();
        let (_, log) = &ran;
        assert!(
            fs::read(&victim).unwrap() == b"root's data\n",
            "the root-owned {} was overwritten through a planted link: {log}",
            victim.display()
        );
        ran
    };
    let owned = scratch("trigger-owned-by-nobody", 0o755, NOBODY);
    let (status, log) = run(&owned);
    assert_eq!(status, Some(1), "{log}");
    let sticky = scratch("trigger-sticky", 0o1777, 0);
    let (status, log) = run(&sticky);
    for hog in &mut hogs {
        let _ = hog.kill();
        let _ = hog.wait();
    }
    assert_eq!(status, Some(0), "{log}");
    let dumps: Vec<PathBuf> = whole_dumps(&private_of(&sticky))
        .into_iter()
        .filter(|d| d.to_string_lossy().ends_with("-trigger"))
        .collect();
    assert!(!dumps.is_empty(), "no trigger dump: {log}");
    assert_roots_and_whole(&dumps);
    for d in [owned, sticky, outside] {
        fs::remove_dir_all(&d).unwrap();
    }
}

fn whole_dumps(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("schedlat-")
        })
        .filter(|p| {
            fs::read_to_string(p.join("dump.jsonl"))
                .is_ok_and(|t| t.ends_with("\"type\":\"end\"}\n"))
        })
        .collect()
}

/// libfaketime's preload for threaded programs (Debian's `faketime`):
/// the wall clock a process sees, set by `FAKETIME`, while its monotonic
/// clock (timers, tokio) stays real.
const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// `schedlat` seeing the wall clock `spec` says (libfaketime's FAKETIME:
/// an absolute time is a frozen clock, `+N`/`-N` an offset in seconds).
fn schedlat_at_faked_time(spec: &str) -> Command {
    assert!(
        Path::new(FAKETIME_LIB).exists(),
        "{FAKETIME_LIB} is missing: `cargo xtask setup --test` installs Debian's faketime"
    );
    let mut cmd = Command::new(SCHEDLAT);
    cmd.env("LD_PRELOAD", FAKETIME_LIB)
        .env("FAKETIME", spec)
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    cmd
}

/// Issue 29 item 4: two recorders sharing a dump directory, signalled
/// together (`kill -HUP $(pidof schedlat)`), picked the same name in the
/// same millisecond and the loser's cleanup removed the winner's
/// temporary directory: 4 of 20 dumps survived. Their wall clocks are
/// frozen at one instant here, so every pair of dumps falls in the same
/// millisecond. Every dump asked for is written now, or refused and said
/// so.
#[test]
fn two_recorders_signalled_together_keep_every_dump() {
    if !require_root() {
        return;
    }
    let dir = scratch("shared-by-two", 0o755, 0);
    let start = |n: usize| {
        let log = dir.with_extension(format!("{n}.stderr"));
        let child = schedlat_at_faked_time("2026-01-01 00:00:00")
            .args(["record", "--ring", "10s", "--slow-threshold", "100ms"])
            .args(["--keep", "100", "--dump-dir"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        (child, log)
    };
    let mut recorders = [start(1), start(2)];
    let deadline = Instant::now() + Duration::from_secs(60);
    for (_, log) in &recorders {
        while !fs::read_to_string(log)
            .unwrap_or_default()
            .contains("recording the last")
        {
            assert!(Instant::now() < deadline, "not recording");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    const ROUNDS: usize = 10;
    for _ in 0..ROUNDS {
        for (child, _) in &recorders {
            // SAFETY: signalling our own children.
            unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
        }
        std::thread::sleep(Duration::from_millis(600));
    }
    std::thread::sleep(Duration::from_secs(1));
    let mut refused = 0;
    let mut logs = String::new();
    for (child, log) in &mut recorders {
        // SAFETY: as above.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        assert!(child.wait().unwrap().success());
        let text = fs::read_to_string(&*log).unwrap();
        refused += text.matches("not taken").count() + text.matches("failed").count();
        logs.push_str(&text);
        let _ = fs::remove_file(&*log);
    }
    let whole = whole_dumps(&dir);
    assert_eq!(
        whole.len() + refused,
        2 * ROUNDS,
        "{} whole dumps, {refused} refused, of {}: {logs}",
        whole.len(),
        2 * ROUNDS
    );
    assert!(whole.len() >= ROUNDS, "{} whole dumps: {logs}", whole.len());
    fs::remove_dir_all(&dir).unwrap();
}

/// Issue 29 item 5: once the dump disk was full, no dump succeeded again
/// (old dumps were pruned only after a successful one). The oldest dump
/// now makes room, said so, and the new one is written.
#[test]
fn a_full_disk_gives_up_the_oldest_dump_for_the_new_one() {
    if !require_root() {
        return;
    }
    let dir = scratch("full-disk", 0o755, 0);
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m,mode=0755", "schedlat-test"])
        .arg(&dir)
        .status()
        .unwrap()
        .success();
    assert!(mounted, "mount a 1 MiB tmpfs on {}", dir.display());
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let unmount = Unmount(&dir);
    // An old dump taking all of it (written until the disk is full).
    let old = dir.join("schedlat-20200101T000000.000Z-1-1-sighup");
    fs::create_dir(&old).unwrap();
    let filler = vec![b'x'; 2 << 20];
    let full = fs::write(old.join("dump.jsonl"), &filler).unwrap_err();
    assert_eq!(full.raw_os_error(), Some(libc::ENOSPC), "{full}");
    let (status, log) = record_with_dumps(&dir, 1);
    assert_eq!(status, Some(0), "{log}");
    assert!(log.contains("is full: removed the oldest dump"), "{log}");
    assert!(!old.exists(), "{log}");
    assert_eq!(whole_dumps(&dir).len(), 1, "{log}");
    drop(unmount);
    fs::remove_dir_all(&dir).unwrap();
}

/// Issue 48 item 6: with the file system kept full by someone else's
/// file, each dump removed the oldest dumps "to make room" and failed
/// anyway (1 dump before, 0 after). Dumps are removed now only when that
/// makes the new dump fit; otherwise none is, and the failure says why.
#[test]
fn a_disk_kept_full_by_another_user_keeps_the_old_dumps() {
    if !require_root() {
        return;
    }
    let dir = scratch("kept-full", 0o755, 0);
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m,mode=0755", "schedlat-test"])
        .arg(&dir)
        .status()
        .unwrap()
        .success();
    assert!(mounted, "mount a 1 MiB tmpfs on {}", dir.display());
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let unmount = Unmount(&dir);
    // A small old dump of root's (4 KiB: less than any dump of a running
    // recorder), and nobody's file taking the rest.
    let old = dir.join("schedlat-20200101T000000.000Z-1-1-sighup");
    fs::create_dir(&old).unwrap();
    fs::write(old.join("dump.jsonl"), vec![b'x'; 4096]).unwrap();
    let theirs = dir.join("nobodys-file");
    fs::File::create(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let fill = Command::new("setpriv")
        .args([&format!("--reuid={NOBODY}"), &format!("--regid={NOBODY}")])
        .args(["--clear-groups", "dd", "if=/dev/zero", "bs=4k"])
        .arg(format!("of={}", theirs.display()))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(!fill.success(), "nobody's file did not fill the disk");
    let (status, log) = record_with_dumps(&dir, 1);
    assert_eq!(status, Some(0), "{log}");
    assert!(
        old.join("dump.jsonl").exists(),
        "the old dump was removed for nothing: {log}"
    );
    assert!(!log.contains("removed the oldest dump"), "{log}");
    assert!(log.contains("none removed"), "{log}");
    // Nothing half-written left behind either.
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["nobodys-file", "schedlat-20200101T000000.000Z-1-1-sighup"],
        "{log}"
    );
    drop(unmount);
    fs::remove_dir_all(&dir).unwrap();
}

/// Issue 29 item 3: trigger cooldowns ran on the wall clock, so a clock
/// stepped back 10 minutes kept triggers off for 10 minutes (1 trigger
/// against 4 in the control run). The recorder's wall clock is stepped
/// back here by libfaketime (an offset read from a file), the rest of the
/// machine's untouched: triggers go on firing after the step.
#[test]
fn a_wall_clock_stepped_back_does_not_silence_the_triggers() {
    if !require_root() {
        return;
    }
    let dir = scratch("stepped-back", 0o755, 0);
    let offset = dir.with_extension("faketime");
    let log = dir.with_extension("step.stderr");
    // Any wait in a second fires it: every second but the cooldown.
    let extra = ["--trigger", "max>1ns", "--cooldown", "2"];
    let mut child = recording_on_a_clock_file(&dir, &offset, &log, &extra);
    let text = || fs::read_to_string(&log).unwrap_or_default();
    std::thread::sleep(Duration::from_secs(3));
    fs::write(&offset, "-600\n").unwrap();
    let at_step = text().len();
    std::thread::sleep(Duration::from_secs(8));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert!(child.wait().unwrap().success(), "{}", text());
    let all = text();
    let after = all[at_step..].matches("schedlat: trigger:").count();
    assert!(
        after >= 2,
        "{after} triggers in the 8 s after the wall clock stepped back 10 min (cooldown 2 s): {all}"
    );
    for f in [&offset, &log] {
        let _ = fs::remove_file(f);
    }
    fs::remove_dir_all(&dir).unwrap();
}

/// `record --ring 20s` in `dir` with `extra` arguments, its wall clock
/// offset by what the file `offset` says (libfaketime, re-read at every
/// clock reading; "+0" to begin with), stderr to `log`; returned once it
/// records. Bounded: 60 s to start.
fn recording_on_a_clock_file(dir: &Path, offset: &Path, log: &Path, extra: &[&str]) -> Child {
    fs::write(offset, "+0\n").unwrap();
    let mut child = schedlat_at_faked_time("+0");
    child
        .env_remove("FAKETIME")
        .env("FAKETIME_TIMESTAMP_FILE", offset)
        .env("FAKETIME_NO_CACHE", "1")
        .args(["record", "--ring", "20s", "--slow-threshold", "100ms"])
        .args(extra)
        .args(["--keep", "100", "--dump-dir"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(fs::File::create(log).unwrap());
    let child = child.spawn().unwrap();
    let text = || fs::read_to_string(log).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !text().contains("recording the last") {
        assert!(Instant::now() < deadline, "not recording: {}", text());
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// Issue 29 item 3: the ring stamped each second on the wall clock, so
/// after a step back a dump held the seconds before it dated in the future
/// (after the dump itself) and out of order, and `--keep` and replay went
/// by those dates. Seconds are now stamped on the monotonic clock and
/// dated once, when the dump is taken: in order, and none after the dump.
#[test]
fn a_wall_clock_stepped_back_leaves_the_dumps_seconds_in_order() {
    if !require_root() {
        return;
    }
    let dir = scratch("stepped-dump", 0o755, 0);
    let offset = dir.with_extension("faketime");
    let log = dir.with_extension("dump.stderr");
    let mut child = recording_on_a_clock_file(&dir, &offset, &log, &[]);
    let text = || fs::read_to_string(&log).unwrap_or_default();
    std::thread::sleep(Duration::from_secs(4));
    fs::write(&offset, "-600\n").unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !text().contains("schedlat: dumped") {
        assert!(Instant::now() < deadline, "no dump: {}", text());
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: as above.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert!(child.wait().unwrap().success(), "{}", text());
    let dumps = whole_dumps(&dir);
    assert_eq!(dumps.len(), 1, "{}", text());
    let jsonl = fs::read_to_string(dumps[0].join("dump.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let dumped = lines[0]["dumped_unix_ns"].as_u64().unwrap();
    let seconds: Vec<(u64, u64)> = lines
        .iter()
        .filter(|l| l["type"] == "interval" && l["series"] == "total")
        .map(|l| {
            let at = |k: &str| l[k].as_u64().unwrap();
            (at("start_unix_ns"), at("end_unix_ns"))
        })
        .collect();
    assert!(seconds.len() >= 5, "{} seconds: {jsonl}", seconds.len());
    let stamps = || format!("dumped at {dumped}, seconds {seconds:?}");
    for pair in seconds.windows(2) {
        assert!(pair[0].0 < pair[0].1, "{}", stamps());
        assert!(pair[0].1 <= pair[1].0, "out of order: {}", stamps());
    }
    let newest = seconds.last().unwrap().1;
    assert!(
        newest <= dumped,
        "a second dated after the dump: {}",
        stamps()
    );
    // The newest second ended within a second of the dump.
    assert!(dumped - newest < 2_000_000_000, "{}", stamps());
    for f in [&offset, &log] {
        let _ = fs::remove_file(f);
    }
    fs::remove_dir_all(&dir).unwrap();
}
