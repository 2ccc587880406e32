//! Every error class of a study file names the file, the line, the key and
//! what is allowed.

use benchlab_core::fake::FAKE;
use benchlab_core::study::{Study, StudyError};
use benchlab_core::Registry;

fn registry() -> Registry {
    let mut r = Registry::new();
    r.add(&FAKE);
    r
}

fn err(text: &str) -> StudyError {
    Study::parse("my-study.toml", text, &registry()).expect_err("the study must be refused")
}

const HEAD: &str = "[study]\nname = \"s\"\n";

fn check(e: &StudyError, line: usize, key: &str, needles: &[&str]) {
    let shown = e.to_string();
    assert_eq!(e.file, "my-study.toml", "{shown}");
    assert_eq!(e.line, line, "{shown}");
    assert_eq!(e.key, key, "{shown}");
    assert!(
        shown.starts_with(&format!("my-study.toml:{line}:")),
        "{shown}"
    );
    assert!(shown.contains(&format!("`{key}`")), "{shown}");
    for n in needles {
        assert!(shown.contains(n), "`{n}` missing from: {shown}");
    }
}

#[test]
fn unknown_key_in_workload() {
    let e = err(&format!(
        "{HEAD}[[workload]]\nkind = \"fake\"\nsizes = [1, 2]\n"
    ));
    check(
        &e,
        5,
        "workload[0].sizes",
        &["unknown key", "allowed here:", "size", "sleep_s"],
    );
}

#[test]
fn unknown_top_level_key() {
    let e = err(&format!("{HEAD}[defaultz]\nrepetitions = 3\n"));
    check(
        &e,
        3,
        "defaultz",
        &[
            "unknown key",
            "study, defaults, configuration, host, service, workload, testbed",
        ],
    );
}

#[test]
fn wrong_type() {
    let e = err(&format!(
        "{HEAD}[[workload]]\nkind = \"fake\"\nfail = \"yes\"\n"
    ));
    check(
        &e,
        5,
        "workload[0].fail",
        &["expected true or false", "found a string"],
    );
    let e = err(&format!(
        "{HEAD}[defaults]\nrepetitions = \"three\"\n[[workload]]\nkind = \"fake\"\n"
    ));
    check(
        &e,
        4,
        "defaults.repetitions",
        &["expected a non-negative integer"],
    );
}

#[test]
fn bad_size() {
    let e = err(&format!(
        "{HEAD}[[workload]]\nkind = \"fake\"\nsize = [64, \"4 parsecs\"]\n"
    ));
    check(
        &e,
        5,
        "workload[0].size[1]",
        &["bad size", "unknown size unit `parsecs`", "KiB"],
    );
    let e = err(&format!("{HEAD}[[workload]]\nkind = \"fake\"\nsize = -4\n"));
    check(&e, 5, "workload[0].size", &["negative", "a size in bytes"]);
}

#[test]
fn empty_sweep() {
    let e = err(&format!("{HEAD}[[workload]]\nkind = \"fake\"\nsize = []\n"));
    check(
        &e,
        5,
        "workload[0].size",
        &["empty sweep", "at least one value"],
    );
}

#[test]
fn unknown_workload() {
    let e = err(&format!("{HEAD}[[workload]]\nkind = \"net.teleport\"\n"));
    check(
        &e,
        4,
        "workload[0].kind",
        &["unknown workload `net.teleport`", "known: fake"],
    );
}

#[test]
fn bad_choice_and_placement() {
    let e = err(&format!(
        "{HEAD}order = \"random\"\n[[workload]]\nkind = \"fake\"\n"
    ));
    check(
        &e,
        3,
        "study.order",
        &["`random` is not allowed", "\"sequential\", \"interleaved\""],
    );
    let e = err(&format!("{HEAD}[[configuration]]\nname = \"a\"\nserver = {{ cpus = \"3-1\" }}\n[[workload]]\nkind = \"fake\"\n"));
    check(
        &e,
        5,
        "configuration[0].server.cpus",
        &["not a CPU list", "0-3,8"],
    );
    let e = err(&format!("{HEAD}[[configuration]]\nname = \"a\"\nclient = {{ nice = 40 }}\n[[workload]]\nkind = \"fake\"\n"));
    check(&e, 5, "configuration[0].client.nice", &["-20 … 19"]);
}

