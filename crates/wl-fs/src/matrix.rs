//! `fs.matrix`: one point is one IOzone cell — one (file size, record
//! size) pair in one cache mode — through the selected patterns. Sweeping
//! `file_size` and `record_size` gives IOzone's `-a` matrix; the report
//! assembles the file × record matrices per pattern from the points.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use benchlab_core::param::{ParamDefault, ParamKind, ParamSpec};
use benchlab_core::units::format_size;
use benchlab_core::ValidationError;
use benchlab_core::{
    Better, ClientCtx, Combine, MatrixSummary, MetricSpec, Params, Sample, ServerSide, SideResult,
    ViewSpec, Workload, WorkloadError,
};

use crate::cgroup::{MemCgroup, Version};
use crate::io::{run_cell, CellSpec, ALIGN};
use crate::pattern::{parse_patterns, Pattern};
use benchlab_env::target::{prepare, TargetSpec, MKFS_CHOICES};

/// The workload.
pub struct FsMatrix;

/// The registered instance.
pub static MATRIX: FsMatrix = FsMatrix;

/// Cache modes.
pub const CACHE_MODES: &[&str] = &["in-cache", "direct", "out-of-cache"];
/// Forms of out-of-cache.
pub const OOC_FORMS: &[&str] = &["cgroup", "big-file"];

/// IOzone's `CROSSOVER`: above 16 MiB files, `-a` starts records at
/// [`AUTO_LARGE_RECORD`].
pub const AUTO_CROSSOVER: u64 = 16 << 20;
/// IOzone's `LARGE_REC`: 64 KiB.
pub const AUTO_LARGE_RECORD: u64 = 64 << 10;
/// Default file size (one cell of `-a`).
pub const DEFAULT_FILE_SIZE: i64 = 64 << 20;
/// Default record size.
pub const DEFAULT_RECORD_SIZE: i64 = 64 << 10;
/// Default cgroup limit of the out-of-cache cgroup form.
pub const DEFAULT_CGROUP_LIMIT: i64 = 256 << 20;
/// The smallest cgroup limit: the agent's own new allocations (buffers,
/// the permutation) are charged there too.
pub const MIN_CGROUP_LIMIT: u64 = 16 << 20;
/// IOzone's default stride (`-j`).
pub const DEFAULT_STRIDE: i64 = 17;
/// mkfs.xfs refuses file systems smaller than this (xfsprogs ≥ 5.19).
pub const XFS_MIN_SIZE: u64 = 300 << 20;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "file_size",
        kind: ParamKind::Bytes,
        default: ParamDefault::Int(DEFAULT_FILE_SIZE),
        help: "file size (IOzone -s; sweep it, or a doubling range \"1MiB..4GiB\" as -n/-g)",
    },
    ParamSpec {
        name: "record_size",
        kind: ParamKind::Bytes,
        default: ParamDefault::Int(DEFAULT_RECORD_SIZE),
        help: "record size of every read/write (IOzone -r; sweep it, or \"8KiB..1MiB\" as -y/-q)",
    },
    ParamSpec {
        name: "cache",
        kind: ParamKind::Choice(CACHE_MODES),
        default: ParamDefault::Str("in-cache"),
        help: "in-cache (page cache as it is), direct (O_DIRECT, IOzone -I; stdio patterns stay buffered), out-of-cache",
    },
    ParamSpec {
        name: "out_of_cache",
        kind: ParamKind::Choice(OOC_FORMS),
        default: ParamDefault::Str("cgroup"),
        help: "out-of-cache form: cgroup (I/O in a memory cgroup limited to cgroup_limit) or big-file (the file must exceed RAM, as seed 001's 32 GiB)",
    },
    ParamSpec {
        name: "cgroup_limit",
        kind: ParamKind::Bytes,
        default: ParamDefault::Int(DEFAULT_CGROUP_LIMIT),
        help: "memory limit of the out-of-cache cgroup (page cache included); file_size must be at least twice it",
    },
    ParamSpec {
        name: "patterns",
        kind: ParamKind::Text,
        default: ParamDefault::Str("all"),
        help: "\"all\" or a comma list of: write, rewrite, read, reread, random-read, random-write, bkwd-read, record-rewrite, stride-read, fwrite, frewrite, fread, freread",
    },
    ParamSpec {
        name: "auto_skip",
        kind: ParamKind::Bool,
        default: ParamDefault::Bool(false),
        help: "IOzone -a's rule: files above 16 MiB get no records below 64 KiB (those cells are not planned)",
    },
    ParamSpec {
        name: "stride",
        kind: ParamKind::Count,
        default: ParamDefault::Int(DEFAULT_STRIDE),
        help: "stride read's stride in records (IOzone -j)",
    },
    ParamSpec {
        name: "include_fsync",
        kind: ParamKind::Bool,
        default: ParamDefault::Bool(false),
        help: "fsync (fflush for stdio) inside the timed window (IOzone -e)",
    },
    ParamSpec {
        name: "include_close",
        kind: ParamKind::Bool,
        default: ParamDefault::Bool(false),
        help: "close (fclose) inside the timed window (IOzone -c)",
    },
    ParamSpec {
        name: "drop_caches",
        kind: ParamKind::Bool,
        default: ParamDefault::Bool(false),
        help: "sync and drop the page cache before each cell (root)",
    },
    ParamSpec {
        name: "verify",
        kind: ParamKind::Bool,
        default: ParamDefault::Bool(true),
        help: "read the file back after the cell (untimed) and check every byte",
    },
    ParamSpec {
        name: "size_scale",
        kind: ParamKind::Factor,
        default: ParamDefault::Float(1.0),
        help: "multiplies file sizes (whole records, at least one) and the cgroup limit; `run --scale` multiplies it, for trial runs (tables keep the nominal sizes)",
    },
    ParamSpec {
        name: "target",
        kind: ParamKind::Text,
        default: ParamDefault::Str("/var/tmp"),
        help: "a directory (benchlab works in its own subdirectory), or with mkfs an image file to create (image_size) or a block device",
    },
    ParamSpec {
        name: "mkfs",
        kind: ParamKind::Choice(MKFS_CHOICES),
        default: ParamDefault::Str("none"),
        help: "format target as ext4 or xfs for every point, mount it, and remove it afterwards (root)",
    },
    ParamSpec {
        name: "mkfs_options",
        kind: ParamKind::Text,
        default: ParamDefault::Str(""),
        help: "extra mkfs arguments",
    },
    ParamSpec {
        name: "mount_options",
        kind: ParamKind::Text,
        default: ParamDefault::Str(""),
        help: "mount -o options (seed 001 optimized: barrier=0; a kernel that refuses them skips the point)",
    },
    ParamSpec {
        name: "image_size",
        kind: ParamKind::Bytes,
        default: ParamDefault::Unset,
        help: "create target as a sparse image file of this size (with mkfs)",
    },
];

