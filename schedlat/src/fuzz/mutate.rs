//! The proptest driver of the fuzz targets (src/fuzz/mod.rs), in every
//! `cargo test`: each target mutates the seeds in
//! `schedlat/fuzz/corpus/<target>/` (real files from kernels and tools, and
//! any input that once failed) with proptest: byte flips, inserts,
//! deletions, duplicated or spliced ranges, numbers replaced by boundary
//! values. A panic fails the test, and proptest shrinks the input to the
//! smallest that still fails; add it to the corpus when fixing the cause.
//!
//! A run is made of rounds of 200 cases, each round seeded from
//! `SCHEDLAT_FUZZ_SEED` (default fixed, so a failure reproduces) and its
//! number. `SCHEDLAT_FUZZ_ROUNDS` sets the exact number of rounds and then
//! the time budget is ignored: `cargo xtask test` (and so CI) sets 100
//! (xtask's `FUZZ_ROUNDS`), so every CI run tries the same inputs whatever
//! the machine's speed; that took 10-18 s per target (the BTF target, which
//! wrote each case to a file on disk, up to 54 s while the disk was busy;
//! now a memfd) in the debug build on a busy 2-core VM. Without it a target
//! runs for `SCHEDLAT_FUZZ_SECS` seconds (default 1), at least one
//! round: the way to explore longer by hand.

use std::{
    fmt,
    path::PathBuf,
    time::{Duration, Instant},
};

use proptest::{
    collection::vec,
    prelude::*,
    test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner},
};

/// A mutated input, shown as text in failure reports.
#[derive(Clone)]
pub(super) struct Input(pub Vec<u8>);

impl fmt::Debug for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(&self.0))
    }
}

#[derive(Debug, Clone)]
enum Op {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize, usize),
    Duplicate(usize, usize),
    Truncate(usize),
    /// Replace the n-th run of ASCII digits with a boundary value.
    Number(usize, u64),
    /// Overwrite 4 bytes (a BTF header field or type info) with a value.
    Word(usize, u32),
    /// Insert a range of another seed.
    Splice(usize, usize, usize, usize),
}

const BOUNDARIES: [u64; 14] = [
    0,
    1,
    7,
    8,
    16,
    255,
    4096,
    65_535,
    65_536,
    u32::MAX as u64,
    u32::MAX as u64 + 1,
    i64::MAX as u64,
    u64::MAX - 1,
    u64::MAX,
];

fn op() -> impl Strategy<Value = Op> {
    let number = prop_oneof![
        proptest::sample::select(&BOUNDARIES[..]),
        any::<u64>(),
        0u64..100_000,
    ];
    let word = prop_oneof![
        proptest::sample::select(&[0u32, 1, 0xffff, 0x0100_0000, 0x1f00_ffff, u32::MAX][..]),
        any::<u32>(),
    ];
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Op::Flip(at, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Op::Insert(at, b)),
        (any::<usize>(), 1usize..64).prop_map(|(at, n)| Op::Delete(at, n)),
        (any::<usize>(), 1usize..256).prop_map(|(at, n)| Op::Duplicate(at, n)),
        any::<usize>().prop_map(Op::Truncate),
        (any::<usize>(), number).prop_map(|(n, v)| Op::Number(n, v)),
        (any::<usize>(), word).prop_map(|(at, v)| Op::Word(at, v)),
        (any::<usize>(), any::<usize>(), 1usize..256, any::<usize>())
            .prop_map(|(s, from, n, at)| Op::Splice(s, from, n, at)),
    ]
}

fn apply(seed: &[u8], ops: &[Op], seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut data = seed.to_vec();
    for op in ops {
        let len = data.len();
        let at = |i: usize| if len == 0 { 0 } else { i % len };
        match *op {
            Op::Flip(i, b) if len > 0 => data[at(i)] ^= b.max(1),
            Op::Insert(i, b) => data.insert(if len == 0 { 0 } else { i % (len + 1) }, b),
            Op::Delete(i, n) if len > 0 => {
                let start = at(i);
                data.drain(start..(start + n).min(len));
            }
            Op::Duplicate(i, n) if len > 0 => {
                let start = at(i);
                let chunk = data[start..(start + n).min(len)].to_vec();
                data.splice(start..start, chunk);
            }
            Op::Truncate(i) => data.truncate(if len == 0 { 0 } else { i % (len + 1) }),
            Op::Number(n, v) => replace_number(&mut data, n, v),
            Op::Word(i, v) if len >= 4 => {
                let start = at(i).min(len - 4);
                data[start..start + 4].copy_from_slice(&v.to_le_bytes());
            }
            Op::Splice(s, from, n, i) => {
                let other = &seeds[s % seeds.len()];
                if !other.is_empty() {
                    let from = from % other.len();
                    let chunk = &other[from..(from + n).min(other.len())];
                    let i = if len == 0 { 0 } else { i % (len + 1) };
                    data.splice(i..i, chunk.iter().copied());
                }
            }
            _ => {}
        }
    }
    data
}

