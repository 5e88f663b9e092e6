//! The kernel's field offsets the timer programs read, from the running
//! kernel's BTF, in the layout of their `OFFSETS` global.

use anyhow::{Context, Result, bail};
use btf_rs::{Btf, Type};

// The eBPF crate's own file: one definition, so the layout written here is
// the one the programs read.
#[allow(
    unreachable_pub,
    dead_code,
    reason = "the eBPF crate's file: its items are pub there"
)]
#[path = "../../../bench-ebpf/src/offsets.rs"]
mod layout;

pub(super) use layout::{Offsets, SYMBOL};

// SAFETY: repr(C) with u64 fields only: no padding, any bit pattern valid.
unsafe impl aya::Pod for Offsets {}

/// The offsets in the running kernel (`btf`); the decision's only with
/// `decision`, 0 otherwise (the plain timer reads none of them).
pub(super) fn resolve(btf: &Btf, decision: bool) -> Result<Offsets> {
    let at = |strukt, member| member_offset(btf, strukt, member).map(u64::from);
    let pid = at("task_struct", "pid")?;
    if !decision {
        return Ok(Offsets {
            pid,
            ..Offsets::ZERO
        });
    }
    Ok(Offsets {
        pid,
        se_cfs_rq: at("task_struct", "se")? + at("sched_entity", "cfs_rq")?,
        cfs_rq_rq: at("cfs_rq", "rq")?,
        rq_curr: at("rq", "curr")?,
        rq_nr_switches: at("rq", "nr_switches")?,
        ti_flags: at("task_struct", "thread_info")? + at("thread_info", "flags")?,
    })
}

/// The byte offset of `member` in `struct strukt`, found among its
/// members and those of its anonymous structs and unions (`rq->curr` is in
/// one from 6.13).
fn member_offset(btf: &Btf, strukt: &str, member: &str) -> Result<u32> {
    let ids = btf
        .resolve_ids_by_name(strukt)
        .with_context(|| format!("struct {strukt} is not in the kernel's BTF"))?;
    for id in ids {
        if let Ok(Type::Struct(s)) = btf.resolve_type_by_id(id)
            && let Some(offset) = find_member(btf, &s, member, 0)
        {
            return Ok(offset / 8);
        }
    }
    bail!("struct {strukt} has no member {member} in the kernel's BTF")
}

/// `member`'s bit offset in `s`, descending into anonymous members.
fn find_member(btf: &Btf, s: &btf_rs::Struct, member: &str, depth: u32) -> Option<u32> {
    for m in &s.members {
        match btf.resolve_name(m) {
            Ok(name) if name == member => return Some(m.bit_offset()),
            Ok(name) if !name.is_empty() => continue,
            _ => {}
        }
        if depth < 4
            && let Ok(Type::Struct(inner) | Type::Union(inner)) = btf.resolve_chained_type(m)
            && let Some(offset) = find_member(btf, &inner, member, depth + 1)
        {
            return Some(m.bit_offset() + offset);
        }
    }
    None
}