/// A cell's table figure: the plain mean over the patterns, the figure of
/// seed 001's Appendix D, from which its headline (the geometric mean over
/// the cells, built by the report) comes. The per-cell geometric mean over
/// the patterns stays recorded as `geomean_kib_s`.
const MEAN: MetricSpec = MetricSpec {
    name: "mean_kib_s",
    label: "Mean over the patterns (KiB/s)",
    better: Better::Higher,
    decimals: 0,
    combine: Combine::Sum,
};

/// Everything a point asks for, read from its parameters.
#[derive(Debug, Clone)]
pub struct Config {
    /// The cell.
    pub cell: CellSpec,
    /// Cache mode.
    pub cache: String,
    /// Out-of-cache form.
    pub ooc: String,
    /// cgroup limit.
    pub cgroup_limit: u64,
    /// Drop caches first.
    pub drop_caches: bool,
    /// Where.
    pub target: TargetSpec,
}

fn opt_text(p: &Params, name: &str) -> Result<String, WorkloadError> {
    Ok(p.str(name)?.to_string())
}

impl Config {
    /// Reads and checks a point's parameters.
    pub fn from_params(p: &Params) -> Result<Config, ValidationError> {
        let bad = |k: &str, m: String| ValidationError::new(k, m);
        let get = |e: WorkloadError| ValidationError::new("parameters", e.to_string());
        let file_size = p.u64("file_size").map_err(|e| get(e.into()))?;
        let record_size = p.u64("record_size").map_err(|e| get(e.into()))?;
        if record_size < 16 {
            return Err(bad("record_size", "must be at least 16 bytes".into()));
        }
        if file_size == 0 {
            return Err(bad("file_size", "must be more than 0".into()));
        }
        let cache = opt_text(p, "cache").map_err(get)?;
        let ooc = opt_text(p, "out_of_cache").map_err(get)?;
        let cgroup_limit = p.u64("cgroup_limit").map_err(|e| get(e.into()))?;
        let patterns = parse_patterns(p.str("patterns").map_err(|e| get(e.into()))?)
            .map_err(|m| bad("patterns", m))?;
        let stride = p.u64("stride").map_err(|e| get(e.into()))?;
        if stride == 0 {
            return Err(bad("stride", "must be at least 1 record".into()));
        }
        if cache == "direct" && record_size % ALIGN as u64 != 0 {
            return Err(bad(
                "record_size",
                format!("direct I/O needs records that are a multiple of {ALIGN} bytes"),
            ));
        }
        let scale = p.f64("size_scale").map_err(|e| get(e.into()))?;
        let nominal = (file_size, cgroup_limit);
        let (file_size, cgroup_limit) = scaled(file_size, record_size, cgroup_limit, scale);
        if cache == "out-of-cache" && ooc == "cgroup" {
            if nominal.1 < MIN_CGROUP_LIMIT {
                return Err(bad(
                    "cgroup_limit",
                    format!("must be at least {MIN_CGROUP_LIMIT} bytes (16 MiB)"),
                ));
            }
            if file_size < 2 * cgroup_limit {
                return Err(bad(
                    "file_size",
                    format!(
                        "out-of-cache with a cgroup limit of {cgroup_limit} bytes needs files of at least twice that (several times is better){}",
                        if scale != 1.0 {
                            format!("; at size_scale {scale} the file is {file_size} bytes")
                        } else {
                            String::new()
                        }
                    ),
                ));
            }
        }
        let mkfs = opt_text(p, "mkfs").map_err(get)?;
        let image_size = p.opt_u64("image_size").map_err(|e| get(e.into()))?;
        let mount_options = opt_text(p, "mount_options").map_err(get)?;
        let mkfs_options = opt_text(p, "mkfs_options").map_err(get)?;
        if mkfs == "none" {
            if image_size.is_some() {
                return Err(bad(
                    "image_size",
                    "an image needs mkfs = \"ext4\" or \"xfs\"".into(),
                ));
            }
            if !mount_options.is_empty() || !mkfs_options.is_empty() {
                return Err(bad(
                    "mount_options",
                    "mkfs and mount options need mkfs = \"ext4\" or \"xfs\" (a plain directory is used as it is)".into(),
                ));
            }
        }
        if let Some(size) = image_size {
            if mkfs == "xfs" && size < XFS_MIN_SIZE {
                return Err(bad("image_size", "mkfs.xfs needs at least 300 MiB".into()));
            }
            if size < 16 << 20 {
                return Err(bad("image_size", "must be at least 16 MiB".into()));
            }
        }
        let target = opt_text(p, "target").map_err(get)?;
        if target.trim().is_empty() {
            return Err(bad(
                "target",
                "must name a directory, an image file or a device".into(),
            ));
        }
        Ok(Config {
            cell: CellSpec {
                path: std::path::PathBuf::new(),
                file_size,
                record_size,
                stride,
                patterns,
                direct: cache == "direct",
                include_fsync: p.bool("include_fsync").map_err(|e| get(e.into()))?,
                include_close: p.bool("include_close").map_err(|e| get(e.into()))?,
                verify: p.bool("verify").map_err(|e| get(e.into()))?,
                keep_file: false,
            },
            cache,
            ooc,
            cgroup_limit,
            drop_caches: p.bool("drop_caches").map_err(|e| get(e.into()))?,
            target: TargetSpec {
                path: target.into(),
                mkfs: (mkfs != "none").then_some(mkfs),
                mkfs_options,
                mount_options,
                image_size,
            },
        })
    }
}

