//! The `-p PID` filter: checked against /proc before any kernel work, and
//! watched during the run so that a target that exits ends it cleanly.

use std::{fs, path::Path};

use thiserror::Error;

use crate::cli::FilterArgs;

#[derive(Debug, Error)]
pub enum FilterError {
    #[error("no process with PID {0} (check `ps -p {0}`)")]
    NoSuchProcess(u32),
    #[error("{tid} is a thread of process {tgid}: use `-p {tgid}` to measure that process")]
    IsThread { tid: u32, tgid: u32 },
}

/// What the kernel side measures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only waits of this process; None = every process.
    pub tgid: Option<u32>,
}

impl Filter {
    pub fn resolve(args: &FilterArgs) -> Result<Filter, FilterError> {
        if let Some(pid) = args.pid {
            match tgid_of(pid) {
                None => return Err(FilterError::NoSuchProcess(pid)),
                Some(tgid) if tgid != pid => return Err(FilterError::IsThread { tid: pid, tgid }),
                Some(_) => {}
            }
        }
        Ok(Filter { tgid: args.pid })
    }

    pub fn is_active(&self) -> bool {
        self.tgid.is_some()
    }

    /// False once the only target has exited.
    pub fn target_alive(&self) -> bool {
        self.tgid
            .is_none_or(|pid| Path::new(&format!("/proc/{pid}")).exists())
    }

    /// For messages: "process 1234 (comm)".
    pub fn describe(&self) -> Option<String> {
        let pid = self.tgid?;
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        Some(format!("process {pid} ({})", comm.trim()))
    }
}

/// The process a PID (or TID) belongs to, from /proc/PID/status.
fn tgid_of(pid: u32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(pid: Option<u32>) -> Result<Filter, FilterError> {
        Filter::resolve(&FilterArgs { pid })
    }

    #[test]
    fn our_own_process_resolves_and_is_alive() {
        let me = std::process::id();
        let f = resolve(Some(me)).unwrap();
        assert_eq!(f.tgid, Some(me));
        assert!(f.target_alive());
        assert!(
            f.describe()
                .unwrap()
                .starts_with(&format!("process {me} ("))
        );
    }

    #[test]
    fn a_missing_process_is_an_error() {
        // pid_max is at most 2^22, so this PID cannot exist.
        let e = resolve(Some(5_000_000)).unwrap_err().to_string();
        assert!(e.contains("no process with PID 5000000"), "{e}");
    }

    #[test]
    fn a_thread_id_points_at_its_process() {
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(200));
        });
        let tid = rx.recv().unwrap();
        let e = resolve(Some(tid)).unwrap_err().to_string();
        assert!(
            e.contains(&format!("use `-p {}`", std::process::id())),
            "{e}"
        );
        t.join().unwrap();
    }

    #[test]
    fn no_filter_is_inactive() {
        let f = resolve(None).unwrap();
        assert!(!f.is_active() && f.target_alive() && f.describe().is_none());
    }
}
