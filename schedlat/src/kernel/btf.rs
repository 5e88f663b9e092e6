//! Kernel struct offsets for the tp_btf programs, resolved at load time from
//! the running kernel's BTF (`/sys/kernel/btf/vmlinux`). Rust eBPF has no
//! CO-RE relocations (aya issue 349), so this is how one object runs on many
//! kernels: the offsets travel to the programs as read-only globals, in the
//! kernel configuration structs this module fills (schedlat_common::kconfig).

use std::{
    cell::RefCell,
    collections::HashMap,
    path::{Path, PathBuf},
    rc::Rc,
};

use btf_rs::{Btf, Type};
use schedlat_common::{
    cast,
    kconfig::{
        CauseOffsets, CgroupOffsets, DecisionOffsets, DelayedCount, PidnsOffsets, RqOffsets,
        TaskOffsets,
    },
    names,
};
use thiserror::Error;

pub(crate) const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

#[derive(Debug, Error)]
pub(crate) enum BtfError {
    #[error(
        "kernel BTF not found at {0}: this kernel was built without CONFIG_DEBUG_INFO_BTF. Use `--hook tp` (classic tracepoints) or point --btf at a BTF file for this kernel"
    )]
    Missing(PathBuf),
    /// A BTF file given with --btf (or SCHEDLAT_BTF) that is not there: a
    /// typo, not a kernel without BTF.
    #[error(
        "BTF file {0} does not exist (given with --btf or SCHEDLAT_BTF); leave it out to use the kernel's own, {VMLINUX_BTF}"
    )]
    NoSuchFile(PathBuf),
    #[error("cannot parse BTF {path}: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("BTF {path} has no struct `{name}`")]
    NoStruct { path: PathBuf, name: String },
    #[error(
        "BTF {path} has no typedef {name}: this kernel has no tp_btf attach point for that tracepoint (try --hook tp)"
    )]
    NoTracepoint { path: PathBuf, name: String },
    #[error("BTF {path}: {what}")]
    Layout { path: PathBuf, what: String },
    #[error("BTF {path}: struct {strukt} has none of the fields {fields:?}")]
    NoField {
        path: PathBuf,
        strukt: String,
        fields: Vec<String>,
    },
}

