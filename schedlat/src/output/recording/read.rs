//! A recording read back (`schedlat record`, `schedlat --json`, or a
//! `record --ring` dump), for `compare`: every interval merged, refused
//! when damaged or of another schema.

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::RecordedScope;
use crate::{
    analysis::recording::Window,
    histogram::Waits,
    output::{dump, json, json::Interval},
    sys::{files::Lines, slice::Slice},
};

/// A recording's intervals merged, and what they say they measured.
pub(crate) struct Recording {
    pub waits: Waits,
    pub unit: String,
    /// The slice it was judged against, when its objects say.
    pub slice: Option<Slice>,
    /// What it measured (None in files from before scopes were written).
    pub scope: Option<RecordedScope>,
    pub hook: String,
}

/// The longest line of a recording read: a `--json` line carries its
/// breakdown (skipped unbuilt when read), about 0.5-15 KiB a key, so this
/// takes tens of thousands of keys; the line is all a read holds at once.
const MAX_LINE_BYTES: usize = 256 << 20;

/// The schema of a line; the rest of the line is skipped unread.
#[derive(serde::Deserialize)]
struct Schema {
    schema: Option<String>,
}

impl Recording {
    pub(crate) fn load(path: &Path) -> Result<Recording> {
        // A recorder dump is a directory; its JSON Lines are read.
        let dump = path.join("dump.jsonl");
        let path = if path.is_dir() { dump.as_path() } else { path };
        let lines = Lines::open(path, dump::MAX_DUMP_BYTES, MAX_LINE_BYTES)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Recording::read(path, lines)
    }

