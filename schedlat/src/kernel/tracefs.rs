//! Classic tracepoint support: where tracefs is, and the field offsets of the
//! sched records, parsed from their `format` files at load time so that no
//! kernel layout is compiled into the eBPF object.

use std::{
    fs,
    path::{Path, PathBuf},
};

use thiserror::Error;

/// Where tracefs is normally mounted, newest location first.
pub(crate) const TRACEFS_CANDIDATES: [&str; 2] =
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

#[derive(Debug, Error)]
pub(crate) enum TracefsError {
    #[error(
        "tracefs is not mounted (looked in {}): mount it with `mount -t tracefs nodev /sys/kernel/tracing`, or pass --tracefs PATH",
        TRACEFS_CANDIDATES.join(", ")
    )]
    NotMounted,
    /// Mounted, but mode 0700 root as tracefs is by default.
    #[error(
        "tracefs at {} is not readable by this user: classic tracepoints need root or CAP_DAC_READ_SEARCH (the default tp_btf mode does not)",
        .0.display()
    )]
    Denied(PathBuf),
    #[error(
        "cannot read tracepoint format {path}: {error}{}",
        if matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
            " (EMFILE): schedlat has no file descriptor left; raise its limit (LimitNOFILE=, ulimit -n)"
        } else {
            " (is tracefs mounted there, and are you root or do you have CAP_DAC_READ_SEARCH?)"
        }
    )]
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("tracepoint format {path} has no field `{field}`")]
    MissingField { path: PathBuf, field: String },
    #[error(
        "tracepoint format {path} is not a layout this kernel could produce ({why}): is --tracefs a real tracefs?"
    )]
    Layout { path: PathBuf, why: String },
}

/// Finds the tracefs mount: the explicit path if given, else the first
/// candidate that has an `events` directory.
pub(crate) fn locate(explicit: Option<&Path>) -> Result<PathBuf, TracefsError> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    locate_among(&TRACEFS_CANDIDATES.map(Path::new))
}

/// The first of `candidates` with an `events` directory. One that exists
/// but cannot be searched (EACCES: mounted with mode 0700 and no
/// CAP_DAC_READ_SEARCH) is told apart from one that is not mounted.
fn locate_among(candidates: &[&Path]) -> Result<PathBuf, TracefsError> {
    let mut denied = None;
    for dir in candidates {
        match fs::metadata(dir.join("events")) {
            Ok(m) if m.is_dir() => return Ok(dir.to_path_buf()),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                denied.get_or_insert_with(|| dir.to_path_buf());
            }
            _ => {}
        }
    }
    Err(denied.map_or(TracefsError::NotMounted, TracefsError::Denied))
}

/// Why the tracepoint `category/event` cannot be attached, found by opening
/// its `id` file as aya does: the errno's own reason (EMFILE: no
/// descriptor left; EACCES: tracefs not readable; ENOENT: the kernel has
/// no such tracepoint), where aya's error says "tracefs not found"
/// whatever kept it from opening the file. None when the file opens: the
/// cause is elsewhere.
pub(crate) fn why_unusable(explicit: Option<&Path>, category: &str, event: &str) -> Option<String> {
    let dir = match locate(explicit) {
        Ok(dir) => dir,
        Err(e) => return Some(e.to_string()),
    };
    let id = dir.join("events").join(category).join(event).join("id");
    let error = crate::sys::files::read_regular(&id).err()?;
    Some(match error.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE) => format!(
            "{}: {error} (EMFILE): schedlat has no file descriptor left; raise its limit (LimitNOFILE=, ulimit -n)",
            id.display()
        ),
        Some(libc::EACCES | libc::EPERM) => TracefsError::Denied(dir).to_string(),
        Some(libc::ENOENT) => format!(
            "{}: {error}: this kernel has no tracepoint {category}/{event}{}",
            id.display(),
            if category == "syscalls" {
                " (it needs CONFIG_FTRACE_SYSCALLS)"
            } else {
                ""
            }
        ),
        _ => format!("{}: {error}", id.display()),
    })
}

/// One `field:` line of a format file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub name: String,
    pub offset: u64,
    pub size: u64,
}

/// A parsed `events/<category>/<event>/format` file.
#[derive(Debug, Clone)]
pub(crate) struct Format {
    pub path: PathBuf,
    pub fields: Vec<Field>,
    pub print_fmt: String,
}

impl Format {
    pub(crate) fn read(
        tracefs: &Path,
        category: &str,
        event: &str,
    ) -> Result<Format, TracefsError> {
        let path = tracefs
            .join("events")
            .join(category)
            .join(event)
            .join("format");
        let text = crate::sys::files::read_regular(&path).map_err(|error| {
            if error.kind() == std::io::ErrorKind::PermissionDenied {
                TracefsError::Denied(tracefs.to_path_buf())
            } else {
                TracefsError::Unreadable {
                    path: path.clone(),
                    error,
                }
            }
        })?;
        Ok(Format::parse(path, &text))
    }

