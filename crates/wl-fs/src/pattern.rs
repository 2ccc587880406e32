//! The 13 IOzone access patterns and, for each, the exact sequence of
//! record offsets it touches, as pure functions (the measured loops in
//! [`crate::io`] follow the same rules; the tests compare both).
//!
//! Source: IOzone 3.x `-a` as described in `reference/classic-tools.md`
//! §4.2: sequential write/rewrite/read/reread from offset 0; random
//! read/write over a fixed permutation made with `srand48(0)`/`lrand48()`;
//! backward read from the last record down; record rewrite of offset 0
//! over and over; stride read with stride 17 records and IOzone's "+1"
//! wrap; and the stdio (`fwrite`/`fread`) patterns sequentially.

/// One IOzone column. The order is IOzone's column order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pattern {
    /// Sequential `write()` into a freshly truncated file.
    Write,
    /// Sequential `write()` over the existing blocks.
    Rewrite,
    /// Sequential `read()`.
    Read,
    /// Sequential `read()` again (cached unless direct).
    Reread,
    /// `lseek()` + `read()` over a fixed permutation of the records.
    RandomRead,
    /// `lseek()` + `write()` over the same permutation.
    RandomWrite,
    /// `read()` from the last record down to the first.
    BkwdRead,
    /// `write()` of the first record, over and over.
    RecordRewrite,
    /// `read()` every `stride`-th record, wrapping to the next start.
    StrideRead,
    /// stdio `fwrite()` over the existing file (`"r+"`).
    Fwrite,
    /// stdio `fwrite()` again.
    Frewrite,
    /// stdio `fread()`.
    Fread,
    /// stdio `fread()` again.
    Freread,
}

impl Pattern {
    /// All 13, in IOzone's column order.
    pub const ALL: [Pattern; 13] = [
        Pattern::Write,
        Pattern::Rewrite,
        Pattern::Read,
        Pattern::Reread,
        Pattern::RandomRead,
        Pattern::RandomWrite,
        Pattern::BkwdRead,
        Pattern::RecordRewrite,
        Pattern::StrideRead,
        Pattern::Fwrite,
        Pattern::Frewrite,
        Pattern::Fread,
        Pattern::Freread,
    ];

    /// The name in study files and metric keys (`random-read`).
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Write => "write",
            Pattern::Rewrite => "rewrite",
            Pattern::Read => "read",
            Pattern::Reread => "reread",
            Pattern::RandomRead => "random-read",
            Pattern::RandomWrite => "random-write",
            Pattern::BkwdRead => "bkwd-read",
            Pattern::RecordRewrite => "record-rewrite",
            Pattern::StrideRead => "stride-read",
            Pattern::Fwrite => "fwrite",
            Pattern::Frewrite => "frewrite",
            Pattern::Fread => "fread",
            Pattern::Freread => "freread",
        }
    }

    /// The label of its loop's line in `bench/cost`'s log
    /// (`benchlab_core::cost`).
    pub fn cost_label(self) -> &'static str {
        match self {
            Pattern::Write => "fs.matrix write",
            Pattern::Rewrite => "fs.matrix rewrite",
            Pattern::Read => "fs.matrix read",
            Pattern::Reread => "fs.matrix reread",
            Pattern::RandomRead => "fs.matrix random-read",
            Pattern::RandomWrite => "fs.matrix random-write",
            Pattern::BkwdRead => "fs.matrix bkwd-read",
            Pattern::RecordRewrite => "fs.matrix record-rewrite",
            Pattern::StrideRead => "fs.matrix stride-read",
            Pattern::Fwrite => "fs.matrix fwrite",
            Pattern::Frewrite => "fs.matrix frewrite",
            Pattern::Fread => "fs.matrix fread",
            Pattern::Freread => "fs.matrix freread",
        }
    }

    /// The metric key of its rate: `random_read_kib_s`.
    pub fn metric(self) -> &'static str {
        match self {
            Pattern::Write => "write_kib_s",
            Pattern::Rewrite => "rewrite_kib_s",
            Pattern::Read => "read_kib_s",
            Pattern::Reread => "reread_kib_s",
            Pattern::RandomRead => "random_read_kib_s",
            Pattern::RandomWrite => "random_write_kib_s",
            Pattern::BkwdRead => "bkwd_read_kib_s",
            Pattern::RecordRewrite => "record_rewrite_kib_s",
            Pattern::StrideRead => "stride_read_kib_s",
            Pattern::Fwrite => "fwrite_kib_s",
            Pattern::Frewrite => "frewrite_kib_s",
            Pattern::Fread => "fread_kib_s",
            Pattern::Freread => "freread_kib_s",
        }
    }

    /// IOzone's report title (`-R`), used as the matrix caption.
    pub fn title(self) -> &'static str {
        match self {
            Pattern::Write => "Writer report",
            Pattern::Rewrite => "Re-writer report",
            Pattern::Read => "Reader report",
            Pattern::Reread => "Re-Reader report",
            Pattern::RandomRead => "Random read report",
            Pattern::RandomWrite => "Random write report",
            Pattern::BkwdRead => "Backward read report",
            Pattern::RecordRewrite => "Record rewrite report",
            Pattern::StrideRead => "Stride read report",
            Pattern::Fwrite => "Fwrite report",
            Pattern::Frewrite => "Re-Fwrite report",
            Pattern::Fread => "Fread report",
            Pattern::Freread => "Re-Fread report",
        }
    }

    /// Looks a pattern up by its name.
    pub fn from_name(name: &str) -> Option<Pattern> {
        Pattern::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether it writes (the others read).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Pattern::Write
                | Pattern::Rewrite
                | Pattern::RandomWrite
                | Pattern::RecordRewrite
                | Pattern::Fwrite
                | Pattern::Frewrite
        )
    }

    /// Whether it goes through stdio (`fopen`), which IOzone never opens
    /// with `O_DIRECT`, even with `-I`.
    pub fn stdio(self) -> bool {
        matches!(
            self,
            Pattern::Fwrite | Pattern::Frewrite | Pattern::Fread | Pattern::Freread
        )
    }
}

