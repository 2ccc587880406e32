//! Who may run beside whom in the one integration-test binary
//! (`tests/it`), where libtest runs tests of every module at once.
//!
//! Most tests only touch their own scratch directory and run in
//! parallel. Some move or read state the whole machine shares; they say
//! so with one of two locks, taken as the first line of the test:
//!
//! - [`exclusive`]`(&[Resource::…])`: one test at a time per named
//!   resource (the huge page pool, QEMU guests, the mount table, …);
//!   tests holding other resources, or none, go on beside it.
//! - [`alone`]: no other test that runs benchlab or holds a resource
//!   runs meanwhile (a CPU shield moves every process of the machine off
//!   a CPU, so another test's pinning fails). A [`Scratch`](crate::Scratch)
//!   holds the suite's shared side while it lives, as does every
//!   [`exclusive`]; a test that runs neither benchlab nor a resource (a
//!   parser, a renderer) does not wait.
//!
//! Both wait rather than fail, and a lock held by a test that panicked is
//! taken over (poisoning is ignored): one failure must not fail the tests
//! queued behind it.
//!
//! Waiting is not running. libtest starts a test on each of its threads
//! and a test waiting for a lock keeps its thread, so with few threads
//! the tests queued for one resource (eleven guest tests) took nearly
//! every thread and the independent tests after them in name order could
//! not start. With `BENCHLAB_TEST_SLOTS=N` (opt-in: `scripts/test.sh`
//! then gives libtest a thread per test) the cap is on the tests that
//! *run* at once instead: at most N hold a share of the suite (a
//! [`Scratch`](crate::Scratch), an [`exclusive`]) at a time, a test that
//! holds a resource first, so that the chains of tests on one resource
//! (the guests, timing, the mounts) never wait for a slot behind tests
//! that could run at any time. And because every test starts at once, a
//! new share first waits [`START_GRACE`] from the suite's first lock, in
//! which every [`alone`] test asks: they then run first, back to back, on
//! an otherwise idle machine, instead of each waiting for the running
//! tests to end while nothing new starts.
//!
//! With `BENCHLAB_LOCK_LOG=FILE` each test's asks, grants and releases
//! are appended to FILE (`SECONDS TEST EVENT WHAT`), from which
//! `scripts/test.sh` prints how long the tests waited and for what.

use std::cell::Cell;
use std::io::Write;
use std::marker::PhantomData;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// State one test at a time may move or count. Each is a lock of its own;
/// [`exclusive`] takes several in this order, so two tests never wait on
/// each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Resource {
    /// The kernel's pool of 2 MiB huge pages (`vm.nr_hugepages`): every
    /// run whose guests ask for huge pages probes and reserves it, and the
    /// guest tests count it.
    HugePages,
    /// QEMU guests: heavy under TCG (one test's guests at a time keeps
    /// each within its timeouts).
    Guests,
    /// QEMU guests that ask for no huge pages and whose tests count only
    /// their own guests (the kernel tests, RabbitMQ in a guest): a second
    /// chain beside [`Resource::Guests`], since one chain of all was the
    /// integration tests' longest path. Two TCG guest tests at once keep
    /// to their timeouts on two CPUs; the guest cache under
    /// `/var/cache/benchlab/guest` is written by renaming whole files.
    PlainGuests,
    /// The mount table, loop devices and the file-system settings the
    /// storage tests make and check are left clean.
    Mounts,
    /// Measurements checked against ground truth (timing, machine-wide CPU
    /// time): one such test at a time, so that they do not load each
    /// other's CPUs.
    Timing,
}

const RESOURCES: usize = Resource::Timing as usize + 1;

static RESOURCE_LOCKS: [Mutex<()>; RESOURCES] = [const { Mutex::new(()) }; RESOURCES];

/// The suite's reader–writer lock: [`alone`] writes, the rest read. Not
/// `std::sync::RwLock`: a test that already reads (it holds a scratch)
/// must be able to read again while a writer waits, and a read share is
/// dropped wherever its scratch is.
struct Suite {
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    readers: usize,
    writer: bool,
    writers_waiting: usize,
    /// Tests (threads) holding a slot: a share, counted once per test.
    running: usize,
    /// Tests holding a resource that wait for their slot: they go first.
    holders_waiting: usize,
}

static SUITE: Suite = Suite {
    state: Mutex::new(State {
        readers: 0,
        writer: false,
        writers_waiting: 0,
        running: 0,
        holders_waiting: 0,
    }),
    changed: Condvar::new(),
};

