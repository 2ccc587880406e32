//! `perf script`'s text, split by side and folded. Each sample is a
//! header line (`comm pid/tid [cpu] time: event:`) followed by its
//! frames, leaf first, and a blank line; task events are one line. The
//! samples go to their side's text, which inferno's perf folder turns
//! into folded stacks (command name at the root, as stackcollapse-perf).

use std::collections::BTreeMap;

use inferno::collapse::perf::{Folder, Options};
use inferno::collapse::Collapse;

use crate::procs::Tree;
use crate::{Root, SideStacks, StacksError, SIDE_OTHER};

/// The `perf script` fields this module reads (no period: every sample
/// counts one, whatever its period).
pub const SCRIPT_FIELDS: &str = "comm,pid,tid,cpu,time,event,ip,sym,dso";

/// What a recording's text comes to.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// Every sample.
    pub samples: u64,
    /// Samples of a process other than the idle task.
    pub busy_samples: u64,
    /// Each side's folded stacks, in the order of their first sample.
    pub sides: Vec<SideStacks>,
}

/// The pid of a header line: the first `N/M` token of digits.
fn header_pid(line: &str) -> Option<u32> {
    line.split_whitespace().find_map(|tok| {
        let (p, t) = tok.split_once('/')?;
        if !p.is_empty()
            && p.bytes().all(|b| b.is_ascii_digit())
            && t.bytes().all(|b| b.is_ascii_digit())
            && !t.is_empty()
        {
            p.parse().ok()
        } else {
            None
        }
    })
}

/// Splits `perf script --show-task-events` output (fields
/// [`SCRIPT_FIELDS`]) into the sides the roots define, and folds each.
pub fn split(text: &str, roots: &[Root]) -> Result<Split, StacksError> {
    let mut tree = Tree::new(roots);
    // Task events first: a sample may precede the fork record of its
    // process only in a damaged file, but the synthesized tree comes
    // first anyway and forks are cheap to read twice.
    for line in text.lines() {
        if line.contains("PERF_RECORD_FORK(") {
            tree.fork_event(line);
        }
    }
    let mut texts: Vec<(String, String, u64)> = Vec::new();
    let (mut samples, mut busy) = (0u64, 0u64);
    let mut block: Option<usize> = None;
    for line in text.lines() {
        if line.trim().is_empty() {
            if let Some(i) = block.take() {
                texts[i].1.push('\n');
            }
            continue;
        }
        let indented = line.starts_with(|c: char| c.is_whitespace());
        if indented {
            if let Some(i) = block {
                let t = &mut texts[i].1;
                t.push_str(line);
                t.push('\n');
            }
            continue;
        }
        // A new header line ends any block left open.
        if let Some(i) = block.take() {
            texts[i].1.push('\n');
        }
        if line.contains("PERF_RECORD_") {
            continue;
        }
        let Some(pid) = header_pid(line) else {
            continue;
        };
        samples += 1;
        if pid != 0 {
            busy += 1;
        }
        let side = tree.side(pid);
        let i = match texts.iter().position(|(s, _, _)| s == side) {
            Some(i) => i,
            None => {
                texts.push((side.to_string(), String::new(), 0));
                texts.len() - 1
            }
        };
        texts[i].2 += 1;
        let t = &mut texts[i].1;
        t.push_str(line);
        t.push('\n');
        block = Some(i);
    }
    let mut sides = Vec::new();
    for (side, text, n) in texts {
        let mut folded = fold(&text)?;
        if side == SIDE_OTHER {
            folded = roots_only(&folded);
        }
        sides.push(SideStacks {
            side,
            samples: n,
            folded,
        });
    }
    Ok(Split {
        samples,
        busy_samples: busy,
        sides,
    })
}

/// Folds one side's `perf script` text.
fn fold(text: &str) -> Result<String, StacksError> {
    let mut opt = Options::default();
    opt.nthreads = 1;
    let mut folder = Folder::from(opt);
    let mut out = Vec::new();
    folder
        .collapse(text.as_bytes(), &mut out)
        .map_err(|e| StacksError(format!("folding the stacks: {e}")))?;
    String::from_utf8(out).map_err(|e| StacksError(format!("folded stacks are not UTF-8: {e}")))
}

/// Folded stacks cut to their root frame (the command name): what ran
/// beside the point, without the size of every stranger's stacks.
fn roots_only(folded: &str) -> String {
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    for (stack, n) in parse_folded(folded) {
        let root = stack.split(';').next().unwrap_or(stack);
        *by.entry(root).or_default() += n;
    }
    by.iter().map(|(r, n)| format!("{r} {n}\n")).collect()
}

/// The `stack count` lines of folded text (lines that do not end in a
/// count are skipped).
pub fn parse_folded(folded: &str) -> impl Iterator<Item = (&str, u64)> {
    folded.lines().filter_map(|l| {
        let (stack, n) = l.trim_end().rsplit_once(' ')?;
        Some((stack, n.parse().ok()?))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
swapper     0/0     [000]     0.000000: PERF_RECORD_FORK(1:1):(0:0)
x 0/0 [000] 0.0: PERF_RECORD_FORK(50:50):(1:1)
x 0/0 [000] 0.0: PERF_RECORD_FORK(60:60):(50:50)
x 0/0 [000] 0.0: PERF_RECORD_FORK(70:70):(1:1)
benchlab 50/51 [000] 10.000: cpu-clock:ppp:
\tffffffff81000001 tcp_sendmsg ([kernel.kallsyms])
\tffffffff81000002 __sys_sendto ([kernel.kallsyms])
\t55555555 client_loop (/usr/bin/benchlab)

hot 60/60 [001] 10.001: cpu-clock:ppp:
\t4005 planted_hot (/tmp/hot)
\t4001 main (/tmp/hot)

hot 60/60 [001] 10.011: cpu-clock:ppp:
\t4005 planted_hot (/tmp/hot)
\t4001 main (/tmp/hot)

swapper 0/0 [001] 10.02: cpu-clock:ppp:
\tffffffff81000009 default_idle ([kernel.kallsyms])

cc1 70/70 [000] 10.03: cpu-clock:ppp:
\t1234 deep ([unknown])
\t1233 deeper ([unknown])
";

    #[test]
    fn samples_go_to_the_side_of_their_nearest_root() {
        let s = split(
            TEXT,
            &[Root {
                pid: 50,
                side: "client".into(),
            }],
        )
        .unwrap();
        assert_eq!((s.samples, s.busy_samples), (5, 4));
        let get = |side: &str| s.sides.iter().find(|x| x.side == side).unwrap();
        let client = get("client");
        assert_eq!(client.samples, 3);
        assert!(client
            .folded
            .contains("benchlab;client_loop;__sys_sendto;tcp_sendmsg 1"));
        assert!(client.folded.contains("hot;main;planted_hot 2"));
        assert_eq!(get("idle").samples, 1);
        assert_eq!(get("other").folded, "cc1 1\n");
    }

    #[test]
    fn folded_lines_parse_back() {
        let v: Vec<_> = parse_folded("a;b 3\nbad\nc 1\n").collect();
        assert_eq!(v, vec![("a;b", 3), ("c", 1)]);
    }
}
