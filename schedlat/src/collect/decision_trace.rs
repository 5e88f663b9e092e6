//! The kernel's own account of a task's waits, for the live tests to check
//! the decision split against: a tracefs instance recording sched_wakeup
//! and sched_switch on one CPU. Each event's flags field carries the
//! need-resched state of the task running on the CPU that traced it
//! (kernel/trace/trace.c tracing_gen_ctx_irq_test()): for a wakeup traced
//! on the wakee's own CPU, that is the state schedlat reads at sched_wakeup.

use std::{fs, path::PathBuf};

/// A tracefs instance of its own (the global buffer is left alone).
pub(super) struct Trace {
    dir: PathBuf,
}

impl Trace {
    /// Records sched_wakeup and sched_switch on `cpu` from now on; None
    /// when tracefs is not mounted or refuses.
    pub(super) fn start(cpu: usize) -> Option<Trace> {
        let dir = PathBuf::from(format!(
            "/sys/kernel/tracing/instances/schedlat-decision-{}",
            std::process::id()
        ));
        fs::create_dir(&dir).ok()?;
        let trace = Trace { dir };
        let write = |file: &str, value: &str| fs::write(trace.dir.join(file), value).ok();
        write("tracing_cpumask", &format!("{:x}", 1u64 << cpu))?;
        write("buffer_size_kb", "8192")?;
        write("events/sched/sched_wakeup/enable", "1")?;
        write("events/sched/sched_switch/enable", "1")?;
        write("tracing_on", "1")?;
        Some(trace)
    }

    /// Stops recording and returns the trace's text.
    pub(super) fn stop(&self) -> String {
        let _ = fs::write(self.dir.join("tracing_on"), "0");
        fs::read_to_string(self.dir.join("trace")).unwrap_or_default()
    }
}

impl Drop for Trace {
    fn drop(&mut self) {
        let _ = fs::write(self.dir.join("events/enable"), "0");
        let _ = fs::remove_dir(&self.dir);
    }
}

/// The waits of `pid` that began with a wakeup, as the trace shows them:
/// by whether the need-resched flag was set at its sched_wakeup, and by the
/// switches to other tasks before it ran (0, 1, 2, 3 or more).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct TracedWaits {
    pub flag_set: [u64; 4],
    pub flag_clear: [u64; 4],
}

/// Parses a trace in the default format, e.g.
/// `  worker-42  [001] dNh2. 123.456789: sched_wakeup: comm=worker pid=42 ...`:
/// the flags field's second character is the need-resched state ('.' when
/// clear; 'p' alone is the preempt count's bit, not TIF's).
pub(super) fn waits_of(trace: &str, pid: u32) -> TracedWaits {
    let mut out = TracedWaits::default();
    let mut open: Option<(bool, usize)> = None;
    let want_pid = format!("pid={pid} ");
    let next_pid = format!("next_pid={pid} ");
    for line in trace.lines().filter(|l| !l.starts_with('#')) {
        let Some((head, event)) = line.split_once(": sched_") else {
            continue;
        };
        if let Some(args) = event.strip_prefix("wakeup: ") {
            if format!("{args} ").contains(&want_pid) && open.is_none() {
                let flags = head.split_whitespace().rev().nth(1).unwrap_or("");
                let set = flags.chars().nth(1).is_some_and(|c| c != '.' && c != 'p');
                open = Some((set, 0));
            }
        } else if let Some(args) = event.strip_prefix("switch: ")
            && let Some((set, passes)) = open.as_mut()
        {
            if format!("{args} ").contains(&next_pid) {
                let row = if *set {
                    &mut out.flag_set
                } else {
                    &mut out.flag_clear
                };
                row[(*passes).min(3)] += 1;
                open = None;
            } else {
                *passes += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_split_by_the_flag_and_the_switches_before_them() {
        let trace = "\
# tracer: nop
          <idle>-0       [001] dNh2.   10.000001: sched_wakeup: comm=w pid=42 prio=120 target_cpu=001
             hog-7       [001] d..2.   10.000010: sched_switch: prev_comm=hog prev_pid=7 prev_prio=120 prev_state=R+ ==> next_comm=w next_pid=42 next_prio=120
             hog-7       [001] d.h2.   10.001000: sched_wakeup: comm=w pid=42 prio=120 target_cpu=001
             hog-7       [001] d..2.   10.004000: sched_switch: prev_comm=hog prev_pid=7 prev_prio=120 prev_state=R ==> next_comm=hog2 next_pid=8 next_prio=120
            hog2-8       [001] d..2.   10.008000: sched_switch: prev_comm=hog2 prev_pid=8 prev_prio=120 prev_state=R ==> next_comm=w next_pid=42 next_prio=120
             hog-7       [001] dph2.   10.009000: sched_wakeup: comm=w pid=420 prio=120 target_cpu=001
";
        let w = waits_of(trace, 42);
        assert_eq!(w.flag_set, [1, 0, 0, 0]);
        assert_eq!(w.flag_clear, [0, 1, 0, 0]);
    }
}
