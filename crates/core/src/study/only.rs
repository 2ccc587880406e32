//! Part of a study: `benchlab run --only configuration=A,B --only
//! workload=W`. The study is cut down after it validated as a whole and
//! before it is planned, so the plan, `check`'s time, the preflight (which
//! hosts and guests are used), the stored plan and the report all see the
//! same part, and the file's order stays as the whole file chose it: a
//! study that runs its configurations in ABBA blocks runs what remains in
//! the same blocks, one that alternates keeps its seed.

use serde::{Deserialize, Serialize};

use super::{order, Study, StudyError};
use crate::param::quoted_list;

/// The keys `--only` takes.
pub const ONLY_KEYS: &[&str] = &["configuration", "workload"];

/// What `--only` keeps, by name as the study file gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Only {
    /// Configurations to run; empty: all.
    pub configurations: Vec<String>,
    /// Workloads to run; empty: all.
    pub workloads: Vec<String>,
}

impl Only {
    /// Reads `--only` arguments, each `KEY=NAME[,NAME…]` with KEY one of
    /// [`ONLY_KEYS`]; the names given for one key in several arguments
    /// add up.
    pub fn parse(args: &[String]) -> Result<Only, StudyError> {
        let mut only = Only::default();
        for arg in args {
            let bad = |message: String| StudyError {
                file: "--only".into(),
                line: 0,
                column: 0,
                key: arg.clone(),
                message,
            };
            let Some((key, names)) = arg.split_once('=') else {
                return Err(bad(format!(
                    "expected KEY=NAME[,NAME…] with KEY one of {}",
                    quoted_list(ONLY_KEYS)
                )));
            };
            let list = match key.trim() {
                "configuration" => &mut only.configurations,
                "workload" => &mut only.workloads,
                other => {
                    return Err(bad(format!(
                        "no key `{other}`: --only takes {}",
                        quoted_list(ONLY_KEYS)
                    )))
                }
            };
            let names: Vec<&str> = names.split(',').map(str::trim).collect();
            if names.iter().any(|n| n.is_empty()) {
                return Err(bad(format!(
                    "an empty name: give the {key}s to run, separated by commas"
                )));
            }
            for n in names {
                if !list.iter().any(|x| x == n) {
                    list.push(n.to_string());
                }
            }
        }
        Ok(only)
    }

    /// Whether it keeps the whole study.
    pub fn is_empty(&self) -> bool {
        self.configurations.is_empty() && self.workloads.is_empty()
    }
}

/// What a run left out of its study file (`--only`), recorded in its
/// stored plan so that its report says it ran a part. Plans stored
/// before `--only` read as nothing left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// The configurations left out, in file order.
    pub configurations: Vec<String>,
    /// How many configurations the file has (an A/A control not counted).
    pub of_configurations: usize,
    /// The workloads left out, in file order.
    pub workloads: Vec<String>,
    /// How many workloads the file has.
    pub of_workloads: usize,
}

impl LeftOut {
    /// Whether the run ran the whole file.
    pub fn is_empty(&self) -> bool {
        self.configurations.is_empty() && self.workloads.is_empty()
    }

    /// One line per kind of thing left out, as the report's header
    /// prints it: `ran 2 of 4 configurations: left out guest-bridged,
    /// guest-direct (--only)`.
    pub fn lines(&self) -> Vec<String> {
        let line = |what: &str, left: &[String], of: usize| {
            format!(
                "ran {} of {of} {what}s: left out {} (--only)",
                of - left.len(),
                left.join(", ")
            )
        };
        let mut out = Vec::new();
        if !self.configurations.is_empty() {
            out.push(line(
                "configuration",
                &self.configurations,
                self.of_configurations,
            ));
        }
        if !self.workloads.is_empty() {
            out.push(line("workload", &self.workloads, self.of_workloads));
        }
        out
    }
}

