//! Per-operation-type latency recorders that merge across clients.
//!
//! Two significant digits (1 % resolution) rather than core's three: a
//! point holds one histogram per operation type (17) per client, and with
//! 128 clients three digits would pin ≈0.5 GB of counts; file-operation
//! latencies are not read to 0.1 % anyway. Count, sum, sum of squares,
//! minimum and maximum are exact beside the histogram.

use base64::Engine;
use benchlab_core::recorder::{HistogramData, MAX_LATENCY_NS};
use hdrhistogram::serialization::{Serializer, V2Serializer};
use hdrhistogram::Histogram;

/// Significant digits of the per-type histograms.
pub const DIGITS: u8 = 2;

/// Latencies in ns.
pub struct Latency {
    hist: Histogram<u64>,
    count: u64,
    sum: u128,
    sum_sq: u128,
    min: u64,
    max: u64,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// An empty recorder, every count allocated now.
    pub fn new() -> Self {
        let mut hist =
            Histogram::new_with_bounds(1, MAX_LATENCY_NS, DIGITS).expect("valid histogram bounds");
        // Recording must never resize (no allocation in the measured loop).
        hist.auto(false);
        Latency {
            hist,
            count: 0,
            sum: 0,
            sum_sq: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// Records one latency.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.hist.saturating_record(ns.max(1));
        self.count += 1;
        self.sum += u128::from(ns);
        self.sum_sq += u128::from(ns) * u128::from(ns);
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    /// Adds another recorder's values.
    pub fn merge(&mut self, other: &Latency) {
        self.hist
            .add(&other.hist)
            .expect("histograms of equal bounds add");
        self.count += other.count;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Number of values.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Appends its exact state (for a client process's result pipe).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.count.to_le_bytes());
        for v in [self.sum, self.sum_sq] {
            out.extend_from_slice(&(v as u64).to_le_bytes());
            out.extend_from_slice(&((v >> 64) as u64).to_le_bytes());
        }
        out.extend_from_slice(&self.min.to_le_bytes());
        out.extend_from_slice(&self.max.to_le_bytes());
        let mut h = Vec::new();
        V2Serializer::new()
            .serialize(&self.hist, &mut h)
            .expect("serialize into memory");
        out.extend_from_slice(&(h.len() as u64).to_le_bytes());
        out.extend_from_slice(&h);
    }

    /// Reads what [`Latency::encode`] wrote, advancing `buf`.
    pub fn decode(buf: &mut &[u8]) -> Result<Latency, String> {
        let count = take_u64(buf)?;
        let sum = take_u128(buf)?;
        let sum_sq = take_u128(buf)?;
        let min = take_u64(buf)?;
        let max = take_u64(buf)?;
        let len = take_u64(buf)? as usize;
        if buf.len() < len {
            return Err("a latency record is cut short".into());
        }
        let (h, rest) = buf.split_at(len);
        let mut hist: Histogram<u64> = hdrhistogram::serialization::Deserializer::new()
            .deserialize(&mut &h[..])
            .map_err(|e| format!("a latency histogram: {e:?}"))?;
        hist.auto(false);
        *buf = rest;
        Ok(Latency {
            hist,
            count,
            sum,
            sum_sq,
            min,
            max,
        })
    }

    /// The serialized form stored with results.
    pub fn data(&self) -> HistogramData {
        let mut bytes = Vec::new();
        V2Serializer::new()
            .serialize(&self.hist, &mut bytes)
            .expect("serialize into memory");
        let mean = if self.count == 0 {
            f64::NAN
        } else {
            self.sum as f64 / self.count as f64
        };
        let stddev = if self.count < 2 {
            0.0
        } else {
            let n = self.count as u128;
            let num = n * self.sum_sq - self.sum * self.sum;
            (num as f64 / (n as f64 * (n - 1) as f64)).sqrt()
        };
        HistogramData {
            unit: "ns".into(),
            count: self.count,
            min: if self.count == 0 { 0 } else { self.min },
            max: self.max,
            mean,
            stddev,
            hdr_v2_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }
}

/// Takes a little-endian u64 off the front of `buf`.
pub(crate) fn take_u64(buf: &mut &[u8]) -> Result<u64, String> {
    if buf.len() < 8 {
        return Err("a record is cut short".into());
    }
    let (a, rest) = buf.split_at(8);
    *buf = rest;
    Ok(u64::from_le_bytes(a.try_into().expect("8 bytes")))
}

fn take_u128(buf: &mut &[u8]) -> Result<u128, String> {
    let lo = take_u64(buf)? as u128;
    let hi = take_u64(buf)? as u128;
    Ok(lo | hi << 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_equals_recording_all() {
        let (mut a, mut b, mut all) = (Latency::new(), Latency::new(), Latency::new());
        for v in 1..=500u64 {
            a.record(v * 1000);
            all.record(v * 1000);
        }
        for v in 501..=1000u64 {
            b.record(v * 1000);
            all.record(v * 1000);
        }
        a.merge(&b);
        let (m, w) = (a.data(), all.data());
        assert_eq!((m.count, m.min, m.max), (1000, 1000, 1_000_000));
        assert_eq!(m.mean, w.mean);
        assert_eq!(m.stddev, w.stddev);
        let (hm, hw) = (m.decode().unwrap(), w.decode().unwrap());
        assert_eq!(hm.value_at_quantile(0.99), hw.value_at_quantile(0.99));
    }

    #[test]
    fn encode_decode_is_exact() {
        let mut a = Latency::new();
        for v in [5u64, 70_000, 3_000_000_000] {
            a.record(v);
        }
        let mut bytes = Vec::new();
        a.encode(&mut bytes);
        bytes.push(42);
        let mut cur = &bytes[..];
        let mut b = Latency::decode(&mut cur).unwrap();
        assert_eq!(cur, [42]);
        assert_eq!(a.data(), b.data());
        b.merge(&a);
        assert_eq!(b.count(), 6);
    }
}