/// Parses the BTF at `path` (memory-mapped: only what is looked up is read).
pub(crate) fn open(path: &Path) -> Result<Btf, BtfError> {
    if !path.exists() {
        return Err(if path == Path::new(VMLINUX_BTF) {
            BtfError::Missing(path.to_path_buf())
        } else {
            BtfError::NoSuchFile(path.to_path_buf())
        });
    }
    crate::sys::files::check_regular(path).map_err(|e| BtfError::Parse {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    // sysfs only allows mmap of /sys/kernel/btf/vmlinux since 6.16 (older
    // kernels return ENODEV, found by `cargo xtask vm-test` on 6.1 and
    // 6.12). btf-rs's other backend parses every type and string into hash
    // maps: 0.8 s and 41 MiB for 6.18's BTF. A copy in memory that can be
    // mapped costs 50 ms and 8 MiB; the full parse stays the last resort
    // (no /proc, no memfd).
    Btf::from_file_with_backend(path, btf_rs::Backend::Mmap)
        .or_else(|_| mapped_copy(path))
        .or_else(|_| Btf::from_file(path))
        .map_err(|e| BtfError::Parse {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
}

/// The BTF at `path` copied into a memfd and parsed from a mapping of that.
fn mapped_copy(path: &Path) -> Result<Btf, btf_rs::Error> {
    use std::{
        fs::File,
        os::fd::{AsRawFd, FromRawFd},
    };
    // SAFETY: a static C string; the fd returned is new and ours.
    let fd = unsafe { libc::memfd_create(c"schedlat-btf".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: fd is a valid descriptor nobody else owns.
    let mut copy = unsafe { File::from_raw_fd(fd) };
    std::io::copy(&mut File::open(path)?, &mut copy)?;
    // btf-rs opens by path; the mapping outlives the descriptor.
    Btf::from_file_with_backend(
        format!("/proc/self/fd/{}", copy.as_raw_fd()),
        btf_rs::Backend::Mmap,
    )
}

/// Every struct an offset set reads (and the enums read: `bpf_func_id`, the
/// helpers this kernel has; sched_ext's task states), and the tracepoints' typedefs: their ids are found in
/// one pass over the BTF (btf_names.rs).
const STRUCTS: [&str; 22] = [
    "task_struct",
    "sched_ext_entity",
    "scx_ent_flags",
    "scx_task_state",
    "pt_regs",
    "bpf_func_id",
    "thread_info",
    "load_weight",
    "sched_entity",
    "cfs_rq",
    "rq",
    "task_group",
    "cfs_bandwidth",
    "css_set",
    "cgroup",
    "cgroup_subsys_state",
    "cgroup_root",
    "kernfs_node",
    "pid",
    "upid",
    "pid_namespace",
    "ns_common",
];

/// The structs of one BTF, each looked up once however many offset sets
/// read it: a lookup by name is a scan over every type (~150,000 on 6.18,
/// about 0.8 ms), and the offset sets share task_struct, cfs_rq and rq.
pub(crate) struct Layouts<'a> {
    btf: &'a Btf,
    path: &'a Path,
    /// The ids of STRUCTS and the tracepoint typedefs, from one pass; None
    /// where the file cannot be read (btf-rs then scans per name).
    ids: Ids,
    /// By name; None when the BTF has no such struct.
    found: RefCell<HashMap<&'static str, Option<Rc<StructLayout>>>>,
}

/// The BTF at `path` opened (`open`) and its Layouts' ids found
/// (btf_names.rs) at once, on two threads: neither needs the other, and
/// each is a pass over the file (about 2 ms each on 6.18).
pub(crate) fn open_indexed(path: &Path) -> Result<(Btf, Ids), BtfError> {
    std::thread::scope(|scope| {
        let ids = scope.spawn(|| ids_of_wanted(path));
        let btf = open(path)?;
        Ok((btf, ids.join().unwrap_or(None)))
    })
}

/// The ids of STRUCTS and the tracepoint typedefs, by name (None where the
/// file cannot be read for the one-pass walk).
pub(crate) type Ids = Option<HashMap<String, Vec<u32>>>;

fn ids_of_wanted(path: &Path) -> Ids {
    // sched_waking's too: indexing one more name costs nothing, and
    // `--waking` then needs no second scan.
    let typedefs = names::BTF_PROGRAMS
        .iter()
        .chain([&names::BTF_WAKING, &names::BTF_CGROUP_MKDIR])
        .map(|(_, tp)| format!("btf_trace_{tp}"))
        .collect::<Vec<_>>();
    let mut wanted: Vec<&str> = STRUCTS.to_vec();
    wanted.extend(typedefs.iter().map(String::as_str));
    wanted.push(RDONLY_CAST);
    crate::kernel::btf_names::ids_of(path, &wanted)
}

impl<'a> Layouts<'a> {
    pub(crate) fn new(btf: &'a Btf, path: &'a Path) -> Self {
        Layouts::indexed(btf, path, ids_of_wanted(path))
    }

    /// With the ids `open_indexed` found beside the parse.
    pub(crate) fn indexed(btf: &'a Btf, path: &'a Path, ids: Ids) -> Self {
        Layouts {
            btf,
            path,
            ids,
            found: RefCell::default(),
        }
    }

    /// The ids of the types named `name`, ascending.
    fn ids(&self, name: &str) -> Vec<u32> {
        match self.ids.as_ref().and_then(|ids| ids.get(name)) {
            Some(ids) => ids.clone(),
            None => self.btf.resolve_ids_by_name(name).unwrap_or_default(),
        }
    }

    /// The first id of a type named `name` that is of the kind `wanted`
    /// accepts (a name can be a struct and a typedef at once), as aya's own
    /// lookups pick.
    fn first_id(&self, name: &str, wanted: fn(&Type) -> bool) -> Option<u32> {
        let mut ids = self.ids(name);
        ids.sort_unstable();
        ids.into_iter()
            .find(|&id| self.btf.resolve_type_by_id(id).is_ok_and(|t| wanted(&t)))
    }

    fn get(&self, name: &'static str) -> Result<Rc<StructLayout>, BtfError> {
        let layout = self
            .found
            .borrow_mut()
            .entry(name)
            .or_insert_with(|| StructLayout::find(self, name).ok().map(Rc::new))
            .clone();
        layout.ok_or_else(|| BtfError::NoStruct {
            path: self.path.to_path_buf(),
            name: name.to_string(),
        })
    }

    /// `strukt`'s member `name`, if both exist.
    fn field(&self, strukt: &'static str, name: &str) -> Option<u64> {
        self.get(strukt).and_then(|s| s.offset_of(&[name])).ok()
    }

    /// The value of `enum name`'s enumerator `member`, if both exist.
    fn enumerator(&self, name: &str, member: &str) -> Option<u64> {
        let id = self.first_id(name, |t| matches!(t, Type::Enum(_) | Type::Enum64(_)))?;
        let named = |m: &dyn btf_rs::BtfType| self.btf.resolve_name(m).is_ok_and(|n| n == member);
        match self.btf.resolve_type_by_id(id).ok()? {
            Type::Enum(e) => e
                .members
                .iter()
                .find(|m| named(*m))
                .map(|m| u64::from(m.val())),
            Type::Enum64(e) => e.members.iter().find(|m| named(*m)).map(|m| m.val()),
            _ => None,
        }
    }
}

/// What the decision split reads (docs/decision.md), or None when this
/// kernel lacks what its request needs: `rq->curr`, `rq->nr_switches`
/// and `task->thread_info.flags` (CONFIG_THREAD_INFO_IN_TASK). The fair
/// class's fields are resolved where they exist: EEVDF's (6.6+, `fair`
/// 1), else CFS's (`fair` 2); the TIF masks and `tick_ns` are the
/// caller's (kernel/decision.rs).
pub(crate) fn decision_offsets(layouts: &Layouts) -> Option<DecisionOffsets> {
    let field = |strukt, name| layouts.field(strukt, name);
    let first = |strukt: &'static str, names: &[&str]| {
        layouts
            .get(strukt)
            .ok()
            .and_then(|s| s.offset_of(names).ok())
    };
    let task_se = field("task_struct", "se")?;
    let (regs_syscall, yield_nr) = yield_syscall(layouts, std::env::consts::ARCH).unwrap_or((0, 0));
    let (task_scx_flags, ext_state_mask, ext_enabled) = ext_state(layouts).unwrap_or((0, 0, 0));
    let mut offsets = DecisionOffsets {
        regs_syscall,
        yield_nr,
        task_scx_flags,
        ext_state_mask,
        ext_enabled,
        rq_curr: field("rq", "curr")?,
        rq_nr_switches: field("rq", "nr_switches")?,
        task_ti_flags: field("task_struct", "thread_info")? + field("thread_info", "flags")?,
        task_se,
        ..DecisionOffsets::ZERO
    };
    // The task groups (CONFIG_FAIR_GROUP_SCHED), all or none.
    let (se_my_q, cfs_rq_tg, tg_css) = field("sched_entity", "my_q")
        .zip(field("cfs_rq", "tg"))
        .zip(field("task_group", "css"))
        .map_or((0, 0, 0), |((my_q, tg), css)| (my_q, tg, css));
    let eevdf = || -> Option<DecisionOffsets> {
        let protect = first("sched_entity", &["vprot", "vlag"])?;
        Some(DecisionOffsets {
            fair: 1,
            has_vprot: u64::from(field("sched_entity", "vprot").is_some()),
            preempt_short: u64::from(field("sched_entity", "custom_slice").is_some()),
            se_weight: field("sched_entity", "load")? + field("load_weight", "weight")?,
            se_vruntime: field("sched_entity", "vruntime")?,
            se_deadline: field("sched_entity", "deadline")?,
            se_vlag: protect,
            se_slice: field("sched_entity", "slice")?,
            se_on_rq: field("sched_entity", "on_rq")?,
            se_depth: field("sched_entity", "depth")?,
            se_parent: field("sched_entity", "parent")?,
            se_cfs_rq: field("sched_entity", "cfs_rq")?,
            se_my_q,
            cfs_rq_tg,
            tg_css,
            se_exec_start: field("sched_entity", "exec_start")?,
            rq_clock_task: field("rq", "clock_task")?,
            cfs_key_sum: first("cfs_rq", &["sum_w_vruntime", "avg_vruntime"])?,
            cfs_weight_sum: first("cfs_rq", &["sum_weight", "avg_load"])?,
            cfs_zero: first("cfs_rq", &["zero_vruntime", "min_vruntime"])?,
            ..offsets
        })
    };
    if let Some(eevdf) = eevdf() {
        return Some(eevdf);
    }
    // CFS (before 6.6): the rule needs only the policies.
    if field("sched_entity", "deadline").is_none() {
        offsets.fair = 2;
    }
    Some(offsets)
}

/// How a task in the sched_ext class is told (6.12+): the offset of
/// `task->scx.flags`, the mask of its state bits and the state a task in
/// the class holds (`SCX_TASK_ENABLED`, in place). Until 7.x the states
/// are `enum scx_task_state` (ENABLED 3), shifted by
/// `SCX_TASK_STATE_SHIFT` into the flags; 7.x lists them among the flags
/// already in place (`scx_ent_flags`: ENABLED 4 << 8, three state bits).
/// None where the kernel has no sched_ext (CONFIG_SCHED_CLASS_EXT off, as
/// in Debian 12's 6.12, or before 6.12).
pub(crate) fn ext_state(layouts: &Layouts) -> Option<(u64, u64, u64)> {
    let flags =
        layouts.field("task_struct", "scx")? + layouts.field("sched_ext_entity", "flags")?;
    let mask = layouts.enumerator("scx_ent_flags", "SCX_TASK_STATE_MASK")?;
    let enabled = match layouts.enumerator("scx_ent_flags", "SCX_TASK_ENABLED") {
        Some(in_place) => in_place,
        None => {
            let shift = layouts.enumerator("scx_ent_flags", "SCX_TASK_STATE_SHIFT")?;
            layouts.enumerator("scx_task_state", "SCX_TASK_ENABLED")? << shift
        }
    };
    (mask != 0 && enabled & mask == enabled).then_some((flags, mask, enabled))
}

/// Where the user registers the kernel keeps for a task hold its system
/// call number, and sched_yield()'s number there, on `arch`: how the
/// decision split tells a holder that yielded (decision.rs `in_yield`).
/// None where the kernel has no bpf_task_pt_regs() (5.15+: its id in the
/// BTF's `enum bpf_func_id`) or the architecture is not one of these.
pub(crate) fn yield_syscall(layouts: &Layouts, arch: &str) -> Option<(u64, u64)> {
    // include/uapi/asm-generic/unistd.h (arm64) and
    // arch/x86/entry/syscalls/syscall_64.tbl.
    let (field, nr) = match arch {
        "x86_64" => ("orig_ax", 24),
        "aarch64" => ("syscallno", 124),
        _ => return None,
    };
    let id = layouts.first_id("bpf_func_id", |t| matches!(t, Type::Enum(_)))?;
    let Ok(Type::Enum(helpers)) = layouts.btf.resolve_type_by_id(id) else {
        return None;
    };
    let has_helper = helpers.members.iter().any(|m| {
        layouts
            .btf
            .resolve_name(m)
            .is_ok_and(|n| n == "BPF_FUNC_task_pt_regs")
    });
    if !has_helper {
        return None;
    }
    Some((layouts.field("pt_regs", field)?, nr))
}

pub(crate) fn task_offsets(layouts: &Layouts) -> Result<TaskOffsets, BtfError> {
    let task = layouts.get("task_struct")?;
    let offsets = TaskOffsets {
        pid: task.offset_of(&["pid"])?,
        tgid: task.offset_of(&["tgid"])?,
        state: task.offset_of(&["__state", "state"])?,
        comm: task.offset_of(&["comm"])?,
        policy: task.offset_of(&["policy"])?,
        static_prio: task.offset_of(&["static_prio"])?,
        rt_priority: task.offset_of(&["rt_priority"])?,
    };
    #[cfg(feature = "fault-injection")]
    let offsets = inject_pid_offset(offsets);
    Ok(offsets)
}

/// sizeof(struct task_struct), for checking offsets against it.
pub(crate) fn task_struct_size(layouts: &Layouts) -> Result<u64, BtfError> {
    layouts.get("task_struct").map(|s| s.size)
}

/// The run-queue length chain, or None when this kernel lacks a link
/// (`se.cfs_rq` and `cfs_rq.rq` need CONFIG_FAIR_GROUP_SCHED); with the
/// counters of delayed tasks where this kernel has them ([`delayed_count`]).
pub(crate) fn rq_offsets(layouts: &Layouts) -> Option<RqOffsets> {
    let field = |strukt, name| layouts.field(strukt, name);
    let (delayed, cfs_counter_a, cfs_counter_b) = delayed_count(layouts);
    Some(RqOffsets {
        resolved: 1,
        task_cfs_rq: field("task_struct", "se")? + field("sched_entity", "cfs_rq")?,
        cfs_rq_rq: field("cfs_rq", "rq")?,
        rq_nr_running: field("rq", "nr_running")?,
        delayed: delayed as u64,
        cfs_counter_a,
        cfs_counter_b,
    })
}

/// Where this kernel counts the tasks delayed dequeue keeps queued after
/// they blocked: the offsets in `struct rq` of its root cfs_rq's
/// counters (`rq->cfs` is embedded). Taken out of rq->nr_running, they
/// leave the tasks that can run: the queue depth counts competitors, not
/// sleepers waiting to be picked off the queue.
pub(crate) fn delayed_count(layouts: &Layouts) -> (DelayedCount, u64, u64) {
    let field = |strukt, name| layouts.field(strukt, name);
    let Some(cfs) = field("rq", "cfs") else {
        return (DelayedCount::None, 0, 0);
    };
    if let (Some(queued), Some(runnable)) = (
        field("cfs_rq", "h_nr_queued"),
        field("cfs_rq", "h_nr_runnable"),
    ) {
        return (
            DelayedCount::QueuedLessRunnable,
            cfs + queued,
            cfs + runnable,
        );
    }
    match field("cfs_rq", "h_nr_delayed") {
        Some(delayed) => (DelayedCount::Delayed, cfs + delayed, 0),
        None => (DelayedCount::None, 0, 0),
    }
}

/// Which group of a task "held by the same cgroup" compares (the cause
/// split's holder, docs/causes.md), the closest this kernel has to the
/// group its CPU scheduler puts the task in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SchedulerGroup {
    /// `task->sched_task_group` (CONFIG_CGROUP_SCHED): the group the
    /// scheduler shares the CPU between, the cpu controller's cgroup (v1)
    /// or the unified one (v2), or the session's autogroup.
    TaskGroup,
    /// `task->cgroups->subsys[cpu_cgrp_id]`: the cpu controller's cgroup.
    CpuController,
    /// `task->cgroups`: the css_set, the same cgroup in every hierarchy.
    CssSet,
}

impl SchedulerGroup {
    /// For `schedlat check`: what is compared, and what that means.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            SchedulerGroup::TaskGroup => {
                "the CPU scheduler's task group (task_struct.sched_task_group: the cpu controller's cgroup, or the session's autogroup in the root group)"
            }
            SchedulerGroup::CpuController => {
                "the cpu controller's cgroup (css_set.subsys[cpu_cgrp_id]; this kernel has no sched_task_group)"
            }
            SchedulerGroup::CssSet => {
                "the whole css_set (this kernel has no CPU task groups, CONFIG_CGROUP_SCHED off): tasks in different groups of any hierarchy count as another cgroup"
            }
        }
    }
}

