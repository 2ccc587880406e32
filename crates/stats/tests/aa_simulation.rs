//! The verdict logic's false-positive rate and power, measured: many
//! simulated studies of two configurations with noisy repetitions and a
//! machine that drifts over the run, in each execution order benchlab
//! offers. Identical configurations (A/A) must be called *better* or
//! *worse* in at most 5 % of the studies; a true 10 % difference should
//! still be found in most studies where the order lets drift be told from
//! a difference. Run with `--nocapture` to see the rates.

use benchlab_stats::{
    block_spread, compare, compare_blocked, Better, Blocked, Comparison, Verdict, DEFAULT_NOISE_PCT,
};

mod common;

use common::Rng;

const STUDIES: usize = 1000;
const REPS: usize = 5;
const NOISE: f64 = 0.05;
const DRIFT: f64 = 0.03;

#[derive(Clone, Copy, Debug)]
enum Order {
    /// Every repetition of A, then every one of B.
    Sequential,
    /// Sequential with an A/A control: A, B, then A again as a hidden
    /// configuration.
    SequentialControl,
    /// At every repetition both configurations, in a random order.
    Alternate,
    /// Two blocks per configuration in ABBA order.
    Abba,
}

/// One repetition: configuration (0 = A, 1 = B, 2 = A's control), block,
/// position in the run.
type Slot = (usize, u32, usize);

fn schedule(order: Order, rng: &mut Rng) -> Vec<Slot> {
    let mut s = Vec::new();
    let push = |c: usize, b: u32, n: usize, s: &mut Vec<Slot>| {
        for _ in 0..n {
            let t = s.len();
            s.push((c, b, t));
        }
    };
    match order {
        Order::Sequential => {
            push(0, 0, REPS, &mut s);
            push(1, 0, REPS, &mut s);
        }
        Order::SequentialControl => {
            push(0, 0, REPS, &mut s);
            push(1, 0, REPS, &mut s);
            push(2, 1, REPS, &mut s);
        }
        Order::Alternate => {
            for r in 0..REPS {
                let first = (rng.next() & 1) as usize;
                push(first, r as u32, 1, &mut s);
                push(1 - first, r as u32, 1, &mut s);
            }
        }
        Order::Abba => {
            let first = REPS.div_ceil(2);
            push(0, 0, first, &mut s);
            push(1, 0, first, &mut s);
            push(1, 1, REPS - first, &mut s);
            push(0, 1, REPS - first, &mut s);
        }
    }
    s
}

/// A's comparison against B in one simulated study where B's true mean is
/// `effect` below A's (0 for A/A).
fn study(order: Order, effect: f64, rng: &mut Rng) -> Comparison {
    let slots = schedule(order, rng);
    let last = (slots.len() - 1) as f64;
    let mut v: [Vec<f64>; 3] = Default::default();
    let mut blk: [Vec<u32>; 3] = Default::default();
    for &(c, b, t) in &slots {
        let mu = if c == 1 {
            100.0 * (1.0 - effect)
        } else {
            100.0
        };
        let x = mu * (1.0 + DRIFT * t as f64 / last) * (1.0 + NOISE * rng.normal());
        v[c].push(x);
        blk[c].push(b);
    }
    let noise = DEFAULT_NOISE_PCT;
    match order {
        Order::Alternate => compare(&v[0], &v[1], Better::Higher, noise).unwrap(),
        Order::Sequential | Order::Abba => {
            let (a, b) = (
                Blocked {
                    values: &v[0],
                    blocks: &blk[0],
                },
                Blocked {
                    values: &v[1],
                    blocks: &blk[1],
                },
            );
            compare_blocked(a, b, block_spread(&[a, b]), Better::Higher, noise).unwrap()
        }
        Order::SequentialControl => {
            // The control is the baseline run again: for the spread
            // between blocks it is A's second block.
            let both: Vec<f64> = v[0].iter().chain(&v[2]).copied().collect();
            let both_blocks: Vec<u32> = blk[0].iter().chain(&blk[2]).copied().collect();
            let a_all = Blocked {
                values: &both,
                blocks: &both_blocks,
            };
            let a = Blocked {
                values: &v[0],
                blocks: &blk[0],
            };
            let b = Blocked {
                values: &v[1],
                blocks: &blk[1],
            };
            let spread = block_spread(&[a_all, b]);
            compare_blocked(a, b, spread, Better::Higher, noise).unwrap()
        }
    }
}

fn rate(order: Order, effect: f64, seed: u64) -> f64 {
    let mut rng = Rng(seed);
    let called = (0..STUDIES)
        .filter(|_| {
            matches!(
                study(order, effect, &mut rng).verdict,
                Verdict::Better | Verdict::Worse
            )
        })
        .count();
    called as f64 / STUDIES as f64
}

#[test]
fn false_positive_rate_and_power_per_order() {
    let orders = [
        Order::Sequential,
        Order::SequentialControl,
        Order::Alternate,
        Order::Abba,
    ];
    // Two threads: the comparisons' bootstrap intervals make each rate a
    // few seconds of work.
    let rates: Vec<(f64, f64)> = std::thread::scope(|s| {
        let fps: Vec<_> = orders
            .iter()
            .map(|&o| s.spawn(move || rate(o, 0.0, 1)))
            .collect();
        let powers: Vec<_> = orders
            .iter()
            .map(|&o| s.spawn(move || rate(o, 0.10, 2)))
            .collect();
        fps.into_iter()
            .zip(powers)
            .map(|(f, p)| (f.join().unwrap(), p.join().unwrap()))
            .collect()
    });
    let mut lines = Vec::new();
    for (order, (fp, power)) in orders.into_iter().zip(rates) {
        lines.push(format!(
            "{order:?}: false positives {:.1} %, power at 10 % {:.1} %",
            fp * 100.0,
            power * 100.0
        ));
        assert!(fp <= 0.05, "{order:?}: A/A called in {:.1} %", fp * 100.0);
        if matches!(order, Order::Alternate) {
            assert!(power >= 0.5, "{order:?}: power {:.1} %", power * 100.0);
        }
    }
    // The order benchlab used before issue 30, analysed as independent
    // samples: what the blocks' analysis protects against.
    let mut rng = Rng(3);
    let naive = (0..STUDIES)
        .filter(|_| {
            let slots = schedule(Order::Sequential, &mut rng);
            let last = (slots.len() - 1) as f64;
            let mut v: [Vec<f64>; 2] = Default::default();
            for &(c, _, t) in &slots {
                v[c].push(100.0 * (1.0 + DRIFT * t as f64 / last) * (1.0 + NOISE * rng.normal()));
            }
            matches!(
                compare(&v[0], &v[1], Better::Higher, DEFAULT_NOISE_PCT)
                    .unwrap()
                    .verdict,
                Verdict::Better | Verdict::Worse
            )
        })
        .count();
    lines.push(format!(
        "Sequential analysed as independent samples (before): false positives {:.1} %",
        naive as f64 / STUDIES as f64 * 100.0
    ));
    for l in &lines {
        eprintln!("{l}");
    }
}
