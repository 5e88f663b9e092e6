//! A workload named the way its owner knows it, on a command line: a
//! container ID (or a unique prefix of at least [`MIN_PREFIX`] digits), a
//! pod UID (either spelling), or a systemd unit or slice. `-c` finds its
//! cgroup on this host (kernel/cgroup_by_name.rs); `replay --series` finds
//! its series in a dump (analysis/dump_series.rs): one spelling, one
//! meaning, in both.

use super::path::{self, PathLabels};

/// The shortest container ID prefix taken (`docker ps` shows 12).
pub const MIN_PREFIX: usize = 4;

/// What an argument names when it is not a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    /// A container ID or its prefix, lower case.
    Container(String),
    /// A pod UID, dashed (or a static pod's 32-digit hash).
    Pod(String),
    /// A systemd unit or slice name.
    Unit(String),
}

/// The suffixes of the unit names taken (systemd src/basic/unit-def.h;
/// the ones a cgroup can be named after).
const UNIT_SUFFIXES: [&str; 6] = [".service", ".scope", ".slice", ".socket", ".mount", ".swap"];

impl Wanted {
    /// What `arg` names; None when it is none of these (a path, say).
    pub fn of(arg: &str) -> Option<Wanted> {
        let hex = arg.bytes().all(|b| b.is_ascii_hexdigit());
        if hex && (MIN_PREFIX..=64).contains(&arg.len()) {
            return Some(Wanted::Container(arg.to_ascii_lowercase()));
        }
        let uid = arg.replace('_', "-").to_ascii_lowercase();
        if path::is_pod_uid(&uid) {
            return Some(Wanted::Pod(uid));
        }
        if !arg.contains('/') && UNIT_SUFFIXES.iter().any(|s| arg.ends_with(s)) {
            return Some(Wanted::Unit(arg.to_string()));
        }
        None
    }

    /// What `kind = value` names (`container`, `pod`, `unit`: the
    /// spelling of a dump's series and of `compare`'s scopes), checked as
    /// [`Wanted::of`] checks a bare value; None for another kind or a
    /// value that is not one.
    pub fn spelled(kind: &str, value: &str) -> Option<Wanted> {
        let wanted = Wanted::of(value)?;
        (wanted.what() == kind).then_some(wanted)
    }

    /// The label of `labels` this compares, when it has it: a container's
    /// full ID, a pod's UID, the unit or slice (innermost) of that name.
    pub fn key<'a>(&self, labels: &'a PathLabels) -> Option<&'a str> {
        match self {
            Wanted::Container(prefix) => labels
                .container_id
                .as_deref()
                .filter(|id| id.starts_with(prefix.as_str())),
            Wanted::Pod(uid) => labels.pod_uid.as_deref().filter(|u| u == uid),
            Wanted::Unit(unit) => [&labels.unit, &labels.slice]
                .into_iter()
                .flatten()
                .map(String::as_str)
                .find(|u| u == unit),
        }
    }

    /// What it names, as a word: `container`, `pod`, `unit`.
    pub fn what(&self) -> &'static str {
        match self {
            Wanted::Container(_) => "container",
            Wanted::Pod(_) => "pod",
            Wanted::Unit(_) => "unit",
        }
    }

    /// The value as given (normalised: lower-case hex, a dashed UID).
    pub fn value(&self) -> &str {
        match self {
            Wanted::Container(v) | Wanted::Pod(v) | Wanted::Unit(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_spelled_out_must_be_the_kind_its_value_is() {
        assert_eq!(
            Wanted::spelled("container", "9A8B"),
            Some(Wanted::Container("9a8b".into()))
        );
        assert_eq!(Wanted::spelled("pod", "9a8b"), None);
        assert_eq!(Wanted::spelled("container", "xyz"), None);
        assert_eq!(
            Wanted::spelled("unit", "kubepods.slice"),
            Some(Wanted::Unit("kubepods.slice".into()))
        );
        let uid = "3f1c2d4e_5b6a_7c8d_9e0f_123456789abc";
        assert_eq!(
            Wanted::spelled("pod", uid).as_ref().map(Wanted::value),
            Some("3f1c2d4e-5b6a-7c8d-9e0f-123456789abc")
        );
    }
}
