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
        .args(["record", "--ring", "10s", "--dump-dir"])
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
