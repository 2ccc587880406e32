//! `collect()` on the machine running the tests, checked against what the
//! usual command-line tools and files report.

use std::process::Command;

use benchlab_inventory::{collect, render_markdown, render_text, Inventory};

#[test]
fn counts_cpus_and_memory() {
    let inv = collect();
    assert!(inv.cpu.logical_cpus > 0);
    assert!(
        inv.memory.total_bytes.unwrap_or(0) > 0,
        "{:#?}",
        inv.warnings
    );
    assert!(!inv.collected_at.is_empty() && inv.collected_at.ends_with('Z'));
}

#[test]
fn kernel_release_matches_uname_r() {
    let out = Command::new("uname")
        .arg("-r")
        .output()
        .expect("uname is installed");
    assert!(out.status.success());
    let expected = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(
        collect().os.kernel_release.as_deref(),
        Some(expected.as_str())
    );
}

#[test]
fn loopback_is_listed() {
    let inv = collect();
    let lo = inv
        .nics
        .iter()
        .find(|n| n.name == "lo")
        .expect("every network namespace has lo");
    assert_eq!(lo.driver.as_deref(), Some("virtual"));
    assert!(lo.mtu.is_some());
}

#[test]
fn sysctl_value_matches_procfs() {
    let inv = collect();
    let raw = std::fs::read_to_string("/proc/sys/net/core/rmem_max").unwrap();
    assert_eq!(
        inv.sysctls.get("net.core.rmem_max").map(String::as_str),
        Some(raw.trim())
    );
    assert!(
        !inv.sysctls.contains_key("net.ipv4.tcp_fastopen_key"),
        "secret keys are not collected"
    );
}

#[test]
fn json_round_trip_is_lossless() {
    let mut inv = collect();
    inv.tools
        .extra
        .insert("benchlab".to_string(), "0.1.0".to_string());
    let json = serde_json::to_string_pretty(&inv).unwrap();
    let back: Inventory = serde_json::from_str(&json).unwrap();
    assert_eq!(back, inv);
    // Older stored inventories may lack newer fields.
    let partial: Inventory = serde_json::from_str(r#"{"hostname":"h"}"#).unwrap();
    assert_eq!(partial.hostname, "h");
}

#[test]
fn renderings_name_the_cpu_and_kernel() {
    let inv = collect();
    let text = render_text(&inv);
    let model = inv.cpu.model_name.as_deref().expect("cpu model readable");
    let kernel = inv.os.kernel_release.as_deref().expect("kernel readable");
    assert!(text.contains(model), "{text}");
    assert!(text.contains(kernel), "{text}");
    let md = render_markdown(&[("this host", &inv)]);
    assert!(md.starts_with("| System | this host |\n"));
    assert!(md.contains(model) && md.contains(kernel));
}
