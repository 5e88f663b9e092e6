//! Where each CPU sits, from sysfs: the CPUs sharing its last-level cache
//! (`/sys/devices/system/cpu/cpuN/cache/index*/`: the highest `level`, its
//! `shared_cpu_list`) and its NUMA node (`/sys/devices/system/node/nodeN/
//! cpulist`). The cause split uses it to tell migrations that left a cache
//! or a node from the others.

use std::{fs, path::Path};

use schedlat_common::causes::CpuTopology;

/// The usual sysfs root.
pub const SYSFS: &str = "/sys/devices/system";

/// Per CPU 0..`cpus`, its LLC (the lowest CPU sharing it) and node; None
/// when an online CPU's last-level cache is not published (some VMs), as
/// every migration would then look like a cache crossing. CPUs that are
/// not online (possible but absent) get a cache of their own and node 0:
/// no task runs there.
pub fn read(root: &Path, cpus: usize) -> Option<Vec<CpuTopology>> {
    let online = cpu_list(&fs::read_to_string(root.join("cpu/online")).ok()?)?;
    let mut out: Vec<CpuTopology> = (0..cpus)
        .map(|cpu| CpuTopology {
            llc: cpu as u32,
            node: 0,
        })
        .collect();
    for &cpu in &online {
        let slot = out.get_mut(cpu as usize)?;
        slot.llc = llc(&root.join(format!("cpu/cpu{cpu}/cache")))?;
    }
    // No node directory: a kernel without NUMA, one node.
    if let Ok(nodes) = fs::read_dir(root.join("node")) {
        for entry in nodes.flatten() {
            let name = entry.file_name();
            let Some(node) = name
                .to_str()
                .and_then(|n| n.strip_prefix("node"))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Some(list) = fs::read_to_string(entry.path().join("cpulist"))
                .ok()
                .and_then(|t| cpu_list(&t))
            else {
                continue;
            };
            for cpu in list {
                if let Some(slot) = out.get_mut(cpu as usize) {
                    slot.node = node;
                }
            }
        }
    }
    Some(out)
}

/// The lowest CPU sharing the highest-level cache under `dir` (whose
/// `shared_cpu_list` reads). The lists are read highest level first, and
/// only until one reads: on start-up's path, a file per CPU and cache
/// level adds up.
fn llc(dir: &Path) -> Option<u32> {
    let mut levels = Vec::new();
    for entry in fs::read_dir(dir).ok()?.flatten() {
        if !entry.file_name().to_string_lossy().starts_with("index") {
            continue;
        }
        if let Some(level) = fs::read_to_string(entry.path().join("level"))
            .ok()
            .and_then(|l| l.trim().parse::<u32>().ok())
        {
            levels.push((level, entry.path()));
        }
    }
    // Stable: of equal levels the first listed wins, as it did.
    levels.sort_by_key(|&(level, _)| std::cmp::Reverse(level));
    levels.into_iter().find_map(|(_, index)| {
        fs::read_to_string(index.join("shared_cpu_list"))
            .ok()
            .and_then(|l| cpu_list(&l))
            .and_then(|l| l.into_iter().min())
    })
}

/// A sysfs CPU list ("0-3,8,10-11"); None when malformed.
pub fn cpu_list(text: &str) -> Option<Vec<u32>> {
    let text = text.trim();
    let mut out = Vec::new();
    if text.is_empty() {
        return Some(out);
    }
    for part in text.split(',') {
        let (low, high): (u32, u32) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
            None => {
                let n = part.trim().parse().ok()?;
                (n, n)
            }
        };
        // sysfs lists ascend; a reversed or huge range is not one.
        if high < low || high - low > 1 << 16 {
            return None;
        }
        out.extend(low..=high);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn fixture(name: &str) -> PathBuf {
        let root =
            std::env::temp_dir().join(format!("schedlat-topo-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        root
    }

    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// cpu0-3 on two L3s (0-1, 2-3) and two nodes, cpu4 possible but offline.
    fn two_sockets(root: &Path) {
        write(root, "cpu/online", "0-3\n");
        for cpu in 0..4 {
            let l3 = if cpu < 2 { "0-1" } else { "2-3" };
            for (i, level, shared) in [(0, "1", cpu.to_string()), (2, "2", cpu.to_string())] {
                write(root, &format!("cpu/cpu{cpu}/cache/index{i}/level"), level);
                write(
                    root,
                    &format!("cpu/cpu{cpu}/cache/index{i}/shared_cpu_list"),
                    &shared,
                );
            }
            write(root, &format!("cpu/cpu{cpu}/cache/index3/level"), "3\n");
            write(
                root,
                &format!("cpu/cpu{cpu}/cache/index3/shared_cpu_list"),
                l3,
            );
        }
        write(root, "node/node0/cpulist", "0-1\n");
        write(root, "node/node1/cpulist", "2-3\n");
        write(root, "node/possible", "0-1\n");
    }

    #[test]
    fn reads_caches_and_nodes() {
        let root = fixture("two");
        two_sockets(&root);
        let t = read(&root, 5).unwrap();
        let llc: Vec<u32> = t.iter().map(|c| c.llc).collect();
        let node: Vec<u32> = t.iter().map(|c| c.node).collect();
        assert_eq!(llc, [0, 0, 2, 2, 4]);
        assert_eq!(node, [0, 0, 1, 1, 0]);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn no_cache_info_means_no_topology_and_no_nodes_one_node() {
        let root = fixture("bare");
        write(&root, "cpu/online", "0-1\n");
        write(&root, "cpu/cpu0/cache/index3/level", "3");
        write(&root, "cpu/cpu0/cache/index3/shared_cpu_list", "0-1");
        assert_eq!(read(&root, 2), None);
        write(&root, "cpu/cpu1/cache/index3/level", "3");
        write(&root, "cpu/cpu1/cache/index3/shared_cpu_list", "0-1");
        let t = read(&root, 2).unwrap();
        assert!(t.iter().all(|c| c.llc == 0 && c.node == 0));
        // More online CPUs than possible ones: sysfs contradicts itself.
        assert_eq!(read(&root, 1), None);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn cpu_lists_parse_as_sysfs_writes_them() {
        assert_eq!(cpu_list("0-3,8,10-11\n"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(cpu_list("5"), Some(vec![5]));
        assert_eq!(cpu_list("\n"), Some(vec![]));
        assert_eq!(cpu_list("3-1"), None);
        assert_eq!(cpu_list("0-x"), None);
        assert_eq!(cpu_list("0-4000000000"), None);
    }

    #[test]
    fn this_machine_has_a_topology_for_every_online_cpu() {
        let cpus = aya::util::nr_cpus().unwrap();
        if let Some(t) = read(Path::new(SYSFS), cpus) {
            assert_eq!(t.len(), cpus);
            assert!(t.iter().all(|c| (c.llc as usize) < cpus));
        }
    }
}
