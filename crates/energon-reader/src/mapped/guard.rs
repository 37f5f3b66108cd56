//! Memory maps that survive their file being truncated or rewritten underneath.
//!
//! Touching a page of a map past its file's new end raises SIGBUS, which kills the process: a
//! dataset re-synced under a running job would end it without a word. Every map of this crate is
//! registered here instead, and a SIGBUS handler (installed once, chaining to whatever handler was
//! there) puts a page of zeros where the fault hit, marks the map as changed, and lets the read
//! go on. Readers ask [`Region::changed`] after touching a sample's pages and report a typed error
//! naming the shard. Faults outside our maps go to the previous handler (or kill the process as
//! before).

use std::{
    io,
    sync::{
        Once, OnceLock,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
};

/// Maps guarded at once; more are mapped unguarded (and logged once).
const SLOTS: usize = 8192;

/// One registered map: its address range (start 0: free) and whether a fault hit it.
struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    changed: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const, reason = "only to initialise the array")]
const FREE: Slot =
    Slot { start: AtomicUsize::new(0), len: AtomicUsize::new(0), changed: AtomicBool::new(false) };

static REGISTRY: [Slot; SLOTS] = [FREE; SLOTS];
static INSTALL: Once = Once::new();
/// The SIGBUS action before ours, and the page size, set once by [`install`].
static PREVIOUS: OnceLock<(libc::sigaction, usize)> = OnceLock::new();

/// A registered map; unregistered on drop. Drop it before the map is unmapped (the registry must
/// never name an address range that something else may map next).
#[derive(Debug)]
pub(crate) struct Region {
    slot: Option<usize>,
}

/// Where to ask whether a region changed; valid as long as its [`Region`] is registered (keep it
/// with a handle to the map).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RegionRef {
    slot: Option<usize>,
}

impl RegionRef {
    /// Whether a fault hit the region (see [`Region::changed`]).
    pub(crate) fn changed(&self) -> bool {
        self.slot.is_some_and(|i| REGISTRY[i].changed.load(Ordering::Acquire))
    }
}

impl Region {
    /// Registers `[start, start + len)`; an unguarded region when the registry is full or the
    /// handler cannot be installed.
    pub(crate) fn register(start: *const u8, len: usize) -> Region {
        if len == 0 || !install() {
            return Region { slot: None };
        }
        let start = start as usize;
        for (i, slot) in REGISTRY.iter().enumerate() {
            // Reserved (`usize::MAX`, which the handler skips) until its range is set.
            if slot.start.load(Ordering::Relaxed) == 0
                && slot
                    .start
                    .compare_exchange(0, usize::MAX, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                slot.changed.store(false, Ordering::Relaxed);
                slot.len.store(len, Ordering::Relaxed);
                slot.start.store(start, Ordering::Release);
                return Region { slot: Some(i) };
            }
        }
        static FULL: Once = Once::new();
        FULL.call_once(|| {
            tracing::warn!("more than {SLOTS} maps at once: further maps are not guarded");
        });
        Region { slot: None }
    }

    /// Whether a fault hit the region: its file shrank or was rewritten while it was read, and
    /// some of its bytes read as zeros.
    #[cfg(test)]
    fn changed(&self) -> bool {
        self.handle().changed()
    }

    /// A handle to ask [`Region::changed`] through.
    pub(crate) fn handle(&self) -> RegionRef {
        RegionRef { slot: self.slot }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            REGISTRY[i].len.store(0, Ordering::Relaxed);
            REGISTRY[i].start.store(0, Ordering::Release);
        }
    }
}

/// Installs the handler (once); whether it is installed.
fn install() -> bool {
    INSTALL.call_once(|| {
        // SAFETY: a zeroed sigaction is a valid value; sigaction only reads `new` and writes
        // `old`, both valid for the call.
        unsafe {
            let page = usize::try_from(libc::sysconf(libc::_SC_PAGESIZE)).unwrap_or(4096);
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            libc::sigemptyset(&mut new.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, &new, &mut old) == 0 {
                let _ = PREVIOUS.set((old, page));
            } else {
                tracing::warn!(
                    "cannot install the SIGBUS handler: {}; a shard that shrinks while it is \
                     read ends the process",
                    io::Error::last_os_error()
                );
            }
        }
    });
    PREVIOUS.get().is_some()
}

/// The SIGBUS handler: a fault inside a registered region gets a page of zeros (and marks the
/// region changed); any other goes to the previous action.
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some((previous, page)) = PREVIOUS.get() else { return };
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    for slot in &REGISTRY {
        let start = slot.start.load(Ordering::Acquire);
        if start == 0 || start == usize::MAX {
            continue;
        }
        let len = slot.len.load(Ordering::Relaxed);
        if addr < start || addr >= start.saturating_add(len) {
            continue;
        }
        let at = addr & !(page - 1);
        // SAFETY: the page lies in a live map of ours (registered until the map is dropped);
        // replacing it with an anonymous page of zeros leaves the map valid, and the map's own
        // munmap later covers it. mmap is a plain system call, safe in a signal handler.
        let res = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                *page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if res != libc::MAP_FAILED {
            slot.changed.store(true, Ordering::Release);
            return;
        }
        break;
    }
    // Not ours (or not fixable): the previous action decides.
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // SAFETY: restores the action that was there; the fault repeats when the handler
        // returns and ends the process as it would have without us.
        unsafe { libc::sigaction(libc::SIGBUS, previous, std::ptr::null_mut()) };
    } else if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed for exactly this signature.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        f(sig, info, ctx);
    } else {
        // SAFETY: as above, for a plain handler.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        f(sig);
    }
}

#[cfg(test)]
mod tests {
    use std::{fs, io::Write};

    use super::*;

    #[test]
    fn a_map_whose_file_shrinks_reads_zeros_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        fs::File::create(&path).unwrap().write_all(&vec![7u8; 64 * 1024]).unwrap();
        let file = fs::File::open(&path).unwrap();
        // SAFETY: the test truncates the file on purpose: the guard makes that safe to read.
        let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
        let region = Region::register(map.as_ptr(), map.len());
        assert!(region.slot.is_some() && !region.changed());
        // Volatile reads: the compiler may not reuse the first read of a byte for the second.
        // SAFETY: every index read is inside the map.
        let at = |i: usize| unsafe { std::ptr::read_volatile(map.as_ptr().add(i)) };
        assert_eq!(at(40_000), 7);
        fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(4096).unwrap();
        // Past the new end: zeros instead of SIGBUS, and the region knows.
        assert_eq!(at(40_000), 0);
        assert!(region.changed());
        assert_eq!(at(100), 7);
        drop(region);
        assert!(REGISTRY.iter().all(|s| s.start.load(Ordering::Relaxed) != map.as_ptr() as usize));
    }
}
