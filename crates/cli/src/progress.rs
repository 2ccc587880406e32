//! Progress of a run: a bar with the ETA of the whole study on a terminal,
//! plain lines otherwise (logs, CI).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use benchlab_core::units::format_duration;
use benchlab_engine::{Observer, RoundStart, RunStart, UnitInfo, UnitResult};
use indicatif::{ProgressBar, ProgressStyle};

/// The time left in a run, learnt from what it has measured so far.
///
/// The plan's per-unit guesses (a workload's `expected_duration` plus the
/// quiesce) can be far off, and differently for each workload: an
/// `fs.matrix` guess is deliberately slow (it also bounds a hung client),
/// about 20 × the time a cell takes, while a network point's guess is
/// close. So each workload gets its own correction, the ratio of the wall
/// time its finished units took (from one unit's end to the next,
/// set-up and quiesce included) to their guesses; a workload that has not
/// run yet borrows the ratio of all finished units, or its guess at the
/// very start.
#[derive(Debug, Clone)]
pub(crate) struct Estimate {
    /// Per unit of the run, in order: (workload index, expected seconds,
    /// still to run).
    units: Vec<(usize, f64, bool)>,
    /// Per workload index: (expected seconds done, actual seconds taken).
    done: Vec<(f64, f64)>,
}

impl Estimate {
    /// `units`: (workload index, expected seconds) of every unit to run.
    pub(crate) fn new(units: Vec<(usize, f64)>) -> Estimate {
        let workloads = units.iter().map(|u| u.0 + 1).max().unwrap_or(0);
        Estimate {
            units: units.into_iter().map(|(w, e)| (w, e, true)).collect(),
            done: vec![(0.0, 0.0); workloads],
        }
    }

    /// Unit `n` finished after `actual_s` of wall time.
    pub(crate) fn finished(&mut self, n: usize, actual_s: f64) {
        if let Some(u) = self.units.get_mut(n) {
            if u.2 {
                u.2 = false;
                self.done[u.0].0 += u.1;
                self.done[u.0].1 += actual_s.max(0.0);
            }
        }
    }

    /// Unit `n` will not run (adaptive repetitions stopped its point).
    pub(crate) fn dropped(&mut self, n: usize) {
        if let Some(u) = self.units.get_mut(n) {
            u.2 = false;
        }
    }

    /// Expected seconds of the units still to run, by the plan's guesses.
    pub(crate) fn guessed_left_s(&self) -> f64 {
        self.units.iter().filter(|u| u.2).map(|u| u.1).sum()
    }

    /// Seconds left: each remaining unit's guess times its workload's
    /// ratio (see the type's docs).
    pub(crate) fn left_s(&self) -> f64 {
        let (e, a) = self
            .done
            .iter()
            .fold((0.0, 0.0), |(e, a), d| (e + d.0, a + d.1));
        let overall = if e > 0.0 { a / e } else { 1.0 };
        self.units
            .iter()
            .filter(|u| u.2)
            .map(|&(w, expected, _)| {
                let (e, a) = self.done[w];
                expected * if e > 0.0 { a / e } else { overall }
            })
            .sum()
    }
}

/// Progress over the units of one run.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    total: usize,
    already: usize,
    estimate: Estimate,
    last_end: Instant,
}

