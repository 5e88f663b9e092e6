//! Root tests of the flight recorder (`schedlat record --ring`, docs/
//! recorder.md) on the real kernel, measured with `-p` on this test process
//! so that other tasks' waits do not count: three phases (a 1 ms
//! sleeper alone, then with CPU hogs on its CPU, then alone again) in a
//! SIGHUP dump, read back by `replay` and by readers schedlat did not write
//! (the HdrHistogram and protobuf Python packages, tests/readers/); the p99
//! trigger; dumps that fail (read-only directory, full disk) without
//! stopping collection or leaving a partial dump.

use std::{
    fs,
    io::Read,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use common::{
    SCHEDLAT, require_root,
    sleeper::{HOG, HOGS, PERIOD, me},
    workload,
};
use serde_json::Value;

use crate::common;

/// A running recorder; its stderr goes to a file the test reads.
pub(crate) struct Recorder {
    child: Child,
    stderr: PathBuf,
}

impl Recorder {
    /// `schedlat record --ring 120s` of this process, dumping into `dir`.
    pub(crate) fn start(dir: &Path, extra: &[&str]) -> Recorder {
        Self::start_as(&["record"], dir, extra)
    }

    /// The same recorder in `schedlat serve` (on a port of the kernel's
    /// choosing).
    pub(crate) fn serving(dir: &Path, extra: &[&str]) -> Recorder {
        Self::start_as(&["serve", "--listen", "127.0.0.1:0"], dir, extra)
    }

    fn start_as(command: &[&str], dir: &Path, extra: &[&str]) -> Recorder {
        let stderr = dir.with_extension("stderr");
        let me = me();
        let mut args = command.to_vec();
        args.extend(["--ring", "120s", "--dump-dir", dir.to_str().unwrap()]);
        if !extra.contains(&"--slow-threshold") {
            args.extend(["--slow-threshold", "1ms"]);
        }
        args.extend(["-p", &me]);
        args.extend(extra);
        let child = Command::new(SCHEDLAT)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let r = Recorder { child, stderr };
        r.wait_for("recording the last", Duration::from_secs(30));
        r
    }

    pub(crate) fn log(&self) -> String {
        let mut s = String::new();
        let _ = fs::File::open(&self.stderr).and_then(|mut f| f.read_to_string(&mut s));
        s
    }

    pub(crate) fn wait_for(&self, what: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while !self.log().contains(what) {
            assert!(
                Instant::now() < deadline,
                "no `{what}` within {limit:?}: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub(crate) fn signal(&self, sig: i32) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub(crate) fn stop(mut self) -> String {
        self.signal(libc::SIGINT);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "{status}: {}", self.log());
        self.log()
    }
}

/// A recorder left running by a failed assertion would outlive the test
/// (and hold whatever it inherited, such as a lock).
impl Drop for Recorder {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub(crate) fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("schedlat-recorder-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

pub(crate) fn dumps(dir: &Path) -> Vec<PathBuf> {
    let mut d: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("schedlat-")
        })
        .collect();
    d.sort();
    d
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// The sleeper for `secs`, with CPU hogs on its CPU when `hogs`.
fn phase(secs: u64, hogs: bool) -> (u64, u64) {
    let cpu = workload::workload_cpu();
    let _hogs = hogs.then(|| workload::Hogs::start_named(cpu, HOGS, HOG));
    let start = unix_ns();
    let rounds = (secs * 1000 / PERIOD.as_millis() as u64) as u32;
    workload::named_sleeper(cpu, PERIOD, rounds, "rec-sleeper");
    (start, unix_ns())
}

fn replay(dump: &Path) -> Vec<Value> {
    let out = Command::new(SCHEDLAT)
        .arg("replay")
        .arg(dump)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs a reader from tests/readers on the dump.
pub(crate) fn python(script: &str, args: &[&Path]) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/readers");
    let out = Command::new("python3")
        .arg(dir.join(script))
        .args(args)
        .output()
        .expect("python3 (the readers need `cargo xtask setup`)");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{script}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn p99(v: &Value) -> u64 {
    v["percentiles"]["p99_ns"].as_u64().unwrap_or(0)
}

fn p50(v: &Value) -> u64 {
    v["percentiles"]["p50_ns"].as_u64().unwrap_or(0)
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Quiet, sleeper and hogs, quiet; SIGHUP: the dump holds the three phases in
/// order, replay's verdicts and p99 follow them, and the .hlog and the
/// Perfetto trace agree with the JSON under readers schedlat did not write.
#[test]
fn sighup_dump_holds_the_phases_in_order() {
    if !require_root() {
        return;
    }
    let dir = scratch("phases");
    let rec = Recorder::start(&dir, &[]);
    let quiet1 = phase(4, false);
    let hogs = phase(4, true);
    let quiet2 = phase(4, false);
    rec.signal(libc::SIGHUP);
    rec.wait_for("dumped", Duration::from_secs(30));
    let log = rec.stop();
    let dump = dumps(&dir)
        .pop()
        .unwrap_or_else(|| panic!("no dump: {log}"));

    let lines = replay(&dump);
    let intervals: Vec<&Value> = lines.iter().filter(|l| l["type"] == "interval").collect();
    // Intervals wholly inside a phase (the edges are mixed).
    let inside = |(from, to): (u64, u64)| -> Vec<&Value> {
        intervals
            .iter()
            .copied()
            .filter(|i| i["start_unix_ns"].as_u64().unwrap() >= from)
            .filter(|i| i["end_unix_ns"].as_u64().unwrap() <= to)
            .collect()
    };
    let (q1, h, q2) = (inside(quiet1), inside(hogs), inside(quiet2));
    assert!(q1.len() >= 2 && h.len() >= 2 && q2.len() >= 2, "{lines:#?}");
    for (i, p) in [&q1, &h, &q2].iter().enumerate() {
        eprintln!(
            "phase {i}: p50 {:?} p99 {:?} verdicts {:?}",
            p.iter().map(|v| p50(v)).collect::<Vec<_>>(),
            p.iter().map(|v| p99(v)).collect::<Vec<_>>(),
            p.iter()
                .map(|v| v["verdict"].as_str().unwrap())
                .collect::<Vec<_>>()
        );
    }
    // In order: the hog phase's intervals come after the first quiet ones
    // and before the second.
    assert!(q1.last().unwrap()["end_unix_ns"].as_u64() <= h[0]["start_unix_ns"].as_u64());
    assert!(h.last().unwrap()["end_unix_ns"].as_u64() <= q2[0]["start_unix_ns"].as_u64());
    // The hogs make the sleeper wait: far above either quiet phase in its
    // tail (p99: on an idle machine the sleeper still often runs at once,
    // the median barely moves) or its median (on a machine busy with other
    // work, the quiet phases' tails are long too, their medians are not).
    let typical = |p: &[&Value], f: fn(&Value) -> u64| median(p.iter().map(|v| f(v)).collect());
    for q in [&q1, &q2] {
        let (tail, mid) = (
            typical(&h, p99) > 2 * typical(q, p99),
            typical(&h, p50) > 2 * typical(q, p50),
        );
        assert!(
            tail || mid,
            "hog phase p99/p50 not above the quiet phase's: {lines:#?}"
        );
    }
    // ... and the verdict says so, while the quiet phases are healthy or
    // too thin to judge.
    let verdict = |v: &Value| v["verdict"].as_str().unwrap().to_string();
    assert!(h.iter().all(|v| verdict(v) != "healthy"), "{h:#?}");
    assert!(
        q1.iter().chain(&q2).any(|v| verdict(v) != verdict(h[0])),
        "{lines:#?}"
    );

    eprintln!("{}", python("check_hlog.py", &[&dump]));
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/perfetto_trace_subset.proto");
    eprintln!("{}", python("check_perfetto.py", &[&dump, &proto]));
    // compare reads dumps too.
    let out = Command::new(SCHEDLAT)
        .args(["compare", "--json"])
        .arg(&dump)
        .arg(&dump)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fs::remove_dir_all(&dir).unwrap();
}

/// `--trigger p99>2ms` fires within two intervals of the hogs starting and
/// the dump holds the quiet seconds before it. (On a loaded machine the
/// sleeper alone may pass 2 ms too: with no cooldown every firing dumps,
/// and the test looks for the dump the hogs caused.)
#[test]
fn p99_trigger_fires_with_pre_trigger_context() {
    if !require_root() {
        return;
    }
    let dir = scratch("trigger");
    let args = [
        "--trigger",
        "p99>2ms",
        "--trigger-window",
        "1",
        "--cooldown",
        "0",
        "--keep",
        "1000",
    ];
    let rec = Recorder::start(&dir, &args);
    let (quiet_start, _) = phase(5, false);
    let (hogs_start, _) = phase(3, true);
    std::thread::sleep(Duration::from_secs(2));
    let log = rec.stop();
    let fired_at = |d: &PathBuf| {
        let text = fs::read_to_string(d.join("dump.jsonl")).unwrap();
        let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        header["dumped_unix_ns"].as_u64().unwrap()
    };
    let all = dumps(&dir);
    let dump = all
        .iter()
        .find(|d| fired_at(d) >= hogs_start)
        .unwrap_or_else(|| panic!("no trigger after the hogs started: {log}"));
    let late = (fired_at(dump) - hogs_start) as f64 / 1e9;
    // Two 1 s intervals, plus the moment to take the job.
    assert!(
        late <= 2.5,
        "fired {late:.2} s after the hogs started: {log}"
    );
    let lines = replay(dump);
    let before = lines
        .iter()
        .filter(|l| l["type"] == "interval")
        .filter(|l| l["start_unix_ns"].as_u64().unwrap() >= quiet_start)
        .filter(|l| l["end_unix_ns"].as_u64().unwrap() <= hogs_start)
        .count();
    assert!(
        before >= 4,
        "{before} quiet intervals before the trigger: {lines:#?}"
    );
    eprintln!(
        "{} trigger dumps; the hogs' fired {late:.2} s after they started, with {before} s before",
        all.len()
    );
    fs::remove_dir_all(&dir).unwrap();
}

fn mount_tmpfs(dir: &Path, options: &str) {
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", options, "schedlat-test"])
        .arg(dir)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mount tmpfs {options} on {}", dir.display());
}

/// Unmounts whatever is still mounted there when the test ends.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        umount(&self.0);
    }
}

fn umount(dir: &Path) {
    let _ = Command::new("umount")
        .arg(dir)
        .stderr(Stdio::null())
        .status();
}

/// A full disk, a read-only directory, and a SIGHUP while a dump is being
/// written: each failed dump is said on stderr, leaves nothing under a
/// dump's name, and collection goes on (a later dump succeeds).
#[test]
fn failed_dumps_leave_nothing_and_collection_goes_on() {
    if !require_root() {
        return;
    }
    let dir = scratch("full");
    // Mode 0755: a tmpfs root is 1777 by default, which the recorder uses
    // through a private subdirectory (tests/dumpdir.rs); here the
    // directory itself takes the dumps.
    mount_tmpfs(&dir, "size=16k,mode=0755");
    let unmount = Unmount(dir.clone());
    let mut rec = Recorder::start(&dir, &["--slow-threshold", "1us"]);
    phase(3, true);
    rec.signal(libc::SIGHUP);
    rec.wait_for("failed", Duration::from_secs(30));
    assert!(
        rec.log().contains("No space left on device"),
        "{}",
        rec.log()
    );
    assert!(rec.alive());
    assert!(
        fs::read_dir(&dir).unwrap().next().is_none(),
        "left behind: {:?}",
        dumps(&dir)
    );

    // Read-only: remounted under the running recorder.
    let ok = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&dir)
        .status()
        .unwrap();
    assert!(ok.success());
    rec.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_secs(2));
    let failures = rec.log().matches("failed").count();
    assert_eq!(failures, 2, "{}", rec.log());
    assert!(rec.log().contains("Read-only file system"), "{}", rec.log());
    assert!(rec.alive());

    // Room again (the same file system, as an operator would make it:
    // the recorder writes through the directory it opened, so a file
    // system mounted over or under its path is not its directory): two
    // SIGHUPs back to back, the second during the first's write; both are
    // whole dumps or the second is refused, said so.
    let ok = Command::new("mount")
        .args(["-o", "remount,rw,size=64m"])
        .arg(&dir)
        .status()
        .unwrap();
    assert!(ok.success());
    rec.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(20));
    rec.signal(libc::SIGHUP);
    rec.wait_for("dumped", Duration::from_secs(30));
    std::thread::sleep(Duration::from_secs(2));
    let log = rec.stop();
    let written = dumps(&dir);
    assert!(!written.is_empty(), "{log}");
    for d in &written {
        let text = fs::read_to_string(d.join("dump.jsonl")).unwrap();
        assert!(
            text.ends_with("\"type\":\"end\"}\n"),
            "{}: cut short",
            d.display()
        );
    }
    // Two dumps, or the second refused and said so.
    let refused = log.matches("not taken").count();
    assert_eq!(written.len() + refused, 2, "{log}");
    let hidden = fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with('.')
        })
        .count();
    assert_eq!(hidden, 0, "temporary dumps left behind");
    drop(unmount);
    fs::remove_dir_all(&dir).unwrap();
}

