//! Issue 6: `repetitions` as an integer or as the adaptive table
//! `{ min, max, target_ci }`, with errors that name the file, line, key and
//! what is allowed.

use benchlab_core::fake::FAKE;
use benchlab_core::study::{Adaptive, Study, StudyError};
use benchlab_core::Registry;

fn registry() -> Registry {
    let mut r = Registry::new();
    r.add(&FAKE);
    r
}

fn parse(text: &str) -> Result<Study, StudyError> {
    Study::parse("my-study.toml", text, &registry())
}

const HEAD: &str = "[study]\nname = \"s\"\n";

#[test]
fn table_form_in_defaults_and_per_workload() {
    let s = parse(&format!(
        "{HEAD}[defaults]\nrepetitions = {{ min = 3, max = 10, target_ci = \"2%\" }}\n\
         [[workload]]\nkind = \"fake\"\n\
         [[workload]]\nname = \"fixed\"\nkind = \"fake\"\nrepetitions = 5\n\
         [[workload]]\nname = \"own\"\nkind = \"fake\"\nrepetitions = {{ max = 4, target_ci = \"0.5 %\" }}\n"
    ))
    .unwrap();
    let want = Adaptive {
        min: 3,
        max: 10,
        target_ci_pct: 2.0,
    };
    assert_eq!(s.defaults.adaptive, Some(want));
    assert_eq!(
        (s.workloads[0].repetitions, s.workloads[0].adaptive),
        (10, Some(want))
    );
    assert_eq!(
        (s.workloads[1].repetitions, s.workloads[1].adaptive),
        (5, None)
    );
    assert_eq!(
        s.workloads[2].adaptive,
        Some(Adaptive {
            min: 3,
            max: 4,
            target_ci_pct: 0.5
        })
    );
}

fn check_err(body: &str, line: usize, key: &str, needles: &[&str]) {
    let e = parse(&format!("{HEAD}{body}")).expect_err("must be refused");
    let shown = e.to_string();
    assert_eq!((e.line, e.key.as_str()), (line, key), "{shown}");
    assert!(
        shown.starts_with(&format!("my-study.toml:{line}:")),
        "{shown}"
    );
    for n in needles {
        assert!(shown.contains(n), "`{n}` missing from: {shown}");
    }
}

#[test]
fn errors() {
    check_err(
        "[defaults]\nrepetitions = { min = 5, max = 3, target_ci = \"2%\" }\n",
        4,
        "defaults.repetitions.max",
        &["less than min = 5"],
    );
    check_err(
        "[defaults]\nrepetitions = { min = 3, max = 5 }\n",
        4,
        "defaults.repetitions",
        &["need `target_ci`", "allowed keys: min, max, target_ci"],
    );
    check_err(
        "[defaults]\nrepetitions = { max = 5, target_ci = \"-2%\" }\n",
        4,
        "defaults.repetitions.target_ci",
        &["positive percentage"],
    );
    check_err(
        "[defaults]\nrepetitions = { max = 5, target_ci = \"2%\", tries = 3 }\n",
        4,
        "defaults.repetitions.tries",
        &["unknown key", "min, max, target_ci"],
    );
    check_err(
        "[defaults]\nrepetitions = \"3\"\n",
        4,
        "defaults.repetitions",
        &[
            "expected a non-negative integer",
            "or a table { min = 3, max = 10, target_ci = \"2%\" }",
            "allowed keys: min, max, target_ci",
        ],
    );
    check_err(
        "[[workload]]\nkind = \"fake\"\nrepetitions = { target_ci = \"2%\" }\n",
        5,
        "workload[0].repetitions",
        &["need `max`"],
    );
}
