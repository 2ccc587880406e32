//! The file set the web server serves: a SPECweb96 tree generated from a
//! seed, a single file of a given size, or a user's URL list.
//!
//! # The SPECweb96 stand-in
//!
//! WebBench's own `zd_static_v20` tree (seed 004) was never published, so
//! the tree is the documented SPECweb96 one (SPEC, "The Workload for the
//! SPECweb96 Benchmark"): per directory 4 classes × 9 files, class `c`
//! file `i` (1…9) of `i · 102.4 · 10^c` bytes (102 B … 900 KiB), requested
//! 35 / 50 / 14 / 1 % by class. Within a class SPEC's accesses are not even;
//! here a file and a directory are picked uniformly within the class (the
//! same simplification as the wrk anchors in `server-tools.md`), giving a
//! mean transfer of about 15 KB. File contents are pseudo-random bytes from
//! the seed, so a compressing path gains nothing and two runs with one
//! seed serve identical bytes.
//!
//! # Ownership
//!
//! Everything is generated under one new directory (`benchlab-web-<seed>`)
//! that must not exist beforehand; the [`Manifest`] lists every file and
//! directory created, and [`Manifest::remove`] removes exactly those (a
//! file someone added later keeps its directory alive, and is reported).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::gen::Target;

/// Share of requests per SPECweb96 class, in percent.
pub const CLASS_SHARE_PCT: [f64; 4] = [35.0, 50.0, 14.0, 1.0];
/// Files per class.
pub const FILES_PER_CLASS: u32 = 9;

/// Size of SPECweb96 file `i` (1…9) of class `class` (0…3):
/// `i · 1024 · 10^class / 10`, rounded down (102, 204, … 921 600 bytes).
pub fn specweb96_size(class: u32, i: u32) -> u64 {
    u64::from(i) * 1024 * 10u64.pow(class) / 10
}

/// One generated (or listed) file.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The URL path (`/benchlab-web-1/dir00000/class1_3`).
    pub url: String,
    /// The file, when benchlab generated it.
    pub file: Option<PathBuf>,
    /// Its size in bytes, when known.
    pub size: Option<u64>,
    /// Relative request frequency.
    pub weight: f64,
}

/// What was generated and how requests are spread over it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifest {
    /// The files, in creation order.
    pub entries: Vec<Entry>,
    /// Directories created, parents before children.
    pub dirs: Vec<PathBuf>,
}

/// Which file set.
#[derive(Debug, Clone, PartialEq)]
pub enum FileSet {
    /// The SPECweb96 tree with `dirs` directories.
    Specweb96 {
        /// Number of directories (SPECweb96 scales this with the load).
        dirs: u32,
    },
    /// One file of `size` bytes.
    Single {
        /// Its size.
        size: u64,
    },
}