/// The group `SchedulerGroup` compares, and its chain from a task:
/// (which, `task_group`, `group_in_cset`, `cset_group`) as CauseOffsets
/// holds them.
pub(crate) fn scheduler_group(
    layouts: &Layouts,
) -> Result<(SchedulerGroup, u64, u64, u64), BtfError> {
    let task = layouts.get("task_struct")?;
    if let Ok(at) = task.offset_of(&["sched_task_group"]) {
        return Ok((SchedulerGroup::TaskGroup, at, 0, 0));
    }
    let cgroups = task.offset_of(&["cgroups"])?;
    let cpu = ["cpu".to_string()];
    let in_cset = subsys_id(layouts.btf, layouts.path, &cpu)
        .ok()
        .zip(layouts.field("css_set", "subsys"))
        .map(|(id, subsys)| subsys + 8 * id);
    Ok(match in_cset {
        Some(at) => (SchedulerGroup::CpuController, cgroups, 1, at),
        None => (SchedulerGroup::CssSet, cgroups, 0, 0),
    })
}

/// What the cause split reads besides the run-queue chain: task->flags and
/// the task's scheduler group (`scheduler_group`), then each piece of the
/// kernel's accounting where its config put it in the BTF.
pub(crate) fn cause_offsets(layouts: &Layouts) -> Result<CauseOffsets, BtfError> {
    let task = layouts.get("task_struct")?;
    let (_, task_group, group_in_cset, cset_group) = scheduler_group(layouts)?;
    let rq_field = |name| layouts.field("rq", name);
    let field = |strukt, name| layouts.field(strukt, name);
    let throttled = field("cfs_rq", "tg").zip(
        field("task_group", "cfs_bandwidth")
            .zip(field("cfs_bandwidth", "throttled_time"))
            .map(|(a, b)| a + b),
    );
    let has = |o: Option<u64>| (u64::from(o.is_some()), o.unwrap_or(0));
    let (has_rq_cpu, rq_cpu) = has(rq_field("cpu"));
    let (has_steal, rq_steal) = has(rq_field("prev_steal_time_rq"));
    let (has_irq, rq_irq) = has(rq_field("prev_irq_time"));
    Ok(CauseOffsets {
        task_flags: task.offset_of(&["flags"])?,
        task_group,
        group_in_cset,
        cset_group,
        has_rq_cpu,
        rq_cpu,
        has_steal,
        rq_steal,
        has_irq,
        rq_irq,
        has_throttled: u64::from(throttled.is_some()),
        cfs_rq_tg: throttled.map_or(0, |t| t.0),
        tg_throttled_time: throttled.map_or(0, |t| t.1),
    })
}

