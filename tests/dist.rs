//! Root: the package `cargo xtask dist` builds, installed into a temporary
//! root and run from there; and the systemd unit's service run as it would
//! be, as an unprivileged user with only the unit's capabilities.
//!
//! The package is built once by `cargo xtask test` before the tests run,
//! which passes its paths in SCHEDLAT_DIST_DEB and SCHEDLAT_DIST_TARBALL
//! (a cargo nested in the test run would wait on the outer one's lock). Run
//! alone: `cargo xtask dist`, then set both to the files it printed.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use common::{http, require_root, serve::Server};

use crate::common;

/// A man page per command: the histogram mode and each subcommand.
const COMMANDS: [&str; 7] = [
    "record", "diagnose", "top", "compare", "serve", "victims", "slow",
];

/// The oldest glibc docs/deploy.md promises.
const OLDEST_GLIBC: (u32, u32) = (2, 34);

/// An unused uid/gid in systemd's DynamicUser range (61184-65519): the
/// service's user has no name, no home and owns nothing, as there.
const SERVICE_UID: &str = "61917";

/// The files `cargo xtask dist` built, from the environment `cargo xtask
/// test` sets. Unset: the test says so and is skipped (None), except under
/// CI=true, where it fails.
struct Package {
    deb: PathBuf,
    tarball: PathBuf,
}

fn package() -> Option<Package> {
    let (Some(deb), Some(tarball)) = (
        std::env::var_os("SCHEDLAT_DIST_DEB"),
        std::env::var_os("SCHEDLAT_DIST_TARBALL"),
    ) else {
        let why = "SCHEDLAT_DIST_DEB and SCHEDLAT_DIST_TARBALL are not set: run these tests with `cargo xtask test` (which builds the package first), or run `cargo xtask dist` and set them to its files";
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        assert!(!ci, "CI=true: {why}");
        eprintln!("skipped: {why}");
        return None;
    };
    let package = Package {
        deb: deb.into(),
        tarball: tarball.into(),
    };
    for path in [&package.deb, &package.tarball] {
        assert!(path.is_file(), "{} does not exist", path.display());
    }
    Some(package)
}

/// The .deb unpacked with `dpkg -x`, once for all tests of this binary.
fn installed() -> Option<&'static Path> {
    static ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let deb = package()?.deb;
        // Under target/tmp, replaced on each run.
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dist-root");
        let _ = fs::remove_dir_all(&root);
        let out = Command::new("dpkg")
            .arg("-x")
            .arg(&deb)
            .arg(&root)
            .output()
            .expect("dpkg runs");
        assert!(out.status.success(), "{}", stderr(&out));
        // Readable and executable by the service's unprivileged user.
        fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        Some(root)
    })
    .as_deref()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}", stderr(&out));
    out
}

/// Regular files of a `dpkg-deb -c` or `tar -tvzf` listing, as `usr/...`.
fn listed_files(listing: &str) -> BTreeSet<String> {
    listing
        .lines()
        .filter(|l| l.starts_with('-'))
        .filter_map(|l| l.split_whitespace().last())
        .map(|p| p.split_once("/usr/").map(|(_, rest)| format!("usr/{rest}")))
        .map(|p| p.unwrap_or_default())
        .collect()
}