/// The sizes a cell really uses at a size scale: the file in whole
/// records (at least one), the cgroup limit no lower than
/// [`MIN_CGROUP_LIMIT`].
pub fn scaled(file: u64, record: u64, limit: u64, scale: f64) -> (u64, u64) {
    if scale == 1.0 {
        return (file, limit);
    }
    let f = ((file as f64 * scale) as u64 / record).max(1) * record;
    let l = ((limit as f64 * scale) as u64).max(MIN_CGROUP_LIMIT);
    (f, l)
}

fn mem_total_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn drop_caches() -> Result<(), WorkloadError> {
    // SAFETY: plain syscall.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").map_err(|e| {
        WorkloadError::Unsupported(format!(
            "drop_caches needs root (/proc/sys/vm/drop_caches): {e}"
        ))
    })
}

/// Geometric mean of positive figures (NaN when there are none).
pub fn geomean(xs: &[f64]) -> f64 {
    if xs.is_empty() || xs.iter().any(|&x| x <= 0.0 || !x.is_finite()) {
        return f64::NAN;
    }
    (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
}

impl Workload for FsMatrix {
    fn kind(&self) -> &'static str {
        "fs.matrix"
    }

    fn summary(&self) -> &'static str {
        "IOzone's 13 file access patterns over file × record sizes, in-cache, out-of-cache or direct I/O (KiB/s)"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn row_param(&self) -> &'static str {
        "file_size"
    }

    fn validate(&self, params: &Params) -> Result<(), ValidationError> {
        Config::from_params(params).map(drop)
    }

    fn include_point(&self, params: &Params) -> bool {
        let (Ok(file), Ok(rec)) = (params.u64("file_size"), params.u64("record_size")) else {
            return true;
        };
        // IOzone -a ends a row at the first record larger than the file.
        if rec > file {
            return false;
        }
        let auto = params.bool("auto_skip").unwrap_or(false);
        !(auto && file > AUTO_CROSSOVER && rec < AUTO_LARGE_RECORD)
    }

    fn table_metrics(&self, _params: &Params) -> Vec<MetricSpec> {
        vec![MEAN]
    }

    fn metrics(&self, _params: &Params) -> Vec<MetricSpec> {
        // Several targets at once (seed 001 ran one): their rates add up.
        let mut m = vec![
            MEAN,
            MetricSpec::higher(
                "geomean_kib_s",
                "Geometric mean over the patterns (KiB/s)",
                0,
            ),
        ];
        // The labels are IOzone's report titles: the matrix views print them.
        m.extend(
            Pattern::ALL
                .iter()
                .map(|p| MetricSpec::higher(p.metric(), p.title(), 0)),
        );
        m
    }

    /// How a repetition's figures were obtained, from what it measured
    /// (the report shows each with the matrices of its points).
    fn notes(
        &self,
        params: &Params,
        metrics: &std::collections::BTreeMap<String, f64>,
    ) -> Vec<String> {
        let mut notes = Vec::new();
        if let Some(v) = metrics.get("cgroup_version") {
            let limit = metrics.get("cgroup_limit_bytes").copied().unwrap_or(0.0);
            notes.push(format!(
                "out-of-cache form: cgroup-v{v} memory limit {}, page cache included",
                format_size(limit as u64)
            ));
        }
        if metrics.contains_key("big_file") {
            notes.push("out-of-cache form: big-file (the file is larger than RAM)".into());
        }
        if let (Some(real), Ok(nominal)) = (metrics.get("file_bytes"), params.u64("file_size")) {
            if *real as u64 != nominal {
                notes.push(format!(
                    "trial run at a size scale: rows keep the nominal file sizes; the {} row's file was {}",
                    format_size(nominal),
                    format_size(*real as u64)
                ));
            }
        }
        if metrics.contains_key("stdio_buffered") {
            notes.push("fwrite, frewrite, fread and freread are buffered: stdio never uses O_DIRECT (as IOzone -I)".into());
        }
        if metrics.get("loop_direct_io") == Some(&0.0) {
            notes.push(
                "the image's loop device has no direct I/O: the host's page cache sits under it"
                    .into(),
            );
        }
        notes
    }

    fn views(&self, _params: &Params) -> Vec<ViewSpec> {
        // IOzone's own report: a file size × record size matrix per
        // pattern, then the per-cell mean over the patterns (seed 001's
        // Appendix D, whose geometric mean over the cells is its headline)
        // and the per-cell geometric mean over the patterns.
        let mut metrics: Vec<String> = Pattern::ALL
            .iter()
            .map(|p| p.metric().to_string())
            .collect();
        metrics.push("mean_kib_s".into());
        metrics.push("geomean_kib_s".into());
        vec![
            ViewSpec::Table {
                row_param: self.row_param().to_string(),
            },
            ViewSpec::Matrix {
                row_param: "file_size".into(),
                col_param: "record_size".into(),
                metrics,
                summary: MatrixSummary::GeoMean,
            },
        ]
    }

    fn expected_duration(&self, params: &Params) -> Duration {
        // Deliberately slow guesses (the runner declares a client hung
        // only after this plus a minute): about 14 passes over the file.
        let file = params.u64("file_size").unwrap_or(0) as f64
            * params.f64("size_scale").unwrap_or(1.0).min(1.0);
        let cached = params.str("cache").map(|c| c == "in-cache").unwrap_or(true);
        let bytes_per_s: f64 = if cached {
            256.0 * 1048576.0
        } else {
            48.0 * 1048576.0
        };
        let mkfs = params.str("mkfs").map(|m| m != "none").unwrap_or(false);
        Duration::from_secs_f64(15.0 * file / bytes_per_s + if mkfs { 3.0 } else { 0.2 })
    }

    fn server_side(&self) -> ServerSide {
        ServerSide::None
    }

    fn run_client(&self, params: &Params, ctx: &ClientCtx) -> Result<SideResult, WorkloadError> {
        // The study was validated at its own size scale; `run --scale`
        // may have shrunk it past what a mode allows: skip, with why.
        let cfg =
            Config::from_params(params).map_err(|e| WorkloadError::Unsupported(e.to_string()))?;
        run(&cfg, &ctx.abort)
    }

    fn combine(
        &self,
        _params: &Params,
        client: SideResult,
        _server: Option<SideResult>,
    ) -> Result<Sample, WorkloadError> {
        let mut sample = Sample::default();
        let mut rates = Vec::new();
        for p in Pattern::ALL {
            if let Some(&v) = client.values.get(p.metric()) {
                sample.metrics.insert(p.metric().into(), v);
                rates.push(v);
            }
        }
        if rates.is_empty() {
            return Err(WorkloadError::Other("no pattern reported a rate".into()));
        }
        sample.metrics.insert(
            "mean_kib_s".into(),
            rates.iter().sum::<f64>() / rates.len() as f64,
        );
        sample
            .metrics
            .insert("geomean_kib_s".into(), geomean(&rates));
        for k in [
            "cgroup_version",
            "cgroup_limit_bytes",
            "cgroup_peak_bytes",
            "stdio_buffered",
            "loop_direct_io",
            "file_bytes",
            "verified_records",
            "big_file",
            "mem_total_bytes",
        ] {
            if let Some(&v) = client.counters.get(k) {
                sample.metrics.insert(k.into(), v as f64);
            }
        }
        sample.client = client;
        Ok(sample)
    }
}

