//! A sched_ext scheduler for the tests (Linux 6.12+ with
//! CONFIG_SCHED_CLASS_EXT): the kernel's own default policy, attached
//! through the bpf system call alone.
//!
//! Every callback of `struct sched_ext_ops` is optional: with none, the
//! kernel picks an idle CPU at wakeup, queues every task in the global
//! FIFO dispatch queue (SCX_DSQ_GLOBAL) and gives each a 20 ms slice
//! (SCX_SLICE_DFL). A struct_ops map whose value names the scheduler and
//! sets nothing else is therefore a complete scheduler, and it needs no
//! BPF program, no compiler and no libbpf: this module writes the map,
//! attaches it with a link, and detaches it when dropped (closing the link
//! unregisters it; every task goes back to the fair class).
//!
//! The value's layout (its type's id and size, where the name goes) is read
//! from the kernel's BTF, never assumed; the system call and its `union
//! bpf_attr` are the library's (schedlat::sys::bpf, aya-obj's binding), its
//! other numbers (UAPI, stable) aya-obj's.

use std::{
    fs,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    path::Path,
    time::{Duration, Instant},
};

use aya_obj::generated::{
    BPF_F_LINK, bpf_attach_type::BPF_STRUCT_OPS, bpf_map_type::BPF_MAP_TYPE_STRUCT_OPS,
};
use btf_rs::{Btf, Type};
use schedlat::sys::bpf::{self, bpf_attr, bpf_cmd};

const STATE: &str = "/sys/kernel/sched_ext/state";

/// An attached scheduler; dropping it detaches it.
pub(crate) struct ExtScheduler {
    link: Option<OwnedFd>,
    _map: OwnedFd,
    _btf: OwnedFd,
}

/// Whether this kernel has sched_ext (its sysfs directory).
pub(crate) fn available() -> bool {
    Path::new(STATE).exists()
}

/// `/sys/kernel/sched_ext/state`, trimmed.
pub(crate) fn state() -> String {
    fs::read_to_string(STATE).map_or_else(|e| format!("unreadable: {e}"), |s| s.trim().into())
}

impl ExtScheduler {
    /// Attaches a scheduler named `name` (letters, digits, `_` and `.`)
    /// for every task, and waits until the kernel says it is enabled.
    pub(crate) fn attach(name: &str) -> Result<ExtScheduler, String> {
        // Mapped where sysfs allows it (6.16+), else parsed whole.
        let path = "/sys/kernel/btf/vmlinux";
        let btf = Btf::from_file_with_backend(path, btf_rs::Backend::Mmap)
            .or_else(|_| Btf::from_file(path))
            .map_err(|e| format!("BTF: {e}"))?;
        let layout = Layout::of(&btf)?;
        let btf_fd = load_minimal_btf()?;
        let map = create_map(&layout, &btf_fd)?;
        let mut value = vec![0u8; layout.value_size as usize];
        let at = layout.name_offset as usize;
        value[at..at + name.len()].copy_from_slice(name.as_bytes());
        update(&map, &value)?;
        // Its link_create member: the map, and the attach type.
        let mut attr = bpf::zeroed();
        let l = bpf::link_create(&mut attr);
        l.__bindgen_anon_1.map_fd = map.as_raw_fd() as u32;
        l.attach_type = BPF_STRUCT_OPS as u32;
        let link = bpf(
            bpf_cmd::BPF_LINK_CREATE,
            &mut attr,
            "BPF_LINK_CREATE (struct_ops)",
        )?;
        let scheduler = ExtScheduler {
            link: Some(link),
            _map: map,
            _btf: btf_fd,
        };
        wait_for_state("enabled")?;
        Ok(scheduler)
    }

    /// Detaches it and waits until every task is back (state `disabled`).
    pub(crate) fn detach(mut self) -> Result<(), String> {
        self.link.take();
        wait_for_state("disabled")
    }
}

impl Drop for ExtScheduler {
    fn drop(&mut self) {
        if self.link.take().is_some() {
            let _ = wait_for_state("disabled");
        }
    }
}

