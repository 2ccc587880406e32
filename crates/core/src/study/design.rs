//! `[study] design`, `margin`, `max_repetitions`, `max_duration` and a
//! workload's `margin`: how many repetitions a study runs — the fixed
//! count its file names, or rounds until every comparison is decided —
//! and the smallest difference that matters to it.

use std::collections::BTreeMap;

use super::values::join;
use super::{Ctx, DeTable, DeValue, StudyError, Tab, Val};

/// How a study decides how many repetitions each point gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DesignKind {
    /// Exactly the `repetitions` the file names (a seed's published
    /// design, a CI budget). The default, so that every study written
    /// before the decide-then-stop form runs as it always did.
    #[default]
    Fixed,
    /// Rounds in the study's order until every comparison of every point
    /// is decided (better, worse or equivalent within the margin) or the
    /// budget is spent; decided points stop early.
    UntilDecided,
}

impl DesignKind {
    /// The name as the study file and `--design` spell it.
    pub fn name(self) -> &'static str {
        match self {
            DesignKind::Fixed => "fixed",
            DesignKind::UntilDecided => "until-decided",
        }
    }

    /// The design named `name` (`fixed`, `until-decided`).
    pub fn from_name(name: &str) -> Option<DesignKind> {
        match name {
            "fixed" => Some(DesignKind::Fixed),
            "until-decided" => Some(DesignKind::UntilDecided),
            _ => None,
        }
    }
}

/// The names [`DesignKind::from_name`] accepts.
pub const DESIGNS: &[&str] = &["fixed", "until-decided"];

/// The smallest difference that matters: one percentage for every metric,
/// and others for named metrics. Empty where nothing was given.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Margins {
    /// For every metric not named in `metrics`, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pct: Option<f64>,
    /// Per metric name, in percent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
}

impl Margins {
    /// Whether nothing was given.
    pub fn is_empty(&self) -> bool {
        self.pct.is_none() && self.metrics.is_empty()
    }

    /// The margin this table gives `metric`, if any.
    pub fn get(&self, metric: &str) -> Option<f64> {
        self.metrics.get(metric).copied().or(self.pct)
    }
}

/// The study's design and its budget.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Design {
    /// Fixed or until decided.
    pub kind: DesignKind,
    /// `[study] margin`.
    #[serde(default, skip_serializing_if = "Margins::is_empty")]
    pub margin: Margins,
    /// The most repetitions of a point under one configuration (the
    /// until-decided design's cap).
    pub max_repetitions: u32,
    /// The most seconds of repetitions a run of the until-decided design
    /// spends (`None`: only `max_repetitions` bounds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_s: Option<f64>,
    /// A larger cap for a run continued past `max_repetitions`
    /// (`run --resume RUN --until-decided --max-repetitions N`); the
    /// rule's error rate stays planned for `max_repetitions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_to: Option<u32>,
}

impl Design {
    /// The cap on repetitions per point and configuration now.
    pub fn cap(&self) -> u32 {
        self.extended_to
            .unwrap_or(self.max_repetitions)
            .max(self.max_repetitions)
    }
}

impl Default for Design {
    fn default() -> Self {
        Design {
            kind: DesignKind::Fixed,
            margin: Margins::default(),
            max_repetitions: DEFAULT_MAX_REPETITIONS,
            max_duration_s: None,
            extended_to: None,
        }
    }
}

/// The margin of a metric no study key names, in percent (the reasons are
/// in docs/methods.md, beside the verdicts it bounds).
pub const DEFAULT_MARGIN_PCT: f64 = 2.0;

/// The until-decided design's cap when the study gives none: with 5 %
/// noise, 20 repetitions per side resolve a 2 % margin's equivalence
/// about as often as not, and at seed scale (minutes per repetition) it
/// bounds a run to a day.
pub const DEFAULT_MAX_REPETITIONS: u32 = 20;

/// The fewest repetitions per side any comparison needs (a spread needs
/// two); a `max_repetitions` below it could never decide anything.
pub const MIN_REPETITIONS_TO_DECIDE: u32 = 2;

