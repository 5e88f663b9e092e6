//! Notices said once per boot of a host and per mode, not at every run:
//! a marker file under /run/schedlat/notices/ (a tmpfs emptied at boot,
//! which is also when what such a notice says, the cgroup hierarchies, can
//! change). Where the marker cannot be written (not root, a read-only
//! /run, a sandboxed service) the notice is said every time: better
//! repeated than never seen.

use std::{
    fs,
    io::ErrorKind,
    path::{Path, PathBuf},
};

const DIR: &str = "/run/schedlat/notices";

/// Whether to say `message` now: true the first time this mode says it
/// on this boot, and whenever that cannot be remembered.
pub fn first_time(mode: &str, message: &str) -> bool {
    first_time_in(Path::new(DIR), mode, message)
}

fn first_time_in(dir: &Path, mode: &str, message: &str) -> bool {
    let marker = marker(dir, mode, message);
    if fs::create_dir_all(dir).is_err() {
        return true;
    }
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&marker)
    {
        Ok(_) => true,
        Err(e) => e.kind() != ErrorKind::AlreadyExists,
    }
}

/// One marker per mode and message (FNV-1a of the message: a changed
/// notice is said again).
fn marker(dir: &Path, mode: &str, message: &str) -> PathBuf {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in message.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    let mode: String = mode
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    dir.join(format!("{mode}-{hash:016x}"))
}

/// The mode of this run, as the command line names it: the subcommand,
/// or `histogram` for the default.
pub fn this_mode() -> String {
    std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .filter(|a| a.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        .unwrap_or_else(|| "histogram".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn said_once_per_mode_and_message_and_always_where_unremembered() {
        let dir = std::env::temp_dir().join(format!("schedlat-notice-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        assert!(first_time_in(&dir, "serve", "keys are v1 cpu"));
        assert!(!first_time_in(&dir, "serve", "keys are v1 cpu"));
        assert!(first_time_in(&dir, "victims", "keys are v1 cpu"));
        assert!(first_time_in(&dir, "serve", "keys are v1 cpu,cpuacct"));
        // A directory that cannot be made: said every time.
        let blocked = dir.join("file");
        fs::write(&blocked, "").unwrap();
        assert!(first_time_in(&blocked.join("sub"), "serve", "x"));
        assert!(first_time_in(&blocked.join("sub"), "serve", "x"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
