//! A minimal QMP client: the greeting, `qmp_capabilities`, then one
//! command at a time (events in between are skipped).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::GuestError;

/// A QMP connection.
pub struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    /// Connects to QEMU's QMP socket (retrying until `deadline`: QEMU
    /// creates it as it starts) and negotiates capabilities.
    pub fn connect(path: &Path, deadline: Instant) -> Result<Qmp, GuestError> {
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if Instant::now() >= deadline => {
                    return Err(GuestError::Qmp(format!(
                        "cannot connect to {}: {e}",
                        path.display()
                    )))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| GuestError::Qmp(e.to_string()))?;
        let writer = stream
            .try_clone()
            .map_err(|e| GuestError::Qmp(e.to_string()))?;
        let mut q = Qmp {
            reader: BufReader::new(stream),
            writer,
        };
        let greeting = q.line()?;
        if greeting.get("QMP").is_none() {
            return Err(GuestError::Qmp(format!("unexpected greeting {greeting}")));
        }
        q.execute("qmp_capabilities", None)?;
        Ok(q)
    }

    fn line(&mut self) -> Result<Value, GuestError> {
        let mut s = String::new();
        let n = self
            .reader
            .read_line(&mut s)
            .map_err(|e| GuestError::Qmp(format!("read: {e}")))?;
        if n == 0 {
            return Err(GuestError::Qmp("QEMU closed the connection".into()));
        }
        serde_json::from_str(&s).map_err(|e| GuestError::Qmp(format!("bad reply {s:?}: {e}")))
    }

    /// Runs a command; returns its `return` value.
    pub fn execute(
        &mut self,
        command: &str,
        arguments: Option<Value>,
    ) -> Result<Value, GuestError> {
        let mut msg = json!({ "execute": command });
        if let Some(a) = arguments {
            msg["arguments"] = a;
        }
        let mut text = msg.to_string();
        text.push('\n');
        self.writer
            .write_all(text.as_bytes())
            .map_err(|e| GuestError::Qmp(format!("write: {e}")))?;
        loop {
            let v = self.line()?;
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                return Err(GuestError::Qmp(format!("{command}: {e}")));
            }
            // An event: not the answer.
        }
    }

    /// The thread id of each vCPU, in vCPU order.
    pub fn vcpu_threads(&mut self) -> Result<Vec<i32>, GuestError> {
        let r = self.execute("query-cpus-fast", None)?;
        let mut cpus: Vec<(i64, i32)> = r
            .as_array()
            .ok_or_else(|| GuestError::Qmp(format!("query-cpus-fast: {r}")))?
            .iter()
            .filter_map(|c| Some((c["cpu-index"].as_i64()?, c["thread-id"].as_i64()? as i32)))
            .collect();
        cpus.sort();
        Ok(cpus.into_iter().map(|(_, t)| t).collect())
    }

    /// QEMU's version (`7.2.22`).
    pub fn version(&mut self) -> Result<String, GuestError> {
        let r = self.execute("query-version", None)?;
        let q = &r["qemu"];
        Ok(format!("{}.{}.{}", q["major"], q["minor"], q["micro"]))
    }

    /// Asks QEMU to exit (the guest has nothing to keep: its writes live
    /// in its own memory).
    pub fn quit(&mut self) {
        let _ = self.execute("quit", None);
    }
}
