//! A repetition's samples of one host and their compact form: each row is
//! stored as its differences from the row before (counters grow slowly,
//! gauges move little), zig-zag variable-length integers, in base64 —
//! about 1–2 bytes per figure per sample instead of 10–20 in JSON.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::sampler::Layout;

/// The samples of one host over one repetition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "Wire", try_from = "Wire")]
pub struct Series {
    /// Wall-clock time of the first sample (ms since the Unix epoch).
    pub start_unix_ms: u64,
    /// The interval asked for.
    pub interval_ms: u32,
    /// The CPU the sampler ran on, when pinned.
    pub pinned_cpu: Option<usize>,
    /// What each number of a row means.
    pub layout: Layout,
    /// Each row's time since the first (ms).
    pub t_ms: Vec<u64>,
    /// The rows, one after the other (`rows() × layout.width()`).
    pub values: Vec<u64>,
}

impl Series {
    /// Samples taken.
    pub fn rows(&self) -> usize {
        self.t_ms.len()
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[u64] {
        let w = self.layout.width();
        &self.values[i * w..(i + 1) * w]
    }
}

/// The stored and transmitted form of a [`Series`].
#[derive(Serialize, Deserialize)]
struct Wire {
    start_unix_ms: u64,
    interval_ms: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pinned_cpu: Option<usize>,
    layout: Layout,
    rows: usize,
    /// Times then values, each as differences from the previous row.
    data: String,
}

fn put(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn get(data: &[u8], pos: &mut usize) -> Result<i64, String> {
    let mut z: u64 = 0;
    for shift in (0..64).step_by(7) {
        let b = *data.get(*pos).ok_or("the data ends inside a number")?;
        *pos += 1;
        z |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
        }
    }
    Err("a number longer than 64 bits".into())
}

impl From<Series> for Wire {
    fn from(s: Series) -> Wire {
        let w = s.layout.width();
        let mut out = Vec::with_capacity(s.values.len() * 2 + s.t_ms.len() * 2);
        let mut prev = 0u64;
        for &t in &s.t_ms {
            put(&mut out, t.wrapping_sub(prev) as i64);
            prev = t;
        }
        for (i, &v) in s.values.iter().enumerate() {
            let before = if i >= w { s.values[i - w] } else { 0 };
            put(&mut out, v.wrapping_sub(before) as i64);
        }
        Wire {
            start_unix_ms: s.start_unix_ms,
            interval_ms: s.interval_ms,
            pinned_cpu: s.pinned_cpu,
            rows: s.t_ms.len(),
            layout: s.layout,
            data: base64::engine::general_purpose::STANDARD_NO_PAD.encode(out),
        }
    }
}

impl TryFrom<Wire> for Series {
    type Error = String;
    fn try_from(w: Wire) -> Result<Series, String> {
        let data = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(w.data.as_bytes())
            .map_err(|e| format!("monitor samples: {e}"))?;
        let width = w.layout.width();
        let total = w
            .rows
            .checked_mul(width)
            .filter(|&n| n <= data.len())
            .ok_or("monitor samples: more rows than the data holds")?;
        let mut pos = 0;
        let mut t_ms = Vec::with_capacity(w.rows);
        let mut prev = 0u64;
        for _ in 0..w.rows {
            prev = prev.wrapping_add(get(&data, &mut pos)? as u64);
            t_ms.push(prev);
        }
        let mut values: Vec<u64> = Vec::with_capacity(total);
        for i in 0..total {
            let before = if i >= width { values[i - width] } else { 0 };
            values.push(before.wrapping_add(get(&data, &mut pos)? as u64));
        }
        if pos != data.len() {
            return Err("monitor samples: data left after the last row".into());
        }
        Ok(Series {
            start_unix_ms: w.start_unix_ms,
            interval_ms: w.interval_ms,
            pinned_cpu: w.pinned_cpu,
            layout: w.layout,
            t_ms,
            values,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn example() -> Series {
        let layout = Layout {
            cpus: 1,
            softirqs: vec!["NET_RX".into()],
            nics: vec!["lo".into()],
            disks: vec![],
        };
        let w = layout.width();
        let mut values = vec![0u64; 3 * w];
        for (r, row) in values.chunks_mut(w).enumerate() {
            for (i, v) in row.iter_mut().enumerate() {
                *v = 1_000_000_000 + (r as u64) * (i as u64) * 7;
            }
        }
        // A counter that wrapped or a gauge that fell: negative steps.
        values[w] = 3;
        Series {
            start_unix_ms: 1_700_000_000_000,
            interval_ms: 1000,
            pinned_cpu: Some(1),
            layout,
            t_ms: vec![0, 1001, 1999],
            values,
        }
    }

    #[test]
    fn the_compact_form_reads_back_exactly() {
        let s = example();
        let json = serde_json::to_string(&s).unwrap();
        let back: Series = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
        // Far smaller than the numbers written out.
        let plain = serde_json::to_string(&s.values).unwrap();
        assert!(
            json.len() < plain.len(),
            "{} vs {}",
            json.len(),
            plain.len()
        );
    }

    #[test]
    fn damaged_data_is_refused() {
        let mut v: serde_json::Value = serde_json::to_value(example()).unwrap();
        v["rows"] = serde_json::json!(1000);
        assert!(serde_json::from_value::<Series>(v.clone()).is_err());
        v["rows"] = serde_json::json!(2);
        let e = serde_json::from_value::<Series>(v).unwrap_err().to_string();
        assert!(e.contains("left after"), "{e}");
    }
}