/// Parses a comma-separated list of pattern names (`"all"` = all 13);
/// returns them in IOzone's column order, whatever the order given.
pub fn parse_patterns(text: &str) -> Result<Vec<Pattern>, String> {
    if text.trim() == "all" {
        return Ok(Pattern::ALL.to_vec());
    }
    let mut out = Vec::new();
    for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        match Pattern::from_name(word) {
            Some(p) if !out.contains(&p) => out.push(p),
            Some(_) => return Err(format!("pattern `{word}` is listed twice")),
            None => {
                return Err(format!(
                    "unknown pattern `{word}` (allowed: all, or a comma-separated list of {})",
                    Pattern::ALL.map(|p| p.name()).join(", ")
                ))
            }
        }
    }
    if out.is_empty() {
        return Err("no pattern given (allowed: all, or a comma-separated list)".into());
    }
    out.sort();
    Ok(out)
}

/// IOzone's record count and bytes moved: `numrecs = file / reclen`,
/// `filebytes = numrecs · reclen` (a partial last record is not used).
pub fn geometry(file_size: u64, record_size: u64) -> (u64, u64) {
    let n = file_size / record_size;
    (n, n * record_size)
}

/// POSIX `drand48` family state (48-bit linear congruential generator),
/// so the permutation is exactly IOzone's: `srand48(0)` then `lrand48()`.
pub struct Rand48 {
    x: u64,
}

impl Rand48 {
    const A: u64 = 0x5_DEEC_E66D;
    const C: u64 = 0xB;
    const MASK: u64 = (1 << 48) - 1;

    /// `srand48(seed)`: the high 32 bits are the seed, the low 16 bits
    /// 0x330E (POSIX).
    pub fn new(seed: u32) -> Self {
        Rand48 {
            x: ((seed as u64) << 16) | 0x330E,
        }
    }

    /// `lrand48()`: the next value in 0 … 2^31 − 1.
    pub fn lrand48(&mut self) -> u64 {
        self.x = (Self::A.wrapping_mul(self.x).wrapping_add(Self::C)) & Self::MASK;
        self.x >> 17
    }
}

/// IOzone's random-I/O permutation of `0..n`: `srand48(0)`; for each `i`,
/// `j = lrand48() % n`, swap(`recnum[i]`, `recnum[j]`). Every record
/// appears exactly once.
pub fn permutation(n: u64) -> Vec<u64> {
    let mut recnum: Vec<u64> = (0..n).collect();
    let mut rng = Rand48::new(0);
    for i in 0..n as usize {
        let j = (rng.lrand48() % n) as usize;
        recnum.swap(i, j);
    }
    recnum
}

