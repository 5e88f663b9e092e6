//! Root tests of `slow --stacks` on the real kernel (docs/stacks.md): a
//! holder thread spinning in a function of a known name, pinned beside a
//! 1 ms sleeper, must be named in the holder's user stack of the
//! sleeper's slow waits behind it, symbolized; the folded stacks' heaviest
//! line must end in it, and the flame graph must name it.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::Duration,
};

use common::{
    SCHEDLAT, TracerProcess,
    cpu::CpuTimes,
    parse_json_lines, require_root, run_schedlat,
    workload::{
        HOLDER_SPIN as SPIN, batch_sleeper, named_sleeper, nice_current_thread, pin_current_thread,
        schedlat_test_holder_spin, sleeper_behind_holder, workload_cpu,
    },
};
use serde_json::Value;

use crate::{common, recorder};

#[test]
fn the_holders_stacks_name_its_function_and_weigh_it_by_the_waits() {
    if !require_root() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("schedlat-stacks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let folded = dir.join("holders.folded");
    let svg = dir.join("holders.svg");
    let cpu = workload_cpu();
    let me = std::process::id().to_string();
    let tracer = TracerProcess::start(
        SCHEDLAT,
        &[
            "slow",
            "--threshold",
            "1ms",
            "--json",
            "--stacks",
            "-p",
            &me,
            "-f",
            folded.to_str().unwrap(),
            "--flamegraph",
            svg.to_str().unwrap(),
        ],
    );
    let (sleeper, holder_tid) = sleeper_behind_holder(cpu, 1500);
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success(), "{status}");

    let objects = parse_json_lines(&lines);
    let waits: Vec<&Value> = objects
        .iter()
        .filter(|o| o["type"] == "wait" && o["victim"]["tid"] == u64::from(sleeper))
        .collect();
    let behind = behind_the_spinner(&objects, sleeper, holder_tid);
    for w in &behind {
        let stacks = &w["holder_stacks"];
        let user = stacks["user"].as_array().expect("a user stack");
        assert!(user[0]["addr"].as_str().unwrap().starts_with("0x"), "{w}");
        // Stopped in user space: no kernel frame of its own.
        assert_eq!(stacks["in_user_space"], true, "{w}");
        let kernel = stacks["kernel"].as_array().expect("a kernel stack");
        assert!(
            stacks["tracing_frames"].as_u64().unwrap() as usize <= kernel.len(),
            "{w}"
        );
    }

    // The folded stacks: `comm;outer;...;inner weight`, weights the
    // microseconds waited.
    let text = std::fs::read_to_string(&folded).expect("the folded file");
    let lines: Vec<(&str, u64)> = text
        .lines()
        .map(|l| {
            let (stack, weight) = l.rsplit_once(' ').expect("stack weight");
            (stack, weight.parse().expect("a weight"))
        })
        .collect();
    // Every wait behind the holder is in its lines, whoever waited (`-p`
    // takes this process's other threads too), each as its whole
    // microseconds.
    let holder_us: u64 = lines
        .iter()
        .filter(|(s, _)| s.starts_with("stack-holder;"))
        .map(|(_, w)| w)
        .sum();
    let behind_us: u64 = objects
        .iter()
        .filter(|o| o["type"] == "wait" && o["culprit"]["tid"] == holder_tid)
        .map(|w| w["wait_ns"].as_u64().unwrap() / 1000)
        .sum();
    assert_eq!(holder_us, behind_us, "{text}");
    assert!(
        lines
            .iter()
            .any(|(s, _)| s.starts_with("stack-holder;") && s.ends_with(&format!(";{SPIN}"))),
        "{text}"
    );
    let heaviest = lines.iter().max_by_key(|(_, w)| *w).expect("folded lines");
    // Load from outside the test on that CPU takes its share of the blame,
    // rightly (as tests/slow.rs): the heaviest stack is the holder's when
    // it held the CPU for most of the sleeper's slow waits.
    if behind.len() * 10 >= waits.len() * 9 {
        assert!(heaviest.0.ends_with(&format!(";{SPIN}")), "{text}");
    } else {
        eprintln!(
            "note: {} of {} slow waits behind tasks from outside this test",
            waits.len() - behind.len(),
            waits.len()
        );
    }

    let graph = std::fs::read_to_string(&svg).expect("the flame graph");
    assert!(
        graph.starts_with("<?xml"),
        "{}",
        &graph[..graph.len().min(200)]
    );
    assert!(graph.contains(SPIN), "the flame graph names {SPIN}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--stacks=holder` takes the holder's stacks and not the waker's: the
/// wakeups are not the stacks programs (each would walk its waker's
/// stack), so no event names a waker.
#[test]
fn holder_stacks_leave_the_wakeups_alone() {
    if !require_root() {
        return;
    }
    let tracer = slow_json("--stacks=holder");
    let (sleeper, holder_tid) = sleeper_behind_holder(workload_cpu(), 1500);
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success(), "{status}");
    let objects = parse_json_lines(&lines);
    for w in behind_the_spinner(&objects, sleeper, holder_tid) {
        assert!(w["holder_stacks"]["waker"].is_null(), "{w}");
    }
}

/// The sleeper's slow waits behind the holder (at least five), each
/// checked to name SPIN innermost in the holder's user stack: where it
/// was, in its function.
fn behind_the_spinner(objects: &[Value], sleeper: u32, holder: u64) -> Vec<&Value> {
    let behind: Vec<&Value> = objects
        .iter()
        .filter(|o| o["type"] == "wait" && o["victim"]["tid"] == u64::from(sleeper))
        .filter(|o| o["culprit"]["tid"] == holder)
        .collect();
    assert!(
        behind.len() >= 5,
        "few slow waits behind the holder: {objects:?}"
    );
    for w in &behind {
        let user = w["holder_stacks"]["user"].as_array().expect("a user stack");
        assert_eq!(
            user.first().map(|f| &f["symbol"]),
            Some(&Value::from(SPIN)),
            "{w}"
        );
    }
    behind
}

/// The flight recorder with `--stacks`: the dump keeps each slow wait's
/// holder stacks (every frame, as `slow --json` writes them), `replay`
/// shows them under the waits and folds the window into a flame graph,
/// and the Perfetto trace gives each wait the holder's callstack (checked
/// by a reader generated from Perfetto's published schema).
#[test]
fn the_flight_recorder_keeps_the_holders_stacks_for_replay_and_perfetto() {
    if !require_root() {
        return;
    }
    let dir = recorder::scratch("stacks");
    let rec = recorder::Recorder::start(&dir, &["--stacks", "--max-stacks", "500"]);
    let announced = "the newest 500 with their holder's and waker's stacks";
    let Dumped {
        dump,
        lines,
        sleeper,
        holder_tid,
        log,
    } = dumped_behind_the_holder(rec, announced, &dir);
    assert_eq!(lines[0]["stacks"], true, "{}", lines[0]);
    assert_eq!(lines[0]["wakers"], true, "{}", lines[0]);
    let behind: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "slow" && l["victim"]["tid"] == u64::from(sleeper))
        .filter(|l| l["culprit"]["tid"] == holder_tid)
        .collect();
    assert!(behind.len() >= 5, "few slow waits behind the holder: {log}");
    // The newest 500 keep their stacks; these are all of them here.
    let with_stacks = behind.iter().filter(|w| w["holder_stacks"].is_object());
    assert!(
        with_stacks.count() >= behind.len().min(500) * 9 / 10,
        "{log}"
    );
    for w in behind.iter().filter(|w| w["holder_stacks"].is_object()) {
        let user = w["holder_stacks"]["user"].as_array().expect("a user stack");
        assert_eq!(
            user.first().map(|f| &f["symbol"]),
            Some(&Value::from(SPIN)),
            "{w}"
        );
    }

    let folded = dir.join("window.folded");
    let svg = dir.join("window.svg");
    let out = std::process::Command::new(SCHEDLAT)
        .args(["replay", "--slow", "3", "-f"])
        .arg(&folded)
        .arg("--flamegraph")
        .arg(&svg)
        .arg(&dump)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        report.contains(&format!("    holder user:   {SPIN}")),
        "{report}"
    );
    let folded = std::fs::read_to_string(&folded).unwrap();
    assert!(
        folded
            .lines()
            .any(|l| l.starts_with("stack-holder;") && l.contains(&format!(";{SPIN} "))),
        "{folded}"
    );
    assert!(std::fs::read_to_string(&svg).unwrap().contains(SPIN));
    let proto =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("proto/perfetto_trace_subset.proto");
    let checked = recorder::python("check_perfetto.py", &[&dump, &proto]);
    assert!(checked.contains("callstacks"), "{checked}");
    eprintln!("{checked}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `serve --ring --stacks=holder` with the neighbour pairs (what the
/// DaemonSet runs, its switch then the pairs' twin with the stacks): each
/// dumped slow wait behind the holder names its function, and who ran
/// during it.
#[test]
fn serves_flight_recorder_keeps_the_holders_stacks_beside_the_pairs() {
    if !require_root() {
        return;
    }
    let dir = recorder::scratch("serve-stacks");
    let rec = recorder::Recorder::serving(&dir, &["--cgroups", "--pairs", "--stacks=holder"]);
    let announced = "the newest 1000 with their holder's stacks";
    let Dumped {
        lines,
        sleeper,
        holder_tid,
        log,
        ..
    } = dumped_behind_the_holder(rec, announced, &dir);
    assert_eq!(lines[0]["stacks"], true, "{}", lines[0]);
    assert_ne!(lines[0]["wakers"], true, "{}", lines[0]);
    let behind: Vec<&Value> = (lines.iter())
        .filter(|l| l["type"] == "slow" && l["victim"]["tid"] == u64::from(sleeper))
        .filter(|l| l["culprit"]["tid"] == holder_tid)
        .filter(|l| l["holder_stacks"].is_object())
        .collect();
    assert!(behind.len() >= 5, "few slow waits behind the holder: {log}");
    let spin = (behind.iter())
        .filter(|w| w["holder_stacks"]["user"][0]["symbol"] == SPIN)
        .count();
    assert!(
        spin * 10 >= behind.len() * 9,
        "{spin} of {} name {SPIN}",
        behind.len()
    );
    for w in &behind {
        let tasks = w["holder_stacks"]["ran"]["tasks"].as_array().unwrap();
        assert!(tasks.iter().any(|t| t["tid"] == holder_tid), "{w}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recorder's dump of a sleeper's waits behind the holder.
struct Dumped {
    dump: std::path::PathBuf,
    /// Its lines, the header first.
    lines: Vec<Value>,
    sleeper: u32,
    holder_tid: u64,
    /// The recorder's stderr.
    log: String,
}

/// Checks that `rec` announced what it keeps (`announced`), runs a 1 ms
/// sleeper behind the holder while it records, dumps on SIGHUP into
/// `dir`, stops it, and reads the dump.
fn dumped_behind_the_holder(
    rec: recorder::Recorder,
    announced: &str,
    dir: &std::path::Path,
) -> Dumped {
    assert!(rec.log().contains(announced), "{}", rec.log());
    let (sleeper, holder_tid) = sleeper_behind_holder(workload_cpu(), 1500);
    rec.signal(libc::SIGHUP);
    rec.wait_for("dumped", Duration::from_secs(30));
    let log = rec.stop();
    let written = recorder::dumps(dir);
    let dump = (written.first().cloned()).unwrap_or_else(|| panic!("no dump: {log}"));
    let text = std::fs::read_to_string(dump.join("dump.jsonl")).unwrap();
    let lines: Vec<String> = text.lines().map(String::from).collect();
    Dumped {
        lines: parse_json_lines(&lines),
        dump,
        sleeper,
        holder_tid,
        log,
    }
}

/// A folded or flame graph path that cannot be written fails the run
/// before it traces anything (no root needed to see it).
#[test]
fn an_unwritable_output_path_is_refused_at_once() {
    let (status, _, stderr) = run_schedlat(&["slow", "-f", "/nonexistent-dir/holders.folded"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("creating the folded stacks file /nonexistent-dir/holders.folded"),
        "{stderr}"
    );
}

/// The waker's stack says how each wait began: a sleeper woken by its
/// timer shows the hrtimer's expiry, a reader woken by a pipe write shows
/// pipe_write (anon_pipe_write on 6.15 and later). Both share a CPU with a spinning holder at nice -10, so
/// their waits are slow.
#[test]
fn the_wakers_stack_tells_a_timer_from_a_pipe_write() {
    if !require_root() {
        return;
    }
    let cpu = workload_cpu();
    let tracer = slow_json("--stacks");
    let stop = Arc::new(AtomicBool::new(false));
    let holder = {
        let stop = stop.clone();
        thread::spawn(move || {
            pin_current_thread(cpu);
            nice_current_thread(-10);
            schedlat_test_holder_spin(&stop)
        })
    };
    let mut fds = [0; 2];
    // SAFETY: a two-element array for pipe(2).
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let [read_fd, write_fd] = fds;
    const ROUNDS: u32 = 1000;
    let reader = thread::spawn(move || {
        pin_current_thread(cpu);
        let mut byte = 0u8;
        for _ in 0..ROUNDS {
            // SAFETY: reads one byte into a local.
            let n = unsafe { libc::read(read_fd, (&raw mut byte).cast(), 1) };
            assert_eq!(n, 1);
        }
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() as u64 }
    });
    let writer = thread::spawn(move || {
        for _ in 0..ROUNDS {
            thread::sleep(Duration::from_millis(1));
            // SAFETY: writes one byte from a constant.
            let n = unsafe { libc::write(write_fd, b"x".as_ptr().cast(), 1) };
            assert_eq!(n, 1);
        }
    });
    let sleeper = u64::from(named_sleeper(
        cpu,
        Duration::from_millis(1),
        ROUNDS,
        "timer-sleeper",
    ));
    writer.join().unwrap();
    let reader = reader.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    holder.join().unwrap();
    // SAFETY: closing the pipe this test opened.
    unsafe {
        libc::close(read_fd);
        libc::close(write_fd);
    }
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success(), "{status}");
    let objects = parse_json_lines(&lines);
    // The symbols of each kept waker stack of `tid`'s slow waits.
    let wakers = |tid: u64| -> Vec<Vec<String>> {
        objects
            .iter()
            .filter(|o| o["type"] == "wait" && o["victim"]["tid"] == tid)
            .filter_map(|o| o["holder_stacks"]["waker"]["kernel"].as_array())
            .map(|k| {
                k.iter()
                    .filter_map(|f| f["symbol"].as_str().map(String::from))
                    .collect()
            })
            .collect()
    };
    // Each thread pins itself first: the CPU stopper that moves it wakes
    // it once (complete_all <- migration_cpu_stop), a wakeup of its own.
    let pinned = |stacks: Vec<Vec<String>>| -> Vec<Vec<String>> {
        let (moved, rest): (Vec<_>, Vec<_>) = stacks
            .into_iter()
            .partition(|s| s.iter().any(|f| f == "migration_cpu_stop"));
        assert!(moved.len() <= 1, "{moved:?}");
        rest
    };
    let (timer, pipe) = (pinned(wakers(sleeper)), pinned(wakers(reader)));
    assert!(
        timer.len() >= 3,
        "few timer wakeups with a stack: {timer:?}"
    );
    assert!(pipe.len() >= 3, "few pipe wakeups with a stack: {pipe:?}");
    let by_timer = |s: &Vec<String>| s.iter().any(|f| f.starts_with("hrtimer"));
    // pipe_write, anon_pipe_write since 6.15.
    let by_pipe = |s: &Vec<String>| s.iter().any(|f| f.ends_with("pipe_write"));
    // Never the other's waker; now and then neither: a thread of this
    // process also sleeps on its memory map's lock (a page fault while
    // another thread unmaps a stack), and the waker's stack is then the
    // unlock's (up_read <- rwsem_wake <- __x64_sys_munmap, seen once
    // among a thousand pipe wakeups).
    let apart = |stacks: &[Vec<String>], own: &dyn Fn(&Vec<String>) -> bool, what: &str| {
        let theirs = stacks.iter().filter(|s| own(s)).count();
        assert!(
            theirs * 10 >= stacks.len() * 9,
            "{theirs} of {} {what} wakeups' stacks show their waker: {stacks:?}",
            stacks.len()
        );
    };
    apart(&timer, &by_timer, "timer");
    apart(&pipe, &by_pipe, "pipe");
    for stack in &timer {
        assert!(!by_pipe(stack), "{stack:?}");
    }
    for stack in &pipe {
        assert!(!by_timer(stack), "{stack:?}");
    }
}

/// A wait passed over names every task that ran on its CPU during it,
/// each with its time there: three threads spinning on one CPU take turns
/// (each its slice, in turn), so each wait of one is spent behind both
/// others, passed over for the first, ended by the second: the holder at
/// its end alone would name half of it.
#[test]
fn a_wait_passed_over_names_every_task_that_ran_during_it() {
    if !require_root() {
        return;
    }
    let cpu = workload_cpu();
    let busy = CpuTimes::now();
    let tracer = slow_json("--stacks=holder");
    let stop = Arc::new(AtomicBool::new(false));
    let spinners: Vec<_> = ["ran-a", "ran-b", "ran-c"]
        .into_iter()
        .map(|name| {
            let stop = stop.clone();
            thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    pin_current_thread(cpu);
                    // SAFETY: gettid has no preconditions.
                    let tid = unsafe { libc::gettid() } as u64;
                    schedlat_test_holder_spin(&stop);
                    tid
                })
                .unwrap()
        })
        .collect();
    thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::SeqCst);
    let tids: Vec<u64> = spinners.into_iter().map(|s| s.join().unwrap()).collect();
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success(), "{status}");
    let busy = busy.busy_since();

    let objects = parse_json_lines(&lines);
    let (waiter, others) = (tids[2], [tids[0], tids[1]]);
    let waits: Vec<&Value> = (objects.iter())
        .filter(|o| o["type"] == "wait" && o["victim"]["tid"] == waiter)
        .collect();
    assert!(waits.len() >= 20, "{} slow waits; {busy}", waits.len());
    let (mut total, mut theirs, mut unknown, mut both) = (0, 0, 0, 0);
    for w in &waits {
        let ran = &w["holder_stacks"]["ran"];
        let tasks = ran["tasks"].as_array().expect("the tasks that ran");
        let ns_of = |tid: u64| -> u64 {
            (tasks.iter())
                .filter(|t| t["tid"] == tid)
                .map(|t| t["ns"].as_u64().unwrap())
                .sum()
        };
        let wait_ns = w["wait_ns"].as_u64().unwrap();
        let covered: u64 = tasks.iter().map(|t| t["ns"].as_u64().unwrap()).sum();
        // The runs tile the CPU's time: with what the ring did not reach,
        // they are the wait; the waiter never ran during its own wait.
        assert_eq!(
            covered + ran["unknown_ns"].as_u64().unwrap(),
            wait_ns,
            "{w}"
        );
        assert_eq!(ns_of(waiter), 0, "the waiter among its holders: {w}");
        // The holder at the end ran during the wait.
        assert!(ns_of(w["culprit"]["tid"].as_u64().unwrap()) > 0, "{w}");
        let (a, b) = (ns_of(others[0]), ns_of(others[1]));
        total += wait_ns;
        theirs += a + b;
        unknown += ran["unknown_ns"].as_u64().unwrap();
        both += usize::from(a >= wait_ns / 5 && b >= wait_ns / 5);
    }
    let share = theirs as f64 / total as f64;
    assert!(
        share >= 0.6,
        "the other two spinners ran {:.0}% of {} waits' time ({:.0}% unknown); {busy}",
        share * 100.0,
        waits.len(),
        unknown as f64 * 100.0 / total as f64
    );
    assert!(
        both * 2 >= waits.len(),
        "{both} of {} waits spent a fifth or more behind each of the other two; {busy}",
        waits.len()
    );
}

