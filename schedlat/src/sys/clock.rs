//! Kernel timestamps (bpf_ktime_get_ns: CLOCK_MONOTONIC) as wall-clock time,
//! and durations as people write them (`--threshold 1ms`, `p99>5ms`).

/// CLOCK_REALTIME minus CLOCK_MONOTONIC, read once; good for timestamps
/// near the moment it was read (NTP steps in between shift them).
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    offset_ns: i128,
}

impl WallClock {
    pub fn now() -> WallClock {
        let real = read(libc::CLOCK_REALTIME);
        let mono = read(libc::CLOCK_MONOTONIC);
        WallClock {
            offset_ns: real - mono,
        }
    }

    /// Nanoseconds since the Unix epoch of the monotonic instant `mono_ns`.
    pub fn unix_ns(&self, mono_ns: u64) -> u64 {
        u64::try_from(i128::from(mono_ns) + self.offset_ns).unwrap_or(0)
    }
}

/// CLOCK_MONOTONIC now, in nanoseconds: the clock of the kernel's
/// timestamps (bpf_ktime_get_ns), which no wall-clock step moves.
pub fn monotonic_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC) as u64
}

fn read(clock: libc::clockid_t) -> i128 {
    // SAFETY: timespec is plain integers; all zeros is a valid value.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock id and a pointer to a local.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}

/// Local time of day with microseconds, "HH:MM:SS.ffffff".
pub fn local_time_us(unix_ns: u64) -> String {
    let secs = (unix_ns / 1_000_000_000) as libc::time_t;
    let micros = (unix_ns % 1_000_000_000) / 1_000;
    match local_hms_of(secs) {
        Some(hms) => format!("{hms}.{micros:06}"),
        None => "??:??:??.??????".to_string(),
    }
}

/// Local time of day now, "HH:MM:SS" (runqlat's -T).
pub fn local_hms() -> String {
    // SAFETY: time(NULL) only returns the time.
    let now = unsafe { libc::time(std::ptr::null_mut()) };
    local_hms_of(now).unwrap_or_else(|| "??:??:??".to_string())
}

/// "HH:MM:SS" of a Unix time in the local time zone.
fn local_hms_of(secs: libc::time_t) -> Option<String> {
    // SAFETY: localtime_r with valid pointers to a local time_t and tm.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&secs, &mut tm).is_null() {
            return None;
        }
        Some(format!(
            "{:02}:{:02}:{:02}",
            tm.tm_hour, tm.tm_min, tm.tm_sec
        ))
    }
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
    fn monotonic_now_is_wall_clock_now() {
        let clock = WallClock::now();
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let mono = monotonic_ns();
        assert!(clock.unix_ns(mono).abs_diff(wall) < 50_000_000);
    }

    #[test]
    fn time_of_day_has_microseconds() {
        let s = local_time_us(1_700_000_000_123_456_789);
        assert_eq!(s.len(), 15, "{s}");
        assert!(s.ends_with(".123456"), "{s}");
    }

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
}
