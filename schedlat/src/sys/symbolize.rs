//! Stack addresses to function names, with blazesym (the libbpf project's
//! symbolizer): kernel addresses through /proc/kallsyms, a process's
//! through its /proc/PID/maps and the ELF symbol tables of the files
//! mapped there (opened through /proc/PID/map_files, so a binary inside a
//! container's file system is found; that needs CAP_SYS_ADMIN, which a
//! tracer has). A process's addresses only mean something while it lives
//! with the same mappings: resolve them as soon as the event is read.
//!
//! An address that cannot be named is kept as the file it falls in and
//! its offset there (`module+0xoffset`), or as the bare address when it
//! falls in no file: never a guessed name.

use std::{num::NonZeroU32, path::Path};

use blazesym::{
    MaybeDefault,
    normalize::{Normalizer, UserMeta},
    symbolize::{
        Input, Symbolized, Symbolizer as Blaze,
        source::{Kernel, Process, Source},
    },
};

/// One frame of a stack, as named (or not) in user space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The address the kernel reported (a return address but for the
    /// innermost user frame, which is where the task was).
    pub addr: u64,
    /// The function, demangled; None when unknown.
    pub symbol: Option<String>,
    /// Bytes from the function's start.
    pub offset: u64,
    /// The file (or kernel module) the address falls in, when known.
    pub module: Option<String>,
    /// The address as an offset in that file, for an unnamed user frame.
    pub module_offset: Option<u64>,
}

impl Frame {
    /// The frame for a flame graph or a line: the function, else
    /// `module+0xoffset`, else the address.
    pub fn label(&self) -> String {
        match (&self.symbol, &self.module, self.module_offset) {
            (Some(s), _, _) => s.clone(),
            (None, Some(m), Some(off)) => {
                let file = Path::new(m)
                    .file_name()
                    .map_or(m.as_str(), |f| f.to_str().unwrap_or(m.as_str()));
                format!("{file}+{off:#x}")
            }
            _ => format!("{:#x}", self.addr),
        }
    }
}

/// The symbolizer, with its caches of parsed files, kept for a run.
pub struct Symbolizer {
    blaze: Blaze,
    normalizer: Normalizer,
}

impl Default for Symbolizer {
    fn default() -> Self {
        Symbolizer::new()
    }
}

impl Symbolizer {
    pub fn new() -> Symbolizer {
        Symbolizer {
            // Names, not file and line: a frame is shown as its function.
            blaze: Blaze::builder().enable_code_info(false).build(),
            normalizer: Normalizer::new(),
        }
    }

    /// Names kernel stacks (each innermost first), in one pass.
    pub fn kernel(&self, stacks: &[&[u64]]) -> Vec<Vec<Frame>> {
        // kallsyms only: a vmlinux search walks /boot and /usr/lib/debug
        // at the first event, and kallsyms has every function (modules too).
        let source = Source::Kernel(Kernel {
            vmlinux: MaybeDefault::None,
            debug_syms: false,
            ..Kernel::default()
        });
        self.resolve(&source, stacks, None)
    }

    /// Names stacks of user-space addresses of process `pid` (each
    /// innermost first), in one pass: one read of its maps for them all.
    pub fn user(&self, pid: u32, stacks: &[&[u64]]) -> Vec<Vec<Frame>> {
        let Some(pid) = NonZeroU32::new(pid) else {
            return stacks
                .iter()
                .map(|s| s.iter().map(|&a| unknown(a)).collect())
                .collect();
        };
        let mut process = Process::new(blazesym::Pid::Pid(pid));
        // Perf maps (JIT runtimes) are files in /tmp that the process
        // writes: not trusted for a root tracer's output.
        process.perf_map = false;
        // ELF symbols only: a frame is shown as its function, which the
        // symbol tables name; the DWARF of a large library (a compiler's
        // libLLVM) took the reader from 11 to 168 MB.
        process.debug_syms = false;
        self.resolve(&Source::Process(process), stacks, Some(pid))
    }