impl Ctx<'_> {
    /// The design keys of `[study]` (the table `t`).
    pub(super) fn design(&self, t: Option<&Tab>) -> Result<Design, StudyError> {
        let mut d = Design::default();
        let Some(t) = t else { return Ok(d) };
        if let Some(v) = t.get("design") {
            let name = self.choice(v, "study.design", DESIGNS)?;
            d.kind = DesignKind::from_name(&name).expect("one of DESIGNS");
        }
        if let Some(v) = t.get("margin") {
            d.margin = self.margins(v, "study.margin")?;
        }
        if let Some(v) = t.get("max_repetitions") {
            d.max_repetitions = self
                .repetition_count(v, "study.max_repetitions", i64::from(MIN_REPETITIONS_TO_DECIDE))
                .map_err(|mut e| {
                    e.message = format!(
                        "{}: a budget smaller than one round of {MIN_REPETITIONS_TO_DECIDE} repetitions per configuration can decide nothing",
                        e.message
                    );
                    e
                })?;
        }
        if let Some(v) = t.get("max_duration") {
            d.max_duration_s = Some(self.duration(v, "study.max_duration")?);
        }
        Ok(d)
    }

    /// `margin`: a percentage (`"2%"`), or a table of them by metric name
    /// with `default` for the rest (`{ default = "2%", rtt_us = "5%" }`).
    pub(super) fn margins(&self, v: &Val, path: &str) -> Result<Margins, StudyError> {
        let DeValue::Table(t) = v.get_ref() else {
            return Ok(Margins {
                pct: Some(self.margin_pct(v, path)?),
                metrics: BTreeMap::new(),
            });
        };
        let mut m = Margins::default();
        for (k, x) in t.iter() {
            let key = k.get_ref().to_string();
            let pct = self.margin_pct(x, &join(path, &key))?;
            if key == "default" {
                m.pct = Some(pct);
            } else {
                m.metrics.insert(key, pct);
            }
        }
        Ok(m)
    }

    /// One margin: a percentage ≥ 0 such as `"2%"`.
    fn margin_pct(&self, v: &Val, path: &str) -> Result<f64, StudyError> {
        const ALLOWED: &str = "expected a percentage of 0 or more such as \"2%\" (the smallest difference that matters), or a table of them by metric name with `default` for the rest";
        let pct = match v.get_ref() {
            DeValue::String(s) => s
                .trim()
                .strip_suffix('%')
                .and_then(|n| n.trim().parse::<f64>().ok()),
            _ => None,
        };
        match pct {
            Some(p) if p.is_finite() && p >= 0.0 => Ok(p),
            Some(p) => Err(self.err(v.span(), path, format!("{p}% is negative: {ALLOWED}"))),
            None => Err(self.err(v.span(), path, ALLOWED)),
        }
    }

    /// A duration: seconds as a number, or a string with a unit (`"90s"`,
    /// `"10m"`, `"2h"`), more than 0.
    fn duration(&self, v: &Val, path: &str) -> Result<f64, StudyError> {
        const ALLOWED: &str =
            "expected a duration such as \"30m\", \"2h\" or \"90s\" (or seconds as a number), more than 0";
        let s = match v.get_ref() {
            DeValue::Integer(_) | DeValue::Float(_) => Some(self.seconds(v, path)?),
            DeValue::String(s) => parse_duration(s),
            _ => None,
        };
        match s {
            Some(s) if s.is_finite() && s > 0.0 => Ok(s),
            _ => Err(self.err(v.span(), path, ALLOWED)),
        }
    }
}

/// `"90s"`, `"10m"`, `"2h"`, `"1.5h"` in seconds; `None` for anything else.
pub fn parse_duration(text: &str) -> Option<f64> {
    let t = text.trim();
    let (num, factor) = if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else if let Some(n) = t.strip_suffix("min") {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        return None;
    };
    num.trim().parse::<f64>().ok().map(|x| x * factor)
}

