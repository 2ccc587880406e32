//! Which side a process belongs to, from the process tree `perf record`
//! itself wrote: at its start it synthesizes a fork event for every
//! process that exists (with its parent), and records every fork while
//! it runs, so a short-lived child of a side (a `command` workload's
//! program) is attributed as well as a long-lived one.

use std::collections::HashMap;

use crate::{Root, SIDE_IDLE, SIDE_KERNEL, SIDE_OTHER};

/// The kernel's thread spawner: its descendants are kernel threads.
const KTHREADD: u32 = 2;
/// How far up the tree a lookup walks before giving up (a loop in a
/// damaged record must not hang the agent).
const MAX_DEPTH: usize = 256;

/// Parents by process, and the sides' roots.
#[derive(Debug, Default)]
pub(crate) struct Tree {
    parent: HashMap<u32, u32>,
    roots: HashMap<u32, String>,
}

impl Tree {
    pub(crate) fn new(roots: &[Root]) -> Tree {
        Tree {
            parent: HashMap::new(),
            roots: roots.iter().map(|r| (r.pid, r.side.clone())).collect(),
        }
    }

    /// Reads a `PERF_RECORD_FORK(child_pid:child_tid):(parent_pid:parent_tid)`
    /// line; a new thread (same pid) changes nothing.
    pub(crate) fn fork_event(&mut self, line: &str) {
        let Some(rest) = line.split("PERF_RECORD_FORK(").nth(1) else {
            return;
        };
        let mut nums = rest
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse::<u32>().ok());
        let (Some(Some(child)), _, Some(Some(parent))) = (nums.next(), nums.next(), nums.next())
        else {
            return;
        };
        if child != parent {
            self.parent.insert(child, parent);
        }
    }

    /// The side of process `pid`: the nearest root among it and its
    /// ancestors, else the kernel's, the idle task's or `other`.
    pub(crate) fn side(&self, pid: u32) -> &str {
        if pid == 0 {
            return SIDE_IDLE;
        }
        let mut p = pid;
        for _ in 0..MAX_DEPTH {
            if let Some(side) = self.roots.get(&p) {
                return side;
            }
            if p == KTHREADD {
                return SIDE_KERNEL;
            }
            match self.parent.get(&p) {
                Some(&q) if q != p && q != 0 => p = q,
                _ => break,
            }
        }
        SIDE_OTHER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_root_wins_and_the_rest_is_kernel_idle_or_other() {
        let mut t = Tree::new(&[
            Root {
                pid: 100,
                side: "server".into(),
            },
            Root {
                pid: 200,
                side: "service:web".into(),
            },
        ]);
        for l in [
            "swapper     0/0     [000]     0.000000: PERF_RECORD_FORK(1:1):(0:0)",
            "swapper 0/0 [000] 0.0: PERF_RECORD_FORK(2:2):(0:0)",
            "kthreadd 0/0 [000] 0.0: PERF_RECORD_FORK(14:14):(2:2)",
            "x 0/0 [000] 0.0: PERF_RECORD_FORK(100:100):(1:1)",
            "x 0/0 [000] 0.0: PERF_RECORD_FORK(200:200):(100:100)",
            "nginx 0/0 [000] 0.0: PERF_RECORD_FORK(201:201):(200:200)",
            "x 0/0 [000] 0.0: PERF_RECORD_FORK(100:105):(100:100)",
            "x 0/0 [000] 0.0: PERF_RECORD_FORK(300:300):(1:1)",
        ] {
            t.fork_event(l);
        }
        assert_eq!(t.side(100), "server");
        assert_eq!(t.side(201), "service:web");
        assert_eq!(t.side(14), SIDE_KERNEL);
        assert_eq!(t.side(0), SIDE_IDLE);
        assert_eq!(t.side(300), SIDE_OTHER);
        assert_eq!(t.side(999), SIDE_OTHER);
    }
}
