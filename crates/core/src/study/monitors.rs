//! `[monitors]`: the system monitors every host runs during every
//! repetition (on by default, one sample per second). `monitors = false`
//! turns them off; `[monitors] interval = 0.5` samples twice a second.

use super::values::{join, type_name};
use super::{Ctx, DeValue, StudyError, Tab};

/// The default interval between samples, s (sar's and mmtests' habit).
pub const DEFAULT_MONITOR_INTERVAL_S: f64 = 1.0;
/// The shortest interval allowed, s: below it the sampler's own cost
/// (a few /proc reads) stops being negligible.
const MIN_INTERVAL_S: f64 = 0.1;
/// The longest interval allowed, s.
const MAX_INTERVAL_S: f64 = 60.0;

const MONITOR_KEYS: &[&str] = &["enabled", "interval"];

/// The study's monitors.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Monitors {
    /// Whether hosts are monitored at all.
    pub enabled: bool,
    /// Time between samples, s.
    pub interval_s: f64,
}

impl Default for Monitors {
    fn default() -> Self {
        Monitors {
            enabled: true,
            interval_s: DEFAULT_MONITOR_INTERVAL_S,
        }
    }
}

impl Ctx<'_> {
    /// `monitors = true | false` or a `[monitors]` table.
    pub(super) fn monitors(&self, doc: &Tab) -> Result<Monitors, StudyError> {
        let mut m = Monitors::default();
        let Some(v) = doc.get("monitors") else {
            return Ok(m);
        };
        match v.get_ref() {
            DeValue::Boolean(b) => m.enabled = *b,
            DeValue::Table(_) => {
                let t = self.table(v, "monitors")?;
                self.check_keys(t, "monitors", MONITOR_KEYS)?;
                if let Some(e) = t.get("enabled") {
                    m.enabled = self.boolean(e, &join("monitors", "enabled"))?;
                }
                if let Some(i) = t.get("interval") {
                    let key = join("monitors", "interval");
                    let s = self.seconds(i, &key)?;
                    if !(MIN_INTERVAL_S..=MAX_INTERVAL_S).contains(&s) {
                        return Err(self.err(
                            i.span(),
                            &key,
                            format!(
                                "{s} s is out of range (allowed: {MIN_INTERVAL_S} to {MAX_INTERVAL_S} seconds between samples)"
                            ),
                        ));
                    }
                    m.interval_s = s;
                }
            }
            other => {
                return Err(self.err(
                    v.span(),
                    "monitors",
                    format!(
                        "expected true, false or a [monitors] table (keys: {}), found {}",
                        MONITOR_KEYS.join(", "),
                        type_name(other)
                    ),
                ))
            }
        }
        Ok(m)
    }
}
