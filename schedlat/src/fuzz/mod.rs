//! The fuzz targets: one function per parser of outside input, each taking
//! raw bytes and panicking on a defect: BTF and the offsets read from it,
//! tracefs formats, /proc and cgroup files, `compare`'s recordings, the
//! recorder dumps `replay` reads (and the .hlog and Perfetto files written
//! from a window, read back by their own readers), the HTTP Accept
//! header of `serve`, whatever a client sends its endpoint, its web
//! configuration file (`--web.config.file`), the decision to take a new
//! version of it (a reload), and the Authorization header, an OTLP
//! collector's answer, and the workload labels of cgroup paths and of the
//! container runtimes' files.
//!
//! One driver searches them: libFuzzer, coverage-guided, through `cargo
//! fuzz` (the crate in `schedlat/fuzz/`, one binary per target, built with
//! this module as the `fuzzing` feature and with overflow checks on), from
//! the seeds in `schedlat/fuzz/corpus/<target>/` (real files from kernels
//! and tools, and every input that once failed); `cargo xtask test` runs
//! each for a fixed number of runs. Every `cargo test` runs each target
//! over its seeds (`seeds.rs`), the regression cases.
//!
//! A target name here is its corpus directory and its libFuzzer binary:
//! [`TARGETS`] lists them, and a test checks the three agree.

#[cfg(test)]
mod seeds;

use std::path::PathBuf;

use crate::{
    commands::replay::{self, ReplayOptions},
    output::{dump, hlog, perfetto},
};

/// A target: raw bytes in, a panic on a defect.
pub type Target = fn(&[u8]);