/// xorshift64* stream for file contents.
fn fill(buf: &mut [u8], state: &mut u64) {
    for chunk in buf.chunks_mut(8) {
        let mut x = *state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *state = x;
        let v = x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

/// The top directory name for a seed.
pub fn top_name(seed: u64) -> String {
    format!("benchlab-web-{seed}")
}

/// Where every file of a set lies, relative to the document root, before
/// anything is written: the client side builds its URL list from this on
/// its own host, the service side writes the files from the same layout.
struct Layout {
    /// Directories, parents first.
    dirs: Vec<String>,
    /// Files: relative path, size, weight.
    files: Vec<(String, u64, f64)>,
}

impl FileSet {
    fn layout(&self, seed: u64) -> Layout {
        let top = top_name(seed);
        let mut l = Layout {
            dirs: vec![top.clone()],
            files: Vec::new(),
        };
        match *self {
            FileSet::Single { size } => l.files.push((format!("{top}/file_{size}"), size, 1.0)),
            FileSet::Specweb96 { dirs } => {
                for d in 0..dirs {
                    let dir = format!("{top}/dir{d:05}");
                    for class in 0..4u32 {
                        for i in 1..=FILES_PER_CLASS {
                            l.files.push((
                                format!("{dir}/class{class}_{i}"),
                                specweb96_size(class, i),
                                CLASS_SHARE_PCT[class as usize] / f64::from(FILES_PER_CLASS * dirs),
                            ));
                        }
                    }
                    l.dirs.push(dir);
                }
            }
        }
        l
    }

    /// The URLs, sizes and weights of the set generated with `seed`,
    /// without touching the disk.
    pub fn targets(&self, seed: u64) -> Vec<Target> {
        self.layout(seed)
            .files
            .into_iter()
            .map(|(rel, size, weight)| Target {
                path: format!("/{rel}"),
                size: Some(size),
                weight,
            })
            .collect()
    }

    /// Generates the set under `root/benchlab-web-<seed>`, refusing to
    /// touch a directory that already exists. On failure, whatever was
    /// created is removed again.
    pub fn generate(&self, root: &Path, seed: u64) -> io::Result<Manifest> {
        let mut m = Manifest::default();
        match self.generate_into(root, seed, &mut m) {
            Ok(()) => Ok(m),
            Err(e) => {
                let _ = m.remove();
                Err(e)
            }
        }
    }

    fn generate_into(&self, root: &Path, seed: u64, m: &mut Manifest) -> io::Result<()> {
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("document root {} is not a directory", root.display()),
            ));
        }
        let layout = self.layout(seed);
        for (n, rel) in layout.dirs.iter().enumerate() {
            let dir = root.join(rel);
            fs::create_dir(&dir).map_err(|e| {
                if n == 0 && e.kind() == io::ErrorKind::AlreadyExists {
                    io::Error::new(
                        e.kind(),
                        format!(
                            "{} already exists and is not benchlab's to overwrite; remove it or choose another seed",
                            dir.display()
                        ),
                    )
                } else {
                    io::Error::new(e.kind(), format!("create {}: {e}", dir.display()))
                }
            })?;
            m.dirs.push(dir);
        }
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut buf = vec![0u8; 1 << 16];
        for (rel, size, weight) in layout.files {
            let file = root.join(&rel);
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&file)
                .map_err(|e| io::Error::new(e.kind(), format!("create {}: {e}", file.display())))?;
            m.entries.push(Entry {
                url: format!("/{rel}"),
                file: Some(file),
                size: Some(size),
                weight,
            });
            let mut left = size;
            while left > 0 {
                let n = left.min(buf.len() as u64) as usize;
                fill(&mut buf[..n], &mut state);
                f.write_all(&buf[..n])?;
                left -= n as u64;
            }
        }
        Ok(())
    }
}

impl Manifest {
    /// The generator's targets.
    pub fn targets(&self) -> Vec<Target> {
        self.entries
            .iter()
            .map(|e| Target {
                path: e.url.clone(),
                size: e.size,
                weight: e.weight,
            })
            .collect()
    }

    /// The manifest as a URL list (`path size weight` per line), the
    /// format [`read_url_list`] reads.
    pub fn url_list(&self) -> String {
        let mut s = String::new();
        for e in &self.entries {
            s.push_str(&e.url);
            if let Some(n) = e.size {
                s.push_str(&format!(" {n} {}", e.weight));
            }
            s.push('\n');
        }
        s
    }

    /// Total bytes of the generated files.
    pub fn total_bytes(&self) -> u64 {
        self.entries.iter().filter_map(|e| e.size).sum()
    }

    /// The paths to remove afterwards, files first, then directories
    /// deepest first (the order [`Manifest::remove`] uses).
    pub fn removal_list(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.entries.iter().filter_map(|e| e.file.clone()).collect();
        v.extend(self.dirs.iter().rev().cloned());
        v
    }

    /// Removes exactly what was generated. A directory that holds
    /// something benchlab did not create is left in place and named in the
    /// error.
    pub fn remove(&self) -> io::Result<()> {
        remove_paths(&self.removal_list())
    }
}

/// Removes files, then (empty) directories, as listed; never recursively.
pub fn remove_paths(paths: &[PathBuf]) -> io::Result<()> {
    let mut kept = Vec::new();
    for p in paths {
        let res = match fs::symlink_metadata(p) {
            Ok(md) if md.is_dir() => fs::remove_dir(p),
            Ok(_) => fs::remove_file(p),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            kept.push(format!("{}: {e}", p.display()));
        }
    }
    if kept.is_empty() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "left in place (not benchlab's, or not removable): {}",
            kept.join("; ")
        )))
    }
}

