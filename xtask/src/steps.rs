//! Wall time per step of a long command (`cargo xtask test`), so that
//! where CI's minutes go can be read off its log: each step's time as it
//! ends, and the whole table at the end, also when a step fails.

use std::time::{Duration, Instant};

use anyhow::Result;

pub(crate) struct Steps {
    command: &'static str,
    started: Instant,
    done: Vec<(&'static str, Duration)>,
}

impl Steps {
    pub(crate) fn new(command: &'static str) -> Steps {
        Steps {
            command,
            started: Instant::now(),
            done: Vec::new(),
        }
    }

    /// Runs `step`, timed, under `name`.
    pub(crate) fn run<T>(
        &mut self,
        name: &'static str,
        step: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let started = Instant::now();
        let result = step();
        let took = started.elapsed();
        self.done.push((name, took));
        let outcome = if result.is_ok() { "done" } else { "FAILED" };
        eprintln!(
            "xtask {}: step {name} {outcome} in {}",
            self.command,
            seconds(took)
        );
        result
    }
}

impl Drop for Steps {
    /// The table, whether the command ended well or not.
    fn drop(&mut self) {
        eprintln!("xtask {}: wall time per step", self.command);
        for (name, took) in &self.done {
            eprintln!("  {name:<12} {:>9}", seconds(*took));
        }
        eprintln!("  {:<12} {:>9}", "total", seconds(self.started.elapsed()));
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}