    /// A recording's text (JSON Lines) in memory; `path` names it in errors.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn parse(path: &Path, text: &[u8]) -> Result<Recording> {
        Recording::read(path, Lines::new(text, u64::MAX, MAX_LINE_BYTES))
    }

    /// A recording read a line at a time, typed: its intervals merged. A
    /// recorder dump is read by the dump reader, with every check `replay`
    /// makes, its total series' intervals merged.
    fn read<R: std::io::Read>(path: &Path, mut lines: Lines<R>) -> Result<Recording> {
        let mut waits = Waits::default();
        let mut unit = None;
        let mut slice = None;
        let mut scope = None;
        let mut hook = String::new();
        let origin = path.display().to_string();
        let mut dump: Option<dump::Reader> = None;
        while let Some((n, line)) = lines
            .next_line()
            .with_context(|| format!("cannot read {origin}"))?
        {
            if let Some(reader) = dump.as_mut() {
                reader.line(n, line)?;
                continue;
            }
            // Text around the objects (a banner captured with 2>&1) is
            // skipped.
            if !line.starts_with(b"{") {
                continue;
            }
            let at = || format!("{origin}:{n}");
            if unit.is_none() && dump::is_dump_line(line) {
                // A dump is held to a dump's line cap, as replay holds it:
                // compare took lines up to a recording's 256 MiB.
                if line.len() > dump::MAX_LINE_BYTES {
                    bail!(
                        "cannot read {origin}: line {n} is longer than {} bytes, the longest read",
                        dump::MAX_LINE_BYTES
                    );
                }
                let mut reader = dump::Reader::new(&origin);
                reader.line(n, line)?;
                dump = Some(reader);
                lines.set_max_line(dump::MAX_LINE_BYTES);
                continue;
            }
            let schema: Schema =
                serde_json::from_slice(line).with_context(|| format!("{}: not JSON", at()))?;
            // Another schema (compare's own output, another tool's JSON) is
            // named as such rather than as a missing field.
            match schema.schema.as_deref() {
                Some(schema) if json::READS.contains(&schema) => {}
                _ if dump::is_dump_line(line) => bail!(
                    "{}: a recorder dump's line inside a recording: not a whole dump",
                    at()
                ),
                Some(other) => bail!(
                    "{}: not a recording (schema {other}): compare reads `schedlat record` files, `schedlat --json` output ({}) and `record --ring` dumps",
                    at(),
                    json::SCHEMA
                ),
                None => bail!(
                    "{}: not a recording (no schema field): compare reads `schedlat record` files, `schedlat --json` output ({}) and `record --ring` dumps",
                    at(),
                    json::SCHEMA
                ),
            }
            let interval: Interval = serde_json::from_slice(line)
                .with_context(|| format!("{}: a damaged {} object", at(), json::SCHEMA))?;
            if unit.get_or_insert_with(|| interval.unit.clone()) != &interval.unit {
                bail!("{origin}: mixes usecs and msecs intervals");
            }
            if scope.is_none() {
                scope = interval.scope.clone();
                hook = interval.hook.clone();
            }
            // The slice the recording was judged against, so both sides use
            // it.
            if let Some(ev) = interval.shape.as_ref().map(|s| &s.evidence)
                && let (Some(ns), Some(src)) =
                    (ev["slice_ns"].as_u64(), ev["slice_source"].as_str())
            {
                slice.get_or_insert_with(|| Slice::fixed(ns, src));
            }
            // Counts near 2^64 come only from a damaged or forged file;
            // refused here so every later sum over the buckets is exact.
            interval
                .waits()
                .and_then(|w| waits.try_merge(&w))
                .with_context(|| {
                    format!(
                        "{}: wait counts add up to more than 2^64: a damaged recording",
                        at()
                    )
                })?;
        }
        if let Some(reader) = dump {
            return Recording::of_dump(&reader.finish()?, &origin);
        }
        let Some(unit) = unit else {
            bail!(
                "{origin}: no schedlat JSON objects in it, so not a recording; make one with `schedlat record -o NEW.json 10` (a file that does not exist yet: record replaces one only with --force)"
            );
        };
        Ok(Recording {
            waits,
            unit,
            slice,
            scope,
            hook,
        })
    }

    /// A whole dump as one side: its total series over every interval.
    fn of_dump(w: &Window, origin: &str) -> Result<Recording> {
        let mut waits = Waits::default();
        for s in &w.seconds {
            if let Some(total) = s.total() {
                waits.try_merge(&total.waits()).with_context(|| {
                    format!("{origin}: wait counts add up to more than 2^64: a damaged dump")
                })?;
            }
        }
        Ok(Recording {
            waits,
            unit: w.meta.unit.clone(),
            slice: Some(Slice::fixed(w.meta.slice_ns, &w.meta.slice_source)),
            scope: None,
            hook: w.meta.hook.clone(),
        })
    }

    /// What differs between this recording's scope and `after`'s (hook
    /// included), one line each; a side without a scope (an older file) is said
    /// once.
    pub(crate) fn differences(&self, after: &Recording) -> Vec<String> {
        let before = self;
        let mut out = Vec::new();
        if before.hook != after.hook {
            out.push(format!(
                "hook mode: {} before, {} after",
                before.hook, after.hook
            ));
        }
        match (&before.scope, &after.scope) {
            (Some(b), Some(a)) => out.extend(b.differences(a)),
            (None, None) => {}
            (b, _) => out.push(format!(
                "only the {} recording says what it measured (the other is a recorder dump or was made by an older schedlat): check that both measured the same thing",
                if b.is_some() { "before" } else { "after" }
            )),
        }
        out
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::{fs, time::Duration};

    use schedlat_common::{CpuStats, bucket_index, log2_slot};

    use super::*;
    use crate::{histogram::Unit, kernel::hook::HookMode, output::Report};

    /// A one-object recording of `n` waits of `us` microseconds each.
    pub(crate) fn recording(
        name: &str,
        unit: Unit,
        us: u64,
        n: u64,
        scope: Option<RecordedScope>,
    ) -> std::path::PathBuf {
        let mut cpu = CpuStats::ZERO;
        cpu.buckets[bucket_index(us * 1000)] = n;
        cpu.log2[log2_slot(us * 1000 / unit.ns())] = n;
        cpu.sum_ns = (us * 1000).saturating_mul(n);
        let waits = Waits::from_cpus(&[cpu]);
        let slice = Slice::fixed(3_000_000, "test");
        let mut report = Report::new(
            HookMode::Btf,
            unit,
            &waits,
            &slice,
            Duration::from_secs(1),
            true,
        );
        report.scope = scope;
        let path = std::env::temp_dir().join(format!("schedlat-cmp-{}-{name}", std::process::id()));
        fs::write(&path, json::render(&report)).unwrap();
        path
    }

    #[test]
    fn another_schema_is_named_not_a_missing_field() {
        let path = std::env::temp_dir().join(format!("schedlat-cmp-{}-schema", std::process::id()));
        fs::write(
            &path,
            "{\"schema\":\"schedlat.compare.v1\",\"before\":{}}\n",
        )
        .unwrap();
        let e = format!("{:#}", Recording::load(&path).err().unwrap());
        fs::remove_file(&path).unwrap();
        assert!(
            e.contains("not a recording (schema schedlat.compare.v1)"),
            "{e}"
        );
        assert!(!e.contains("missing field"), "{e}");
    }

    /// Regression (fuzz_compare_input): a recording whose counts add up
    /// past 2^64 overflowed in Waits::count; it is refused on reading.
    #[test]
    fn counts_past_u64_are_refused() {
        let one = fs::read_to_string(recording("big", Unit::Usecs, 3000, u64::MAX / 2 + 1, None))
            .unwrap();
        // Two intervals of 2^63 waits each: 2^64 in all.
        let e = format!(
            "{:#}",
            Recording::parse(Path::new("big"), one.repeat(2).as_bytes())
                .err()
                .unwrap()
        );
        assert!(
            e.contains("big:2: wait counts add up to more than 2^64"),
            "{e}"
        );
        Recording::parse(Path::new("big"), one.as_bytes()).unwrap();
    }

    /// A recorder dump (its directory) is read as a recording: the total
    /// series' intervals merged, the per-cgroup series and slow waits not.
    #[test]
    fn a_recorder_dump_is_read_beside_a_recording_with_scope() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/recorder-dump");
        let text = fs::read_to_string(dir.join("dump.jsonl")).unwrap();
        let total: u64 = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["type"] == "interval" && v["series"] == "total")
            .map(|v| {
                v["histogram"]["buckets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| b["count"].as_u64().unwrap())
                    .sum::<u64>()
            })
            .sum();
        let dump = Recording::load(&dir).unwrap();
        assert!(total > 0);
        assert_eq!(dump.waits.count(), total);
        let scoped = RecordedScope {
            kernel: "k".into(),
            host: "h".into(),
            ..RecordedScope::default()
        };
        let file =
            Recording::load(&recording("vs-dump", Unit::Usecs, 100, 5, Some(scoped))).unwrap();
        let lines = file.differences(&dump);
        assert!(
            lines.iter().any(|l| l.contains("recorder dump")),
            "{lines:?}"
        );
    }

    /// Issue 48 item 15: compare took a dump's line over 1 MiB (up to a
    /// recording's 256 MiB) that replay refuses; both refuse it now.
    #[test]
    fn a_dump_line_over_a_mib_is_refused_as_replay_refuses_it() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/recorder-dump");
        let text = fs::read_to_string(dir.join("dump.jsonl")).unwrap();
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        // JSON allows the spaces: the line means what it meant.
        let second = lines[1].strip_suffix('}').unwrap().to_string();
        lines[1] = format!("{second}{}}}", " ".repeat(dump::MAX_LINE_BYTES));
        let long = lines.join("\n") + "\n";
        let replay = format!("{:#}", dump::parse(&long, "long").err().unwrap());
        assert!(replay.contains("longer than 1048576 bytes"), "{replay}");
        let compare = format!(
            "{:#}",
            Recording::parse(Path::new("long"), long.as_bytes())
                .err()
                .unwrap()
        );
        assert!(
            compare.contains("line 2 is longer than 1048576 bytes"),
            "{compare}"
        );
        Recording::parse(Path::new("whole"), text.as_bytes()).unwrap();
    }

    #[test]
    fn a_scope_mismatch_is_reported() {
        let whole = RecordedScope {
            kernel: "k".into(),
            host: "h".into(),
            ..RecordedScope::default()
        };
        let one = RecordedScope {
            pid: Some(7),
            ..whole.clone()
        };
        let b = Recording::load(&recording(
            "whole",
            Unit::Usecs,
            100,
            5,
            Some(whole.clone()),
        ))
        .unwrap();
        let a = Recording::load(&recording("one", Unit::Usecs, 100, 5, Some(one))).unwrap();
        assert_eq!(
            b.differences(&a),
            ["filters: the whole system before, -p 7 after"]
        );
        let same = Recording::load(&recording("same", Unit::Usecs, 100, 5, Some(whole))).unwrap();
        assert!(b.differences(&same).is_empty());
        let old = Recording::load(&recording("old", Unit::Usecs, 100, 5, None)).unwrap();
        assert!(b.differences(&old)[0].contains("only the before recording"));
    }
}