#[test]
fn deb_holds_binary_man_pages_completions_docs_and_unit() {
    let Some(Package { deb, tarball }) = package() else {
        return;
    };
    let files = listed_files(&stdout(&run(Command::new("dpkg-deb").arg("-c").arg(&deb))));
    let mut expected: Vec<String> = [
        "usr/bin/schedlat",
        "usr/lib/systemd/system/schedlat.service",
        "usr/share/man/man1/schedlat.1.gz",
        "usr/share/bash-completion/completions/schedlat",
        "usr/share/zsh/vendor-completions/_schedlat",
        "usr/share/fish/vendor_completions.d/schedlat.fish",
        "usr/share/doc/schedlat/README.md",
        "usr/share/doc/schedlat/copyright",
        "usr/share/doc/schedlat/docs/json.md",
    ]
    .map(String::from)
    .to_vec();
    expected.extend(COMMANDS.map(|c| format!("usr/share/man/man1/schedlat-{c}.1.gz")));
    for file in &expected {
        assert!(
            files.contains(file),
            "{file} missing from the .deb: {files:#?}"
        );
    }
    // The packaging command stays out of the user's documentation.
    assert!(
        !files
            .iter()
            .any(|f| f.contains("generate") || f.contains("help.1")),
        "{files:#?}"
    );

    let in_tarball = listed_files(&stdout(&run(Command::new("tar")
        .arg("-tvzf")
        .arg(&tarball))));
    let without_debian: BTreeSet<String> = files.into_iter().collect();
    assert_eq!(
        in_tarball, without_debian,
        "the tarball holds the .deb's files"
    );

    let depends = stdout(&run(Command::new("dpkg-deb")
        .arg("-f")
        .arg(&deb)
        .arg("Depends")));
    assert!(depends.starts_with("libc6 (>= 2."), "Depends: {depends}");
}

#[test]
fn installed_binary_needs_only_glibc_2_34() {
    let Some(root) = installed() else { return };
    let binary = root.join("usr/bin/schedlat");
    let needed = stdout(&run(Command::new("objdump").arg("-p").arg(&binary)));
    for lib in needed
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NEEDED"))
    {
        let lib = lib.trim();
        assert!(
            lib.starts_with("libc.so")
                || lib.starts_with("libm.so")
                || lib.starts_with("ld-linux")
                || lib.starts_with("libgcc_s.so"),
            "{lib}: a runtime dependency beyond glibc"
        );
    }
    let symbols = stdout(&run(Command::new("objdump").arg("-T").arg(&binary)));
    let newest = symbols
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter_map(|v| {
            let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next()??))
        })
        .max()
        .expect("GLIBC_ symbol versions");
    assert!(
        newest <= OLDEST_GLIBC,
        "the binary needs glibc {}.{}, newer than docs/deploy.md's {}.{}",
        newest.0,
        newest.1,
        OLDEST_GLIBC.0,
        OLDEST_GLIBC.1
    );
}

#[test]
fn installed_binary_runs_help_and_one_histogram() {
    let Some(root) = installed() else { return };
    if !require_root() {
        return;
    }
    let binary = root.join("usr/bin/schedlat");
    let help = stdout(&run(Command::new(&binary).arg("--help")));
    assert!(help.contains("Usage: schedlat"), "{help}");
    assert!(!help.contains("__generate"), "{help}");

    let out = run(Command::new(&binary).args(["-v", "1", "1"]));
    let text = stdout(&out);
    assert!(
        text.contains("usecs") && text.contains("distribution"),
        "{text}"
    );
    let total: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("total "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no total line: {text}"));
    assert!(total > 0, "one second of a live system has waits: {text}");
}

#[test]
fn man_pages_render() {
    let Some(root) = installed() else { return };
    let man1 = root.join("usr/share/man/man1");
    let pages: Vec<String> = std::iter::once("schedlat".to_string())
        .chain(COMMANDS.map(|c| format!("schedlat-{c}")))
        .collect();
    for page in &pages {
        let path = man1.join(format!("{page}.1.gz"));
        let out = run(Command::new("man")
            .arg("-l")
            .arg(&path)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "80")
            // groff's own warnings (bad requests, unknown escapes).
            .env("MAN_KEEP_STDERR", "1"));
        let text = stdout(&out);
        assert!(
            text.contains("NAME") && text.contains(page.as_str()),
            "{page}: {text}"
        );
        assert!(
            text.contains("SYNOPSIS") && text.contains("OPTIONS"),
            "{page}: {text}"
        );
        let warnings = stderr(&out);
        assert!(warnings.trim().is_empty(), "{page}: {warnings}");
    }
    let serve = stdout(&run(Command::new("man")
        .arg("-l")
        .arg(man1.join("schedlat-serve.1.gz"))
        .env("MANPAGER", "cat")));
    assert!(serve.contains("--listen"), "{serve}");
}