/// The record indices stride read visits, in order (IOzone `-j`):
/// after reading at `pos`, if `pos + reclen + stride·reclen ≥ filebytes −
/// reclen` it wraps to the next start, `(wrap % n)·reclen` (0 when `n ≤
/// stride`), else it moves on by `stride` records. Exactly `n` reads.
pub fn stride_sequence(n: u64, stride: u64) -> Vec<u64> {
    let mut out = Vec::with_capacity(n as usize);
    let mut pos = 0u64; // in records
    let mut wrap = 0u64;
    for _ in 0..n {
        out.push(pos);
        pos = stride_next(pos, &mut wrap, n, stride);
    }
    out
}

/// One step of [`stride_sequence`], in records (shared with the measured
/// loop so both follow the same rule).
#[inline]
pub fn stride_next(pos: u64, wrap: &mut u64, n: u64, stride: u64) -> u64 {
    // IOzone compares byte positions; in records the comparison is the same
    // with reclen = 1: pos + 1 + stride ≥ n − 1 (signed: n may be 1).
    if (pos + 1 + stride) as i128 >= n as i128 - 1 {
        *wrap += 1;
        if n <= stride {
            0
        } else {
            *wrap % n
        }
    } else {
        pos + stride
    }
}

/// The record offsets (in records) a pattern reads or writes, in order —
/// the specification the measured loops follow, for tests.
pub fn record_sequence(p: Pattern, n: u64, stride: u64) -> Vec<u64> {
    match p {
        Pattern::RandomRead | Pattern::RandomWrite => permutation(n),
        Pattern::BkwdRead => (0..n).rev().collect(),
        Pattern::RecordRewrite => vec![0; n as usize],
        Pattern::StrideRead => stride_sequence(n, stride),
        _ => (0..n).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rand48_matches_glibc() {
        // The same numbers as the C library's own srand48(0)/lrand48().
        let mut r = Rand48::new(0);
        let ours: Vec<u64> = (0..5).map(|_| r.lrand48()).collect();
        let theirs: Vec<u64> = unsafe {
            libc_srand48(0);
            (0..5).map(|_| libc_lrand48() as u64).collect()
        };
        assert_eq!(ours, theirs);
    }

    extern "C" {
        #[link_name = "srand48"]
        fn libc_srand48(seed: libc::c_long);
        #[link_name = "lrand48"]
        fn libc_lrand48() -> libc::c_long;
    }

    #[test]
    fn permutation_covers_every_record_once() {
        for n in [1u64, 2, 17, 128, 1000] {
            let mut p = permutation(n);
            assert_eq!(p.len() as u64, n);
            let sorted_is_identity = {
                p.sort_unstable();
                p == (0..n).collect::<Vec<_>>()
            };
            assert!(sorted_is_identity, "n = {n}");
        }
        // A real shuffle, not the identity.
        assert_ne!(permutation(128), (0..128).collect::<Vec<_>>());
    }

    #[test]
    fn stride_wraps_to_the_next_start() {
        // 64 records, stride 17: 0 17 34 51, then 51 + 1 + 17 ≥ 63 wraps
        // to 1: 1 18 35 52, then 2 …
        let s = stride_sequence(64, 17);
        assert_eq!(&s[..10], &[0, 17, 34, 51, 1, 18, 35, 52, 2, 19]);
        assert_eq!(s.len(), 64);
        // Every read stays inside the file.
        assert!(s.iter().all(|&r| r < 64));
        // Small files: n ≤ stride always wraps to 0.
        assert_eq!(stride_sequence(4, 17), vec![0, 0, 0, 0]);
        // n = 32 (1 MiB of 32 KiB records): 0, 17, then wraps because
        // 17 + 1 + 17 ≥ 31.
        assert_eq!(&stride_sequence(32, 17)[..6], &[0, 17, 1, 18, 2, 19]);
    }

    #[test]
    fn sequences_move_the_file_size() {
        for p in Pattern::ALL {
            let s = record_sequence(p, 100, 17);
            assert_eq!(s.len(), 100, "{p:?}: one record per call, n calls");
        }
        assert!(record_sequence(Pattern::RecordRewrite, 50, 17)
            .iter()
            .all(|&r| r == 0));
        assert_eq!(record_sequence(Pattern::BkwdRead, 3, 17), vec![2, 1, 0]);
    }

    #[test]
    fn pattern_lists() {
        assert_eq!(parse_patterns("all").unwrap().len(), 13);
        assert_eq!(
            parse_patterns("read, write").unwrap(),
            vec![Pattern::Write, Pattern::Read]
        );
        assert!(parse_patterns("write,write").is_err());
        assert!(parse_patterns("seek").unwrap_err().contains("unknown"));
        assert!(parse_patterns("").is_err());
        assert_eq!(geometry(1_000_000, 65536), (15, 983_040));
    }
}
