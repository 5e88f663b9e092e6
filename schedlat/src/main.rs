//! schedlat: run-queue latency, measured in the kernel with eBPF. The
//! program is the library (lib.rs); this is only its entry point.

fn main() -> std::process::ExitCode {
    schedlat::main()
}