/// How long from the suite's first lock a test's first share waits when
/// slots are capped: libtest has started every test by then (a thread
/// each), so every [`alone`] test has asked and runs before the rest.
pub const START_GRACE: Duration = Duration::from_secs(2);

/// The cap on tests running at once (`BENCHLAB_TEST_SLOTS`), if any.
fn slots() -> Option<usize> {
    static SLOTS: OnceLock<Option<usize>> = OnceLock::new();
    *SLOTS.get_or_init(|| {
        std::env::var("BENCHLAB_TEST_SLOTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
    })
}

/// When the suite first asked for a lock.
fn suite_start() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

/// A slot is a libtest test's: its thread is named for the test. Threads
/// a test starts itself (unnamed) take shares beside it without one, or a
/// test waiting for its own helper's slot could wait for ever.
fn test_thread() -> bool {
    std::thread::current().name().is_some_and(|n| n != "main")
}

/// Appends `EVENT WHAT` for this test to `$BENCHLAB_LOCK_LOG`, if set.
fn log(event: &str, what: &str) {
    static FILE: OnceLock<Option<Mutex<std::fs::File>>> = OnceLock::new();
    let file = FILE.get_or_init(|| {
        let path = std::env::var_os("BENCHLAB_LOCK_LOG")?;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()
            .map(Mutex::new)
    });
    if let Some(f) = file {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64();
        let thread = std::thread::current();
        let test = thread.name().unwrap_or("-");
        let mut f = f.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(f, "{now:.3} {test} {event} {what}");
    }
}

thread_local! {
    /// Read shares this thread holds (a scratch, an exclusive).
    static READS: Cell<usize> = const { Cell::new(0) };
    /// This thread's test runs alone.
    static ALONE: Cell<bool> = const { Cell::new(false) };
    /// The resources this thread holds, one bit each.
    static HELD: Cell<u32> = const { Cell::new(0) };
    /// This thread's test holds one of the capped slots.
    static SLOT: Cell<bool> = const { Cell::new(false) };
}

impl Suite {
    fn state(&self) -> MutexGuard<'static, State> {
        SUITE.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A share of the suite: while one is held, no [`alone`] test runs.
#[must_use = "the share ends when it is dropped"]
pub struct Shared {
    held: bool,
}

/// Takes a share of the suite, waiting while an [`alone`] test runs or
/// waits. A thread that holds a share already gets another at once (a
/// waiting [`alone`] test waits for both), and the thread of an alone
/// test gets one that holds nothing.
pub fn shared() -> Shared {
    if ALONE.get() {
        return Shared { held: false };
    }
    let again = READS.get() > 0;
    // The first share of a test takes a slot when they are capped.
    let cap = slots().filter(|_| !again && test_thread());
    if cap.is_some() {
        let start = suite_start();
        std::thread::sleep((start + START_GRACE).saturating_duration_since(Instant::now()));
        log("ask", "slot");
    }
    let holder = HELD.get() != 0;
    let mut st = SUITE.state();
    if cap.is_some() && holder {
        st.holders_waiting += 1;
    }
    loop {
        let full = cap.is_some_and(|n| {
            // A test holding a resource needs a free slot; any other
            // leaves the free slots to those waiting.
            let taken = st.running + if holder { 0 } else { st.holders_waiting };
            taken >= n
        });
        if !(st.writer || (st.writers_waiting > 0 && !again) || full) {
            break;
        }
        st = SUITE.changed.wait(st).unwrap_or_else(|e| e.into_inner());
    }
    if cap.is_some() {
        if holder {
            st.holders_waiting -= 1;
        }
        st.running += 1;
        SLOT.set(true);
    }
    st.readers += 1;
    READS.set(READS.get() + 1);
    if cap.is_some() {
        // Under the state's lock: the log's order is the slots' order.
        log("got", "slot");
    }
    Shared { held: true }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if !self.held {
            return;
        }
        READS.set(READS.get().saturating_sub(1));
        let free_slot = READS.get() == 0 && SLOT.replace(false);
        let mut st = SUITE.state();
        st.readers -= 1;
        if free_slot {
            st.running -= 1;
        }
        if st.readers == 0 || free_slot {
            SUITE.changed.notify_all();
        }
        if free_slot {
            log("free", "slot");
        }
    }
}

/// The calling test runs alone until this is dropped.
#[must_use = "the test runs alone only while this is held"]
pub struct Alone {
    // Tied to the thread that set `ALONE`.
    _thread: PhantomData<*const ()>,
}

/// Waits until no other test holds a share of the suite (a scratch, an
/// exclusive resource), then keeps every other such test waiting until
/// the returned guard is dropped. Take it first: a test that already holds
/// a scratch would wait for itself, so that panics.
pub fn alone() -> Alone {
    assert!(
        READS.get() == 0,
        "take testkit::alone() before any Scratch or exclusive(): this test holds a share of the suite and would wait for itself"
    );
    listed_as_alone();
    suite_start();
    log("ask", "alone");
    let mut st = SUITE.state();
    st.writers_waiting += 1;
    // Wakes the tests waiting for a slot: they now wait for this one.
    SUITE.changed.notify_all();
    while st.writer || st.readers > 0 {
        st = SUITE.changed.wait(st).unwrap_or_else(|e| e.into_inner());
    }
    st.writers_waiting -= 1;
    st.writer = true;
    drop(st);
    log("got", "alone");
    ALONE.set(true);
    Alone {
        _thread: PhantomData,
    }
}

/// With `BENCHLAB_ALONE_LIST=FILE` (`scripts/test.sh`, which runs the
/// tests FILE names after the others): panics unless the calling test
/// (libtest names its thread after it) is in FILE, so that no alone test
/// ends up among the others, stalling them while it waits.
fn listed_as_alone() {
    let Some(file) = std::env::var_os("BENCHLAB_ALONE_LIST") else {
        return;
    };
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("BENCHLAB_ALONE_LIST={}: {e}", file.to_string_lossy()));
    let me = std::thread::current().name().unwrap_or("").to_string();
    assert!(
        text.lines().any(|l| l.trim() == me),
        "{me} runs alone: add it to {} (scripts/test.sh runs the tests listed there after the others)",
        file.to_string_lossy()
    );
}