fn wait_for_state(wanted: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = state();
        if now == wanted {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("sched_ext state {now}, not {wanted}, after 30 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Where the kernel's struct_ops value for sched_ext is, by its BTF.
struct Layout {
    /// `struct bpf_struct_ops_sched_ext_ops`: the map's value.
    value_type: u32,
    value_size: u32,
    /// Where `data.name` is in it.
    name_offset: u32,
}

impl Layout {
    fn of(btf: &Btf) -> Result<Layout, String> {
        let (value_type, value) = named_struct(btf, "bpf_struct_ops_sched_ext_ops")?;
        let (_, ops) = named_struct(btf, "sched_ext_ops")?;
        Ok(Layout {
            value_type,
            value_size: value.size() as u32,
            name_offset: member_offset(btf, &value, "data")? + member_offset(btf, &ops, "name")?,
        })
    }
}

fn named_struct(btf: &Btf, name: &str) -> Result<(u32, btf_rs::Struct), String> {
    let ids = btf
        .resolve_ids_by_name(name)
        .map_err(|e| format!("BTF has no {name}: {e}"))?;
    ids.into_iter()
        .find_map(|id| match btf.resolve_type_by_id(id) {
            Ok(Type::Struct(s)) => Some((id, s)),
            _ => None,
        })
        .ok_or_else(|| format!("BTF has no struct {name}"))
}

/// A member's byte offset.
fn member_offset(btf: &Btf, s: &btf_rs::Struct, name: &str) -> Result<u32, String> {
    s.members
        .iter()
        .find(|m| btf.resolve_name(*m).is_ok_and(|n| n == name))
        .map(|m| m.bit_offset() / 8)
        .ok_or_else(|| format!("no member {name}"))
}

/// A struct_ops map must name a BTF object (kernel/bpf/syscall.c
/// map_create()), though its value's type is the kernel's: the smallest
/// valid one, a single `int`.
fn load_minimal_btf() -> Result<OwnedFd, String> {
    let strings = b"\0int\0";
    let mut blob = Vec::new();
    // struct btf_header: magic, version, flags, hdr_len, then the type
    // and string sections' offsets and lengths.
    blob.extend_from_slice(&0xeb9f_u16.to_ne_bytes());
    blob.extend_from_slice(&[1, 0]);
    let types_len = 16u32;
    for word in [24, 0, types_len, types_len, strings.len() as u32] {
        blob.extend_from_slice(&u32::to_ne_bytes(word));
    }
    // BTF_KIND_INT (1) named "int", 4 bytes, signed, 32 bits.
    for word in [1u32, 1 << 24, 4, (1 << 24) | 32] {
        blob.extend_from_slice(&word.to_ne_bytes());
    }
    blob.extend_from_slice(strings);
    let mut attr = bpf::zeroed();
    let b = bpf::btf_load(&mut attr);
    b.btf = blob.as_ptr() as u64;
    b.btf_size = blob.len() as u32;
    bpf(bpf_cmd::BPF_BTF_LOAD, &mut attr, "BPF_BTF_LOAD")
}

fn create_map(layout: &Layout, btf: &OwnedFd) -> Result<OwnedFd, String> {
    let mut attr = bpf::zeroed();
    let m = bpf::map_create(&mut attr);
    m.map_type = BPF_MAP_TYPE_STRUCT_OPS as u32;
    m.key_size = 4;
    m.value_size = layout.value_size;
    m.max_entries = 1;
    m.map_flags = BPF_F_LINK;
    m.btf_fd = btf.as_raw_fd() as u32;
    m.btf_vmlinux_value_type_id = layout.value_type;
    bpf(
        bpf_cmd::BPF_MAP_CREATE,
        &mut attr,
        "BPF_MAP_CREATE (struct_ops)",
    )
}

fn update(map: &OwnedFd, value: &[u8]) -> Result<(), String> {
    let key = 0u32;
    let mut attr = bpf::zeroed();
    let e = bpf::map_elem(&mut attr);
    e.map_fd = map.as_raw_fd() as u32;
    e.key = &key as *const u32 as u64;
    e.__bindgen_anon_1.value = value.as_ptr() as u64;
    call(bpf_cmd::BPF_MAP_UPDATE_ELEM, &mut attr)
        .map(drop)
        .map_err(|e| format!("BPF_MAP_UPDATE_ELEM (struct_ops value): {e}"))
}

/// The bpf system call, given the whole union; every pointer `attr` holds
/// outlives it.
fn call(cmd: bpf_cmd, attr: &mut bpf_attr) -> std::io::Result<i64> {
    // SAFETY: the pointers attr holds (a key, a value, a BTF blob) are the
    // callers' borrows, alive for the call.
    unsafe { bpf::call(cmd, attr, bpf::WHOLE) }
}

/// A bpf command that returns a new descriptor.
fn bpf(cmd: bpf_cmd, attr: &mut bpf_attr, what: &str) -> Result<OwnedFd, String> {
    let fd = call(cmd, attr).map_err(|e| format!("{what}: {e}"))?;
    // SAFETY: a new descriptor the kernel just gave us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