#[test]
fn names_must_be_unique_and_present() {
    let e = err(&format!("{HEAD}[[configuration]]\nname = \"a\"\n[[configuration]]\nname = \"a\"\n[[workload]]\nkind = \"fake\"\n"));
    check(&e, 6, "configuration[1].name", &["defined twice"]);
    let e = err("[study]\ndescription = \"x\"\n[[workload]]\nkind = \"fake\"\n");
    check(&e, 1, "study.name", &["missing"]);
    let e = err(HEAD);
    check(&e, 1, "workload", &["at least one [[workload]]", "fake"]);
}

#[test]
fn unused_configuration_setting() {
    let e = err(&format!("{HEAD}[[configuration]]\nname = \"a\"\nset = {{ recv_buffer = \"4MiB\" }}\n[[workload]]\nkind = \"fake\"\n"));
    check(
        &e,
        5,
        "configuration[0].set.recv_buffer",
        &["no workload of this study has this parameter"],
    );
}

#[test]
fn not_toml() {
    let e = err("[study\nname = 1\n");
    assert_eq!(e.line, 1, "{e}");
    assert!(e.to_string().contains("not valid TOML"), "{e}");
}

#[test]
fn a_valid_study_expands() {
    let s = Study::parse(
        "ok.toml",
        &format!(
            "{HEAD}[[workload]]\nkind = \"fake\"\nsize = [\"1KiB\", 2048]\nvalue = [1.5, 2]\n"
        ),
        &registry(),
    )
    .unwrap();
    let points = s.workloads[0].points();
    assert_eq!(points.len(), 4);
    assert_eq!(points[0].u64("size").unwrap(), 1024);
    assert_eq!(points[3].f64("value").unwrap(), 2.0);
    assert_eq!(s.configurations[0].name, "default");
}

/// `[[study.step]]` (issue 13): the reproduced study's preparation steps
/// and their status here, read in order; a status outside the three forms,
/// or one without its reason, is refused naming the step.
#[test]
fn study_steps_are_read_and_checked() {
    use benchlab_core::study::StepStatus;
    let ok = "[study]\nname = \"s\"\n\
              [[study.step]]\nstep = \"tuned-adm profile latency-performance\"\nstatus = \"applied\"\n\
              [[study.step]]\nstep = \"tuna --irq p4p2 --spread\"\nstatus = \"approximated: IRQs moved off the shielded CPU\"\n\
              [[study.step]]\nstep = \"BIOS: Performance Per Watt (OS)\"\nstatus = \"not possible here: no BIOS access\"\n\
              [[workload]]\nkind = \"fake\"\n";
    let s = Study::parse("my-study.toml", ok, &registry()).unwrap();
    let statuses: Vec<StepStatus> = s.steps.iter().map(|x| x.status.clone()).collect();
    assert_eq!(
        statuses,
        [
            StepStatus::Applied(None),
            StepStatus::Approximated("IRQs moved off the shielded CPU".into()),
            StepStatus::NotPossible("no BIOS access".into()),
        ]
    );
    assert_eq!(s.steps[2].step, "BIOS: Performance Per Watt (OS)");
    assert_eq!(
        s.steps[1].status.text(),
        "approximated: IRQs moved off the shielded CPU"
    );

    let e = err(&format!(
        "{HEAD}[[study.step]]\nstep = \"x\"\nstatus = \"skipped\"\n[[workload]]\nkind = \"fake\"\n"
    ));
    check(
        &e,
        5,
        "study.step[0].status",
        &[
            "`skipped`",
            "applied",
            "approximated: how",
            "not possible here: why",
        ],
    );
    let e = err(&format!(
        "{HEAD}[[study.step]]\nstep = \"x\"\nstatus = \"not possible here:  \"\n[[workload]]\nkind = \"fake\"\n"
    ));
    check(&e, 5, "study.step[0].status", &["say why"]);
    let e = err(&format!(
        "{HEAD}[[study.step]]\nstatus = \"applied\"\n[[workload]]\nkind = \"fake\"\n"
    ));
    check(&e, 3, "study.step[0].step", &["missing"]);
}

