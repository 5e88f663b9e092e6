//! `schedlat record --ring DURATION`: the flight recorder. Always on, it
//! keeps the last DURATION of per-second fine histograms (the total, and per
//! cgroup with `--cgroups`, up to `--max-series`) and of slow waits with
//! their context, in memory whose bound is stated at start and never
//! exceeded, and writes the whole window to a dump on SIGHUP or when a
//! `--trigger` fires (docs/recorder.md); `serve --ring` keeps the same
//! ring and dumps on `POST /snapshot`. Dumps are written on a thread of
//! their own: collection never waits for a disk.
//!
//! A layer under the commands that keep a ring on the tracer they attached
//! (`record --ring`, in commands/run.rs; `serve --ring`): flight.rs is the
//! recorder's state between seconds, ring.rs the window in memory,
//! trigger.rs when it dumps by itself, writer.rs the dumps.

mod flight;
mod ring;
mod trigger;
mod writer;

pub(crate) use self::{
    flight::{Flight, RecorderOptions},
    trigger::Trigger,
    writer::{DumpKind, Refused},
};