    fn resolve(
        &self,
        source: &Source<'_>,
        stacks: &[&[u64]],
        pid: Option<NonZeroU32>,
    ) -> Vec<Vec<Frame>> {
        // Each frame but the innermost is a return address: the call is
        // the instruction before it, which may be the last of another
        // function (a call to a function that does not return).
        let lookup: Vec<u64> = stacks
            .iter()
            .flat_map(|s| {
                s.iter()
                    .enumerate()
                    .map(|(i, &a)| if i == 0 { a } else { a.saturating_sub(1) })
            })
            .collect();
        let named = self
            .blaze
            .symbolize(source, Input::AbsAddr(&lookup))
            .unwrap_or_default();
        let mut frames: Vec<Frame> = stacks
            .iter()
            .flat_map(|s| s.iter().enumerate())
            .zip(0..)
            .map(|((i, &addr), at)| match named.get(at) {
                Some(Symbolized::Sym(sym)) => Frame {
                    addr,
                    symbol: Some(sym.name.to_string()),
                    offset: sym.offset as u64 + u64::from(i != 0),
                    module: sym
                        .module
                        .as_ref()
                        .map(|m| m.to_string_lossy().into_owned()),
                    module_offset: None,
                },
                _ => unknown(addr),
            })
            .collect();
        if let Some(pid) = pid {
            self.place_unnamed(pid, &lookup, &mut frames);
        }
        let mut rest = frames.into_iter();
        stacks
            .iter()
            .map(|s| rest.by_ref().take(s.len()).collect())
            .collect()
    }

    /// The file and file offset of each user frame left unnamed (a
    /// stripped binary, an anonymous mapping is left as the address).
    fn place_unnamed(&self, pid: NonZeroU32, lookup: &[u64], frames: &mut [Frame]) {
        if frames.iter().all(|f| f.symbol.is_some()) {
            return;
        }
        let Ok(normal) = self
            .normalizer
            .normalize_user_addrs(blazesym::Pid::Pid(pid), lookup)
        else {
            return;
        };
        for (frame, &(offset, meta)) in frames.iter_mut().zip(&normal.outputs) {
            if frame.symbol.is_some() {
                continue;
            }
            if let Some(UserMeta::Elf(elf)) = normal.meta.get(meta) {
                frame.module = Some(elf.path.to_string_lossy().into_owned());
                frame.module_offset = Some(offset);
            }
        }
    }
}

fn unknown(addr: u64) -> Frame {
    Frame {
        addr,
        symbol: None,
        offset: 0,
        module: None,
        module_offset: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    #[unsafe(no_mangle)]
    extern "C" fn schedlat_symbolize_probe() -> u64 {
        std::hint::black_box(7)
    }

    #[test]
    fn a_function_of_this_process_is_named() {
        let addr = schedlat_symbolize_probe as *const () as u64;
        // Two stacks in one pass: the second one's outer frame is a
        // return address, looked up one byte before it (the call's end).
        let stacks = Symbolizer::new().user(std::process::id(), &[&[addr + 1], &[0x10, addr + 1]]);
        assert_eq!(
            stacks[0][0].symbol.as_deref(),
            Some("schedlat_symbolize_probe")
        );
        assert_eq!(stacks[0][0].label(), "schedlat_symbolize_probe");
        assert_eq!(stacks[1].len(), 2);
        assert_eq!(stacks[1][0].label(), "0x10");
        assert_eq!(
            stacks[1][1].symbol.as_deref(),
            Some("schedlat_symbolize_probe")
        );
        assert_eq!(stacks[1][1].offset, 1);
    }

    #[test]
    fn an_address_in_no_file_is_kept_as_it_is() {
        let stacks = Symbolizer::new().user(std::process::id(), &[&[0x10]]);
        assert_eq!(stacks[0][0].symbol, None);
        assert_eq!(stacks[0][0].label(), "0x10");
    }

    #[test]
    fn an_unnamed_frame_in_a_file_is_that_file_and_offset() {
        let frame = Frame {
            addr: 0x5555_0000_1234,
            symbol: None,
            offset: 0,
            module: Some("/usr/bin/stripped".into()),
            module_offset: Some(0x1234),
        };
        assert_eq!(frame.label(), "stripped+0x1234");
    }
}
