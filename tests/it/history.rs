//! `benchlab history`: 12 stored runs of the `fake` workload with a planted
//! shift (value 100 for six runs, then 115; 2 % noise, a seed per run).

use benchlab_testkit::Scratch;

fn study(value: f64, seed: u64) -> String {
    format!(
        r#"
[study]
name = "hist"

[defaults]
repetitions = 1
quiesce_s = 0

[[configuration]]
name = "base"

[[workload]]
name = "fake"
kind = "fake"
value = {value}
step = 0
noise = 0.02
seed = {seed}
"#
    )
}

fn store_series(s: &Scratch, values: &[f64]) {
    for (i, v) in values.iter().enumerate() {
        let f = s.study(&format!("hist{i}.toml"), &study(*v, 11 + i as u64));
        s.run_ok(&["run", f.to_str().unwrap()]);
    }
}

#[test]
fn a_planted_shift_is_named_at_its_run() {
    let s = Scratch::new();
    let mut values = vec![100.0; 6];
    values.extend([115.0; 6]);
    store_series(&s, &values);
    let out = s.run_ok(&["history", "hist"]);
    println!("{out}");
    assert!(
        out.contains("← change at run 7: mean ") && out.contains("better), p = "),
        "{out}"
    );
    // The latency series (10 µs, no shift) does not change.
    assert_eq!(out.matches("← change at").count(), 1, "{out}");
    let fail = s.run(&["history", "hist", "--fail-on-change"]);
    assert_eq!(fail.status.code(), Some(1), "{fail:?}");
    // A study file names the study too; a change before --since does not fail.
    let file = s.path("hist0.toml");
    let since = s.run(&[
        "history",
        file.to_str().unwrap(),
        "--fail-on-change",
        "--since",
        "8",
    ]);
    assert_eq!(since.status.code(), Some(0), "{since:?}");
}

#[test]
fn a_series_without_a_shift_passes() {
    let s = Scratch::new();
    store_series(&s, &[100.0; 12]);
    let out = s.run_ok(&["history", "hist", "--fail-on-change"]);
    assert!(!out.contains("← change"), "{out}");
    assert!(
        out.contains("no change (the strongest split: p = "),
        "{out}"
    );
}