/// Runs one cell with its target and cache mode set up and undone.
pub fn run(cfg: &Config, abort: &AtomicBool) -> Result<SideResult, WorkloadError> {
    let mut r = SideResult::default();
    let target = prepare(&cfg.target)?;
    if let Some(dio) = target.info().loop_direct_io {
        r.counters.insert("loop_direct_io".into(), dio as u64);
    }
    let mut cell = cfg.cell.clone();
    cell.path = target.file();

    let outcome = (|| {
        if cfg.drop_caches {
            drop_caches()?;
        }
        let mut cgroup = None;
        if cfg.cache == "out-of-cache" {
            if cfg.ooc == "cgroup" {
                let mut cg = MemCgroup::create(cfg.cgroup_limit)?;
                r.counters.insert(
                    "cgroup_version".into(),
                    match cg.version() {
                        Version::V1 => 1,
                        Version::V2 => 2,
                    },
                );
                r.counters.insert("cgroup_limit_bytes".into(), cg.limit());
                cg.enter()?;
                cgroup = Some(cg);
            } else {
                let ram = mem_total_bytes().unwrap_or(0);
                r.counters.insert("mem_total_bytes".into(), ram);
                if cell.file_size <= ram {
                    return Err(WorkloadError::Unsupported(format!(
                        "big-file out-of-cache needs a file larger than RAM ({} bytes); this file is {} bytes (use out_of_cache = \"cgroup\")",
                        ram, cell.file_size
                    )));
                }
                r.counters.insert("big_file".into(), 1);
            }
        }
        let res = run_cell(&cell, abort);
        if let Some(mut cg) = cgroup {
            cg.leave();
            if let Some(peak) = cg.peak_bytes() {
                r.counters.insert("cgroup_peak_bytes".into(), peak);
            }
        }
        res
    })();
    // Undo the target whatever happened; a failed cleanup fails the point
    // (something may be left behind), unless the cell failed first.
    let cleanup = target.cleanup();
    let cell_result = outcome?;
    cleanup.map_err(|e| WorkloadError::Other(format!("cleanup of the target: {e}")))?;

    for p in &cell_result.patterns {
        r.values.insert(p.pattern.metric().into(), p.kib_s);
        r.values
            .insert(format!("{}_elapsed_s", p.pattern.name()), p.elapsed_s);
        r.counters
            .insert(format!("{}_bytes", p.pattern.name()), p.bytes);
    }
    if cfg.cell.direct && cfg.cell.patterns.iter().any(|p| p.stdio()) {
        // As IOzone -I: fwrite/frewrite/fread/freread never use O_DIRECT.
        r.counters.insert("stdio_buffered".into(), 1);
    }
    r.counters
        .insert("checked_reads".into(), cell_result.checked_reads);
    r.counters.insert("file_bytes".into(), cfg.cell.file_size);
    r.counters
        .insert("verified_records".into(), cell_result.verified_records);
    r.peak_rss_kib = benchlab_core::cpu::peak_rss_kib();
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchlab_core::Value;

    fn params(pairs: &[(&str, Value)]) -> Params {
        let mut p = Params::defaults(PARAMS);
        for (k, v) in pairs {
            p.set(k, v.clone());
        }
        p
    }

    #[test]
    fn auto_skip_rule() {
        let w = &MATRIX;
        let p = |f: i64, r: i64, auto: bool| {
            params(&[
                ("file_size", Value::Int(f)),
                ("record_size", Value::Int(r)),
                ("auto_skip", Value::Bool(auto)),
            ])
        };
        assert!(w.include_point(&p(16 << 20, 4 << 10, true)));
        assert!(!w.include_point(&p(32 << 20, 32 << 10, true)));
        assert!(w.include_point(&p(32 << 20, 64 << 10, true)));
        assert!(w.include_point(&p(32 << 20, 8 << 10, false)));
        assert!(
            !w.include_point(&p(1 << 20, 2 << 20, false)),
            "record > file"
        );
    }

    #[test]
    fn validation_messages() {
        let w = &MATRIX;
        let e = w
            .validate(&params(&[
                ("cache", Value::Str("direct".into())),
                ("record_size", Value::Int(1000)),
            ]))
            .unwrap_err();
        assert_eq!(e.key, "record_size");
        let e = w
            .validate(&params(&[("patterns", Value::Str("write,seek".into()))]))
            .unwrap_err();
        assert!(e.message.contains("unknown pattern"));
        let e = w
            .validate(&params(&[
                ("cache", Value::Str("out-of-cache".into())),
                ("file_size", Value::Int(256 << 20)),
            ]))
            .unwrap_err();
        assert_eq!(e.key, "file_size");
        assert!(w.validate(&params(&[])).is_ok());
    }

    #[test]
    fn one_cell_in_a_directory() {
        let d = tempfile::tempdir().unwrap();
        let p = params(&[
            ("file_size", Value::Int(1 << 20)),
            ("record_size", Value::Int(64 << 10)),
            ("target", Value::Str(d.path().display().to_string())),
        ]);
        let ctx = ClientCtx::single(None, 0, Default::default());
        let side = MATRIX.run_client(&p, &ctx).unwrap();
        let s = MATRIX.combine(&p, side, None).unwrap();
        for pat in Pattern::ALL {
            assert!(s.metrics[pat.metric()] > 0.0, "{pat:?}");
        }
        let g = s.metrics["geomean_kib_s"];
        let m = s.metrics["mean_kib_s"];
        assert!(g > 0.0 && g <= m * (1.0 + 1e-12), "AM ≥ GM: {g} {m}");
        assert_eq!(s.client.counter("write_bytes"), 1 << 20);
        assert_eq!(s.client.counter("verified_records"), 16);
        assert_eq!(
            std::fs::read_dir(d.path()).unwrap().count(),
            0,
            "nothing left"
        );
    }

    #[test]
    fn size_scale() {
        assert_eq!(scaled(1 << 30, 1 << 20, 1 << 30, 1.0), (1 << 30, 1 << 30));
        // Whole records, at least one; the limit not under 16 MiB.
        assert_eq!(
            scaled(1 << 30, 1 << 20, 1 << 30, 0.01),
            (10 << 20, 16 << 20)
        );
        assert_eq!(scaled(1 << 20, 1 << 20, 1 << 28, 0.01).0, 1 << 20);
    }

    #[test]
    fn geomean_of_known_values() {
        assert!((geomean(&[1.0, 100.0]) - 10.0).abs() < 1e-9);
        assert!(geomean(&[]).is_nan());
    }
}
