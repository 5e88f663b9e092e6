"""Reads a recorder dump's waits.hlog with the HdrHistogram Python package
and checks it against the dump's JSON Lines: the same intervals per series,
the same count, and percentiles in the same schedlat bucket (within its
width, at most 1/8 of its lower bound: docs/recorder.md).

usage: check_hlog.py DUMP_DIR   (prints a summary; exit 1 on a mismatch)
"""
import json
import math
import sys

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader


def bucket_bounds(low_ns, buckets):
    for b in buckets:
        if b["low_ns"] <= low_ns and (b["high_ns"] is None or low_ns <= b["high_ns"]):
            return b
    return None


def bucket_at_rank(buckets, rank):
    seen = 0
    for b in buckets:
        seen += b["count"]
        if seen >= rank:
            return b
    raise AssertionError(f"rank {rank} beyond the buckets")


same_bucket = [0]


def main(dump):
    lines = [json.loads(l) for l in open(f"{dump}/dump.jsonl")]
    intervals = [l for l in lines if l["type"] == "interval"]
    reader = HistogramLogReader(f"{dump}/waits.hlog", HdrHistogram(1, 1 << 42, 2))
    read = []
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            break
        read.append(h)
    assert len(read) == len(intervals), f"{len(read)} histograms in the .hlog, {len(intervals)} in the JSON"
    checked = 0
    for h, j in zip(read, intervals):
        tag = j["series"].replace(" ", "_").replace(",", "_")
        assert h.get_tag() == tag, (h.get_tag(), tag)
        ours = j["histogram"]
        assert h.get_total_count() == ours["count"], (h.get_total_count(), ours["count"])
        start_s = h.get_start_time_stamp() / 1000.0
        assert abs(start_s - j["start_unix_ns"] / 1e9) < 0.002, (start_s, j["start_unix_ns"])
        if ours["count"] == 0:
            continue
        for q, key in ((50, "p50_ns"), (90, "p90_ns"), (99, "p99_ns"), (99.9, "p99_9_ns")):
            theirs = h.get_value_at_percentile(q)
            mine = ours["percentiles"][key]
            # HdrHistogram ranks by rounding, schedlat by nearest rank
            # (ceiling): find the JSON bucket of each rank.
            n = ours["count"]
            b_theirs = bucket_at_rank(ours["buckets"], max(int(q * n / 100 + 0.5), 1))
            b_mine = bucket_at_rank(ours["buckets"], min(max(math.ceil(q * n / 100), 1), n))
            high = b_theirs["high_ns"] if b_theirs["high_ns"] is not None else theirs
            assert b_theirs["low_ns"] <= theirs <= high, f"p{q}: hdr {theirs} ns outside {b_theirs}"
            assert b_mine["low_ns"] <= mine <= (b_mine["high_ns"] or mine), f"p{q}: {mine} outside {b_mine}"
            if b_theirs is b_mine:
                width = high - b_mine["low_ns"] + 1
                assert abs(theirs - mine) < width, f"p{q}: hdr {theirs}, schedlat {mine}, {b_mine}"
                assert width * 8 <= max(b_mine["low_ns"], 8), b_mine
                same_bucket[0] += 1
            checked += 1
        # Every schedlat bucket's count, exactly.
        for b in ours["buckets"]:
            high = b["high_ns"] if b["high_ns"] is not None else b["low_ns"]
            n = h.get_count_at_value(b["low_ns"] + (high - b["low_ns"]) // 2)
            assert n == b["count"], f"bucket {b}: hdr counts {n}"
    print(f"hlog: {len(read)} interval histograms: every bucket count equal; {checked} percentiles in the bucket of their rank, "
          f"{same_bucket[0]} of them in schedlat's own percentile's bucket and within its width (<= 1/8 of its low bound)")


if __name__ == "__main__":
    main(sys.argv[1])