/// Which css of a task's css_set names its cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CssChoice {
    /// cgroup v2: `dfl_cgrp`.
    Default,
    /// A cgroup v1 hierarchy: `subsys[<controller>_cgrp_id]` of the first of
    /// these controllers the kernel knows.
    Controllers(Vec<String>),
}

/// The chain from a task to the kernfs id of its cgroup in the hierarchy
/// `css` picks.
pub(crate) fn cgroup_offsets(
    layouts: &Layouts,
    css: &CssChoice,
) -> Result<CgroupOffsets, BtfError> {
    let (btf, path) = (layouts.btf, layouts.path);
    let cset = layouts.get("css_set")?;
    let cgroup = layouts.get("cgroup")?;
    let cset_css = match css {
        CssChoice::Default => {
            // The v2 chain reads css fields through the cgroup pointer, which
            // needs `self` to be the cgroup's first member (it always was).
            let self_off = cgroup.offset_of(&["self"])?;
            if self_off != 0 {
                return Err(BtfError::Layout {
                    path: path.to_path_buf(),
                    what: format!("struct cgroup's `self` is at {self_off}, not 0"),
                });
            }
            cset.offset_of(&["dfl_cgrp"])?
        }
        CssChoice::Controllers(names) => {
            let id = subsys_id(btf, path, names)?;
            // subsys is an array of pointers.
            let at = cset.offset_of(&["subsys"])? + 8 * id;
            if at >= cset.size {
                return Err(BtfError::Layout {
                    path: path.to_path_buf(),
                    what: format!(
                        "css_set.subsys[{id}] at byte {at} lies outside the struct ({} bytes)",
                        cset.size
                    ),
                });
            }
            at
        }
    };
    let css = layouts.get("cgroup_subsys_state")?;
    Ok(CgroupOffsets {
        task_cgroups: layouts.get("task_struct")?.offset_of(&["cgroups"])?,
        cset_css,
        css_cgroup: css.offset_of(&["cgroup"])?,
        css_parent: css.offset_of(&["parent"])?,
        cgroup_kn: cgroup.offset_of(&["kn"])?,
        kn_id: layouts.get("kernfs_node")?.offset_of(&["id"])?,
        cgroup_root: cgroup.offset_of(&["root"])?,
        root_hierarchy_id: layouts.get("cgroup_root")?.offset_of(&["hierarchy_id"])?,
        // The caller's: which hierarchy is not in the BTF.
        hierarchy_id: 0,
    })
}