/// A holder that stays in the kernel shows its kernel frames, not the
/// scheduler's own: a thread reading /dev/zero into a 16 MiB buffer (the
/// kernel clears it page by page, and gives the CPU up only where it
/// checks, cond_resched, or where an interrupt preempts it) beside a
/// SCHED_BATCH sleeper. The waits behind it end with the holder in the
/// kernel, its own frames under the tracer's reading the zeroes.
#[test]
fn a_holder_in_the_kernel_shows_its_own_kernel_frames() {
    if !require_root() {
        return;
    }
    let cpu = workload_cpu();
    let busy = CpuTimes::now();
    let tracer = slow_json("--stacks=holder");
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        thread::Builder::new()
            .name("zero-reader".into())
            .spawn(move || {
                use std::io::Read;
                pin_current_thread(cpu);
                nice_current_thread(-10);
                let mut zero = std::fs::File::open("/dev/zero").unwrap();
                let mut buf = vec![1u8; 16 << 20];
                while !stop.load(Ordering::Relaxed) {
                    zero.read_exact(&mut buf).unwrap();
                }
                // SAFETY: gettid has no preconditions.
                unsafe { libc::gettid() as u64 }
            })
            .unwrap()
    };
    let sleeper = u64::from(batch_sleeper(cpu, 400));
    stop.store(true, Ordering::SeqCst);
    let reader = reader.join().unwrap();
    let (status, lines) = tracer.stop_with(libc::SIGINT);
    assert!(status.success(), "{status}");
    let busy = busy.busy_since();

    let objects = parse_json_lines(&lines);
    let behind: Vec<&Value> = (objects.iter())
        .filter(|o| o["type"] == "wait" && o["victim"]["tid"] == sleeper)
        .filter(|o| o["culprit"]["tid"] == reader)
        .collect();
    assert!(
        behind.len() >= 5,
        "{} slow waits behind the reader; {busy}",
        behind.len()
    );
    // The holder's own kernel frames: those under the tracer's and the
    // scheduler's (`tracing_frames`).
    let own = |w: &Value| -> Vec<String> {
        let stacks = &w["holder_stacks"];
        let skip = stacks["tracing_frames"].as_u64().unwrap() as usize;
        (stacks["kernel"].as_array().unwrap().iter().skip(skip))
            .map(|f| f["symbol"].as_str().unwrap_or("?").to_string())
            .collect()
    };
    let reading = (behind.iter())
        .filter(|w| w["holder_stacks"]["in_user_space"] == false)
        // read_zero for read(2); read_iter_zero on the iterator path.
        .filter(|w| {
            own(w)
                .iter()
                .any(|f| f.starts_with("read_iter_zero") || f == "read_zero")
        })
        .count();
    // A wait that ended as the reader was between two reads, in user
    // space, may not: one in ten.
    assert!(
        reading * 10 >= behind.len() * 9,
        "{reading} of {} waits behind the reader name its read in the kernel: {:?}",
        behind.len(),
        behind.iter().map(|w| own(w)).collect::<Vec<_>>()
    );
    for w in &behind {
        let first = own(w).first().cloned().unwrap_or_default();
        assert!(
            !["__schedule", "schedule"].contains(&first.as_str()),
            "the scheduler's own frame shown as the holder's: {w}"
        );
    }
}