    pub(crate) fn parse(path: PathBuf, text: &str) -> Format {
        let fields = text.lines().filter_map(parse_field).collect();
        let print_fmt = text
            .lines()
            .find_map(|l| l.strip_prefix("print fmt: "))
            .unwrap_or_default()
            .to_string();
        Format {
            path,
            fields,
            print_fmt,
        }
    }

    pub(crate) fn field(&self, name: &str) -> Result<&Field, TracefsError> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| TracefsError::MissingField {
                path: self.path.clone(),
                field: name.to_string(),
            })
    }

    #[cfg(test)]
    pub(crate) fn offset(&self, name: &str) -> Result<u64, TracefsError> {
        self.field(name).map(|f| f.offset)
    }

    /// The offset of a field the programs read, checked to have one of the
    /// `sizes` the kernel gives it.
    pub(crate) fn offset_sized(&self, name: &str, sizes: &[u64]) -> Result<u64, TracefsError> {
        let field = self.field(name)?;
        if !sizes.contains(&field.size) {
            return Err(self.layout(format!(
                "field `{name}` is {} bytes, not {}",
                field.size,
                sizes
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(" or ")
            )));
        }
        // A scalar the programs read sits at a multiple of its size.
        if field.offset % field.size != 0 {
            return Err(self.layout(format!(
                "field `{name}` at {} is not aligned to its size {}",
                field.offset, field.size
            )));
        }
        Ok(field.offset)
    }

    /// Checks that the fields form a record the kernel could write: the
    /// eBPF programs read at these offsets without bounds known to the
    /// verifier, so a wrong layout would not fail, it would read other
    /// fields and measure nothing. The kernel lists the fields in offset
    /// order from 0, without overlap, with no
    /// gap beyond alignment padding, and each name once.
    pub(crate) fn validate(&self) -> Result<(), TracefsError> {
        if self.fields.is_empty() {
            return Err(self.layout("no fields".into()));
        }
        let mut end = 0;
        for (i, f) in self.fields.iter().enumerate() {
            if self.fields[..i].iter().any(|g| g.name == f.name) {
                return Err(self.layout(format!("field `{}` appears twice", f.name)));
            }
            if f.size == 0 || f.size > MAX_RECORD {
                return Err(self.layout(format!("field `{}` has size {}", f.name, f.size)));
            }
            if f.offset < end {
                return Err(self.layout(format!(
                    "field `{}` at {} overlaps the field before it or is out of order",
                    f.name, f.offset
                )));
            }
            if f.offset - end >= 8 || (i == 0 && f.offset != 0) {
                return Err(self.layout(format!(
                    "field `{}` at {} leaves a gap after byte {end}",
                    f.name, f.offset
                )));
            }
            end = f.offset + f.size;
            if end > MAX_RECORD {
                return Err(self.layout(format!("field `{}` ends past the record", f.name)));
            }
        }
        Ok(())
    }

    fn layout(&self, why: String) -> TracefsError {
        TracefsError::Layout {
            path: self.path.clone(),
            why,
        }
    }
}

/// Largest trace record the programs accept: sched records are under 100
/// bytes; the kernel's own limit is a page.
const MAX_RECORD: u64 = 4096;

/// `\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;`
fn parse_field(line: &str) -> Option<Field> {
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    for part in line.trim().split(';').map(str::trim) {
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d);
        } else if let Some(o) = part.strip_prefix("offset:") {
            offset = o.parse().ok();
        } else if let Some(s) = part.strip_prefix("size:") {
            size = s.parse().ok();
        }
    }
    // The name is the declaration's last word, without an array suffix.
    let name = decl?.split_whitespace().last()?;
    let name = name.split('[').next()?.to_string();
    Some(Field {
        name,
        offset: offset?,
        size: size?,
    })
}

/// The classic sched_switch record shows a preempted task with the
/// TASK_REPORT_MAX bit set ("R+"); every real state bit lies below it. The
/// value differs between kernel versions, so it is read from the print format,
/// `REC->prev_state & <expr> ? "+" : ""`, where `<expr>` is a literal or
/// `(((a | b | ...) + 1) << 1)`. Returns the mask of the real state bits.
pub(crate) fn runnable_state_mask(switch_format: &Format) -> Option<u64> {
    let fmt = &switch_format.print_fmt;
    let end = fmt.find("? \"+\"")?;
    let start = fmt[..end].rfind("REC->prev_state &")? + "REC->prev_state &".len();
    let expr = &fmt[start..end];
    let literals: Vec<u64> = expr
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter_map(parse_int)
        .collect();
    let report_max = if expr.contains("<<") {
        // (((OR of the report states) + 1) << 1): drop the "+ 1" and "<< 1".
        // Checked: a damaged format can OR up to u64::MAX, which has no
        // report bit above it; no mask then, as for an unreadable format.
        let states = literals.iter().rev().skip(2).fold(0, |acc, v| acc | v);
        states.checked_add(1)?.checked_mul(2)?
    } else {
        *literals.first()?
    };
    (report_max.is_power_of_two()).then(|| report_max - 1)
}