#[test]
fn bash_completion_completes_commands() {
    let Some(root) = installed() else { return };
    let file = root.join("usr/share/bash-completion/completions/schedlat");
    let script = format!(
        "source {}; COMP_WORDS=(schedlat se); COMP_CWORD=1; COMP_LINE='schedlat se'; COMP_POINT=${{#COMP_LINE}}; _schedlat schedlat se schedlat; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        file.display()
    );
    let out = stdout(&run(Command::new("bash").args(["-c", &script])));
    assert!(out.lines().any(|l| l == "serve"), "{out}");
}

/// `Key=value` lines of the unit's [Service] section.
fn service_settings(unit: &str) -> Vec<(String, String)> {
    let mut in_service = false;
    let mut settings = Vec::new();
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            in_service = line == "[Service]";
        } else if in_service
            && !line.starts_with('#')
            && let Some((k, v)) = line.split_once('=')
        {
            settings.push((k.to_string(), v.to_string()));
        }
    }
    settings
}

fn setting<'a>(settings: &'a [(String, String)], key: &str) -> &'a str {
    settings
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("the unit has no {key}="))
}

/// `CAP_BPF CAP_PERFMON` -> `+bpf,+perfmon` for setpriv.
fn setpriv_caps(caps: &str) -> String {
    caps.split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_ascii_lowercase()))
        .collect::<Vec<_>>()
        .join(",")
}

/// The arguments of docs/deploy.md's `sudo setpriv ...` block (running the
/// service without systemd), continuation lines joined, `sudo setpriv` cut.
fn readme_setpriv_line(readme: &str) -> Vec<String> {
    let mut lines = readme.lines();
    let mut words = Vec::new();
    while let Some(line) = lines.next() {
        if line.starts_with("sudo setpriv ") {
            let mut line = line;
            loop {
                let (text, more) = match line.trim_end().strip_suffix('\\') {
                    Some(text) => (text, true),
                    None => (line, false),
                };
                words.extend(text.split_whitespace().map(String::from));
                match (more, lines.next()) {
                    (true, Some(next)) => line = next,
                    _ => break,
                }
            }
            break;
        }
    }
    assert!(
        words.len() > 2,
        "docs/deploy.md has no `sudo setpriv ...` line for running the service without systemd"
    );
    words.drain(..2);
    words
}

fn unit_path(root: &Path) -> PathBuf {
    root.join("usr/lib/systemd/system/schedlat.service")
}

