//! `benchlab bisect`: the first version of an ordered list — git revisions
//! built by a command, or any values a study key takes — that made a
//! study's figure worse.
//!
//! The narrowing ([`search`]) and the step decision ([`judge`]) are pure
//! and tested without running anything; [`runner`] runs each step as a
//! stored run of the study with two configurations, the bound and the
//! candidate, in ABBA blocks, and links the runs to the bisection in the
//! store so that an interrupted bisection resumes. See docs/bisect.md.

#![warn(missing_docs)]

pub mod judge;
pub mod prepare;
pub mod runner;
pub mod search;
pub mod stored;
pub mod versions;

pub use judge::{CompareJudge, Judge, Judgement, Pair, SequentialJudge, StepVerdict};
pub use prepare::{prepare, Ask, Source};
pub use runner::{Bisector, Finished, Interrupted, Request, StepEvidence};
pub use search::{max_steps, Decision, Next, Outcome, Search, Settings, Step};
pub use stored::{stored, OpenRound, State, Stored};
pub use versions::{GitSource, Version};
