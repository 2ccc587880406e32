//! Call-stack profiles (issue 40): one recording per host, point and
//! repetition (how it sampled, what it cost, or why there is none), and
//! each side's folded stacks, compressed: folded text repeats its frames'
//! names on every line, and deflate takes it to about a tenth.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use crate::sql::vals;
use crate::{Result, Store, StoreError};

/// A host's recording of one repetition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackRecordingRow {
    /// The point.
    pub point_id: i64,
    /// The repetition, 0-based.
    pub repetition: u32,
    /// The host that recorded (the study's name).
    pub host: String,
    /// Samples per second and CPU.
    pub hz: u32,
    /// How user stacks were walked (`fp`, `dwarf`).
    pub unwind: String,
    /// Seconds sampled.
    pub window_s: f64,
    /// Every sample of the host.
    pub samples: u64,
    /// Samples of a process other than the idle task.
    pub busy_samples: u64,
    /// CPU time `perf record` took, s (its start-up included).
    pub perf_cpu_s: f64,
    /// The part of it inside the sampling window, s.
    pub perf_window_cpu_s: f64,
    /// CPU time `perf script` took after it, s.
    pub script_cpu_s: f64,
    /// The perf that recorded.
    pub perf_version: String,
    /// Why there is no profile (the measurement is kept).
    pub reason: Option<String>,
}

/// One side's folded stacks of a recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackProfileRow {
    /// The point.
    pub point_id: i64,
    /// The repetition, 0-based.
    pub repetition: u32,
    /// The host the side ran on.
    pub host: String,
    /// The side (`server`, `client`, `service:NAME`, `kernel`, `idle`,
    /// `other`).
    pub side: String,
    /// The host whose recording it is.
    pub recorded_on: String,
    /// Its samples.
    pub samples: u64,
    /// Folded stacks (`frame;frame count` lines).
    pub folded: String,
}

fn compress(text: &str) -> Result<Vec<u8>> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(text.as_bytes())
        .and_then(|_| z.finish())
        .map_err(|e| StoreError::Type(format!("compressing folded stacks: {e}")))
}

fn decompress(bytes: &[u8]) -> Result<String> {
    let mut s = String::new();
    flate2::read::ZlibDecoder::new(bytes)
        .read_to_string(&mut s)
        .map_err(|e| StoreError::Type(format!("folded stacks: {e}")))?;
    Ok(s)
}

impl Store {
    /// Records a host's recording of a repetition with its sides' stacks
    /// (again for a repetition run again: the newer replace the older).
    pub fn add_stacks(
        &mut self,
        rec: &StackRecordingRow,
        profiles: &[StackProfileRow],
    ) -> Result<()> {
        let mut packed = Vec::new();
        for p in profiles {
            packed.push(compress(&p.folded)?);
        }
        self.transaction(|tx| {
            tx.exec(
                "DELETE FROM stack_profile WHERE point_id = ?1 AND repetition = ?2 AND recorded_on = ?3",
                vals![rec.point_id, rec.repetition, rec.host.as_str()],
            )?;
            tx.exec(
                "DELETE FROM stack_recording WHERE point_id = ?1 AND repetition = ?2 AND host = ?3",
                vals![rec.point_id, rec.repetition, rec.host.as_str()],
            )?;
            tx.exec(
                "INSERT INTO stack_recording (point_id, repetition, host, hz, unwind, window_s, samples, busy_samples, perf_cpu_s, perf_window_cpu_s, script_cpu_s, perf_version, reason)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                vals![
                    rec.point_id,
                    rec.repetition,
                    rec.host.as_str(),
                    rec.hz,
                    rec.unwind.as_str(),
                    rec.window_s,
                    rec.samples,
                    rec.busy_samples,
                    rec.perf_cpu_s,
                    rec.perf_window_cpu_s,
                    rec.script_cpu_s,
                    rec.perf_version.as_str(),
                    rec.reason.clone()
                ],
            )?;
            for (p, z) in profiles.iter().zip(packed) {
                tx.exec(
                    "INSERT INTO stack_profile (point_id, repetition, host, side, recorded_on, samples, folded_z)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    vals![
                        p.point_id,
                        p.repetition,
                        p.host.as_str(),
                        p.side.as_str(),
                        p.recorded_on.as_str(),
                        p.samples,
                        z
                    ],
                )?;
            }
            Ok(())
        })
    }

    /// The stack recordings of a run, by point, repetition and host.
    pub fn stack_recordings(&self, run_id: i64) -> Result<Vec<StackRecordingRow>> {
        self.query(
            "SELECT r.point_id, r.repetition, r.host, r.hz, r.unwind, r.window_s, r.samples, r.busy_samples,
                    r.perf_cpu_s, r.perf_window_cpu_s, r.script_cpu_s, r.perf_version, r.reason
             FROM stack_recording r JOIN point p ON p.id = r.point_id WHERE p.run_id = ?1
             ORDER BY r.point_id, r.repetition, r.host",
            vals![run_id],
        )?
        .iter()
        .map(|r| {
            Ok(StackRecordingRow {
                point_id: r.int(0)?,
                repetition: r.int(1)? as u32,
                host: r.text(2)?,
                hz: r.int(3)? as u32,
                unwind: r.text(4)?,
                window_s: r.real(5)?,
                samples: r.int(6)? as u64,
                busy_samples: r.int(7)? as u64,
                perf_cpu_s: r.real(8)?,
                perf_window_cpu_s: r.real(9)?,
                script_cpu_s: r.real(10)?,
                perf_version: r.text(11)?,
                reason: r.opt_text(12)?,
            })
        })
        .collect()
    }

    /// The sides' stacks of a run, by point, repetition, host and side.
    pub fn stack_profiles(&self, run_id: i64) -> Result<Vec<StackProfileRow>> {
        self.query(
            "SELECT s.point_id, s.repetition, s.host, s.side, s.recorded_on, s.samples, s.folded_z
             FROM stack_profile s JOIN point p ON p.id = s.point_id WHERE p.run_id = ?1
             ORDER BY s.point_id, s.repetition, s.host, s.side",
            vals![run_id],
        )?
        .iter()
        .map(|r| {
            Ok(StackProfileRow {
                point_id: r.int(0)?,
                repetition: r.int(1)? as u32,
                host: r.text(2)?,
                side: r.text(3)?,
                recorded_on: r.text(4)?,
                samples: r.int(5)? as u64,
                folded: decompress(&r.blob(6)?)?,
            })
        })
        .collect()
    }
}
