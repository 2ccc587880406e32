//! benchlab's file-system workload, [`MATRIX`] (`fs.matrix`): IOzone's 13
//! access patterns — write, rewrite, read, reread, random read, random
//! write, backward read, record rewrite, stride read, fwrite, frewrite,
//! fread, freread — with IOzone's syscall sequences, over a matrix of file
//! sizes × record sizes, in three cache modes:
//!
//! - `in-cache`: the page cache as it is;
//! - `direct`: `O_DIRECT` with page-aligned buffers on the nine
//!   read()/write() patterns, the stdio patterns buffered as in IOzone `-I`;
//! - `out-of-cache`: the I/O runs in a memory cgroup far smaller than the
//!   file ([`cgroup`]), or with a file larger than RAM (seed 001's form).
//!
//! The file lives in a directory benchlab creates, or on an ext4/XFS file
//! system benchlab makes on an image file or a device, mounts and removes
//! for each point (`benchlab_env::target`). Modules: [`pattern`] (the
//! patterns and their offset sequences as pure functions), [`io`] (the
//! measured loops), [`cgroup`], [`matrix`] (the workload).

#![warn(missing_docs)]

pub mod cgroup;
pub mod io;
pub mod matrix;
pub mod pattern;

pub use matrix::{FsMatrix, MATRIX};
pub use pattern::Pattern;
