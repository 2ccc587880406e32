//! Choosing the one repetition a report quotes.
//!
//! Published comparisons often run a test several times and then quote a
//! single run rather than an average, so that every figure in the table comes
//! from one coherent execution:
//!
//! * "We performed the test three times and report the results from the
//!   median run" (seeds 000 and 001) — [`median_run`].
//! * "we ran each configuration nine times, then chose the run which
//!   corresponded to the median standard deviation" (seed 003) —
//!   [`median_stddev_run`].
//!
//! Both return an index into the caller's list of runs, so the caller can
//! pull every other metric from the same run.

use crate::summary::sorted_finite;

/// Index of the run quoted as "the median run".
///
/// * odd n: the run whose value is the median;
/// * even n: the run holding the lower of the two middle values. The
///   median of an even sample is the mean of two runs, which no single run
///   achieved, so one of the two must be chosen by a fixed rule. The lower
///   one is conservative for a higher-is-better metric and slightly
///   favourable for a lower-is-better one; reports should prefer an odd
///   number of runs, as the seeds do (3 and 9);
/// * ties: the earliest index among the runs holding the chosen value, so
///   the answer does not depend on sort stability.
///
/// `None` for an empty slice or one holding NaN or an infinity.
///
/// ```
/// // Three runs, as in "we performed the test three times".
/// assert_eq!(benchlab_stats::median_run(&[9.1, 8.7, 9.4]), Some(0));
/// assert_eq!(benchlab_stats::median_run(&[4.0, 1.0, 3.0, 2.0]), Some(3));
/// ```
pub fn median_run(xs: &[f64]) -> Option<usize> {
    let sorted = sorted_finite(xs)?;
    // Lower middle for even n, the middle for odd n.
    let target = sorted[(sorted.len() - 1) / 2];
    xs.iter().position(|&x| x == target)
}

/// Index of the run "which corresponded to the median standard deviation"
/// (seed 003): given one standard deviation per run, the run whose standard
/// deviation is the median, with the same rules as [`median_run`] (lower
/// middle for even n, earliest index on ties).
///
/// `None` for an empty slice, or one holding NaN, an infinity or a negative
/// value (not a standard deviation).
///
/// ```
/// let stddevs = [0.8, 0.2, 0.5, 0.9, 0.1, 0.4, 0.3, 0.7, 0.6];
/// assert_eq!(benchlab_stats::median_stddev_run(&stddevs), Some(2));
/// ```
pub fn median_stddev_run(stddevs: &[f64]) -> Option<usize> {
    if stddevs.iter().any(|&s| s < 0.0) {
        return None;
    }
    median_run(stddevs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_counts_pick_the_median_value() {
        assert_eq!(median_run(&[5.0]), Some(0));
        assert_eq!(median_run(&[3.0, 1.0, 2.0]), Some(2));
        assert_eq!(median_run(&[1.0, 2.0, 3.0]), Some(1));
        assert_eq!(median_run(&[10.0, 50.0, 20.0, 40.0, 30.0]), Some(4));
    }

    #[test]
    fn even_counts_pick_the_lower_middle() {
        assert_eq!(median_run(&[2.0, 1.0]), Some(1));
        // Sorted 1, 2, 3, 4: lower middle is 2.0 at index 3.
        assert_eq!(median_run(&[4.0, 1.0, 3.0, 2.0]), Some(3));
    }

    #[test]
    fn ties_pick_the_earliest_index() {
        assert_eq!(median_run(&[7.0, 7.0, 7.0]), Some(0));
        // The median value 5.0 sits at indices 1 and 3.
        assert_eq!(median_run(&[9.0, 5.0, 1.0, 5.0, 8.0]), Some(1));
        assert_eq!(median_run(&[1.0, 3.0, 3.0, 3.0]), Some(1));
    }

    #[test]
    fn median_run_rejects_bad_input() {
        assert_eq!(median_run(&[]), None);
        assert_eq!(median_run(&[1.0, f64::NAN, 2.0]), None);
        assert_eq!(median_run(&[1.0, f64::INFINITY, 2.0]), None);
    }

    #[test]
    fn median_stddev_run_nine_runs() {
        // Seed 003 ran nine times: the median of nine is the fifth smallest.
        let stddevs = [0.31, 0.12, 0.57, 0.44, 0.29, 0.90, 0.33, 0.21, 0.48];
        // Sorted: .12 .21 .29 .31 .33 .44 .48 .57 .90 → 0.33 at index 6.
        assert_eq!(median_stddev_run(&stddevs), Some(6));
        assert_eq!(median_stddev_run(&[0.5, 0.5]), Some(0));
        assert_eq!(median_stddev_run(&[0.0, 0.0, 1.0]), Some(0));
        assert_eq!(median_stddev_run(&[]), None);
        assert_eq!(median_stddev_run(&[0.1, -0.2, 0.3]), None);
        assert_eq!(median_stddev_run(&[0.1, f64::NAN, 0.3]), None);
    }
}