impl Study {
    /// Keeps only the configurations and workloads `only` names, and
    /// records the rest in [`Study::left_out`]. A name the file does not
    /// have is refused, naming those it has. What refers to a part left
    /// out goes with it: comparisons and crosschecks that name it, and
    /// the services only left-out workloads drive. An A/A control stays
    /// the first kept configuration again.
    pub fn keep_only(&mut self, only: &Only) -> Result<(), StudyError> {
        if only.is_empty() {
            return Ok(());
        }
        let control = self.control;
        // The control (last) is not the file's: it cannot be named, and
        // it is not counted.
        let file_configs = &self.configurations[..self.configurations.len() - usize::from(control)];
        let configs: Vec<String> = file_configs.iter().map(|c| c.name.clone()).collect();
        let workloads: Vec<String> = self.workloads.iter().map(|w| w.name.clone()).collect();
        let mut problems = Vec::new();
        for (what, given, have) in [
            ("configuration", &only.configurations, &configs),
            ("workload", &only.workloads, &workloads),
        ] {
            let unknown: Vec<&str> = given
                .iter()
                .filter(|n| !have.contains(n))
                .map(String::as_str)
                .collect();
            if !unknown.is_empty() {
                let have: Vec<&str> = have.iter().map(String::as_str).collect();
                problems.push(format!(
                    "--only {what}: the study has no {what} {} ({what}s: {})",
                    quoted_list(&unknown),
                    quoted_list(&have)
                ));
            }
        }
        if !problems.is_empty() {
            return Err(StudyError {
                file: self.file.clone(),
                line: 0,
                column: 0,
                key: String::new(),
                message: problems.join("; "),
            });
        }
        if control {
            // The control is the first configuration again: taken off
            // here, added back as the first one that remains.
            self.configurations.pop();
            for w in &mut self.workloads {
                w.overrides.pop();
            }
            self.control = false;
        }
        let keep =
            |given: &[String], name: &str| given.is_empty() || given.iter().any(|n| n == name);
        let keep_config: Vec<bool> = configs
            .iter()
            .map(|c| keep(&only.configurations, c))
            .collect();
        let mut left = LeftOut {
            of_configurations: configs.len(),
            of_workloads: workloads.len(),
            ..LeftOut::default()
        };
        left.configurations = configs
            .iter()
            .zip(&keep_config)
            .filter(|(_, k)| !**k)
            .map(|(c, _)| c.clone())
            .collect();
        left.workloads = workloads
            .iter()
            .filter(|w| !keep(&only.workloads, w))
            .cloned()
            .collect();

        let mut k = keep_config.iter();
        self.configurations
            .retain(|_| *k.next().expect("one flag each"));
        for w in &mut self.workloads {
            let mut k = keep_config.iter();
            w.overrides.retain(|_| *k.next().expect("one flag each"));
        }
        let (kept, dropped): (Vec<_>, Vec<_>) = std::mem::take(&mut self.workloads)
            .into_iter()
            .partition(|w| keep(&only.workloads, &w.name));
        self.workloads = kept;
        // A service only left-out workloads drive is neither checked nor
        // started; one no workload names (started for its own sake) stays.
        let unused = |s: &str| {
            dropped.iter().any(|w| w.services.iter().any(|x| x == s))
                && !self
                    .workloads
                    .iter()
                    .any(|w| w.services.iter().any(|x| x == s))
        };
        let unused: Vec<String> = self
            .services
            .iter()
            .map(|s| s.name.clone())
            .filter(|s| unused(s))
            .collect();
        self.services.retain(|s| !unused.contains(&s.name));
        for c in &mut self.configurations {
            c.services.retain(|s| !unused.contains(&s.name));
        }
        let names: Vec<&str> = self
            .configurations
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        self.compare
            .retain(|p| names.contains(&p.a.as_str()) && names.contains(&p.b.as_str()));
        let names: Vec<&str> = self.workloads.iter().map(|w| w.name.as_str()).collect();
        self.crosschecks
            .retain(|x| names.contains(&x.native.as_str()) && names.contains(&x.classic.as_str()));
        if !left.configurations.is_empty() && !self.order_why.is_empty() {
            // The reason may name a configuration left out: say whose it is.
            self.order_why
                .push_str(", as the whole study file runs, kept for this part of it");
        }
        self.left_out = left;
        if control {
            order::add_control(&mut self.configurations, &mut self.workloads);
            self.control = true;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::registry;
    use crate::plan::{Plan, RunOptions};
    use crate::study::{Order, CONTROL_NAME};

    /// Four configurations, costly to switch (a profile), so in ABBA
    /// blocks; two workloads; a comparison and a crosscheck.
    const STUDY: &str = r#"
[study]
name = "t"
[[study.compare]]
a = "a"
b = "b"
[[study.compare]]
a = "c"
b = "d"
[[study.crosscheck]]
native = "one"
classic = "two"
map = { size = "size" }
[defaults]
repetitions = 4
[[configuration]]
name = "a"
[[configuration]]
name = "b"
profile = "latency-performance"
[[configuration]]
name = "c"
set = { value = 50 }
[[configuration]]
name = "d"
profile = "latency-performance"
set = { value = 60 }
[[workload]]
name = "one"
kind = "fake"
size = [1, 2]
[[workload]]
name = "two"
kind = "fake"
size = [1, 2]
"#;

    fn study(text: &str) -> Study {
        Study::parse("t.toml", text, &registry()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn only(args: &[&str]) -> Only {
        Only::parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn names(s: &Study) -> Vec<&str> {
        s.configurations.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn keeps_the_named_configurations_and_records_the_rest() {
        let mut s = study(STUDY);
        let order = s.order;
        assert_eq!(order, Order::Blocks { blocks: 2 });
        s.keep_only(&only(&["configuration=c,d"])).unwrap();
        assert_eq!(names(&s), ["c", "d"]);
        assert_eq!(s.order, order, "the file's order is kept");
        assert!(
            s.order_text()
                .ends_with("as the whole study file runs, kept for this part of it"),
            "{}",
            s.order_text()
        );
        // Each workload's overrides follow their configuration.
        assert_eq!(s.workloads[0].overrides.len(), 2);
        assert_eq!(s.workloads[0].overrides[0].f64("value").unwrap(), 50.0);
        assert_eq!(s.workloads[1].overrides[1].f64("value").unwrap(), 60.0);
        // The comparison of a with b went with them; c with d stays.
        assert_eq!(s.compare.len(), 1);
        assert_eq!(
            (s.compare[0].a.as_str(), s.compare[0].b.as_str()),
            ("c", "d")
        );
        assert_eq!(s.crosschecks.len(), 1);
        assert_eq!(
            s.left_out.lines(),
            ["ran 2 of 4 configurations: left out a, b (--only)"]
        );

        // The plan runs c and d in ABBA blocks: c d | d c for each point.
        let plan = Plan::new(&s, &registry(), RunOptions::default());
        assert_eq!(plan.points.len(), 2 * 2 * 2);
        let cfgs: Vec<usize> = plan
            .units
            .iter()
            .map(|u| plan.points[u.point].config)
            .collect();
        let half = cfgs.len() / 2;
        assert!(cfgs[..half / 2].iter().all(|&c| c == 0), "{cfgs:?}");
        assert!(cfgs[half / 2..half].iter().all(|&c| c == 1), "{cfgs:?}");
        assert!(
            cfgs[half..half + half / 2].iter().all(|&c| c == 1),
            "{cfgs:?}"
        );
        assert!(cfgs[half + half / 2..].iter().all(|&c| c == 0), "{cfgs:?}");
    }

    #[test]
    fn keeps_the_named_workloads_with_their_crosschecks() {
        let mut s = study(STUDY);
        s.keep_only(&only(&[
            "workload=two",
            "configuration=a",
            "configuration=b,a",
        ]))
        .unwrap();
        assert_eq!(names(&s), ["a", "b"]);
        assert_eq!(s.workloads.len(), 1);
        assert_eq!(s.workloads[0].name, "two");
        assert!(s.crosschecks.is_empty(), "its native workload was left out");
        assert_eq!(
            s.left_out.lines(),
            [
                "ran 2 of 4 configurations: left out c, d (--only)",
                "ran 1 of 2 workloads: left out one (--only)"
            ]
        );
        let plan = Plan::new(&s, &registry(), RunOptions::default());
        assert!(plan.points.iter().all(|p| p.workload == 0 && p.config < 2));
        assert_eq!(plan.units.len(), 2 * 2 * 4);
    }

    #[test]
    fn unknown_names_are_refused_naming_those_there_are() {
        let mut s = study(STUDY);
        let e = s
            .keep_only(&only(&["configuration=a,guest", "workload=three"]))
            .unwrap_err();
        let text = e.to_string();
        assert_eq!(e.file, "t.toml");
        assert!(
            text.contains(r#"--only configuration: the study has no configuration "guest" (configurations: "a", "b", "c", "d")"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"--only workload: the study has no workload "three" (workloads: "one", "two")"#
            ),
            "{text}"
        );
        assert_eq!(s, study(STUDY), "a refused --only changes nothing");

        for (arg, says) in [
            (
                "configurations=a",
                "no key `configurations`: --only takes \"configuration\", \"workload\"",
            ),
            ("a,b", "expected KEY=NAME"),
            ("workload=one,", "an empty name"),
        ] {
            let e = Only::parse(&[arg.to_string()]).unwrap_err();
            assert_eq!(e.file, "--only");
            assert_eq!(e.key, arg);
            assert!(e.to_string().contains(says), "{arg}: {e}");
        }
    }

    #[test]
    fn the_control_stays_the_first_configuration_kept() {
        let mut s = study(&STUDY.replace("name = \"t\"", "name = \"t\"\ncontrol = true"));
        assert_eq!(s.configurations.len(), 5);
        s.keep_only(&only(&["configuration=b,c"])).unwrap();
        assert_eq!(names(&s), ["b", "c", CONTROL_NAME]);
        assert!(s.control);
        assert_eq!(s.configurations[2].env, s.configurations[0].env);
        assert_eq!(s.workloads[0].overrides.len(), 3);
        assert_eq!(s.workloads[0].overrides[2], s.workloads[0].overrides[0]);
        assert_eq!(
            s.left_out.lines(),
            ["ran 2 of 4 configurations: left out a, d (--only)"]
        );
    }

    #[test]
    fn no_only_leaves_the_study_as_it_is() {
        let mut s = study(STUDY);
        s.keep_only(&Only::default()).unwrap();
        assert_eq!(s, study(STUDY));
        assert!(s.left_out.is_empty());
        assert!(s.left_out.lines().is_empty());
    }
}
