//! Classic tracepoint support: where tracefs is, and the field offsets of the
//! sched records, parsed from their `format` files at load time so that no
//! kernel layout is compiled into the eBPF object.

use std::{
    fs,
    path::{Path, PathBuf},
};

use thiserror::Error;

/// Where tracefs is normally mounted, newest location first.
pub const TRACEFS_CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

#[derive(Debug, Error)]
pub enum TracefsError {
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
        "cannot read tracepoint format {path}: {error} (is tracefs mounted there, and are you root or do you have CAP_DAC_READ_SEARCH?)"
    )]
    Unreadable {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("tracepoint format {path} has no field `{field}`")]
    MissingField { path: PathBuf, field: String },
}

/// Finds the tracefs mount: the explicit path if given, else the first
/// candidate that has an `events` directory.
pub fn locate(explicit: Option<&Path>) -> Result<PathBuf, TracefsError> {
    if let Some(path) = explicit {
        return Ok(path.to_path_buf());
    }
    let mut denied = None;
    for dir in TRACEFS_CANDIDATES.iter().map(PathBuf::from) {
        match fs::metadata(dir.join("events")) {
            Ok(meta) if meta.is_dir() => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                denied.get_or_insert(dir);
            }
            _ => {}
        }
    }
    Err(denied.map_or(TracefsError::NotMounted, TracefsError::Denied))
}

/// One `field:` line of a format file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub offset: u64,
    pub size: u64,
}

/// A parsed `events/<category>/<event>/format` file.
#[derive(Debug, Clone)]
pub struct Format {
    pub path: PathBuf,
    pub fields: Vec<Field>,
    pub print_fmt: String,
}

impl Format {
    pub fn read(tracefs: &Path, category: &str, event: &str) -> Result<Format, TracefsError> {
        let path = tracefs
            .join("events")
            .join(category)
            .join(event)
            .join("format");
        let text = fs::read_to_string(&path).map_err(|error| TracefsError::Unreadable {
            path: path.clone(),
            error,
        })?;
        Ok(Format::parse(path, &text))
    }

    pub fn parse(path: PathBuf, text: &str) -> Format {
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

    pub fn field(&self, name: &str) -> Result<&Field, TracefsError> {
        self.fields
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| TracefsError::MissingField {
                path: self.path.clone(),
                field: name.to_string(),
            })
    }

    pub fn offset(&self, name: &str) -> Result<u64, TracefsError> {
        self.field(name).map(|f| f.offset)
    }
}

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
pub fn runnable_state_mask(switch_format: &Format) -> Option<u64> {
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
        let states = literals.iter().rev().skip(2).fold(0, |acc, v| acc | v);
        (states + 1) << 1
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

    #[test]
    fn state_mask_absent_without_plus_marker() {
        let f = Format::parse("x".into(), "print fmt: \"%d\", REC->prev_state");
        assert_eq!(runnable_state_mask(&f), None);
    }
}
