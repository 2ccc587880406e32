//! What a measured loop cost beyond its system calls, for `bench/cost`:
//! heap allocations made on the loop's thread and its context switches.
//!
//! Only a build with the feature `count-allocs` counts anything: it
//! installs a counting global allocator (every binary that links this
//! crate gets it) and [`LoopCost::end`] appends one line per loop to the
//! file named by `BENCHLAB_COST_LOG`. Without the feature both calls are
//! empty and inline to nothing, so a shipped build's loops are unchanged.
//!
//! The counts are per thread, so a loop's figure is exactly what its own
//! thread did between [`LoopCost::start`] and [`LoopCost::end`]: a timer
//! thread or the controller next to it never shows up in it.

/// A loop's counters at its start; see the module docs.
#[derive(Debug, Clone, Copy)]
#[must_use]
pub struct LoopCost {
    #[cfg(feature = "count-allocs")]
    at_start: counting::Counts,
}

impl LoopCost {
    /// Takes the counters just before a measured loop.
    #[inline(always)]
    pub fn start() -> LoopCost {
        LoopCost {
            #[cfg(feature = "count-allocs")]
            at_start: counting::Counts::now(),
        }
    }

    /// Records what the loop that began at [`LoopCost::start`] cost, as
    /// `label` with `ops` operations, in `BENCHLAB_COST_LOG` (when set).
    /// Call it right after the loop, before anything else allocates.
    #[inline(always)]
    pub fn end(self, label: &str, ops: u64) {
        #[cfg(feature = "count-allocs")]
        counting::log(label, ops, self.at_start, counting::Counts::now());
        #[cfg(not(feature = "count-allocs"))]
        let _ = (label, ops);
    }
}

#[cfg(feature = "count-allocs")]
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;
    use std::io::Write;

    thread_local! {
        // Const-initialised and without a destructor: using it registers
        // nothing and allocates nothing, so the allocator may touch it.
        static ALLOCS: Cell<u64> = const { Cell::new(0) };
    }

    /// The system allocator, counting each allocation (and reallocation,
    /// which may move the block) on the calling thread.
    struct Counting;

    #[inline(always)]
    fn bump() {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
    }

    // SAFETY: every call is passed on unchanged to the system allocator.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            bump();
            // SAFETY: the caller's contract, passed on.
            unsafe { System.alloc(layout) }
        }

        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            bump();
            // SAFETY: the caller's contract, passed on.
            unsafe { System.alloc_zeroed(layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            bump();
            // SAFETY: the caller's contract, passed on.
            unsafe { System.realloc(ptr, layout, new_size) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: the caller's contract, passed on.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    /// The calling thread's allocations and context switches so far.
    #[derive(Debug, Clone, Copy)]
    pub(super) struct Counts {
        allocs: u64,
        voluntary: i64,
        involuntary: i64,
    }

    impl Counts {
        pub(super) fn now() -> Counts {
            // SAFETY: rusage is plain data; all zero is a valid value.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: `ru` is writable; RUSAGE_THREAD is the calling thread.
            unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
            Counts {
                allocs: ALLOCS.try_with(Cell::get).unwrap_or(0),
                voluntary: ru.ru_nvcsw,
                involuntary: ru.ru_nivcsw,
            }
        }
    }

    /// One tab-separated line: label, operations, allocations, voluntary
    /// and involuntary context switches. Appended in one `write()`, so the
    /// lines of concurrent processes do not interleave.
    pub(super) fn log(label: &str, ops: u64, a: Counts, b: Counts) {
        let Some(path) = std::env::var_os("BENCHLAB_COST_LOG") else {
            return;
        };
        let line = format!(
            "{label}\t{ops}\t{}\t{}\t{}\n",
            b.allocs - a.allocs,
            b.voluntary - a.voluntary,
            b.involuntary - a.involuntary
        );
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

#[cfg(all(test, feature = "count-allocs"))]
mod tests {
    use super::*;

    #[test]
    fn counts_the_loops_allocations_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("benchlab-cost-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        std::env::set_var("BENCHLAB_COST_LOG", &dir);
        let before: Vec<u8> = vec![1; 64];
        let c = LoopCost::start();
        let mut kept = Vec::new();
        for i in 0..10u8 {
            kept.push(Box::new(i));
        }
        c.end("test", 10);
        drop((before, kept));
        let log = std::fs::read_to_string(&dir).unwrap();
        std::fs::remove_file(&dir).unwrap();
        let f: Vec<&str> = log.trim_end().split('\t').collect();
        assert_eq!(&f[..2], ["test", "10"]);
        // Ten boxes and the vector's growth: 4, 8, 16 elements.
        assert_eq!(f[2], "13", "{log}");
    }
}
