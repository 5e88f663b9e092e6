//! The collect layer's live tests: each loads the eBPF object into the
//! running kernel (root), drives a workload and reads the maps through
//! the readers of collect/, against what the workload did or what the
//! kernel's own trace says. Test-only: nothing here is built into
//! schedlat.

mod causes;
mod decision;
// The kernel's own trace, the live tests' oracle: one file with the root
// tests (tests/common), which check the same waits through the binary.
#[path = "../../../../tests/common/kernel_trace.rs"]
mod decision_trace;
mod key_decision;
mod pairs;
mod summary_rows;
mod yields;
