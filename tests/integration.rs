//! The integration tests, one binary with a module per area (a binary per
//! file compiled `common` and linked the dependency tree 34 times). Most
//! run schedlat as a real process that loads its eBPF object into the running
//! kernel, so they need root; `cargo xtask test` runs them one at a time
//! (`--test-threads=1`): they share the scheduler and the CPUs their
//! workloads pin to. One area: `cargo test --test integration serve::`.
//!
//! The kernel-level checks the VM guests also run (guest, causes,
//! decision_matrix) and the packaged unit's (unit) stay binaries of their
//! own: `cargo xtask vm-test` builds them statically for the guests.

mod common;

/// Root: who the NoisyNeighbour alert names over a labelled set of cases
/// on a kubelet-shaped node (precision and recall).
mod blame;
/// Root: the neighbour pairs' charges by time on the CPU (a flat run queue,
/// a brief sleeper beside another cgroup's loops).
mod charges;
/// Root: `schedlat check`, as root and as uid 65534 with and without
/// CAP_BPF + CAP_PERFMON.
mod check;
mod cli;
/// Root: workloads named as their owners know them (short-lived cgroups
/// named at creation; containers, pods and units).
mod containers;
/// Root: diagnose's decision remedies applied and checked (the worker case).
mod decision;
/// The fleet deployment: the Kubernetes manifests against the schemas.
mod deploy;
/// Root: `schedlat diagnose` on real scenarios and cgroups.
mod diagnose;
/// Root: diagnose -c on a kubelet-shaped node (pods, containers, units).
mod diagnose_pods;
/// Root: the package of `cargo xtask dist` installed and run, and the systemd
/// unit's service run as its unprivileged user (needs SCHEDLAT_DIST_DEB and
/// SCHEDLAT_DIST_TARBALL, which `cargo xtask test` sets).
mod dist;
/// Root: the recorder's dump directory against another user (uid 65534).
mod dumpdir;
/// Root: `serve --exemplars` against a real Prometheus 3.x with exemplar storage.
mod exemplars;
/// Root: the OCI image run by podman and containerd with the DaemonSet's
/// securityContext.
mod image;
/// Hostile files for replay and compare, and record -o destinations.
mod inputs;
/// Root: the eBPF object loaded on the running kernel, against runqlat and
/// the kernel's own counters.
mod kernel;
/// Root: a Kubernetes-like node's pods, containers and unit named in every
/// view (both kubelet cgroup drivers, containerd's and CRI-O's files).
mod kube_node;
/// Root: runs under resource limits (descriptors, map memory) and on an
/// offline CPU.
mod limits;
mod mixin;
/// Root: tasks named to attack the terminal, in every text renderer.
mod names;
mod neighbours;
/// Root: `serve --otlp-endpoint` against an OTLP receiver built from PyPI's
/// opentelemetry-proto (accepting, refusing, hanging).
mod otlp;
/// Root: the flight recorder (`record --ring`), its dumps read back by replay
/// and by the HdrHistogram and protobuf Python packages (tests/readers).
mod recorder;
/// Root: the README's samples of output against real runs, by their form.
mod samples;
/// Root: schedlat against the kernel's run_delay, by kind of wait.
mod schedstat;
/// Root: filters and breakdowns with real cgroups, against runqlat -c and
/// schedstat.
mod scopes;
/// Root: `schedlat serve` scraped by promtool and by a real Prometheus server.
mod serve;
/// Root: shape verdicts and compare on scenarios built in the test.
mod shape;
/// Root: `schedlat slow` on the sleeper-and-hogs scenario.
mod slow;
/// Root: who may make serve dump or answer (POST /snapshot, Host, Origin),
/// as uid 65534 against serve as root.
mod snapshot;
/// Root: `schedlat slow --stacks`, its folded stacks and flame graph, with a
/// holder spinning in a function of a known name.
mod stacks;
/// Root: `schedlat top` driven in tmux.
mod top;
/// Root: regressions for inputs that once gave a wrong answer silently.
mod trust;
/// Root: the default report's verdict in words (the seed case, and waits
/// behind a throttled SCHED_FIFO hog).
mod verdict;
/// Root: `schedlat victims` on the sleeper-and-hogs scenario, against perf sched.
mod victims;
/// Root: `serve --web.config.file` (TLS, client certificates, basic auth)
/// against curl and a real Prometheus, with openssl-made certificates.
mod web;
