//! Hostile files given to the commands that read them (`replay`, `compare`)
//! and written by `record -o` (issue 29): each case once hung, filled
//! memory, wrapped silently or destroyed something. No root needed.

use std::{
    io::Read,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use common::{SCHEDLAT, run_schedlat};

use crate::common;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("schedlat-inputs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What a run printed, its status, and its peak RSS in KiB (the largest
/// VmHWM seen while it ran: rusage's ru_maxrss would include the test
/// process's own, which Linux carries into a vforked child), or None if it
/// had to be killed after `limit`: a hang.
struct Bounded {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
    peak_kib: i64,
}

fn run_bounded(args: &[&str], limit: Duration) -> Option<Bounded> {
    let mut child = Command::new(SCHEDLAT)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let readers = (
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        }),
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        }),
    );
    let deadline = Instant::now() + limit;
    let status;
    let mut peak_kib = 0;
    loop {
        if let Some(hwm) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches(" kB").parse::<i64>().ok())
            })
        {
            peak_kib = peak_kib.max(hwm);
        }
        if let Some(done) = child.try_wait().unwrap() {
            status = done;
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(Bounded {
        status,
        stdout: readers.0.join().unwrap(),
        stderr: readers.1.join().unwrap(),
        peak_kib,
    })
}

fn fixture_dump() -> Vec<serde_json::Value> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/recorder-dump/dump.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn write_lines(path: &Path, lines: &[serde_json::Value]) {
    let text: String = lines.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// Issue 29 item 6: replay hung on a FIFO, and a dump whose dump.jsonl
/// linked to /dev/zero grew it to 2 GB in 4 s until the OOM killer came.
/// Both are refused at once now, as compare refuses them.
#[test]
fn replay_refuses_a_fifo_and_a_link_to_a_device_at_once() {
    let dir = scratch("special");
    let fifo = dir.join("fifo-dump");
    std::fs::create_dir_all(&fifo).unwrap();
    let c = std::ffi::CString::new(fifo.join("dump.jsonl").to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let zero = dir.join("zero-dump");
    std::fs::create_dir_all(&zero).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero.join("dump.jsonl")).unwrap();
    for (dump, what) in [(&fifo, "a FIFO"), (&zero, "a device")] {
        let r = run_bounded(&["replay", dump.to_str().unwrap()], Duration::from_secs(20))
            .unwrap_or_else(|| panic!("replay of {what} still ran after 20 s"));
        assert_eq!(r.status.code(), Some(1), "{what}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!("it is {what}")),
            "{what}: {}",
            r.stderr
        );
        assert!(r.peak_kib < 200_000, "{what}: peak RSS {} KiB", r.peak_kib);
        let r = run_bounded(
            &["compare", dump.to_str().unwrap(), dump.to_str().unwrap()],
            Duration::from_secs(20),
        )
        .unwrap_or_else(|| panic!("compare of {what} still ran after 20 s"));
        assert_eq!(r.status.code(), Some(1), "{what}: {}", r.stderr);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A regular file of one endless line (a sparse file of zeros) is refused
/// once the line passes the longest a dump holds, before it is read whole.
#[test]
fn replay_refuses_an_endless_line_without_reading_it_whole() {
    let dir = scratch("endless");
    let file = std::fs::File::create(dir.join("dump.jsonl")).unwrap();
    file.set_len(1 << 30).unwrap();
    let r = run_bounded(&["replay", dir.to_str().unwrap()], Duration::from_secs(60))
        .expect("replay of a 1 GiB line still ran after 60 s");
    assert_eq!(r.status.code(), Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains("line 1 is longer than 1048576 bytes"),
        "{}",
        r.stderr
    );
    assert!(r.peak_kib < 200_000, "peak RSS {} KiB", r.peak_kib);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 29 item 11: compare took 17x its input in memory on a crafted long
/// line (2.4 GiB for 146 MiB), building every JSON value. Read typed, a
/// line's breakdown is skipped unbuilt and a histogram of more buckets than
/// exist is refused: peak memory stays near the line itself.
#[test]
fn compare_memory_stays_near_its_input_on_crafted_lines() {
    let dir = scratch("crafted");
    let dump = fixture_dump();
    let mut object = dump[1]["histogram"].clone();
    let bucket = object["buckets"][0].clone();
    // About 40 MB of breakdown: per-key objects no reader uses.
    let key = serde_json::json!({"key": "pid 1", "buckets": vec![bucket.clone(); 40]});
    object["breakdown"] = serde_json::json!({"by": "pids", "keys": vec![key; 20_000]});
    let wide = dir.join("wide-breakdown.jsonl");
    write_lines(&wide, &[object.clone()]);
    let size_kib = std::fs::metadata(&wide).unwrap().len() as i64 / 1024;
    assert!(size_kib > 30_000, "{size_kib} KiB");
    let w = wide.to_str().unwrap();
    let r = run_bounded(&["compare", w, w], Duration::from_secs(120)).expect("compare finished");
    assert_eq!(r.status.code(), Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("change: "), "{}", r.stdout);
    // Before: 17-22x the line (measured 1.26 GB for a 56 MB line).
    assert!(
        r.peak_kib < 2 * size_kib + 40_000,
        "peak RSS {} KiB for a {size_kib} KiB line",
        r.peak_kib
    );

    // A million buckets where 304 exist: refused at the 305th.
    object.as_object_mut().unwrap().remove("breakdown");
    object["buckets"] = serde_json::json!(vec![bucket; 1_000_000]);
    let many = dir.join("many-buckets.jsonl");
    write_lines(&many, &[object]);
    let m = many.to_str().unwrap();
    let r = run_bounded(&["compare", m, m], Duration::from_secs(120)).expect("compare finished");
    assert_eq!(r.status.code(), Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("more than 304 entries"), "{}", r.stderr);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 29 item 11: compare accepted dumps replay refuses (no end line, no
/// header, an unknown schema): both read dumps with the same reader now,
/// and refuse them with the same words.
#[test]
fn compare_refuses_the_dumps_replay_refuses() {
    let dir = scratch("partial");
    let dump = fixture_dump();
    let last = dump.len() - 1;
    let mut unknown = dump.clone();
    unknown[0]["schema"] = "schedlat.dump.v9".into();
    let cases = [
        (
            "no-end",
            dump[..last].to_vec(),
            "the dump is cut short (no end line)",
        ),
        ("no-header", dump[1..].to_vec(), "no dump header before it"),
        ("unknown-schema", unknown, "schema schedlat.dump.v9"),
    ];
    for (name, lines, expect) in cases {
        let case = dir.join(name);
        std::fs::create_dir_all(&case).unwrap();
        write_lines(&case.join("dump.jsonl"), &lines);
        let p = case.to_str().unwrap();
        for args in [vec!["replay", p], vec!["compare", p, p]] {
            let (status, _, stderr) = run_schedlat(&args);
            assert_eq!(status.code(), Some(1), "{args:?}: {stderr}");
            assert!(stderr.contains(expect), "{args:?}: {stderr}");
        }
    }
    // The whole dump is read by both.
    let whole = dir.join("whole");
    std::fs::create_dir_all(&whole).unwrap();
    write_lines(&whole.join("dump.jsonl"), &dump);
    let p = whole.to_str().unwrap();
    for args in [vec!["replay", p], vec!["compare", p, p]] {
        let (status, _, stderr) = run_schedlat(&args);
        assert_eq!(status.code(), Some(0), "{args:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 29 item 11: `--from`/`--to` past what the clock holds wrapped
/// silently; they are a bad command line now (exit 2), with the reason.
#[test]
fn replay_bounds_the_clock_cannot_hold_are_a_bad_command_line() {
    let dump = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/recorder-dump");
    let d = dump.to_str().unwrap();
    for (args, expect) in [
        (vec!["--from", "18446744073s"], "past the end of the clock"),
        (
            vec!["--to", "307445734561825861m"],
            "past the end of the clock",
        ),
        (vec!["--from", "99:00:00"], "from 00:00:00 to 23:59:60"),
        (vec!["--to", "1:2"], "a time of day reads HH:MM:SS"),
    ] {
        let mut all = vec!["replay", d];
        all.extend(&args);
        let (status, stdout, stderr) = run_schedlat(&all);
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}{stdout}");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
    }
}

/// Issue 29 item 3: after the wall clock stepped back during a recording,
/// replay showed 1 of 17 intervals (42 of 6,559 waits) with exit 0 and no
/// warning, while compare merged them all. It shows every interval in the
/// order recorded now, and says why their times are out of order.
#[test]
fn replay_shows_every_interval_of_a_dump_whose_clock_stepped_back() {
    let dir = scratch("stepped");
    let mut dump = fixture_dump();
    let intervals: Vec<usize> = (0..dump.len())
        .filter(|&i| dump[i]["type"] == "interval")
        .collect();
    assert!(intervals.len() >= 4);
    // Ten minutes back after the first interval.
    for &i in &intervals[1..] {
        for field in ["start_unix_ns", "end_unix_ns"] {
            let t = dump[i][field].as_u64().unwrap();
            dump[i][field] = (t - 600_000_000_000).into();
        }
    }
    let total: u64 = intervals
        .iter()
        .map(|&i| dump[i]["histogram"]["count"].as_u64().unwrap())
        .sum();
    write_lines(&dir.join("dump.jsonl"), &dump);
    let d = dir.to_str().unwrap();
    let (status, stdout, stderr) = run_schedlat(&["replay", d, "--json"]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    let window: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(window["intervals"], intervals.len(), "{stdout}");
    assert_eq!(window["count"], total, "{stdout}");
    assert_eq!(window["out_of_order_intervals"], 1, "{stdout}");
    assert!(stderr.contains("out of time order"), "{stderr}");
    let (status, stdout, _) = run_schedlat(&["replay", d]);
    assert_eq!(status.code(), Some(0));
    assert!(stdout.contains("out of time order"), "{stdout}");
    assert!(
        stdout.contains(&format!("{} intervals merged", intervals.len())),
        "{stdout}"
    );
    let (_, stdout, _) = run_schedlat(&["compare", d, d, "--json"]);
    let compared: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(compared["before"]["count"], total);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 29 item 8: `record -o LINK --force` replaced the link with a
/// regular file, leaving the file it named as it was. It is refused now,
/// before any kernel work, and the link stays.
#[test]
fn record_refuses_to_replace_a_link_even_forced() {
    let dir = scratch("record-link");
    let file = dir.join("baseline.jsonl");
    std::fs::write(&file, "baseline\n").unwrap();
    let link = dir.join("latest.jsonl");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let (status, _, stderr) =
        run_schedlat(&["record", "-o", link.to_str().unwrap(), "--force", "1"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is a symbolic link to"), "{stderr}");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "baseline\n");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 29 item 7: names from a file reached the terminal raw: a slow
/// wait's task named with ESC sequences cleared the screen, and one with a
/// newline forged a line of replay's output; a recording's scope (a cgroup
/// path) did the same in compare's warning. They are shown escaped as ps
/// does (`?`), and kept exact in JSON.
#[test]
fn names_from_files_reach_the_terminal_escaped() {
    let dir = scratch("names");
    let mut dump = fixture_dump();
    let hostile = ["\u{1b}[2J\u{1b}[H", "x\nFAKE 1 waits"];
    let slow: Vec<usize> = (0..dump.len())
        .filter(|&i| dump[i]["type"] == "slow")
        .collect();
    for (k, &i) in slow.iter().enumerate() {
        dump[i]["victim"]["comm"] = hostile[k % 2].into();
        dump[i]["culprit"]["comm"] = hostile[(k + 1) % 2].into();
    }
    write_lines(&dir.join("dump.jsonl"), &dump);
    let d = dir.to_str().unwrap();
    let (status, stdout, stderr) = run_schedlat(&["replay", d, "--slow", "100"]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stdout.contains('\u{1b}'), "an ESC reached the terminal");
    assert!(
        !stdout.lines().any(|l| l.starts_with("FAKE")),
        "a forged line: {stdout}"
    );
    assert!(stdout.contains("?[2J?[H"), "{stdout}");
    assert!(stdout.contains("x?FAKE 1 waits"), "{stdout}");

    // A recording whose scope names a hostile cgroup, against a plain one.
    let plain = &dump[1]["histogram"];
    let mut forged = plain.clone();
    forged["scope"] = serde_json::json!({
        "pid": null, "tid": null, "cgroup": "/a\u{1b}[8m\nchange: improved", "comm": null,
        "cpus": null, "breakdown": null, "kernel": "k", "host": "h",
    });
    let mut other = plain.clone();
    other["scope"] = serde_json::json!({
        "pid": null, "tid": null, "cgroup": null, "comm": null,
        "cpus": null, "breakdown": null, "kernel": "k", "host": "h",
    });
    let (a, b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    write_lines(&a, &[other]);
    write_lines(&b, &[forged]);
    let (status, stdout, stderr) =
        run_schedlat(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(!stdout.contains('\u{1b}'), "an ESC reached the terminal");
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("change: ")).count(),
        1,
        "a forged verdict line: {stdout}"
    );
    assert!(
        stdout.contains("-c /a?[8m?change: improved after"),
        "{stdout}"
    );
    // JSON keeps the name exactly.
    let (_, json, _) = run_schedlat(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        v["scope_differences"][0]
            .as_str()
            .unwrap()
            .contains("/a\u{1b}[8m\nchange"),
        "{json}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