impl Ctx<'_> {
    /// Every metric a margin table names is a metric of one of `workloads`
    /// at one of its points: a misspelt name would silently fall back to
    /// the default margin.
    pub(super) fn check_margin_metrics(
        &self,
        v: &Val,
        path: &str,
        margins: &Margins,
        workloads: &[(&super::WorkloadEntry, &dyn crate::workload::Workload)],
    ) -> Result<(), StudyError> {
        if margins.metrics.is_empty() {
            return Ok(());
        }
        let mut known: Vec<&'static str> = Vec::new();
        for (entry, wl) in workloads {
            for p in entry.points() {
                for m in wl.metrics(&p).into_iter().chain(wl.table_metrics(&p)) {
                    if !known.contains(&m.name) {
                        known.push(m.name);
                    }
                }
            }
        }
        let DeValue::Table(t) = v.get_ref() else {
            return Ok(());
        };
        for (k, _) in t.iter() {
            let name = k.get_ref().as_ref();
            if name != "default" && !known.contains(&name) {
                return Err(self.err(
                    k.span(),
                    &join(path, name),
                    format!(
                        "no workload here has a metric `{name}` (allowed: default, {})",
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl Ctx<'_> {
    /// What spans the design's keys and the rest of the study: margins'
    /// metric names, a budget that holds one round, and the design's fit
    /// with the repetitions and the order.
    pub(super) fn check_design(
        &self,
        t: Option<&Tab>,
        study: &super::Study,
        registry: &crate::workload::Registry,
    ) -> Result<(), StudyError> {
        let Some(t) = t else { return Ok(()) };
        let d = &study.design;
        let workloads: Vec<(&super::WorkloadEntry, &dyn crate::workload::Workload)> = study
            .workloads
            .iter()
            .filter_map(|w| Some((w, registry.get(&w.kind)?)))
            .collect();
        if let Some(v) = t.get("margin") {
            self.check_margin_metrics(v, "study.margin", &d.margin, &workloads)?;
        }
        // A budget below one round is refused where the run's options
        // are known (`Study::check_budget`): `--scale` and `--quick`
        // shorten the round, and a quick trial may carry a short budget.
        if d.kind != DesignKind::UntilDecided {
            return Ok(());
        }
        let v = t
            .get("design")
            .expect("until-decided is only ever read from the file here");
        if let Some(w) = study.workloads.iter().find(|w| w.adaptive.is_some()) {
            return Err(self.err(
                v.span(),
                "study.design",
                format!(
                    "\"until-decided\" replaces adaptive repetitions (workload `{}` has a table `repetitions`): give it an integer (the fixed design's count) or use design = \"fixed\"",
                    w.name
                ),
            ));
        }
        if study.order == super::Order::Sequential && study.configurations.len() > 1 {
            return Err(self.err(
                v.span(),
                "study.design",
                "\"until-decided\" needs configurations that alternate or run in ABBA blocks; order = \"sequential\" runs one block each, which can never separate a difference from drift (allowed orders: alternate, blocks, interleaved)",
            ));
        }
        Ok(())
    }
}

impl super::Study {
    /// The margin of `metric` of workload `workload`, in percent: the
    /// workload's, else the study's, else [`DEFAULT_MARGIN_PCT`].
    pub fn margin_pct(&self, workload: usize, metric: &str) -> f64 {
        self.workloads
            .get(workload)
            .and_then(|w| w.margin.get(metric))
            .or_else(|| self.design.margin.get(metric))
            .unwrap_or(DEFAULT_MARGIN_PCT)
    }

    /// Expected seconds of one round: one repetition of every point under
    /// every configuration.
    pub fn round_s(
        &self,
        registry: &crate::workload::Registry,
        opts: crate::plan::RunOptions,
    ) -> f64 {
        // One repetition is a round; planning every repetition of a large
        // fixed design just to sum its points would be wasted work.
        let one = crate::plan::RunOptions {
            quick: true,
            ..opts
        };
        let plan = crate::plan::Plan::new(self, registry, one);
        plan.points.iter().map(|p| p.expected_s).sum()
    }

    /// Runs with design `kind` whatever the file says (`--design`):
    /// refused where the file's other keys do not fit it.
    pub fn set_design(&mut self, kind: DesignKind) -> Result<(), StudyError> {
        let err = |message: String| StudyError {
            file: self.file.clone(),
            line: 0,
            column: 0,
            key: "study.design".into(),
            message,
        };
        if kind == DesignKind::UntilDecided {
            if let Some(w) = self.workloads.iter().find(|w| w.adaptive.is_some()) {
                return Err(err(format!(
                    "--design until-decided replaces adaptive repetitions, which workload `{}` has",
                    w.name
                )));
            }
            // A seed's published design may be sequential (one block each),
            // which can never separate a difference from drift. Its
            // decide-then-stop form is a different design anyway, so it
            // runs in the order the study would get without the key.
            if self.order == super::Order::Sequential && self.configurations.len() > 1 {
                let (order, why) =
                    super::order::choose(&self.text, None, None, &self.configurations);
                self.order = order;
                self.order_why = format!(
                    "--design until-decided instead of the file's order = \"sequential\", whose one block each cannot separate a difference from drift; {why}"
                );
            }
        }
        self.design.kind = kind;
        Ok(())
    }
}

impl super::Study {
    /// Refuses a `max_duration` shorter than one round as `opts` run it
    /// (every point once under every configuration, scaled): a budget no
    /// round fits in could decide nothing. `run` and `check` call it once
    /// the options are known.
    pub fn check_budget(
        &self,
        registry: &crate::workload::Registry,
        opts: crate::plan::RunOptions,
    ) -> Result<(), StudyError> {
        let Some(max_s) = self.design.max_duration_s else {
            return Ok(());
        };
        let round_s = self.round_s(registry, opts);
        if max_s >= round_s {
            return Ok(());
        }
        let scaled = if opts.quick || opts.scale != 1.0 {
            " at this run's scale"
        } else {
            ""
        };
        let message = format!(
            "{} is less than one round{scaled} ({}: one repetition of every point under every configuration): allowed is at least that",
            crate::units::format_duration(max_s),
            crate::units::format_duration(round_s)
        );
        // The key's place in the file, read again from its text (the
        // study keeps no spans).
        let cx = Ctx {
            file: &self.file,
            text: &self.text,
        };
        let span = DeTable::parse(&self.text).ok().and_then(|doc| {
            let study = doc.get_ref().get("study")?;
            match study.get_ref() {
                DeValue::Table(t) => t.get("max_duration").map(|v| v.span()),
                _ => None,
            }
        });
        Err(match span {
            Some(span) => cx.err(span, "study.max_duration", message),
            None => StudyError {
                file: self.file.clone(),
                line: 0,
                column: 0,
                key: "study.max_duration".into(),
                message,
            },
        })
    }

    /// The block repetition `repetition` of a point planned for `planned`
    /// repetitions ran in, under its configuration: its own under the
    /// until-decided design (each round is one block per configuration),
    /// the order's share of the fixed count otherwise.
    pub fn block_of(&self, repetition: u32, planned: u32) -> u32 {
        match self.design.kind {
            DesignKind::UntilDecided => repetition,
            DesignKind::Fixed => self.order.block(repetition, planned),
        }
    }
}