/// Reads a URL list: one `path [size [weight]]` per line (`#` starts a
/// comment); a size makes every response of that URL checked against it,
/// a weight sets its relative frequency (default 1).
pub fn read_url_list(file: &Path) -> Result<Vec<Target>, String> {
    let text = fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let path = words.next().unwrap_or_default();
        let at = || format!("{}:{}", file.display(), n + 1);
        if !path.starts_with('/') {
            return Err(format!(
                "{}: {path:?} is not a URL path (it must start with '/'; the server address comes from the service)",
                at()
            ));
        }
        let size = match words.next() {
            None => None,
            Some(w) => Some(w.parse::<u64>().map_err(|_| {
                format!(
                    "{}: expected a size in bytes after the path, got {w:?}",
                    at()
                )
            })?),
        };
        let weight = match words.next() {
            None => 1.0,
            Some(w) => match w.parse::<f64>() {
                Ok(x) if x >= 0.0 && x.is_finite() => x,
                _ => {
                    return Err(format!(
                        "{}: expected a non-negative weight after the size, got {w:?}",
                        at()
                    ))
                }
            },
        };
        if let Some(extra) = words.next() {
            return Err(format!(
                "{}: unexpected {extra:?} (a line is `path [size [weight]]`)",
                at()
            ));
        }
        out.push(Target {
            path: path.to_string(),
            size,
            weight,
        });
    }
    if out.is_empty() {
        return Err(format!("{}: no URL in the list", file.display()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_specweb96() {
        assert_eq!(specweb96_size(0, 1), 102);
        assert_eq!(specweb96_size(0, 9), 921);
        assert_eq!(specweb96_size(1, 1), 1024);
        assert_eq!(specweb96_size(2, 9), 92_160);
        assert_eq!(specweb96_size(3, 9), 921_600);
    }

    #[test]
    fn tree_is_deterministic_and_removed_exactly() {
        let root = tempfile::tempdir().unwrap();
        let other = root.path().join("not-ours");
        fs::write(&other, b"x").unwrap();
        let m = FileSet::Specweb96 { dirs: 2 }
            .generate(root.path(), 7)
            .unwrap();
        assert_eq!(m.entries.len(), 72);
        for e in &m.entries {
            let f = e.file.as_ref().unwrap();
            assert_eq!(fs::metadata(f).unwrap().len(), e.size.unwrap());
        }
        let w: f64 = m.entries.iter().map(|e| e.weight).sum();
        assert!((w - 100.0).abs() < 1e-9);
        let first = fs::read(m.entries[5].file.as_ref().unwrap()).unwrap();
        // A second tree from the same seed is refused (exists) ...
        let err = FileSet::Specweb96 { dirs: 2 }
            .generate(root.path(), 7)
            .unwrap_err();
        assert!(err.to_string().contains("not benchlab's"), "{err}");
        // ... and the refused attempt removed nothing.
        assert!(m.entries[0].file.as_ref().unwrap().exists());
        m.remove().unwrap();
        assert!(!root.path().join(top_name(7)).exists());
        assert!(other.exists(), "a file benchlab did not create survives");
        // Same seed, same bytes.
        let m2 = FileSet::Specweb96 { dirs: 2 }
            .generate(root.path(), 7)
            .unwrap();
        assert_eq!(
            fs::read(m2.entries[5].file.as_ref().unwrap()).unwrap(),
            first
        );
        // A stranger's file inside the tree keeps its directory.
        let intruder = m2.dirs[1].join("intruder");
        fs::write(&intruder, b"y").unwrap();
        let err = m2.remove().unwrap_err();
        assert!(err.to_string().contains("dir00000"), "{err}");
        assert!(intruder.exists());
    }

    #[test]
    fn url_list_errors_name_the_line() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("urls");
        fs::write(&f, "# c\n/a 10 2.5\n/b\n").unwrap();
        let t = read_url_list(&f).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].size, t[0].weight), (Some(10), 2.5));
        assert_eq!((t[1].size, t[1].weight), (None, 1.0));
        fs::write(&f, "/a 1 -1\n").unwrap();
        assert!(read_url_list(&f).unwrap_err().contains("weight"));
        fs::write(&f, "/a\nb\n").unwrap();
        assert!(read_url_list(&f).unwrap_err().contains("urls:2"));
        fs::write(&f, "/a ten\n").unwrap();
        assert!(read_url_list(&f).unwrap_err().contains("size in bytes"));
    }
}
