//! `schedlat slow --threshold 1ms`: every wait of at least the threshold,
//! as it happens, with the task that waited, the task that held the CPU
//! until it ended (the culprit) and the run-queue length (runqslower, with
//! context). The kernel sends only those waits, through a ring buffer
//! (schedlat-ebpf/src/slow.rs), and counts the ones the buffer had no room
//! for; they are reported in the stream, where they were lost.

mod render;

use crate::commands::session::{self, Signals};
use std::{mem::size_of, time::Duration};

use anyhow::{Context, Result};
use aya::maps::{MapData, RingBuf};
use schedlat_common::{names, victims::SlowEvent};
use tokio::io::{Interest, unix::AsyncFd};

use crate::{
    cli::{FilterArgs, KernelArgs},
    collect::histogram::Unit,
    collect::victims::mode_counters,
    commands::run::Ended,
    commands::stdout,
    kernel::loader::LoadError,
    kernel::modes::Modes,
    sys::clock::WallClock,
};

const BANNER: &str = "Tracing run queue latency... Hit Ctrl-C to end.\n";

#[derive(Debug, clap::Args)]
pub struct SlowArgs {
    /// Report waits at least this long: a number with a unit, e.g. 1ms,
    /// 500us, 2.5ms (runqslower's default is 10ms)
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = parse_duration_ns)]
    pub threshold: u64,

    /// One JSON object per event on stdout (schema in docs/json.md)
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: &SlowArgs, kernel: &KernelArgs, filter: &FilterArgs) -> Result<Ended> {
    let mut signals = Signals::install()?;
    let (mut tracer, filter) = session::attach(
        kernel,
        filter,
        Unit::Usecs.ns(),
        &Modes::slow(args.threshold),
    )?;
    let name = names::MAP_SLOW_EVENTS;
    let map = tracer
        .ebpf_mut()
        .take_map(name)
        .ok_or(LoadError::MissingMap(name))?;
    let ring = RingBuf::try_from(map).map_err(|error| LoadError::Map { name, error })?;
    // SAFETY: RingBuf owns its map fd and keeps it open, unchanged, for as
    // long as it lives, which is as long as the AsyncFd.
    let mut ring = unsafe { AsyncFd::register_with_interest(ring, Interest::READABLE) }
        .map_err(|e| e.into_parts().1)
        .context("watching the slow events' ring buffer")?;

    // Counted from before the banner, like the events: a reader of the
    // banner sees every event and loss from then on.
    let mut out = Output {
        json: args.json,
        clock: WallClock::now(),
        events: 0,
        lost: 0,
        lost_base: mode_counters(tracer.ebpf_mut())?.slow_lost,
    };
    let banner = if args.json {
        eprint!("{BANNER}");
        String::new()
    } else {
        format!("{BANNER}{}\n", render::HEADER)
    };
    if stdout::write(&banner).is_err() {
        return Ok(Ended::StdoutClosed);
    }

    // Losses are counted in the kernel; they are checked (and the clock's
    // offset refreshed) once a second, as is a reader that went away.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    // With -p, a target that exits ends the run.
    let mut watch = tokio::time::interval(Duration::from_millis(500));
    loop {
        let stop = tokio::select! {
            ready = ring.readable_mut() => {
                let mut guard = ready.context("waiting for slow events")?;
                if out.drain(guard.get_inner_mut()).is_err() {
                    return Ok(Ended::StdoutClosed);
                }
                guard.clear_ready();
                false
            }
            _ = tick.tick() => {
                if stdout::reader_gone() {
                    return Ok(Ended::StdoutClosed);
                }
                out.clock = WallClock::now();
                false
            }
            _ = watch.tick(), if filter.is_active() => {
                if filter.target_alive() {
                    continue;
                }
                eprintln!("schedlat: the target process exited");
                true
            }
            _ = signals.recv() => true,
        };
        // Whatever ends the run, what is in the buffer is shown first.
        let lost = mode_counters(tracer.ebpf_mut())?.slow_lost;
        let written = out
            .drain(ring.get_mut())
            .and_then(|()| out.lost_now(lost.saturating_sub(out.lost_base)));
        if written.is_err() {
            return Ok(Ended::StdoutClosed);
        }
        if stop {
            let end = if args.json {
                render::end_json(out.events, out.lost, args.threshold)
            } else {
                render::summary(out.events, out.lost, args.threshold)
            };
            return Ok(match stdout::write(&end) {
                Ok(()) => Ended::Done,
                Err(_) => Ended::StdoutClosed,
            });
        }
    }
}

/// What has been printed so far.
struct Output {
    json: bool,
    clock: WallClock,
    events: u64,
    /// Losses reported so far, and the kernel's count at the start.
    lost: u64,
    lost_base: u64,
}

impl Output {
    /// Prints every event in the buffer.
    fn drain(&mut self, ring: &mut RingBuf<MapData>) -> std::io::Result<()> {
        let mut text = String::new();
        while let Some(item) = ring.next() {
            let Some(event) = decode(&item) else {
                continue;
            };
            self.events += 1;
            text.push_str(&if self.json {
                render::json(&event, self.clock)
            } else {
                render::line(&event, self.clock)
            });
        }
        if text.is_empty() {
            return Ok(());
        }
        stdout::write(&text)
    }

    /// Reports losses since the last report, in the stream.
    fn lost_now(&mut self, total: u64) -> std::io::Result<()> {
        if total <= self.lost {
            return Ok(());
        }
        let new = total - self.lost;
        self.lost = total;
        stdout::write(&if self.json {
            render::lost_json(new)
        } else {
            render::lost_line(new)
        })
    }
}

/// A ring buffer record as the kernel wrote it.
fn decode(bytes: &[u8]) -> Option<SlowEvent> {
    (bytes.len() >= size_of::<SlowEvent>()).then(|| {
        // SAFETY: long enough; SlowEvent is repr(C) plain data, valid for
        // any bit pattern; the record need not be aligned for Rust.
        unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<SlowEvent>()) }
    })
}

/// "1ms", "500us", "2.5ms", "1s", "250000ns" to nanoseconds.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(split);
    let scale = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "" => return Err(format!("`{s}` needs a unit: e.g. 1ms, 500us, 2.5ms")),
        other => return Err(format!("unknown unit `{other}`: use ns, us, ms or s")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{s}` is not a duration such as 1ms"))?;
    let ns = value * scale;
    if !(1.0..=1e12).contains(&ns) {
        return Err(format!("`{s}` is out of range (1ns to 1000s)"));
    }
    Ok(ns.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_need_a_unit() {
        assert_eq!(parse_duration_ns("1ms"), Ok(1_000_000));
        assert_eq!(parse_duration_ns("2.5ms"), Ok(2_500_000));
        assert_eq!(parse_duration_ns("500us"), Ok(500_000));
        assert_eq!(parse_duration_ns("1s"), Ok(1_000_000_000));
        assert_eq!(parse_duration_ns("250ns"), Ok(250));
        assert!(parse_duration_ns("1").unwrap_err().contains("needs a unit"));
        assert!(
            parse_duration_ns("1h")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(
            parse_duration_ns("0ms")
                .unwrap_err()
                .contains("out of range")
        );
        assert!(parse_duration_ns("ms").is_err());
    }

    #[test]
    fn short_records_are_skipped() {
        assert!(decode(&[0u8; 8]).is_none());
        let bytes = vec![0u8; size_of::<SlowEvent>()];
        assert_eq!(decode(&bytes), Some(SlowEvent::default()));
    }
}
