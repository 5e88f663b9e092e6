//! The kernel's own account of a task's waits, for the live tests to check
//! the decision split against: a tracefs instance recording sched_wakeup
//! and sched_switch on one CPU. Each event's flags field carries the
//! need-resched state of the task running on the CPU that traced it
//! (kernel/trace/trace.c tracing_gen_ctx_irq_test()): for a wakeup traced
//! on the wakee's own CPU, that is the state schedlat reads at sched_wakeup
//! (the full bit or, on a lazy kernel, the lazy one: `L`, or `B` for both).
//!
//! Shared by the root tests (through the binary's JSON) and the library's
//! live tests (collect/live/mod.rs includes this file by path).

use std::{fs, path::PathBuf};

/// A tracefs instance of its own (the global buffer is left alone).
pub(crate) struct Trace {
    dir: PathBuf,
}

impl Trace {
    /// Records sched_wakeup and sched_switch on `cpu` from now on; None
    /// when tracefs is not mounted or refuses.
    pub(crate) fn start(cpu: usize) -> Option<Trace> {
        Trace::prepare(cpu, false).filter(Trace::on)
    }

    /// As `start`, with the timers' expiries too (`hrtimer_expire_entry`:
    /// the tick is the one whose function is the tick handler).
    pub(crate) fn start_with_ticks(cpu: usize) -> Option<Trace> {
        Trace::prepare(cpu, true).filter(Trace::on)
    }

    /// The instance, its buffer and events set up but not recording yet
    /// (`on` starts it): making an instance allocates its buffers, which
    /// takes long enough under emulation to shift the window of a test
    /// that compares its trace with another tracer's.
    pub(crate) fn prepare(cpu: usize, with_ticks: bool) -> Option<Trace> {
        let dir = PathBuf::from(format!(
            "/sys/kernel/tracing/instances/schedlat-decision-{}",
            std::process::id()
        ));
        fs::create_dir(&dir).ok()?;
        let trace = Trace { dir };
        // A new instance records from the start.
        trace.write("tracing_on", "0")?;
        trace.write("tracing_cpumask", &format!("{:x}", 1u64 << cpu))?;
        trace.write("buffer_size_kb", "8192")?;
        let ticks: &[&str] = if with_ticks {
            &["timer/hrtimer_expire_entry"]
        } else {
            &[]
        };
        for event in ["sched/sched_wakeup", "sched/sched_switch"]
            .iter()
            .chain(ticks)
        {
            trace.write(&format!("events/{event}/enable"), "1")?;
        }
        Some(trace)
    }

    fn write(&self, file: &str, value: &str) -> Option<()> {
        fs::write(self.dir.join(file), value).ok()
    }

    /// Starts recording; false when tracefs refused.
    pub(crate) fn on(&self) -> bool {
        self.write("tracing_on", "1").is_some()
    }

    /// Stops recording.
    pub(crate) fn off(&self) {
        let _ = self.write("tracing_on", "0");
    }

    /// What was recorded, as text.
    pub(crate) fn text(&self) -> String {
        fs::read_to_string(self.dir.join("trace")).unwrap_or_default()
    }

    /// Stops recording and returns the trace's text.
    pub(crate) fn stop(&self) -> String {
        self.off();
        self.text()
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
pub(crate) struct TracedWaits {
    pub flag_set: [u64; 4],
    pub flag_clear: [u64; 4],
}

/// The waits of `pid` in a trace in the default format, e.g.
/// `  worker-42  [001] dNh2. 123.456789: sched_wakeup: comm=worker pid=42 ...`,
/// counted by the flag at the wakeup and the switches before it ran
/// (`traced_waits` parses them).
pub(crate) fn waits_of(trace: &str, pid: u32) -> TracedWaits {
    let mut out = TracedWaits::default();
    for w in traced_waits(trace, pid) {
        let row = if w.flag_set {
            &mut out.flag_set
        } else {
            &mut out.flag_clear
        };
        row[w.passes.min(3)] += 1;
    }
    out
}

impl TracedWaits {
    /// Where another tracer's count of the same waits, by bit set or clear
    /// and pass-overs 0, 1, 2, 3+ (`set`, `clear`), differs from the
    /// trace's by more than 5% of the traced waits plus 3 in any cell (the
    /// two windows differ by a write to tracefs and a signal's delivery):
    /// the comparison in words.
    pub(crate) fn disagreement(&self, set: [u64; 4], clear: [u64; 4]) -> Option<String> {
        let total: u64 = self.flag_set.iter().chain(&self.flag_clear).sum();
        let slack = 3 + total / 20;
        let agree = set
            .iter()
            .chain(&clear)
            .zip(self.flag_set.iter().chain(&self.flag_clear))
            .all(|(ours, theirs)| ours.abs_diff(*theirs) <= slack);
        let said = format!(
            "schedlat set {set:?} clear {clear:?}, the kernel's trace set {:?} clear {:?} (slack {slack} of {total} traced wakeups)",
            self.flag_set, self.flag_clear
        );
        eprintln!("{said}");
        (!agree).then_some(said)
    }
}

/// One wakeup-started wait of a task as the trace shows it: the
/// need-resched flag at its sched_wakeup, the switches to other tasks
/// before it ran, whether a tick (`hrtimer_expire_entry` of the tick
/// handler) came between the wakeup and its switch-in, the flag at that
/// tick's entry (clear: a schedule() after the wakeup picked the running
/// task again, which clears it without a sched_switch), and the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TracedWait {
    pub flag_set: bool,
    pub passes: usize,
    pub tick: bool,
    pub flag_at_tick: Option<bool>,
    pub wait_ns: u64,
    /// The switch to the task preempted the one before it inside the
    /// kernel (`prev_state=R+`: sched_switch's `preempt`).
    pub preempted: bool,
}

impl TracedWait {
    /// The wakeup set a need-resched bit and no other task ran before the
    /// task: a request the holder alone stood between.
    pub(crate) fn asked_alone(&self) -> bool {
        self.flag_set && self.passes == 0
    }