/// Without root, on a dump recorded on a real kernel (a 1 ms sleeper
/// process, then two hogs on its CPU; tests/fixtures/recorder-dump):
/// replay reads it, and the HdrHistogram and protobuf readers agree with
/// its JSON.
#[test]
fn a_recorded_dump_reads_back_without_root() {
    let dump = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/recorder-dump");
    let lines = replay(&dump);
    let intervals = lines.iter().filter(|l| l["type"] == "interval").count();
    assert_eq!(intervals, 5, "{lines:#?}");
    let window = lines.last().unwrap();
    assert_eq!(window["type"], "window");
    assert_eq!(window["reason"], "SIGHUP");
    assert!(window["count"].as_u64().unwrap() > 1000, "{window}");
    assert!(window["slow_waits"].as_u64().unwrap() > 0, "{window}");
    let sub = Command::new(SCHEDLAT)
        .args(["replay", "--from", "1s", "--to", "3s", "--json"])
        .arg(&dump)
        .output()
        .unwrap();
    let sub = String::from_utf8(sub.stdout).unwrap();
    // Seconds 1 to 3 of the dump: the intervals wholly inside (their
    // edges are a few ms off whole seconds).
    let inside = sub.lines().filter(|l| l.contains("\"interval\"")).count();
    assert!((1..=2).contains(&inside), "{sub}");
    eprintln!("{}", python("check_hlog.py", &[&dump]));
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/perfetto_trace_subset.proto");
    eprintln!("{}", python("check_perfetto.py", &[&dump, &proto]));
}
