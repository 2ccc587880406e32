//! `[study]`: the study's name, description and order (its steps are
//! read by [`super::steps`], its comparisons by [`super::compare`]).

use super::{Ctx, Step, StudyError, Tab};

/// Order in which units run.
///
/// Stored with every run; runs stored before the orders `alternate` and
/// `blocks` existed read as `sequential` or `interleaved`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// configuration → workload → point → repetition: one block per
    /// configuration.
    Sequential,
    /// workload → point → repetition → configuration, the configurations
    /// in file order at every repetition.
    Interleaved,
    /// workload → point → repetition → configuration, the configurations
    /// in a random order at every repetition, drawn from `seed`: slow
    /// drift reaches every configuration alike, and no configuration is
    /// always first after a switch.
    Alternate {
        /// Seed of the order (recorded, so that the order can be told).
        seed: u64,
    },
    /// `blocks` blocks per configuration in ABBA order (A B B A A B …):
    /// each block runs its share of every point's repetitions under one
    /// configuration, for configurations that are costly to switch. The
    /// spread between a configuration's blocks measures drift.
    Blocks {
        /// Blocks per configuration (at least 2).
        blocks: u32,
    },
}

impl Order {
    /// The order's name as the study file spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Order::Sequential => "sequential",
            Order::Interleaved => "interleaved",
            Order::Alternate { .. } => "alternate",
            Order::Blocks { .. } => "blocks",
        }
    }

    /// Whether the configurations alternate at every repetition (so
    /// their repetitions compare as independent samples).
    pub fn alternates(&self) -> bool {
        matches!(self, Order::Interleaved | Order::Alternate { .. })
    }

    /// The block a repetition of a point with `repetitions` repetitions
    /// ran in, under its configuration: 0 for every repetition in
    /// sequential order, its share's number for `blocks`, and the
    /// repetition itself where configurations alternate (each round is a
    /// block of one repetition per configuration).
    pub fn block(&self, repetition: u32, repetitions: u32) -> u32 {
        match *self {
            Order::Sequential => 0,
            Order::Interleaved | Order::Alternate { .. } => repetition,
            Order::Blocks { blocks } => {
                (u64::from(repetition) * u64::from(blocks) / u64::from(repetitions.max(1))) as u32
            }
        }
    }
}

/// The default number of blocks per configuration when configurations
/// are costly to switch: two, the fewest that let drift be measured
/// (A B B A).
pub const DEFAULT_BLOCKS: u32 = 2;

/// The most blocks a study may ask for.
const MAX_BLOCKS: i64 = 100;

const STUDY_KEYS: &[&str] = &[
    "name",
    "description",
    "order",
    "blocks",
    "seed",
    "control",
    "step",
    "compare",
    "crosscheck",
    "stacks",
    // Read by `super::design`.
    "design",
    "margin",
    "max_repetitions",
    "max_duration",
];
const ORDERS: &[&str] = &["alternate", "blocks", "sequential", "interleaved"];

/// `[study]`'s values.
pub(super) struct Header {
    pub(super) name: String,
    pub(super) description: String,
    /// The order the file asks for; `None`: chosen from the
    /// configurations (see [`super::Study::order_why`]).
    pub(super) order: Option<Order>,
    /// `seed`, for the alternate order.
    pub(super) seed: Option<u64>,
    /// `blocks`, for the blocks order.
    pub(super) blocks: Option<u32>,
    /// `control = true`: an A/A control column.
    pub(super) control: bool,
    pub(super) steps: Vec<Step>,
    /// `stacks`: call-stack sampling for every workload that does not
    /// say otherwise.
    pub(super) stacks: Option<super::Stacks>,
}

impl Ctx<'_> {
    /// `[study]`.
    pub(super) fn header(&self, doc: &Tab) -> Result<Header, StudyError> {
        let name;
        let mut description = String::new();
        let mut order = None;
        let (mut seed, mut blocks, mut control) = (None, None, false);
        let mut steps = Vec::new();
        let mut stacks = None;
        match doc.get("study") {
            Some(v) => {
                let t = self.table(v, "study")?;
                self.check_keys(t, "study", STUDY_KEYS)?;
                match t.get("name") {
                    Some(n) => name = self.string(n, "study.name")?,
                    None => {
                        return Err(self.err(
                            v.span(),
                            "study.name",
                            "missing: every study needs a name",
                        ))
                    }
                }
                if name.trim().is_empty() {
                    return Err(self.err(
                        t.get("name").unwrap().span(),
                        "study.name",
                        "must not be empty",
                    ));
                }
                if let Some(d) = t.get("description") {
                    description = self.string(d, "study.description")?;
                }
                if let Some(v) = t.get("seed") {
                    let n = self.int(v, "study.seed")?;
                    seed = Some(
                        u64::try_from(n)
                            .map_err(|_| self.err(v.span(), "study.seed", "must be 0 or more"))?,
                    );
                }
                if let Some(v) = t.get("blocks") {
                    let n = self.count(v, "study.blocks", 2)?;
                    if n > MAX_BLOCKS {
                        return Err(self.err(
                            v.span(),
                            "study.blocks",
                            format!("at most {MAX_BLOCKS} blocks per configuration"),
                        ));
                    }
                    blocks = Some(n as u32);
                }
                if let Some(v) = t.get("control") {
                    control = self.boolean(v, "study.control")?;
                }
                if let Some(o) = t.get("order") {
                    let name = self.choice(o, "study.order", ORDERS)?;
                    order = Some(match name.as_str() {
                        "interleaved" => Order::Interleaved,
                        "alternate" => Order::Alternate {
                            seed: seed.unwrap_or_default(),
                        },
                        "blocks" => Order::Blocks {
                            blocks: blocks.unwrap_or(DEFAULT_BLOCKS),
                        },
                        _ => Order::Sequential,
                    });
                }
                // `seed` and `blocks` belong to one order each: given
                // with another, they would silently mean nothing.
                for (key, applies) in [("seed", "alternate"), ("blocks", "blocks")] {
                    if let (Some(v), Some(o)) = (t.get(key), order) {
                        if o.name() != applies {
                            return Err(self.err(
                                v.span(),
                                &format!("study.{key}"),
                                format!(
                                    "applies to order = \"{applies}\" only (this study's order is \"{}\")",
                                    o.name()
                                ),
                            ));
                        }
                    }
                }
                if let Some(v) = t.get("step") {
                    steps = self.steps(v)?;
                }
                if let Some(v) = t.get("stacks") {
                    stacks = self.stacks(v, "study.stacks", None)?;
                }
            }
            None => {
                return Err(self.err(
                    0..0,
                    "study",
                    "missing: a study file needs a [study] table with a name",
                ))
            }
        }

        Ok(Header {
            name,
            description,
            order,
            seed,
            blocks,
            control,
            steps,
            stacks,
        })
    }
}
