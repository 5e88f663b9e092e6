//! A process's own name: its main thread's comm, as /proc/PID/comm gives
//! it. The culprit processes of `victims` are named after it rather than
//! after their busiest thread (rustc's `lto cgu.08` is a thread of rustc).

/// The name of process `pid`, None when it is gone (or never was).
pub fn of(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(text.trim_end_matches('\n').to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_has_its_name_and_a_missing_one_none() {
        let me = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert_eq!(
            super::of(std::process::id()).as_deref(),
            Some(me.trim_end())
        );
        assert_eq!(super::of(u32::MAX), None);
    }
}
