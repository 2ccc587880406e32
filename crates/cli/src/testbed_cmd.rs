//! `benchlab testbed` (up, down, status) and its relays.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// A test bed's name: given as is, or read from the file that describes it.
fn testbed_name(name_or_file: &str) -> Result<String> {
    let path = Path::new(name_or_file);
    if path.is_file() {
        let text = std::fs::read_to_string(path)?;
        Ok(benchlab_testbed::parse_spec(name_or_file, &text)?.name)
    } else {
        Ok(name_or_file.to_string())
    }
}

pub(crate) fn testbed(action: crate::TestbedAction) -> Result<i32> {
    use crate::TestbedAction;
    let dir = benchlab_testbed::default_state_dir();
    let mut out = std::io::stdout();
    match action {
        TestbedAction::Up { file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let spec = benchlab_testbed::parse_spec(&file.display().to_string(), &text)?;
            let bed = benchlab_testbed::up(&spec, &dir)?;
            writeln!(
                out,
                "test bed `{}` is up ({} topology):",
                bed.name, bed.topology
            )?;
            for h in &bed.hosts {
                writeln!(
                    out,
                    "  host {:<12} netns {:<20} address {}/{} ({})",
                    h.name, h.netns, h.address, h.prefix_len, h.interface
                )?;
            }
            for (i, l) in spec.links.iter().enumerate() {
                writeln!(
                    out,
                    "  link {} {} <-> {} {} /{} ({})",
                    l.hosts[0],
                    l.address(0),
                    l.hosts[1],
                    l.address(1),
                    l.subnet.prefix_len,
                    benchlab_testbed::spec::link_interface(&bed.name, i)
                )?;
            }
            for n in &bed.notes {
                writeln!(out, "  note: {n}")?;
            }
            writeln!(out, "remove it with: benchlab testbed down {}", bed.name)?;
        }
        TestbedAction::Down { name } => {
            let name = testbed_name(&name)?;
            let r = benchlab_testbed::down(&name, &dir)?;
            if !r.found {
                writeln!(
                    out,
                    "no test bed `{name}` is recorded in {}: nothing to remove",
                    dir.display()
                )?;
            }
            for k in &r.killed {
                writeln!(
                    out,
                    "  killed process {} in {}{}",
                    k.pid,
                    k.netns,
                    if k.sigkill { " (SIGKILL)" } else { "" }
                )?;
            }
            for o in &r.removed {
                writeln!(out, "  removed {o}")?;
            }
            for o in &r.already_gone {
                writeln!(out, "  already gone: {o}")?;
            }
        }
        TestbedAction::Netem => {
            if benchlab_testbed::netem_available() {
                writeln!(out, "this kernel has netem: test beds can impose delay_ms")?;
            } else {
                writeln!(out, "this kernel has no netem (sch_netem): test beds cannot impose delay_ms; use `benchlab relay --delay-ms` between hosts instead")?;
                return Ok(1);
            }
        }
        TestbedAction::Status { name } => {
            let name = testbed_name(&name)?;
            let s = benchlab_testbed::status(&name, &dir)?;
            writeln!(
                out,
                "test bed `{}` ({}){}",
                s.name,
                s.state_file.display(),
                if s.complete {
                    ""
                } else {
                    ": incomplete (its `up` did not finish)"
                }
            )?;
            for h in &s.hosts {
                writeln!(
                    out,
                    "  host {:<12} netns {:<20} address {}/{}",
                    h.name, h.netns, h.address, h.prefix_len
                )?;
            }
            for o in &s.objects {
                writeln!(
                    out,
                    "  {} {}",
                    if o.exists { "present" } else { "MISSING" },
                    o.object
                )?;
            }
        }
    }
    Ok(0)
}

pub(crate) fn relay(
    listen: std::net::SocketAddr,
    to: std::net::SocketAddr,
    delay_ms: f64,
    protocol: &str,
) -> Result<i32> {
    use benchlab_testbed::relay::{self, RelayConfig, RelayProtocol};
    let protocol = match protocol {
        "tcp" => RelayProtocol::Tcp,
        "udp" => RelayProtocol::Udp,
        "both" => RelayProtocol::Both,
        other => bail!("--protocol {other}: expected tcp, udp or both"),
    };
    if !(delay_ms.is_finite() && delay_ms >= 0.0) {
        bail!("--delay-ms must be a non-negative number of milliseconds");
    }
    let stop = crate::runner::interrupt_flag()?;
    let handle = relay::start(RelayConfig {
        listen,
        upstream: to,
        delay: std::time::Duration::from_secs_f64(delay_ms / 1000.0),
        protocol,
    })
    .with_context(|| format!("cannot start the relay on {listen}"))?;
    eprintln!(
        "benchlab relay: {} → {to}, {delay_ms} ms each way",
        handle.local_addr()
    );
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let stats = handle.stop();
    writeln!(
        std::io::stdout(),
        "{}",
        serde_json::to_string_pretty(&stats)?
    )?;
    Ok(0)
}