/// The value of `enum cgroup_subsys_id`'s `<controller>_cgrp_id` for the
/// first of `controllers` this kernel has.
fn subsys_id(btf: &Btf, path: &Path, controllers: &[String]) -> Result<u64, BtfError> {
    let members: Vec<(String, u32)> = btf
        .resolve_types_by_name("cgroup_subsys_id")
        .unwrap_or_default()
        .into_iter()
        .find_map(|t| match t {
            Type::Enum(e) => Some(e),
            _ => None,
        })
        .map(|e| {
            e.members
                .iter()
                .map(|m| (btf.resolve_name(m).unwrap_or_default(), m.val()))
                .collect()
        })
        .unwrap_or_default();
    controllers
        .iter()
        .find_map(|c| {
            let want = format!("{c}_cgrp_id");
            members
                .iter()
                .find(|(n, _)| *n == want)
                .map(|(_, v)| u64::from(*v))
        })
        .ok_or_else(|| BtfError::Layout {
            path: path.to_path_buf(),
            what: format!("enum cgroup_subsys_id has no id for the controllers {controllers:?}"),
        })
}

/// The chain from a task to the inode number of its active PID namespace.
pub(crate) fn pidns_offsets(layouts: &Layouts) -> Result<PidnsOffsets, BtfError> {
    let pid = layouts.get("pid")?;
    let upid = layouts.get("upid")?;
    let ns = layouts.get("pid_namespace")?.offset_of(&["ns"])?;
    let inum = layouts.get("ns_common")?.offset_of(&["inum"])?;
    Ok(PidnsOffsets {
        task_thread_pid: layouts.get("task_struct")?.offset_of(&["thread_pid"])?,
        pid_level: pid.offset_of(&["level"])?,
        pid_numbers: pid.offset_of(&["numbers"])?,
        upid_size: upid.size,
        upid_ns: upid.offset_of(&["ns"])?,
        pidns_inum: ns + inum,
    })
}

/// Test builds only (`--features fault-injection`, which `cargo xtask
/// vm-test --inject-bad-offset` uses): SCHEDLAT_FAULT_TASK_PID_OFFSET=<bytes>
/// replaces the resolved task_struct.pid offset, to prove that the VM tests
/// catch a wrong offset. Said on stderr so a failing run explains itself.
#[cfg(feature = "fault-injection")]
fn inject_pid_offset(mut offsets: TaskOffsets) -> TaskOffsets {
    if let Some(pid) = std::env::var("SCHEDLAT_FAULT_TASK_PID_OFFSET")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        say!(
            "schedlat: fault injection: task_struct.pid offset {} replaced by {pid}",
            offsets.pid
        );
        offsets.pid = pid;
    }
    offsets
}

/// The kernel function that makes a pointer untrusted
/// (schedlat_common::cast).
const RDONLY_CAST: &str = "bpf_rdonly_cast";

/// The ids schedlat_common::cast's rewrite writes, or None when this BTF
/// has no `bpf_rdonly_cast` (kernels before 6.2) or no task_struct. Only
/// meaningful for the running kernel's own BTF: the ids go into the
/// programs as they are.
pub(crate) fn cast_ids(layouts: &Layouts) -> Option<cast::Ids> {
    let is_struct = |t: &Type| matches!(t, Type::Struct(_));
    Some(cast::Ids {
        rdonly_cast: layouts.first_id(RDONLY_CAST, |t| matches!(t, Type::Func(_)))?,
        task: Some(layouts.first_id(cast::Struct::Task.btf_name(), is_struct)?),
        cgroup: layouts.first_id(cast::Struct::Cgroup.btf_name(), is_struct),
    })
}