/// Every target, by name.
pub const TARGETS: [(&str, Target); 11] = [
    ("btf", btf),
    ("tracefs", tracefs),
    ("procfs", procfs),
    ("compare", compare),
    ("replay", replay),
    ("accept", accept),
    ("http", http),
    ("workload", workload),
    ("web_config", web_config),
    ("web_reload", web_reload),
    ("otlp_answer", otlp_answer),
];

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// A BTF file as `--btf` names it: every lookup loading does must fail
/// cleanly, and the task_struct layout loading accepts (after btf_check, as
/// kernel/loader/plan.rs does) must lie inside the struct.
pub fn btf(data: &[u8]) {
    use std::{io::Write as _, os::fd::AsRawFd};

    use crate::kernel::{btf, btf_check};
    // btf-rs parses (and maps) a file, so each case goes through one: a
    // memfd, in memory (a file on disk made each case 15x slower).
    static FILE: std::sync::LazyLock<std::fs::File> = std::sync::LazyLock::new(|| {
        // SAFETY: a valid NUL-terminated name; the descriptor returned is
        // owned by the File from here on.
        let fd = unsafe { libc::memfd_create(c"schedlat-fuzz-btf".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        // SAFETY: fd was just created and nothing else owns it.
        unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }
    });
    let mut file = &*FILE;
    file.set_len(0).expect("truncate case");
    std::io::Seek::rewind(&mut file).expect("rewind case");
    file.write_all(data).expect("write case");
    let path = &PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    let Ok(parsed) = btf::open(path) else {
        return;
    };
    let layouts = btf::Layouts::new(&parsed, path);
    if let (Ok(task), Ok(size)) = (btf::task_offsets(&layouts), btf::task_struct_size(&layouts))
        && btf_check::check_plausible(&task, size, path).is_ok()
    {
        assert!(
            task.pid + 4 <= size && task.tgid + 4 <= size && task.comm + 16 <= size,
            "{task:?} in {size}"
        );
    }
    let _ = btf::rq_offsets(&layouts);
    let _ = btf::pidns_offsets(&layouts);
    let _ = btf::tracepoint_ids(&layouts, &["sched_switch", "sched_wakeup"]);
}

/// A tracepoint's format file: offsets accepted lie in the record, the
/// runnable-state mask is a run of low bits.
pub fn tracefs(data: &[u8]) {
    use crate::kernel::tracefs::{Format, runnable_state_mask};
    let format = Format::parse("fuzz".into(), &text(data));
    let valid = format.validate().is_ok();
    for name in ["prev_pid", "prev_state", "next_pid", "pid"] {
        if let (true, Ok(offset)) = (valid, format.offset_sized(name, &[4, 8])) {
            assert!(offset < 4096, "{name} at {offset} accepted");
        }
    }
    if let Some(mask) = runnable_state_mask(&format) {
        assert!((mask + 1).is_power_of_two(), "mask {mask:#x}");
    }
}

/// The /proc and cgroup files schedlat reads: PSI, schedstat,
/// /proc/PID/stat and cgroup, cpu.stat, quotas, /proc/stat, CPU lists.
pub fn procfs(data: &[u8]) {
    use crate::sys::procfs::*;
    let t = text(data);
    let _ = parse_pressure(&t);
    let _ = parse_schedstat(&t);
    let _ = parse_stat_starttime(&t);
    let _ = parse_proc_cgroup(&t);
    let _ = parse_flat_keyed(&t);
    let _ = parse_cpu_max(&t);
    let _ = parse_proc_stat(&t);
    if let Ok(cpus) = parse_cpu_list(&t) {
        assert!(cpus.iter().all(|&c| c < 65_536), "{cpus:?}");
    }
    let (quota, period) = t.split_once('\n').unwrap_or((&t, "100000"));
    if let Ok(Some(q)) = parse_cfs_quota(quota, period) {
        assert!(q.cpus().is_finite(), "{q:?}");
    }
    if let Ok(Some(q)) = parse_cpu_max(&t) {
        assert!(q.cpus().is_finite(), "{q:?}");
    }
}

/// A recording (or dump) as `compare` reads it, and everything compare
/// does with one it accepts.
pub fn compare(data: &[u8]) {
    crate::output::compare::fuzz_one(data);
}

/// A dump as `replay` reads it, and replay's whole report (text and JSON,
/// with and without bounds). Then the recorder's other files written from
/// that window and read back by readers schedlat did not write: the .hlog
/// by HdrHistogram's log reader (one histogram per series per interval,
/// each with that series' count), the Perfetto trace by prost (one slice
/// begun and ended per slow wait, a wakeup instant per recorded waker).
pub fn replay(data: &[u8]) {
    let Ok(w) = dump::parse(&text(data), "fuzz") else {
        return;
    };
    for (from, to, json) in [(None, None, false), (Some("1s"), Some("00:00:00"), true)] {
        let opts = ReplayOptions {
            from: from.map(String::from),
            to: to.map(String::from),
            series: "total".into(),
            slow: 10,
            json,
            folded: None,
            flamegraph: None,
        };
        let _ = replay::report(&w, &opts);
    }
    let mut log = Vec::new();
    if hlog::write_window(&mut log, &w).is_ok() {
        hlog_reads_back(&log, &w);
    }
    let mut trace = Vec::new();
    perfetto::write(&mut trace, &w).expect("writing to memory");
    let trace = <perfetto::Trace as prost::Message>::decode(&trace[..]).expect("decodes");
    let kind = |k| {
        trace
            .packet
            .iter()
            .filter(|p| p.track_event.as_ref().and_then(|e| e.r#type) == Some(k))
            .count()
    };
    assert_eq!(kind(perfetto::TYPE_SLICE_BEGIN), w.slow.len());
    assert_eq!(kind(perfetto::TYPE_SLICE_END), w.slow.len());
    // A wakeup instant for each wait recorded with its waker.
    let woken = (w.slow.iter())
        .filter(|s| s.stacks.as_ref().is_some_and(|s| s.waker.is_some()))
        .count();
    assert_eq!(kind(perfetto::TYPE_INSTANT), woken);
}

fn hlog_reads_back(log: &[u8], w: &crate::analysis::recording::Window) {
    use hdrhistogram::serialization::{
        Deserializer,
        interval_log::{IntervalLogIterator, LogEntry},
    };
    let expected: Vec<u64> = w
        .seconds
        .iter()
        .flat_map(|s| s.series.iter().map(|(_, c)| c.waits().count()))
        .collect();
    let mut counts = Vec::new();
    for entry in IntervalLogIterator::new(log) {
        if let LogEntry::Interval(h) = entry.expect("the .hlog parses") {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(h.encoded_histogram())
                .expect("its histograms are base64");
            let histogram: hdrhistogram::Histogram<u64> = Deserializer::new()
                .deserialize(&mut &bytes[..])
                .expect("its histograms decode");
            counts.push(histogram.len());
        }
    }
    assert_eq!(counts, expected, "interval counts in the .hlog");
}

/// The HTTP Accept header of a scrape: whatever it says, the answer's
/// Content-Type is a valid header value.
pub fn accept(data: &[u8]) {
    use crate::export::negotiate::negotiate;
    let accept = text(data);
    let content_type = negotiate(Some(&accept)).content_type();
    assert!(
        hyper::header::HeaderValue::from_str(&content_type).is_ok(),
        "{accept:?} -> {content_type:?}"
    );
}

/// Bytes a client sends `serve` on one connection, through hyper's parser
/// and every route and guard, on a loopback listener and on one beyond
/// it: whatever they are, the answer is HTTP, and a request is answered
/// only as the guard allows: never a page of another site (an Origin
/// other than the Host), never a name that is not an address on loopback
/// (DNS rebinding); 200 only for GET or HEAD of `/` and `/metrics`.
pub fn http(data: &[u8]) {
    use std::net::IpAddr;

    use crate::commands::serve::raw;
    for listen in ["127.0.0.1:9415", "[::]:9415"] {
        let listen: std::net::SocketAddr = listen.parse().expect("an address");
        let (answered, received) = raw::exchange(listen, data);
        assert!(
            answered.is_empty() || received.starts_with(b"HTTP/1."),
            "{answered:?} answered with {:?}",
            String::from_utf8_lossy(&received)
        );
        for a in answered.iter().filter(|a| a.status != 403) {
            if let Some(origin) = &a.origin {
                let authority = origin.split_once("://").map(|(_, rest)| rest);
                assert!(
                    authority.is_some_and(|o| a
                        .host
                        .as_ref()
                        .is_some_and(|h| o.eq_ignore_ascii_case(h))),
                    "another site's request answered: {a:?}"
                );
            }
            // hyper's own reading of the Host: an authority whose host is
            // a domain name was let through on loopback.
            let named = a
                .host
                .as_ref()
                .and_then(|h| h.parse::<hyper::http::uri::Authority>().ok());
            if listen.ip().is_loopback()
                && let Some(authority) = named
            {
                let host = authority
                    .host()
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                assert!(
                    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok(),
                    "Host {host:?} answered on loopback: {a:?}"
                );
            }
            let read = a.method == "GET" || a.method == "HEAD";
            match a.status {
                200 => assert!(read && (a.path == "/" || a.path == "/metrics"), "{a:?}"),
                405 => assert!(!read || a.path == "/snapshot", "{a:?}"),
                404 => {}
                _ => panic!("status {} for {a:?}", a.status),
            }
        }
    }
}

/// A cgroup path, and the container runtimes' files: whatever the input,
/// a label is only ever what its owner allows (a 64-digit ID, a pod UID,
/// a unit name), and a name is clean or absent.
pub fn workload(data: &[u8]) {
    use crate::sys::workload::{names, path};
    const ID: &str = "9a8b7c6d5e4f30211203f4e5d6c7b8a99a8b7c6d5e4f30211203f4e5d6c7b8a9";
    let t = text(data);
    let labels = path::parse(&t);
    if let Some(id) = &labels.container_id {
        assert!(path::is_container_id(id), "{id:?}");
    }
    if let Some(uid) = &labels.pod_uid {
        assert!(path::is_pod_uid(uid), "{uid:?}");
    }
    for unit in labels.unit.iter().chain(&labels.slice) {
        assert!(
            unit.bytes().all(|b| b.is_ascii_graphic()) && unit.len() <= 255,
            "{unit:?}"
        );
    }
    let found = [
        names::parse_containerd_bundle(&t),
        names::parse_storage_config(&t),
        names::parse_storage_containers(t.as_bytes(), ID),
        names::parse_docker_config(&t),
    ];
    for n in found.into_iter().flatten() {
        for name in [&n.container, &n.pod, &n.namespace].into_iter().flatten() {
            assert_eq!(names::clean_name(name).as_ref(), Some(name));
        }
    }
}

/// `serve --web.config.file`'s file, and each line as an Authorization
/// header: a configuration or an error, never a panic, and what is taken
/// holds together (every password a bcrypt hash, TLS versions in order,
/// client certificates verified against a CA file).
pub fn web_config(data: &[u8]) {
    use crate::commands::serve::web::{self, config::ClientAuth};
    let t = text(data);
    if let Ok(config) = web::parse_for_fuzzing(&t) {
        for (user, hash) in &config.users {
            assert!(hash.parse::<bcrypt::HashParts>().is_ok(), "{user}");
        }
        if let Some(tls) = &config.tls {
            assert!(tls.min_version <= tls.max_version, "{tls:?}");
            if let ClientAuth::Require { ca_file } | ClientAuth::VerifyIfGiven { ca_file } =
                &tls.client_auth
            {
                assert!(ca_file.is_absolute(), "{ca_file:?}");
            }
        }
        assert!(!config.describe().is_empty());
        for (user, hash) in &config.users {
            let cost = hash.parse::<bcrypt::HashParts>().map(|p| p.get_cost());
            assert!(
                cost.as_ref().is_ok_and(|c| (4..=16).contains(c)),
                "{user}: {cost:?}"
            );
        }
    }
    for line in t.lines() {
        if let Some((user, _)) = web::credentials_for_fuzzing(line) {
            assert!(!user.contains(':'), "{line:?}");
        }
    }
}

/// A reload of `serve --web.config.file`: the bytes up to the first NUL
/// are the configuration in force, the rest the file read again, on a
/// loopback listener and on one beyond it. Whatever the file holds, what
/// is taken never drops the TLS, the basic auth or the required client
/// certificates of the running configuration, and beyond loopback it
/// authenticates.
pub fn web_reload(data: &[u8]) {
    use crate::commands::serve::web::{self, config::ClientAuth};
    let t = text(data);
    let (running, next) = t.split_once('\0').unwrap_or((&t, ""));
    let requires = |c: &web::config::WebConfig| {
        matches!(
            c.tls.as_ref().map(|t| &t.client_auth),
            Some(ClientAuth::Require { .. })
        )
    };
    for must_authenticate in [false, true] {
        let Some((running, taken)) = web::reload_for_fuzzing(running, next, must_authenticate)
        else {
            continue;
        };
        if let Ok(taken) = taken {
            assert!(running.tls.is_none() || taken.tls.is_some(), "TLS dropped");
            assert!(
                running.users.is_empty() || !taken.users.is_empty(),
                "basic auth dropped"
            );
            assert!(
                !requires(&running) || requires(&taken),
                "client certificates dropped"
            );
            assert!(
                !must_authenticate || taken.authenticates(),
                "lets anyone in"
            );
        }
    }
}

/// An OTLP collector's answer to a push (its partial success): whatever
/// it holds, what serve logs of it is printable, bounded, and said once
/// per message.
pub fn otlp_answer(data: &[u8]) {
    use crate::{commands::serve::otlp, export::otlp::answer};
    let Some(partial) = answer::partial_success(data) else {
        return;
    };
    assert!(
        partial.message.chars().count() <= answer::MESSAGE_SHOWN + 1,
        "{} characters",
        partial.message.chars().count()
    );
    assert_eq!(
        crate::output::escape::printable(&partial.message),
        partial.message
    );
    let said = std::cell::RefCell::new(None);
    let line = otlp::partial_line_for_fuzzing(&said, partial.clone()).expect("the first is said");
    assert!(!line.contains('\n') && !line.contains('\x1b'), "{line:?}");
    assert!(
        otlp::partial_line_for_fuzzing(&said, partial).is_none(),
        "said twice"
    );
}

#[cfg(test)]
mod tests {
    use super::{TARGETS, seeds::run_seeds};

    fn run(name: &str) {
        let (_, target) = TARGETS.iter().find(|(n, _)| *n == name).expect("a target");
        run_seeds(name, target);
    }

    #[test]
    fn seeds_of_btf() {
        run("btf");
    }

    #[test]
    fn seeds_of_tracefs() {
        run("tracefs");
    }

    #[test]
    fn seeds_of_procfs() {
        run("procfs");
    }

    #[test]
    fn seeds_of_compare() {
        run("compare");
    }

    #[test]
    fn seeds_of_replay() {
        run("replay");
    }

    #[test]
    fn seeds_of_accept() {
        run("accept");
    }

    #[test]
    fn seeds_of_http() {
        run("http");
    }

    #[test]
    fn seeds_of_workload() {
        run("workload");
    }

    #[test]
    fn seeds_of_web_config() {
        run("web_config");
    }

    #[test]
    fn seeds_of_web_reload() {
        run("web_reload");
    }

    #[test]
    fn seeds_of_otlp_answer() {
        run("otlp_answer");
    }

    /// Each target has its corpus and its libFuzzer binary, and nothing
    /// else does: a target added in one place only is caught here.
    #[test]
    fn targets_corpora_and_libfuzzer_binaries_agree() {
        let fuzz = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
        let mut names: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        let mut corpora: Vec<String> = std::fs::read_dir(fuzz.join("corpus"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        corpora.sort();
        assert_eq!(corpora, names, "schedlat/fuzz/corpus/");
        let manifest = std::fs::read_to_string(fuzz.join("Cargo.toml")).unwrap();
        let mut bins: Vec<&str> = manifest
            .lines()
            .filter_map(|l| l.strip_prefix("name = \""))
            .filter_map(|l| l.strip_suffix('"'))
            .filter(|n| *n != "schedlat-fuzz")
            .collect();
        bins.sort_unstable();
        assert_eq!(bins, names, "[[bin]] targets of schedlat/fuzz/Cargo.toml");
        for name in &names {
            let source = fuzz.join(format!("fuzz_targets/{name}.rs"));
            let text = std::fs::read_to_string(&source).unwrap();
            assert!(
                text.contains(&format!("schedlat::fuzz::{name}(")),
                "{} runs another target",
                source.display()
            );
        }
    }
}
