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
//! The layout (the value type's id and size, where the name goes) and the
//! enum values (the map type, the attach type) are read from the kernel's
//! BTF, never assumed.

use std::{
    fs,
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    path::Path,
    time::{Duration, Instant},
};

use btf_rs::{Btf, BtfType, Type};

const STATE: &str = "/sys/kernel/sched_ext/state";
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_BTF_LOAD: libc::c_long = 18;
const BPF_LINK_CREATE: libc::c_long = 28;
/// include/uapi/linux/bpf.h: the map's value is registered through a link.
const BPF_F_LINK: u32 = 1 << 13;

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
        let mut attr = [0u32; 16];
        attr[0] = map.as_raw_fd() as u32;
        attr[2] = layout.attach_type;
        let link = bpf(BPF_LINK_CREATE, &mut attr, "BPF_LINK_CREATE (struct_ops)")?;
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

/// What the bpf system call needs of the kernel's types.
struct Layout {
    /// `struct bpf_struct_ops_sched_ext_ops`: the map's value.
    value_type: u32,
    value_size: u32,
    /// Where `data.name` is in it.
    name_offset: u32,
    map_type: u32,
    attach_type: u32,
}

impl Layout {
    fn of(btf: &Btf) -> Result<Layout, String> {
        let (value_type, value) = named_struct(btf, "bpf_struct_ops_sched_ext_ops")?;
        let (_, ops) = named_struct(btf, "sched_ext_ops")?;
        Ok(Layout {
            value_type,
            value_size: value.size() as u32,
            name_offset: member_offset(btf, &value, "data")? + member_offset(btf, &ops, "name")?,
            map_type: enumerator(btf, "bpf_map_type", "BPF_MAP_TYPE_STRUCT_OPS")?,
            attach_type: enumerator(btf, "bpf_attach_type", "BPF_STRUCT_OPS")?,
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

fn enumerator(btf: &Btf, name: &str, member: &str) -> Result<u32, String> {
    let ids = btf
        .resolve_ids_by_name(name)
        .map_err(|e| format!("BTF has no {name}: {e}"))?;
    let named = |m: &dyn BtfType| btf.resolve_name(m).is_ok_and(|n| n == member);
    ids.into_iter()
        .find_map(|id| match btf.resolve_type_by_id(id) {
            Ok(Type::Enum(e)) => e.members.iter().find(|m| named(*m)).map(|m| m.val()),
            _ => None,
        })
        .ok_or_else(|| format!("BTF has no {name}::{member}"))
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
    let mut attr = [0u32; 8];
    let ptr = blob.as_ptr() as u64;
    attr[0] = ptr as u32;
    attr[1] = (ptr >> 32) as u32;
    attr[4] = blob.len() as u32;
    bpf(BPF_BTF_LOAD, &mut attr, "BPF_BTF_LOAD")
}

fn create_map(layout: &Layout, btf: &OwnedFd) -> Result<OwnedFd, String> {
    // union bpf_attr's map_create: map_type, key_size, value_size,
    // max_entries, map_flags, inner_map_fd, numa_node, map_name[16],
    // map_ifindex, btf_fd, btf_key_type_id, btf_value_type_id,
    // btf_vmlinux_value_type_id (words 0-6, 7-10, 11-15).
    let mut attr = [0u32; 20];
    attr[0] = layout.map_type;
    attr[1] = 4;
    attr[2] = layout.value_size;
    attr[3] = 1;
    attr[4] = BPF_F_LINK;
    attr[12] = btf.as_raw_fd() as u32;
    attr[15] = layout.value_type;
    bpf(BPF_MAP_CREATE, &mut attr, "BPF_MAP_CREATE (struct_ops)")
}

fn update(map: &OwnedFd, value: &[u8]) -> Result<(), String> {
    let key = 0u32;
    let mut attr = [0u32; 8];
    attr[0] = map.as_raw_fd() as u32;
    let (k, v) = (&key as *const u32 as u64, value.as_ptr() as u64);
    attr[2] = k as u32;
    attr[3] = (k >> 32) as u32;
    attr[4] = v as u32;
    attr[5] = (v >> 32) as u32;
    // SAFETY: attr is the map_elem member of union bpf_attr; the key and
    // the value outlive the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_UPDATE_ELEM,
            attr.as_mut_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    if ret < 0 {
        return Err(format!(
            "BPF_MAP_UPDATE_ELEM (struct_ops value): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// A bpf command that returns a new descriptor.
fn bpf<const N: usize>(
    cmd: libc::c_long,
    attr: &mut [u32; N],
    what: &str,
) -> Result<OwnedFd, String> {
    // SAFETY: attr is the command's member of union bpf_attr, zeroed
    // beyond what is set; every pointer in it outlives the call.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.as_mut_ptr(),
            std::mem::size_of_val(attr),
        )
    };
    if fd < 0 {
        return Err(format!("{what}: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: a new descriptor the kernel just gave us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
