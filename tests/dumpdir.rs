//! Root: the flight recorder's dump directory against another local user
//! (uid 65534, nobody), on this machine only (issue 29 item 1). A user who
//! could rename entries in the directory swapped the hidden temporary
//! dump for one of their own whose files were links to any file, and root
//! overwrote that file (21 of 21 trigger dumps, 339 of 425 HTTP ones).

mod common;

use std::{
    fs,
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::{SCHEDLAT, require_root};

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
    let log = dir.with_extension("stderr");
    let mut child = Command::new(SCHEDLAT)
        // Few slow waits (this machine may be busy): small dumps.
        .args([
            "record",
            "--ring",
            "10s",
            "--slow-threshold",
            "100ms",
            "--dump-dir",
        ])
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
    std::thread::sleep(Duration::from_secs(1));
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
    let dumps: Vec<PathBuf> = fs::read_dir(&dir)
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
    for d in &dumps {
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
    fs::remove_dir_all(&dir).unwrap();
    fs::remove_dir_all(&outside).unwrap();
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

/// Issue 29 item 4: two recorders sharing a dump directory, signalled
/// together (`kill -HUP $(pidof schedlat)`), picked the same name in the
/// same millisecond and the loser's cleanup removed the winner's
/// temporary directory: 4 of 20 dumps survived. Every dump asked for is
/// written now, or refused and said so.
#[test]
fn two_recorders_signalled_together_keep_every_dump() {
    if !require_root() {
        return;
    }
    let dir = scratch("shared-by-two", 0o755, 0);
    let start = |n: usize| {
        let log = dir.with_extension(format!("{n}.stderr"));
        let child = Command::new(SCHEDLAT)
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
    let _unmount = Unmount(&dir);
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
    drop(_unmount);
    fs::remove_dir_all(&dir).unwrap();
}