/// The BTF ids of the `btf_trace_<tracepoint>` typedefs that tp_btf
/// programs attach to, as (typedef name, id): for each name the first
/// typedef, as aya's own lookup picks (see attach_btf.rs for their use).
pub(crate) fn tracepoint_ids(
    layouts: &Layouts,
    tracepoints: &[&str],
) -> Result<Vec<(String, u32)>, BtfError> {
    tracepoints
        .iter()
        .map(|tp| {
            let name = format!("btf_trace_{tp}");
            match layouts.first_id(&name, |t| matches!(t, Type::Typedef(_))) {
                Some(id) => Ok((name, id)),
                None => Err(BtfError::NoTracepoint {
                    path: layouts.path.to_path_buf(),
                    name,
                }),
            }
        })
        .collect()
}

/// A struct's members with their byte offsets, flattened through anonymous
/// structs and unions (task_struct hides fields inside them under some
/// configs, e.g. randomized layouts).
struct StructLayout {
    path: PathBuf,
    name: String,
    /// sizeof, in bytes.
    size: u64,
    members: Vec<(String, u64)>,
}

impl StructLayout {
    fn find(layouts: &Layouts, name: &str) -> Result<StructLayout, BtfError> {
        let (btf, path) = (layouts.btf, layouts.path);
        let no_struct = || BtfError::NoStruct {
            path: path.to_path_buf(),
            name: name.to_string(),
        };
        let strukt = layouts
            .ids(name)
            .into_iter()
            .map(|id| btf.resolve_type_by_id(id))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| no_struct())?
            .into_iter()
            .find_map(|t| match t {
                Type::Struct(s) => Some(s),
                _ => None,
            })
            .ok_or_else(no_struct)?;
        let mut members = Vec::new();
        let mut budget = MAX_MEMBERS_VISITED;
        collect_members(btf, &strukt, (0, 0), &mut budget, &mut members);
        Ok(StructLayout {
            path: path.to_path_buf(),
            name: name.to_string(),
            size: strukt.size() as u64,
            members,
        })
    }

    /// Offset of the first of `candidates` that exists (newest name first).
    /// An offset at or past the struct's end is refused: the programs would
    /// read another object's memory (only a damaged BTF says so).
    fn offset_of(&self, candidates: &[&str]) -> Result<u64, BtfError> {
        let (name, offset) = candidates
            .iter()
            .find_map(|want| {
                self.members
                    .iter()
                    .find(|(name, _)| name == want)
                    .map(|(name, off)| (name, *off))
            })
            .ok_or_else(|| BtfError::NoField {
                path: self.path.clone(),
                strukt: self.name.clone(),
                fields: candidates.iter().map(|s| s.to_string()).collect(),
            })?;
        // `>`, not `>=`: a flexible array member (struct pid's numbers[]
        // on 6.1-6.12) starts exactly at the struct's end. Found by
        // vm-test after the fuzz finding below first used `>=`.
        if offset > self.size {
            return Err(BtfError::Layout {
                path: self.path.clone(),
                what: format!(
                    "struct {} member {name} at byte {offset} lies outside the struct ({} bytes): a damaged BTF",
                    self.name, self.size
                ),
            });
        }
        Ok(offset)
    }
}

/// How deep anonymous structs and unions nest, and how long a typedef or
/// qualifier chain runs, before the BTF is taken as damaged: real kernels
/// nest a few levels, and a BTF whose types loop back on themselves must
/// not recurse or spin forever.
const MAX_ANONYMOUS_DEPTH: u32 = 16;
const MAX_TYPE_CHAIN: u32 = 32;
/// How many members one struct's walk visits, those of its anonymous
/// members included, before the rest is left out: the depth bound alone
/// lets a struct whose anonymous members point back at it be walked
/// (members)^16 times (a fuzz finding: 399 bytes that ran for minutes).
/// task_struct, the largest that schedlat reads, has a few hundred.
const MAX_MEMBERS_VISITED: u32 = 1 << 16;

