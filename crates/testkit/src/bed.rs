//! A test bed of network namespaces (`benchlab testbed up`), taken down
//! when the test ends, however it ends.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Scratch;

/// A test bed made from a spec, removed when dropped.
pub struct Bed {
    /// The bed's name (its namespaces are `bl-NAME-HOST`).
    pub name: String,
    /// The state directory it was made with (the scratch's `state`).
    pub state: PathBuf,
}

impl Bed {
    /// `benchlab testbed up` on `[testbed] name = NAME` followed by `spec`
    /// (topology, subnet, hosts), with the scratch's state directory;
    /// asserted to succeed.
    pub fn up(s: &Scratch, name: &str, spec: &str) -> Bed {
        let file = s.study(
            &format!("{name}-bed.toml"),
            &format!("[testbed]\nname = \"{name}\"\n{spec}"),
        );
        let state = s.path("state");
        let out = Command::new(crate::benchlab_bin())
            .args(["testbed", "up"])
            .arg(&file)
            .env("BENCHLAB_STATE_DIR", &state)
            .output()
            .expect("run benchlab testbed up");
        assert!(
            out.status.success(),
            "testbed up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Bed {
            name: name.to_string(),
            state,
        }
    }

    /// The namespace of one of the bed's hosts.
    pub fn ns(&self, host: &str) -> String {
        format!("bl-{}-{host}", self.name)
    }

    /// Process ids running in one of the bed's namespaces.
    pub fn pids(&self, host: &str) -> Vec<u32> {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.ns(host)])
            .output()
            .expect("run ip netns pids");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// `ip netns exec NS PROGRAM` on one of the hosts.
    pub fn exec(&self, host: &str, program: impl AsRef<Path>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns(host)])
            .arg(program.as_ref());
        c
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = Command::new(crate::benchlab_bin())
            .args(["testbed", "down", &self.name])
            .env("BENCHLAB_STATE_DIR", &self.state)
            .output();
    }
}
