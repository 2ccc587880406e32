//! A latency recorder that merges: one per generator thread or client,
//! added together after the run (web.load's threads, fileserver.load's
//! client processes through [`Latency::encode`]). It keeps the exact count,
//! sum, sum of squares, minimum and maximum beside the HDR histogram, so the
//! mean and standard deviation are exact and only percentiles carry the
//! histogram's significant digits ([`LatencyRecorder`](crate::recorder::LatencyRecorder)
//! has no merge, and a series per request is not wanted here).

use crate::recorder::{HistogramData, MAX_LATENCY_NS, SIGNIFICANT_DIGITS};
use base64::Engine;
use hdrhistogram::serialization::{Serializer, V2Serializer};
use hdrhistogram::Histogram;

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
    /// An empty recorder with the store's significant digits, all
    /// histogram counts allocated now.
    pub fn new() -> Self {
        Self::with_digits(SIGNIFICANT_DIGITS)
    }

    /// An empty recorder whose histogram keeps `digits` significant
    /// digits (fewer where many recorders are held at once), all counts
    /// allocated now.
    pub fn with_digits(digits: u8) -> Self {
        let mut hist =
            Histogram::new_with_bounds(1, MAX_LATENCY_NS, digits).expect("valid histogram bounds");
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

    /// Exact mean in ns (NaN when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            f64::NAN
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// Value at quantile `q` in ns (0 when empty).
    pub fn quantile(&self, q: f64) -> u64 {
        self.hist.value_at_quantile(q)
    }

    /// Exact sample standard deviation (n − 1).
    pub fn stddev(&self) -> f64 {
        crate::recorder::exact_stddev(self.count, self.sum, self.sum_sq)
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
        HistogramData {
            unit: "ns".into(),
            count: self.count,
            min: if self.count == 0 { 0 } else { self.min },
            max: self.max,
            mean: self.mean(),
            stddev: self.stddev(),
            hdr_v2_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }
}

/// Takes a little-endian u64 off the front of `buf`.
pub fn take_u64(buf: &mut &[u8]) -> Result<u64, String> {
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
        assert_eq!(a.count(), 1000);
        assert_eq!(a.mean(), all.mean());
        assert_eq!(a.stddev(), all.stddev());
        assert_eq!(a.quantile(0.99), all.quantile(0.99));
        let d = a.data();
        assert_eq!((d.min, d.max), (1000, 1_000_000));
        assert_eq!(d.decode().unwrap().len(), 1000);
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