impl Alone {
    /// Runs `beside` in a thread of its own while `here` runs in this
    /// one, both as parts of this alone test (a scratch or an exclusive
    /// taken in either holds nothing), and returns both results once
    /// both have ended; a panic in either is this test's. The helper
    /// cannot outlive the guard, so nothing else runs beside it either.
    pub fn beside<A: Send, B>(
        &self,
        beside: impl FnOnce() -> A + Send,
        here: impl FnOnce() -> B,
    ) -> (A, B) {
        std::thread::scope(|scope| {
            let helper = scope.spawn(|| {
                ALONE.set(true);
                beside()
            });
            let b = here();
            match helper.join() {
                Ok(a) => (a, b),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }
}

impl Drop for Alone {
    fn drop(&mut self) {
        ALONE.set(false);
        let mut st = SUITE.state();
        st.writer = false;
        SUITE.changed.notify_all();
        drop(st);
        log("free", "alone");
    }
}

/// The resources a test holds, and its share of the suite.
#[must_use = "the resources are free again when this is dropped"]
pub struct Exclusive {
    // Dropped first (fields drop in order): the resources, then the share.
    _locks: Vec<MutexGuard<'static, ()>>,
    _suite: Shared,
    bits: u32,
    what: String,
}

/// Waits for each of `resources`, taken in [`Resource`] order, and holds
/// them (and a share of the suite) until the returned guard is dropped.
/// Take it first, naming every resource the test needs in one call.
///
/// The resources come first and the share after: a test queued behind a
/// busy resource holds no share, so an [`alone`] test waits only for the
/// tests that run, not for every test queued behind the resource (the
/// guest tests queue for minutes). That is why a test that holds a share
/// already (a scratch, another exclusive) is refused: it could wait for a
/// resource whose holder waits for the alone test, which waits for it. An
/// alone test needs no resource lock: nothing else runs beside it, and a
/// test that holds a resource while it waits for its share does not use
/// it yet.
pub fn exclusive(resources: &[Resource]) -> Exclusive {
    let mut wanted = resources.to_vec();
    wanted.sort();
    wanted.dedup();
    let bits = wanted.iter().fold(0, |b, r| b | 1 << *r as u32);
    assert!(
        HELD.get() & bits == 0,
        "exclusive({resources:?}): this test holds some of them already and would wait for itself"
    );
    assert!(
        READS.get() == 0,
        "take exclusive({resources:?}) first, naming every resource at once: this test holds a share of the suite already (a Scratch, another exclusive)"
    );
    let what = format!("{wanted:?}");
    suite_start();
    log("ask", &what);
    let locks = if ALONE.get() {
        Vec::new()
    } else {
        wanted
            .into_iter()
            .map(|r| {
                RESOURCE_LOCKS[r as usize]
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
            })
            .collect()
    };
    log("got", &what);
    HELD.set(HELD.get() | bits);
    let suite = shared();
    Exclusive {
        _locks: locks,
        _suite: suite,
        bits,
        what,
    }
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        HELD.set(HELD.get() & !self.bits);
        log("free", &self.what);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    // These tests share the process-wide suite lock with each other: each
    // takes `alone` or only shares, so they cannot disturb one another's
    // checks.

    #[test]
    fn a_helper_beside_an_alone_test_is_part_of_it() {
        let a = alone();
        let (helper, here) = a.beside(
            || {
                // A share taken here holds nothing instead of waiting
                // for the alone test, which waits for this thread (not
                // taken unless that holds: it would hang, not fail).
                if !ALONE.get() {
                    return false;
                }
                let _share = shared();
                true
            },
            || ALONE.get(),
        );
        assert!(helper && here);
        drop(a);
        assert!(!ALONE.get());
    }

    #[test]
    fn an_alone_test_waits_for_shares_and_keeps_new_ones_out() {
        let others = Arc::new(AtomicUsize::new(0));
        let share = shared();
        let o = others.clone();
        let lone = std::thread::spawn(move || {
            let _a = alone();
            // The thread below asked for a share meanwhile: it waits.
            let seen = o.load(Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100));
            (seen, o.load(Ordering::SeqCst))
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(!lone.is_finished(), "alone ran while a share was held");
        // A second share on this thread is given at once although a writer
        // waits (else this thread would wait for itself).
        drop(shared());
        // A new share on another thread waits for the writer.
        let o = others.clone();
        let later = std::thread::spawn(move || {
            let _s = shared();
            o.fetch_add(1, Ordering::SeqCst);
        });
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(others.load(Ordering::SeqCst), 0);
        drop(share);
        assert_eq!(lone.join().unwrap(), (0, 0));
        later.join().unwrap();
        assert_eq!(others.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn an_alone_test_can_make_scratches() {
        let _a = alone();
        let s = crate::Scratch::new();
        let _e = exclusive(&[Resource::HugePages]);
        drop(s);
    }

    #[test]
    #[should_panic(expected = "would wait for itself")]
    fn alone_after_a_share_is_refused() {
        let _s = shared();
        let _a = alone();
    }

    #[test]
    #[should_panic(expected = "would wait for itself")]
    fn a_resource_held_twice_is_refused() {
        let _a = exclusive(&[Resource::Guests]);
        let _b = exclusive(&[Resource::HugePages, Resource::Guests]);
    }

    #[test]
    #[should_panic(expected = "take exclusive")]
    fn a_resource_after_a_share_is_refused() {
        let _s = shared();
        let _e = exclusive(&[Resource::Mounts]);
    }

    #[test]
    fn an_alone_test_does_not_wait_for_tests_queued_behind_a_resource() {
        // A holds Timing and runs; B queues for Timing; then a test asks
        // to run alone. It runs once A is done, before B (which holds no
        // share while it waits for Timing), and B runs after it.
        let order = Arc::new(Mutex::new(Vec::new()));
        let a = exclusive(&[Resource::Timing]);
        let o = order.clone();
        let b = std::thread::spawn(move || {
            let _e = exclusive(&[Resource::Timing]);
            o.lock().unwrap().push("b");
        });
        std::thread::sleep(Duration::from_millis(50));
        let o = order.clone();
        let lone = std::thread::spawn(move || {
            let _a = alone();
            o.lock().unwrap().push("alone");
            std::thread::sleep(Duration::from_millis(50));
        });
        while SUITE.state().writers_waiting == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        order.lock().unwrap().push("a");
        drop(a);
        lone.join().unwrap();
        b.join().unwrap();
        assert_eq!(*order.lock().unwrap(), ["a", "alone", "b"]);
    }

    #[test]
    fn one_holder_per_resource() {
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|i| {
                let (inside, most) = (inside.clone(), most.clone());
                std::thread::spawn(move || {
                    // Named in two orders: taken in one.
                    let rs = if i % 2 == 0 {
                        [Resource::Timing, Resource::Mounts]
                    } else {
                        [Resource::Mounts, Resource::Timing]
                    };
                    let _e = exclusive(&rs);
                    let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(n, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(10));
                    inside.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 1);
    }
}
