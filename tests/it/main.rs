//! benchlab's integration tests: one binary, one module per area, so that
//! the workspace is linked once for all of them (`cargo test --test it
//! guest::` runs one area). The helpers are in `crates/testkit`.
//!
//! libtest runs the tests of all modules at once. A test that moves or
//! counts state the whole machine shares takes a lock first (see
//! `benchlab_testkit::lock`): `exclusive(&[Resource::…])` for a named
//! resource, `alone()` when nothing else may run meanwhile; either is the
//! test's first line. Each module
//! says which of its tests do and why:
//!
//! - alone: `env` (shields, background load, machine-wide settings
//!   compared before and after), `seeds_compare`'s seed 002 (realtime
//!   profile and shield), `faults`' kill matrix (counts machine-wide
//!   state; its servers' and guests' start deadlines), `monitors`' two
//!   CPU tests (machine-wide CPU time), `boot`'s kernel bisection (its
//!   verdicts rest on timings inside a TCG guest);
//! - `HugePages` + `Guests`: `guest`;
//! - `PlainGuests`: `boot` (guests booting Debian's kernels) and
//!   `guest`'s RabbitMQ test, guests without huge pages, beside the
//!   `guest` tests' chain;
//! - `Mounts`: `fs`, `faults`' storage tests, `monitors`' disk test,
//!   `seeds_compare`'s seed 001, `readonly`'s read-only mount;
//! - `Timing`: `hosts`, `monitors`, `bisect` (its timed C program),
//!   `stacks` (perf samples every CPU).
//!
//! libtest starts the tests in name order, a thread each (12 in
//! scripts/test.sh), and a test queued for a lock keeps its thread: the
//! two guest chains, the suite's longest paths, must start first. The
//! `guest` tests come early enough; the kernel tests' module is named
//! `boot` for that (as `kernel` it started 150 s into CI's step).
//!
//! Every other test touches only its own scratch directory, test bed
//! (named for it) and ports (chosen free), and runs beside the rest; it
//! still waits for an `alone` test when it runs benchlab (a `Scratch`
//! holds the suite's shared side).

mod adaptive;
mod bisect;
mod boot;
mod browse;
mod clients;
mod command;
mod cost;
mod decide;
mod decide_report;
mod env;
mod faults;
mod fileserver;
mod fs;
mod guest;
mod history;
mod hosts;
mod lab;
mod legacy_db;
mod monitors;
mod mq;
mod net;
mod one_command;
mod one_read_path;
mod only;
mod order;
mod pipeline;
mod readonly;
mod report;
mod resume;
mod security;
mod seeds;
mod seeds_compare;
mod seeds_html;
mod serve;
mod service_study;
mod stacks;
mod store_pg;
mod web;