#[test]
fn unit_passes_systemd_analyze_verify() {
    // verify checks that ExecStart's binary exists and that the
    // Documentation= man page opens: point both at the unpacked package
    // (the unit's only change).
    let Some(root) = installed() else { return };
    let unit = fs::read_to_string(unit_path(root)).unwrap();
    assert!(unit.contains("\nExecStart=/usr/bin/schedlat "), "{unit}");
    let dir = root.with_extension("verify");
    fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("schedlat.service");
    let rebased = format!("\nExecStart={}/usr/bin/schedlat ", root.display());
    fs::write(
        &copy,
        unit.replace("\nExecStart=/usr/bin/schedlat ", &rebased),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .env("MANPATH", root.join("usr/share/man"))
        .output()
        .expect("systemd-analyze runs");
    let warnings = stderr(&out);
    assert!(out.status.success(), "{warnings}");
    assert!(
        !warnings.contains("schedlat"),
        "warnings about the unit: {warnings}"
    );
}

#[test]
fn service_runs_unprivileged_with_only_the_units_capabilities() {
    let Some(root) = installed() else { return };
    if !require_root() {
        return;
    }
    let unit = fs::read_to_string(unit_path(root)).unwrap();
    let settings = service_settings(&unit);
    assert_eq!(setting(&settings, "DynamicUser"), "yes");
    assert_eq!(setting(&settings, "NoNewPrivileges"), "yes");
    let ambient = setting(&settings, "AmbientCapabilities");
    assert_eq!(ambient, setting(&settings, "CapabilityBoundingSet"));
    let caps = setpriv_caps(ambient);

    // The exact ExecStart as the unit's user, with its capabilities: the
    // line docs/deploy.md gives hosts without systemd, which must say exactly that.
    let exec: Vec<&str> = setting(&settings, "ExecStart").split_whitespace().collect();
    assert_eq!(exec[0], "/usr/bin/schedlat");
    let expected: Vec<String> = [
        format!("--reuid={SERVICE_UID}"),
        format!("--regid={SERVICE_UID}"),
        "--clear-groups".into(),
        format!("--inh-caps=-all,{caps}"),
        format!("--ambient-caps=-all,{caps}"),
        format!("--bounding-set=-all,{caps}"),
        "--no-new-privs".into(),
    ]
    .into_iter()
    .chain(exec.iter().map(|w| w.to_string()))
    .collect();
    // The line sits in docs/deploy.md ("Install from a package"), which
    // the package installs beside the README.
    let deploy = fs::read_to_string(root.join("usr/share/doc/schedlat/docs/deploy.md")).unwrap();
    let line = readme_setpriv_line(&deploy);
    assert_eq!(
        line, expected,
        "docs/deploy.md's setpriv line is not the unit's ExecStart, user and capabilities"
    );
    // Run as written, the binary taken from the unpacked package.
    let mut cmd = Command::new("setpriv");
    for word in &line {
        match word.as_str() {
            "/usr/bin/schedlat" => cmd.arg(root.join("usr/bin/schedlat")),
            _ => cmd.arg(word),
        };
    }
    let server = Server::start_command(cmd);

    // It is who the unit says, with nothing more.
    let status = fs::read_to_string(format!("/proc/{}/status", server.pid())).unwrap();
    let field = |name: &str| common::status_field(server.pid(), name);
    assert!(field("Uid:").starts_with(SERVICE_UID), "{status}");
    // CAP_PERFMON is bit 38, CAP_BPF bit 39.
    assert_eq!(field("CapEff:"), "000000c000000000", "{status}");
    assert_eq!(field("NoNewPrivs:"), "1", "{status}");

    let metrics = http::get(server.addr, "/metrics", None).expect("scrape");
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    let count: f64 = metrics
        .body
        .lines()
        .find_map(|l| l.strip_prefix("schedlat_runqueue_latency_seconds_count "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no latency count in:\n{}", metrics.body));
    assert!(count > 0.0, "{}", metrics.body);

    // MemoryMax holds twice its worst case: its peak RSS here plus the
    // start array (8 bytes per pid_max entry, outside RSS) at the largest
    // pid_max, 4194304.
    let hwm_kib: u64 = field("VmHWM:")
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    let worst_kib = hwm_kib + 8 * 4_194_304 / 1024;
    let max = setting(&settings, "MemoryMax");
    let max_mib: u64 = max.trim_end_matches('M').parse().expect("MemoryMax=NM");
    assert!(
        2 * worst_kib <= max_mib * 1024,
        "peak RSS {hwm_kib} KiB + 32 MiB of start array, twice, exceeds MemoryMax={max}"
    );
    eprintln!("serve as the unit's user: peak RSS {hwm_kib} KiB; MemoryMax={max}");
    let status = server.stop_with(libc::SIGTERM);
    assert!(status.success(), "{status}");
}

#[test]
fn without_one_capability_names_it() {
    let Some(root) = installed() else { return };
    if !require_root() {
        return;
    }
    let binary = root.join("usr/bin/schedlat");
    for (caps, lacking) in [
        ("+bpf", "lacks CAP_PERFMON)"),
        ("+perfmon", "lacks CAP_BPF)"),
        ("-all", "lacks CAP_BPF and CAP_PERFMON)"),
    ] {
        let mut setpriv = Command::new("setpriv");
        setpriv.args([
            &format!("--reuid={SERVICE_UID}"),
            &format!("--regid={SERVICE_UID}"),
            "--clear-groups",
        ]);
        if caps == "-all" {
            setpriv.arg("--inh-caps=-all");
        } else {
            setpriv.args([
                format!("--inh-caps=-all,{caps}"),
                format!("--ambient-caps=-all,{caps}"),
            ]);
        }
        let out = setpriv
            .arg(&binary)
            .args(["1", "1"])
            .output()
            .expect("setpriv runs");
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{caps}: {err}");
        assert!(err.contains(lacking), "{caps}: {err}");
        assert!(stdout(&out).is_empty(), "{caps}: {}", stdout(&out));
    }
}