fn collect_members(
    btf: &Btf,
    strukt: &btf_rs::Struct,
    (base_bits, depth): (u64, u32),
    budget: &mut u32,
    out: &mut Vec<(String, u64)>,
) {
    if depth > MAX_ANONYMOUS_DEPTH {
        return;
    }
    for member in &strukt.members {
        let Some(left) = budget.checked_sub(1) else {
            return;
        };
        *budget = left;
        let bits = base_bits + u64::from(member.bit_offset());
        let name = btf.resolve_name(member).unwrap_or_default();
        if !name.is_empty() {
            out.push((name, bits / 8));
            continue;
        }
        // Anonymous member: descend into it (through typedefs/qualifiers).
        let Ok(mut ty) = btf.resolve_chained_type(member) else {
            continue;
        };
        for _ in 0..MAX_TYPE_CHAIN {
            match ty {
                Type::Struct(ref inner) | Type::Union(ref inner) => {
                    collect_members(btf, inner, (bits, depth + 1), budget, out);
                    break;
                }
                Type::Typedef(_) | Type::Const(_) | Type::Volatile(_) => {
                    let Some(next) = ty
                        .as_btf_type()
                        .and_then(|t| btf.resolve_chained_type(t).ok())
                    else {
                        break;
                    };
                    ty = next;
                }
                _ => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-made BTF blob: struct task_struct { int pid; int tgid; <anon
    /// union> { unsigned int __state; }; char comm[16]; unsigned int policy;
    /// int static_prio; unsigned int rt_priority; } with the union at byte 8,
    /// so resolution must descend into anonymous members. Built by
    /// `fixture_btf()` below.
    fn fixture_btf() -> Vec<u8> {
        let strings = b"\0int\0task_struct\0pid\0__state\0unsigned int\0tgid\0comm\0policy\0static_prio\0rt_priority\0char\0";
        let (s_int, s_task, s_pid, s_state, s_uint, s_tgid) =
            (1u32, 5u32, 17u32, 21u32, 29u32, 42u32);
        let (s_comm, s_policy, s_static_prio, s_rt_priority, s_char) =
            (47u32, 52u32, 59u32, 71u32, 83u32);
        let mut types = Vec::new();
        let mut push = |words: &[u32]| {
            for w in words {
                types.extend_from_slice(&w.to_le_bytes());
            }
        };
        // [1] INT "int" size 4, signed, 32 bits
        push(&[s_int, 1 << 24, 4, (1 << 24) | 32]);
        // [2] INT "unsigned int" size 4, 32 bits
        push(&[s_uint, 1 << 24, 4, 32]);
        // [3] UNION (anon) vlen 1 size 4 { __state: [2] @0 }
        push(&[0, (5 << 24) | 1, 4, s_state, 2, 0]);
        // [4] STRUCT task_struct vlen 7 size 40
        //     { pid: [1] @0, tgid: [1] @32 bits, anon: [3] @64 bits,
        //       comm: [6] @96, policy: [2] @224, static_prio: [1] @256,
        //       rt_priority: [2] @288 }
        push(&[
            s_task,
            (4 << 24) | 7,
            40,
            s_pid,
            1,
            0,
            s_tgid,
            1,
            32,
            0,
            3,
            64,
            s_comm,
            6,
            96,
            s_policy,
            2,
            224,
            s_static_prio,
            1,
            256,
            s_rt_priority,
            2,
            288,
        ]);
        // [5] INT "char" size 1, 8 bits
        push(&[s_char, 1 << 24, 1, 8]);
        // [6] ARRAY of [5] indexed by [2], 16 elements
        push(&[0, 3 << 24, 0, 5, 2, 16]);
        let mut blob = Vec::new();
        blob.extend_from_slice(&0xeb9fu16.to_le_bytes()); // magic
        blob.push(1); // version
        blob.push(0); // flags
        blob.extend_from_slice(&24u32.to_le_bytes()); // hdr_len
        blob.extend_from_slice(&0u32.to_le_bytes()); // type_off
        blob.extend_from_slice(&(types.len() as u32).to_le_bytes()); // type_len
        blob.extend_from_slice(&(types.len() as u32).to_le_bytes()); // str_off
        blob.extend_from_slice(&(strings.len() as u32).to_le_bytes()); // str_len
        blob.extend_from_slice(&types);
        blob.extend_from_slice(strings);
        blob
    }

    #[test]
    fn resolves_offsets_from_fixture_through_anonymous_union() {
        let btf = Btf::from_bytes(&fixture_btf()).expect("fixture parses");
        let layouts = Layouts::new(&btf, Path::new("fixture"));
        let offs = task_offsets(&layouts).unwrap();
        assert_eq!(
            offs,
            TaskOffsets {
                pid: 0,
                tgid: 4,
                state: 8,
                comm: 12,
                policy: 28,
                static_prio: 32,
                rt_priority: 36,
            }
        );
        // No sched_entity, cfs_rq or rq in the fixture: no run-queue length.
        assert_eq!(rq_offsets(&layouts), None);
    }

    /// Regression (fuzz_btf_offsets): a BTF placing task_struct.pid at
    /// byte 64 of a 40-byte struct was accepted.
    #[test]
    fn offset_past_the_struct_is_refused() {
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus/btf/member_offset_past_struct_end.btf");
        let btf = open(&path).unwrap();
        let e = task_offsets(&Layouts::new(&btf, &path))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("pid at byte 64 lies outside the struct (40 bytes)"),
            "{e}"
        );
    }

    #[test]
    fn missing_field_is_named_in_the_error() {
        let btf = Btf::from_bytes(&fixture_btf()).unwrap();
        let layout = Layouts::new(&btf, Path::new("fixture"))
            .get("task_struct")
            .unwrap();
        let err = layout.offset_of(&["cgroups"]).unwrap_err().to_string();
        assert!(
            err.contains("cgroups") && err.contains("task_struct"),
            "{err}"
        );
    }

    #[test]
    fn missing_file_says_what_to_do() {
        let Err(err) = open(Path::new("/nonexistent/vmlinux")) else {
            panic!("a missing file cannot parse")
        };
        let err = err.to_string();
        // Issue 19: a path given by the user that is not there is a typo,
        // not a kernel built without BTF.
        assert!(
            err.contains("/nonexistent/vmlinux does not exist") && !err.contains("CONFIG_DEBUG"),
            "{err}"
        );
    }

    #[test]
    fn resolves_offsets_on_the_running_kernel() {
        // Every machine schedlat supports (and CI) has kernel BTF.
        let path = Path::new(VMLINUX_BTF);
        let btf = open(path).expect("this kernel has BTF");
        let layouts = Layouts::new(&btf, path);
        let offs = task_offsets(&layouts).unwrap();
        // pid and __state are both well inside task_struct and distinct.
        assert_ne!(offs.pid, offs.state);
        assert!(offs.pid > 0 && offs.pid < 16384, "{offs:?}");
        assert_eq!(offs.pid % 4, 0);
        for off in [offs.comm, offs.policy, offs.static_prio, offs.rt_priority] {
            assert!(off > 0 && off < 16384 && off != offs.pid, "{offs:?}");
        }
        // Debian's kernels (and this one) have CONFIG_FAIR_GROUP_SCHED.
        let rq = rq_offsets(&layouts).expect("task->se.cfs_rq->rq->nr_running");
        assert!(rq.task_cfs_rq > 0 && rq.cfs_rq_rq > 0, "{rq:?}");
        // Delayed tasks are counted from 6.14's fields, or 6.12.y's and
        // 6.13's h_nr_delayed; before 6.12 none are kept queued.
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut numbers = release.split(|c: char| !c.is_ascii_digit());
        let version: (u32, u32) = (
            numbers.next().unwrap().parse().unwrap(),
            numbers.next().unwrap().parse().unwrap(),
        );
        let (count, a, b) = delayed_count(&layouts);
        let expected: &[DelayedCount] = match version {
            v if v >= (6, 14) => &[DelayedCount::QueuedLessRunnable],
            v if v >= (6, 12) => &[DelayedCount::Delayed, DelayedCount::None],
            _ => &[DelayedCount::None],
        };
        assert!(expected.contains(&count), "{release}: {count:?}");
        assert_eq!(rq.delayed, count as u64);
        if count == DelayedCount::QueuedLessRunnable {
            assert!(
                a > rq.rq_nr_running && b > rq.rq_nr_running && a != b,
                "{rq:?}"
            );
        }
        // ... and CONFIG_SMP, CONFIG_CFS_BANDWIDTH.
        let cause = cause_offsets(&layouts).unwrap();
        assert!(cause.task_flags > 0 && cause.task_group > 0, "{cause:?}");
        // ... and CONFIG_CGROUP_SCHED: the holder's group is the
        // scheduler's own, task_struct.sched_task_group.
        assert_eq!(
            scheduler_group(&layouts).unwrap(),
            (SchedulerGroup::TaskGroup, cause.task_group, 0, 0)
        );
        assert_eq!((cause.has_rq_cpu, cause.has_throttled), (1, 1), "{cause:?}");
        assert!(
            cause.cfs_rq_tg > 0 && cause.tg_throttled_time > 0,
            "{cause:?}"
        );
    }

    /// The holder's yield is told at the switch where the kernel has
    /// bpf_task_pt_regs() (5.15+): its saved system call number, at the
    /// offset of `orig_ax` (x86-64) in pt_regs, against sched_yield()'s
    /// 24. Other architectures are not guessed at.
    #[test]
    fn the_running_kernel_tells_yields_at_the_switch() {
        use crate::sys::kernel_facts::{Release, release};
        let path = Path::new(VMLINUX_BTF);
        let btf = open(path).expect("this kernel has BTF");
        let layouts = Layouts::new(&btf, path);
        let found = yield_syscall(&layouts, "x86_64");
        if std::env::consts::ARCH == "x86_64" && release() >= Release(5, 15) {
            let (offset, nr) = found.expect("5.15+ has bpf_task_pt_regs and pt_regs.orig_ax");
            assert_eq!(nr, 24);
            // orig_ax follows the 15 general registers (arch/x86/include/
            // asm/ptrace.h).
            assert_eq!(offset, 15 * 8);
        }
        assert_eq!(yield_syscall(&layouts, "riscv64"), None);
    }

    #[test]
    fn the_running_kernel_casts_from_6_2() {
        use crate::sys::kernel_facts::{Release, release};
        let path = Path::new(VMLINUX_BTF);
        let btf = open(path).expect("this kernel has BTF");
        let ids = cast_ids(&Layouts::new(&btf, path));
        if release() < Release(6, 2) {
            assert_eq!(ids, None, "bpf_rdonly_cast came in 6.2");
            return;
        }
        let ids = ids.expect("every 6.2+ kernel has bpf_rdonly_cast");
        let name_of = |id| match btf.resolve_type_by_id(id).unwrap() {
            Type::Func(f) => ("func", btf.resolve_name(&f).unwrap()),
            Type::Struct(s) => ("struct", btf.resolve_name(&s).unwrap()),
            other => panic!("id {id} is a {other:?}"),
        };
        assert_eq!(name_of(ids.rdonly_cast), ("func", "bpf_rdonly_cast".into()));
        assert_eq!(name_of(ids.task.unwrap()), ("struct", "task_struct".into()));
        assert_eq!(name_of(ids.cgroup.unwrap()), ("struct", "cgroup".into()));
    }

    #[test]
    fn one_pass_finds_what_btf_rs_finds_on_the_running_kernel() {
        let path = Path::new(VMLINUX_BTF);
        let names = [
            "task_struct",
            "rq",
            "btf_trace_sched_switch",
            "no_such_type",
        ];
        // Mapped from 6.16, read into memory before: found either way.
        let ids = crate::kernel::btf_names::ids_of(path, &names).expect("a readable BTF");
        let parsed = open(path).unwrap();
        for name in names {
            let want = parsed.resolve_ids_by_name(name).unwrap_or_default();
            assert_eq!(ids[name], want, "{name}");
        }
        assert!(!ids["task_struct"].is_empty());
    }

    #[test]
    fn a_mapped_copy_reads_as_the_mapped_file() {
        // What kernels before 6.16 get, where sysfs refuses the mapping.
        let path = Path::new(VMLINUX_BTF);
        let copy = mapped_copy(path).expect("memfd and /proc/self/fd");
        let direct = open(path).unwrap();
        assert_eq!(
            task_offsets(&Layouts::new(&copy, path)).unwrap(),
            task_offsets(&Layouts::new(&direct, path)).unwrap()
        );
        let tracepoints = ["sched_switch", "sched_wakeup"];
        assert_eq!(
            tracepoint_ids(&Layouts::new(&copy, path), &tracepoints).unwrap(),
            tracepoint_ids(&Layouts::new(&direct, path), &tracepoints).unwrap()
        );
    }
}