impl Progress {
    /// `units` to run, (workload index, expected seconds) each; `already`
    /// were done before (a resumed run).
    pub(crate) fn new(units: Vec<(usize, f64)>, already: usize) -> Progress {
        let total = units.len();
        let estimate = Estimate::new(units);
        let expected_s = estimate.guessed_left_s();
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total as u64);
            bar.set_style(
                ProgressStyle::with_template(
                    "{bar:30.cyan/blue} {pos}/{len} {elapsed_precise} {msg}",
                )
                .expect("valid template")
                .progress_chars("=> "),
            );
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        let p = Progress {
            bar,
            total,
            already,
            estimate,
            last_end: Instant::now(),
        };
        let line = format!(
            "benchlab: {} repetition(s) to run{}, expected {}",
            total,
            if already > 0 {
                format!(" ({already} already done)")
            } else {
                String::new()
            },
            format_duration(expected_s)
        );
        match &p.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
        p
    }

    /// The estimate of the time left (see [`Estimate`]).
    fn eta_s(&self) -> f64 {
        self.estimate.left_s()
    }

    pub(crate) fn begin(&mut self, n: usize, what: &str) {
        if let Some(b) = &self.bar {
            b.set_position(n as u64);
            b.set_message(format!("ETA {} · {what}", format_duration(self.eta_s())));
        }
    }

    pub(crate) fn end(&mut self, n: usize, what: &str, summary: &str) {
        let now = Instant::now();
        self.estimate
            .finished(n, (now - self.last_end).as_secs_f64());
        self.last_end = now;
        let line = format!(
            "[{}/{}] {what}: {summary} (ETA {})",
            n + 1 + self.already,
            self.total + self.already,
            format_duration(self.eta_s())
        );
        match &self.bar {
            Some(b) => {
                b.set_position(n as u64 + 1);
                b.println(line);
            }
            None => eprintln!("{line}"),
        }
    }

    /// Unit `n` is not needed (adaptive repetitions stopped its point):
    /// its time leaves the estimate, and the bar moves on silently.
    pub(crate) fn skip(&mut self, n: usize) {
        self.estimate.dropped(n);
        if let Some(b) = &self.bar {
            b.set_position(n as u64 + 1);
        }
    }

    pub(crate) fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

/// The engine's observer on the command line: a [`Progress`] once the run
/// says what it will run.
#[derive(Default)]
pub(crate) struct Printer {
    progress: Option<Progress>,
}

impl Observer for Printer {
    fn start(&mut self, run: &RunStart) {
        self.progress = Some(Progress::new(
            run.units
                .iter()
                .map(|u| (u.workload, u.expected_s))
                .collect(),
            run.already,
        ));
    }

    fn begin(&mut self, unit: &UnitInfo<'_>) {
        if let Some(p) = &mut self.progress {
            p.begin(unit.index, &unit.to_string());
        }
    }

    fn end(&mut self, unit: &UnitInfo<'_>, result: &UnitResult<'_>) {
        if let Some(p) = &mut self.progress {
            p.end(unit.index, &unit.to_string(), &result.to_string());
        }
    }

    fn skip(&mut self, index: usize) {
        if let Some(p) = &mut self.progress {
            p.skip(index);
        }
    }

    fn finish(&mut self) {
        if let Some(p) = &mut self.progress {
            p.finish();
        }
    }

    fn note(&mut self, text: &str) {
        eprintln!("benchlab: {text}");
    }

    fn round(&mut self, r: &RoundStart) {
        // The last round's bar gives way to the next round's.
        if let Some(p) = &mut self.progress {
            p.finish();
        }
        eprintln!(
            "benchlab: round {}: {} of {} point(s) undecided, about {}",
            r.round + 1,
            r.points,
            r.rows,
            format_duration(r.expected_s)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 13: an fs study's guesses are about 20 × its real times. After
    /// the first cells, the time left follows what they took; a network
    /// workload that has not run yet borrows the overall ratio until its
    /// own first unit, then keeps its own.
    #[test]
    fn each_workload_learns_its_own_ratio() {
        // Workload 0: 4 fs cells guessed at 100 s each; workload 1: 2
        // network points guessed at 10 s each.
        let mut e = Estimate::new(vec![
            (0, 100.0),
            (0, 100.0),
            (0, 100.0),
            (0, 100.0),
            (1, 10.0),
            (1, 10.0),
        ]);
        assert_eq!(e.left_s(), 420.0);
        // The first cell took 5 s: the other three will take about 15 s,
        // and the network points borrow the same 1/20 for now.
        e.finished(0, 5.0);
        assert!((e.left_s() - (15.0 + 1.0)).abs() < 1e-9, "{}", e.left_s());
        e.finished(1, 5.0);
        e.finished(2, 5.0);
        e.finished(3, 5.0);
        // A network point took its guess, 10 s: the last one is 10 s, not
        // the fs workload's 0.5 s.
        e.finished(4, 10.0);
        assert!((e.left_s() - 10.0).abs() < 1e-9, "{}", e.left_s());
        // A dropped unit leaves the estimate.
        e.dropped(5);
        assert_eq!(e.left_s(), 0.0);
        // Finishing twice or out of range changes nothing.
        e.finished(4, 99.0);
        e.finished(17, 1.0);
        assert_eq!(e.done[1], (10.0, 10.0));
    }
}