fn replace_number(data: &mut Vec<u8>, n: usize, value: u64) {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < data.len() {
        if data[i].is_ascii_digit() {
            let start = i;
            while i < data.len() && data[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((start, i));
        } else {
            i += 1;
        }
    }
    if let Some(&(start, end)) = runs.get(n % runs.len().max(1)) {
        data.splice(start..end, value.to_string().into_bytes());
    }
}

pub(super) fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

/// The seeds of `target`, sorted by name so runs are reproducible.
pub(super) fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fuzz corpus {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let seeds: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!seeds.is_empty(), "fuzz corpus {} is empty", dir.display());
    seeds
}

/// How long [`fuzz`] runs: an exact number of rounds or a time budget.
enum Bound {
    Rounds(u64),
    Time(Duration),
}

fn bound() -> Bound {
    if let Some(rounds) = std::env::var("SCHEDLAT_FUZZ_ROUNDS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        return Bound::Rounds(rounds.max(1));
    }
    Bound::Time(budget())
}

fn budget() -> Duration {
    let secs = std::env::var("SCHEDLAT_FUZZ_SECS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(1.0);
    Duration::from_secs_f64(secs.max(0.0))
}

/// Runs `check` on every seed, then on mutations of them for the rounds or
/// the time [`bound`] gives. `check` panics on a failure.
pub(super) fn fuzz(target: &str, check: impl Fn(&[u8])) {
    let seeds = corpus(target);
    for seed in &seeds {
        check(seed);
    }
    let base: u64 = std::env::var("SCHEDLAT_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x05ce_d1a7);
    let strategy = {
        let seeds = seeds.clone();
        (0..seeds.len(), vec(op(), 1..16))
            .prop_map(move |(i, ops)| Input(apply(&seeds[i], &ops, &seeds)))
    };
    let config = Config {
        cases: 200,
        failure_persistence: None,
        max_shrink_time: 20_000,
        ..Config::default()
    };
    let bound = bound();
    let started = Instant::now();
    let mut round = 0u64;
    let mut cases = 0u64;
    loop {
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&(base ^ round).to_le_bytes());
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed);
        let mut runner = TestRunner::new_with_rng(config.clone(), rng);
        if let Err(e) = runner.run(&strategy, |input| {
            check(&input.0);
            Ok(())
        }) {
            let saved = match &e {
                TestError::Fail(_, input) => save_failure(target, &input.0),
                TestError::Abort(_) => String::new(),
            };
            panic!(
                "fuzz target {target} failed (SCHEDLAT_FUZZ_SEED={base}, round {round}): {e}{saved}"
            );
        }
        round += 1;
        cases += u64::from(config.cases);
        let done = match bound {
            Bound::Rounds(rounds) => round >= rounds,
            Bound::Time(budget) => started.elapsed() >= budget,
        };
        if done {
            break;
        }
    }
    eprintln!(
        "fuzz {target}: {round} rounds, {cases} cases in {:.1?}, no failure",
        started.elapsed()
    );
}

/// Writes a minimal failing input as its exact bytes (the report shows it
/// as lossy text, which loses binary BTF), ready to go into the corpus.
fn save_failure(target: &str, data: &[u8]) -> String {
    let dir = std::env::temp_dir().join("schedlat-fuzz-failures");
    let path = dir.join(format!("{target}-{}.bin", std::process::id()));
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, data)) {
        Ok(()) => format!("\nminimal failing input saved as {}", path.display()),
        Err(e) => format!("\n(cannot save the minimal failing input: {e})"),
    }
}