    /// The case `late` names: the wakeup set need-resched, no other task
    /// ran, and the switch to the task came after a tick.
    pub(crate) fn late(&self) -> bool {
        self.asked_alone() && self.tick
    }

    /// A request answered before any tick: the prompt grant.
    pub(crate) fn prompt(&self) -> bool {
        self.asked_alone() && !self.tick
    }
}

/// The need-resched state of a trace line's flags field (its second
/// character; '.' when clear, 'p' alone is the preempt count's bit).
fn flag_of(head: &str) -> bool {
    let flags = head.split_whitespace().rev().nth(1).unwrap_or("");
    flags.chars().nth(1).is_some_and(|c| c != '.' && c != 'p')
}

/// A trace line's timestamp, ns (`10.000001` seconds, microseconds).
fn ns_of(head: &str) -> u64 {
    let ts = head.split_whitespace().next_back().unwrap_or("0");
    let (s, us) = ts.split_once('.').unwrap_or((ts, "0"));
    s.parse::<u64>().unwrap_or(0) * 1_000_000_000 + us.parse::<u64>().unwrap_or(0) * 1000
}

/// The tick's hrtimer handler, by its names over kernel versions.
fn is_tick(args: &str) -> bool {
    [
        "tick_nohz_handler",
        "tick_sched_timer",
        "tick_nohz_highres_handler",
    ]
    .iter()
    .any(|f| args.contains(&format!("function={f} ")) || args.ends_with(&format!("function={f}")))
}

/// Every wakeup-started wait of `pid` in a trace of `start_with_ticks`.
pub(crate) fn traced_waits(trace: &str, pid: u32) -> Vec<TracedWait> {
    let mut out = Vec::new();
    let mut open: Option<(TracedWait, u64)> = None;
    let want_pid = format!("pid={pid} ");
    let next_pid = format!("next_pid={pid} ");
    for line in trace.lines().filter(|l| !l.starts_with('#')) {
        let Some((head, rest)) = line.split_once(": ") else {
            continue;
        };
        let Some((event, args)) = rest.split_once(": ") else {
            continue;
        };
        match event {
            "sched_wakeup" if open.is_none() && format!("{args} ").contains(&want_pid) => {
                let wait = TracedWait {
                    flag_set: flag_of(head),
                    passes: 0,
                    tick: false,
                    flag_at_tick: None,
                    wait_ns: 0,
                    preempted: false,
                };
                open = Some((wait, ns_of(head)));
            }
            "hrtimer_expire_entry" if is_tick(args) => {
                if let Some((w, _)) = open.as_mut()
                    && !w.tick
                {
                    w.tick = true;
                    w.flag_at_tick = Some(flag_of(head));
                }
            }
            "sched_switch" => {
                if let Some((w, at)) = open.as_mut() {
                    if format!("{args} ").contains(&next_pid) {
                        w.wait_ns = ns_of(head).saturating_sub(*at);
                        w.preempted = args.contains("prev_state=R+ ");
                        out.push(*w);
                        open = None;
                    } else {
                        w.passes += 1;
                    }
                }
            }
            _ => {}
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

    /// The seed case's slow wait (a wakeup that set the flag, a schedule()
    /// that cleared it without a switch, the tick, then the switch) beside
    /// a prompt one.
    #[test]
    fn a_request_the_tick_answered_is_told_from_a_prompt_one() {
        let trace = "\
# tracer: nop
            loop-7       [001] dNh1.   10.000100: sched_wakeup: comm=w pid=42 prio=120 target_cpu=001
            loop-7       [001] d..1.   10.000110: sched_switch: prev_comm=loop prev_pid=7 prev_prio=120 prev_state=R ==> next_comm=w next_pid=42 next_prio=120
            loop-7       [001] d.h1.   10.001000: hrtimer_expire_entry: hrtimer=00000000abcd function=hrtimer_wakeup now=10001000000
            loop-7       [001] dNh1.   10.001002: sched_wakeup: comm=w pid=42 prio=120 target_cpu=001
            loop-7       [001] d.h1.   10.004500: hrtimer_expire_entry: hrtimer=00000000beef function=tick_nohz_handler now=10004500000
            loop-7       [001] d..2.   10.004510: sched_switch: prev_comm=loop prev_pid=7 prev_prio=120 prev_state=R+ ==> next_comm=w next_pid=42 next_prio=120
";
        let w = traced_waits(trace, 42);
        assert_eq!(w.len(), 2);
        assert!(w[0].prompt() && !w[0].late() && !w[0].preempted);
        assert!(w[1].preempted);
        assert_eq!(w[0].wait_ns, 10_000);
        assert!(w[1].late() && !w[1].prompt());
        assert_eq!(w[1].flag_at_tick, Some(false));
        assert_eq!(w[1].wait_ns, 3_508_000);
    }
}
