//! Progress of a run: a bar with the ETA of the whole study on a terminal,
//! plain lines otherwise (logs, CI).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use benchlab_core::units::format_duration;
use indicatif::{ProgressBar, ProgressStyle};

/// Progress over the units of one run.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    total: usize,
    already: usize,
    expected_total_s: f64,
    expected_done_s: f64,
    started: Instant,
}

impl Progress {
    /// `total` units to run, expected to take `expected_s`; `already` were
    /// done before (a resumed run).
    pub(crate) fn new(total: usize, expected_s: f64, already: usize) -> Progress {
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
            expected_total_s: expected_s,
            expected_done_s: 0.0,
            started: Instant::now(),
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

    /// The estimate of the time left: the expected time of what remains,
    /// corrected by how the run has kept to its estimate so far.
    fn eta_s(&self) -> f64 {
        let left = (self.expected_total_s - self.expected_done_s).max(0.0);
        let ratio = if self.expected_done_s > 0.0 {
            (self.started.elapsed().as_secs_f64() / self.expected_done_s).clamp(0.2, 5.0)
        } else {
            1.0
        };
        left * ratio
    }

    pub(crate) fn begin(&mut self, n: usize, what: &str) {
        if let Some(b) = &self.bar {
            b.set_position(n as u64);
            b.set_message(format!("ETA {} · {what}", format_duration(self.eta_s())));
        }
    }

    pub(crate) fn end(&mut self, n: usize, what: &str, summary: &str, expected_s: f64) {
        self.expected_done_s += expected_s;
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
    pub(crate) fn skip(&mut self, n: usize, expected_s: f64) {
        self.expected_total_s = (self.expected_total_s - expected_s).max(self.expected_done_s);
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