/// `slow -f --by LEVEL` folds each holder's stacks under its workload,
/// above its comm, and the run ends saying where most of the waiting
/// went: the holder and the function it was in.
#[test]
fn the_folded_stacks_go_under_the_workload_and_the_run_says_where_the_waiting_went() {
    if !require_root() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("schedlat-stacks-by-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let folded = dir.join("by.folded");
    let me = std::process::id().to_string();
    let mut tracer = TracerProcess::start(
        SCHEDLAT,
        &[
            "slow",
            "--threshold",
            "1ms",
            "--stacks=holder",
            "-p",
            &me,
            "-f",
            folded.to_str().unwrap(),
            "--by",
            "cgroup",
        ],
    );
    let mut stderr = tracer.stderr.take().expect("stderr is piped");
    let (_, holder_tid) = sleeper_behind_holder(workload_cpu(), 1500);
    let (status, _) = tracer.stop_with(libc::SIGINT);
    assert!(status.success(), "{status}");
    let mut said = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut said).unwrap();

    let text = std::fs::read_to_string(&folded).expect("the folded file");
    // `workload;comm;outer;...;inner weight`: the holder's lines, under
    // the cgroup this process is in.
    let holders: Vec<Vec<&str>> = (text.lines())
        .map(|l| {
            l.rsplit_once(' ')
                .expect("stack weight")
                .0
                .split(';')
                .collect()
        })
        .filter(|f: &Vec<&str>| f.get(1) == Some(&"stack-holder"))
        .collect();
    assert!(!holders.is_empty(), "no stack of the holder: {text}");
    for f in &holders {
        assert!(f[0].starts_with('/'), "not under a cgroup: {f:?}");
    }
    assert!(holders.iter().any(|f| f.last() == Some(&SPIN)), "{text}");
    // Where the waiting went, by the holder's (comm, workload) and its
    // innermost frame; the holder took most of it on a quiet CPU.
    let summary = (said.lines())
        .find(|l| l.contains("waited behind holders with their stacks"))
        .unwrap_or_else(|| panic!("no summary on stderr: {said}"));
    assert!(summary.contains(" went to "), "{summary}");
    // Named by its function when it held the CPU for most of the waiting
    // (load from outside the test takes its share of the blame, rightly).
    let weight = |holder: bool| -> u64 {
        (text.lines())
            .filter(|l| l.contains(";stack-holder;") == holder)
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum()
    };
    if weight(true) > weight(false) * 2 {
        assert!(
            summary.contains("went to stack-holder (") && summary.ends_with(&format!(" in {SPIN}")),
            "{summary}"
        );
    }
    eprintln!("{summary} (holder {holder_tid})");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `schedlat slow --threshold 1ms --json STACKS -p` this process, attached.
pub(crate) fn slow_json(stacks: &str) -> TracerProcess {
    let me = std::process::id().to_string();
    TracerProcess::start(
        SCHEDLAT,
        &["slow", "--threshold", "1ms", "--json", stacks, "-p", &me],
    )
}