/// Issue 27: `[monitors]` is on by default; `monitors = false` and its
/// keys are read, and a bad value names the key and what is allowed.
#[test]
fn monitors_section() {
    let w = "[[workload]]\nkind = \"fake\"\n";
    let ok = |text: &str| Study::parse("my-study.toml", text, &registry()).unwrap();
    let m = ok(&format!("{HEAD}{w}")).monitors;
    assert!(m.enabled);
    assert_eq!(m.interval_s, 1.0);
    assert!(!ok(&format!("monitors = false\n{HEAD}{w}")).monitors.enabled);
    let m = ok(&format!("{HEAD}{w}[monitors]\ninterval = 0.5\n")).monitors;
    assert!(m.enabled && m.interval_s == 0.5);
    let e = err(&format!("{HEAD}{w}[monitors]\ninterval = 0.01\n"));
    check(
        &e,
        6,
        "monitors.interval",
        &["out of range", "0.1 to 60 seconds"],
    );
    let e = err(&format!("{HEAD}{w}[monitors]\nevery = 1\n"));
    check(
        &e,
        6,
        "monitors.every",
        &["unknown key", "enabled, interval"],
    );
    let e = err(&format!("monitors = \"yes\"\n{HEAD}{w}"));
    check(
        &e,
        1,
        "monitors",
        &["expected true, false or a [monitors] table"],
    );
}

/// Sweeps multiply: a workload whose axes would expand to more points than
/// any study could measure is refused at the axis that crosses the bound,
/// before the points are expanded (five 64-value ranges once asked for
/// 10^9 points and ran out of memory).
#[test]
fn a_sweep_of_too_many_points_is_refused_before_expanding() {
    let list = |n: usize| {
        let v: Vec<String> = (1..=n).map(|i| format!("{i}.0")).collect();
        format!("[{}]", v.join(", "))
    };
    let e = err(&format!(
        "{HEAD}[[workload]]\nkind = \"fake\"\nsize = \"1..1TiB\"\nvalue = {}\nlatency_us = {}\n",
        list(30),
        list(30)
    ));
    check(
        &e,
        7,
        "workload[0].latency_us",
        &[
            "more than 10000 points",
            "size (41) × value (30) × latency_us (30)",
        ],
    );
    // Just under the bound is a study.
    let ok = format!(
        "{HEAD}[[workload]]\nkind = \"fake\"\nsize = \"1..1TiB\"\nvalue = {}\nlatency_us = {}\n",
        list(30),
        list(8)
    );
    let s = Study::parse("my-study.toml", &ok, &registry()).unwrap();
    assert_eq!(s.workloads[0].points().len(), 41 * 30 * 8);
}

/// A repetition count past any finishable design is refused by its key,
/// in each of its places, before any plan of every unit is made (the
/// fuzzer's find: `max_duration` checks built the whole plan of a study
/// asking for billions of repetitions).
#[test]
fn too_many_repetitions_are_refused_by_their_key() {
    let wl = "[[workload]]\nkind = \"fake\"\n";
    let cases = [
        (
            format!("{HEAD}[defaults]\nrepetitions = 4000000000\n{wl}"),
            4,
            "defaults.repetitions",
        ),
        (
            format!("[study]\nname = \"s\"\ndesign = \"until-decided\"\nmax_repetitions = 4000000000\nmax_duration = \"1h\"\n{wl}"),
            4,
            "study.max_repetitions",
        ),
        (
            format!("{HEAD}[[workload]]\nkind = \"fake\"\nrepetitions = {{ min = 3, max = 1001, target_ci = \"2%\" }}\n"),
            5,
            "workload[0].repetitions.max",
        ),
    ];
    for (text, line, key) in cases {
        check(&err(&text), line, key, &["allowed is at most 1000"]);
    }
}