fn parse_int(token: &str) -> Option<u64> {
    match token.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => token.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Verbatim from Linux 6.18's events/sched/sched_switch/format.
    const SWITCH_6_18: &str = include_str!("../../testdata/sched_switch.format");

    #[test]
    fn parses_switch_fields() {
        let f = Format::parse("sched_switch".into(), SWITCH_6_18);
        assert_eq!(f.offset("prev_pid").unwrap(), 24);
        assert_eq!(f.offset("next_pid").unwrap(), 56);
        let state = f.field("prev_state").unwrap();
        assert_eq!((state.offset, state.size), (32, 8));
        assert_eq!(f.field("prev_comm").unwrap().size, 16);
        assert!(matches!(
            f.offset("nope"),
            Err(TracefsError::MissingField { .. })
        ));
    }

    #[test]
    fn the_real_layout_is_valid() {
        let f = Format::parse("sched_switch".into(), SWITCH_6_18);
        f.validate().unwrap();
        assert_eq!(f.offset_sized("prev_pid", &[4]).unwrap(), 24);
        assert_eq!(f.offset_sized("prev_state", &[4, 8]).unwrap(), 32);
    }

    /// Regression: corrupt formats loaded and measured nothing (0 waits,
    /// exit 0). Each corruption here is refused with its reason.
    #[test]
    fn corrupt_layouts_are_refused() {
        let corrupt = |from: &str, to: &str, why: &str| {
            assert!(SWITCH_6_18.contains(from), "fixture lacks {from}");
            let text = SWITCH_6_18.replacen(from, to, 1);
            let f = Format::parse("x".into(), &text);
            let e = f
                .validate()
                .and_then(|()| f.offset_sized("prev_pid", &[4]).map(|_| ()))
                .and_then(|()| f.offset_sized("next_pid", &[4]).map(|_| ()))
                .unwrap_err()
                .to_string();
            assert!(e.contains(why), "{from} -> {to}: {e}");
        };
        // A field moved past the record.
        corrupt("offset:56;", "offset:4000;", "gap");
        // The two PIDs swapped: the record read in file order has a hole.
        let swapped = SWITCH_6_18
            .replacen("prev_pid;\toffset:24;", "prev_pid;\toffset:@;", 1)
            .replacen("next_pid;\toffset:56;", "next_pid;\toffset:24;", 1)
            .replacen("offset:@;", "offset:56;", 1);
        let e = Format::parse("x".into(), &swapped).validate().unwrap_err();
        assert!(e.to_string().contains("gap after byte 24"), "{e}");
        // Overlapping fields.
        corrupt(
            "prev_prio;\toffset:28;",
            "prev_prio;\toffset:24;",
            "overlaps",
        );
        // A wrong size.
        corrupt(
            "next_pid;\toffset:56;\tsize:4;",
            "next_pid;\toffset:56;\tsize:2;",
            "is 2 bytes, not 4",
        );
        corrupt(
            "prev_pid;\toffset:24;\tsize:4;",
            "prev_pid;\toffset:24;\tsize:8;",
            "overlaps",
        );
        // A duplicated field.
        corrupt("next_comm[16]", "prev_comm[16]", "appears twice");
        // A PID at an odd offset.
        let odd = "\tfield:int common_pid;\toffset:0;\tsize:4;\n\tfield:char c;\toffset:4;\tsize:1;\n\tfield:pid_t pid;\toffset:5;\tsize:4;\n";
        let f = Format::parse("x".into(), odd);
        f.validate().unwrap();
        let e = f.offset_sized("pid", &[4]).unwrap_err().to_string();
        assert!(e.contains("not aligned"), "{e}");
    }

    #[test]
    fn state_mask_from_6_18_print_fmt() {
        let f = Format::parse("sched_switch".into(), SWITCH_6_18);
        assert_eq!(runnable_state_mask(&f), Some(0xff));
    }

    #[test]
    fn state_mask_from_literal_print_fmt() {
        // Shape of 4.14-era kernels: TASK_REPORT_MAX written as a literal.
        let text = "print fmt: \"x\", (REC->prev_state & 0x80) ? \"x\" : \"R\", REC->prev_state & 0x80 ? \"+\" : \"\"";
        let f = Format::parse("old".into(), text);
        assert_eq!(runnable_state_mask(&f), Some(0x7f));
    }

    /// Regression (fuzz_tracefs_format): report states OR-ed up to
    /// u64::MAX overflowed in `+ 1`; such a format gives no mask.
    #[test]
    fn state_mask_absent_when_the_states_overflow() {
        let text = "print fmt: \"x\", REC->prev_state & (((0x0 | 0xffffffffffffffff) + 1) << 1) ? \"+\" : \"\"";
        let f = Format::parse("x".into(), text);
        assert_eq!(runnable_state_mask(&f), None);
    }

    #[test]
    fn state_mask_absent_without_plus_marker() {
        let f = Format::parse("x".into(), "print fmt: \"%d\", REC->prev_state");
        assert_eq!(runnable_state_mask(&f), None);
    }
}
