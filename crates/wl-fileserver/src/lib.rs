//! benchlab's file-server workloads (seed 004's NetBench half):
//! `fileserver.load` replays dbench's load file — tridge's trace of
//! NetBench's operation mix — from many clients over SMB against a real
//! Samba server; `fileserver.local` replays it on a local or mounted
//! directory, as dbench does.
//!
//! - [`loadfile`]: the load-file format, parsed before anything runs;
//! - [`backend`]: the operations, and the local back end;
//! - [`smb`]: the SMB back end over libsmbclient (loaded at run time);
//! - [`smb1`]: benchlab's own SMB1 client, the second SMB back end, and
//!   [`ntlm`], its NTLMv2 logon;
//! - [`replay`]: the clients, the phases and the tallies;
//! - [`load`]: the two workloads (options, metrics, views).

pub mod backend;
pub mod latency;
pub mod load;
pub mod loadfile;
pub mod ntlm;
mod procs;
pub mod replay;
pub mod smb;
pub mod smb1;

pub use load::{FileserverLoad, LOAD, LOCAL};
