//! Issue 11, item 4: a configuration's `hosts = { FROM = "TO" }` moves
//! the workload sides and services placed on FROM to TO within that
//! configuration. Every mistake names the file, the line, the key and what
//! is allowed.

use benchlab_core::fake::FAKE;
use benchlab_core::study::{Configuration, Study, StudyError};
use benchlab_core::Registry;

fn registry() -> Registry {
    let mut r = Registry::new();
    r.add(&FAKE);
    r
}

/// Hosts b1, b2 (the study's) and b1-direct, b2-direct, gen-direct,
/// spare (defined for the maps); a two-target workload on b1 and b2, a
/// service on b1; line 1 is `[study]`.
const HEAD: &str = "[study]\nname = \"s\"\n\
[[host]]\nname = \"b1\"\nlocal = true\n\
[[host]]\nname = \"b2\"\nlocal = true\n\
[[host]]\nname = \"b1-direct\"\nlocal = true\n\
[[host]]\nname = \"b2-direct\"\nlocal = true\n\
[[host]]\nname = \"gen-direct\"\nlocal = true\n\
[[host]]\nname = \"spare\"\nlocal = true\n\
[[service]]\nname = \"svc\"\nkind = \"command\"\nhost = \"b1\"\nargv = [\"true\"]\n\
[[service]]\nname = \"ext\"\nhost = \"b2\"\naddress = \"10.0.0.2:80\"\n\
[[workload]]\nkind = \"fake\"\ntargets = [\"b1\", \"b2\"]\n\
[[configuration]]\nname = \"bridged\"\n\
[[configuration]]\nname = \"direct\"\n";

/// Line of the first line after [`HEAD`].
fn next_line() -> usize {
    HEAD.matches('\n').count() + 1
}

fn parse(extra: &str) -> Result<Study, StudyError> {
    Study::parse("my-study.toml", &format!("{HEAD}{extra}"), &registry())
}

fn check(extra: &str, key: &str, needles: &[&str]) {
    let e = parse(extra).expect_err("the map must be refused");
    let shown = e.to_string();
    assert_eq!(e.file, "my-study.toml", "{shown}");
    assert_eq!(e.line, next_line(), "{shown}");
    assert_eq!(e.key, key, "{shown}");
    assert!(
        shown.starts_with(&format!("my-study.toml:{}:", next_line())),
        "{shown}"
    );
    for n in needles {
        assert!(shown.contains(n), "`{n}` missing from: {shown}");
    }
}

fn config<'a>(s: &'a Study, name: &str) -> &'a Configuration {
    s.configurations.iter().find(|c| c.name == name).unwrap()
}

#[test]
fn a_map_moves_sides_and_managed_services_of_its_configuration_only() {
    let s =
        parse("hosts = { b1 = \"b1-direct\", b2 = \"b2-direct\", generator = \"gen-direct\" }\n")
            .unwrap();
    let (bridged, direct) = (config(&s, "bridged"), config(&s, "direct"));
    assert!(bridged.hosts.is_empty());
    assert_eq!(bridged.host("b1"), "b1");
    assert_eq!(direct.host("b1"), "b1-direct");
    assert_eq!(direct.host("generator"), "gen-direct");
    // Hosts it does not map stay.
    assert_eq!(direct.host("sut"), "sut");
    // The workload keeps the study's names: they label its targets.
    assert_eq!(s.workloads[0].servers, ["b1", "b2"]);
    // The managed service moves with its host, in its spec too; the
    // unmanaged one is an address and stays as it is.
    let svc = |c: &Configuration, n: &str| c.services.iter().find(|d| d.name == n).unwrap().clone();
    assert_eq!(svc(bridged, "svc").host, "b1");
    assert_eq!(svc(direct, "svc").host, "b1-direct");
    assert_eq!(svc(direct, "svc").spec["host"], "b1-direct");
    assert_eq!(svc(direct, "ext").host, "b2");
    assert_eq!(
        s.services[0].host, "b1",
        "the study's own service is unmoved"
    );
    // Each configuration's own hosts: its sides after its map, and its
    // managed service's host (the one at an address runs on none).
    assert_eq!(s.configuration_hosts(bridged), ["b1", "b2", "generator"]);
    assert_eq!(
        s.configuration_hosts(direct),
        ["b1-direct", "b2-direct", "gen-direct"]
    );
    // Every host of every configuration, each once.
    assert_eq!(
        s.used_hosts(),
        [
            "b1",
            "b2",
            "generator",
            "b1-direct",
            "b2-direct",
            "gen-direct"
        ]
    );
}

#[test]
fn two_hosts_may_swap() {
    let s = parse("hosts = { b1 = \"b2\", b2 = \"b1\" }\n").unwrap();
    let direct = config(&s, "direct");
    assert_eq!((direct.host("b1"), direct.host("b2")), ("b2", "b1"));
    assert_eq!(direct.services[0].host, "b2");
}

#[test]
fn an_unknown_host_is_refused_naming_the_hosts() {
    check(
        "hosts = { b3 = \"b1-direct\" }\n",
        "configuration[1].hosts.b3",
        &["no host is named `b3`", "\"b1-direct\"", "\"sut\""],
    );
}

#[test]
fn a_host_nothing_runs_on_is_refused_naming_the_mappable_ones() {
    // `spare` is defined but no side or service is on it; `sut` is only
    // the default host, and this study's workload names its own.
    check(
        "hosts = { spare = \"b1-direct\" }\n",
        "configuration[1].hosts.spare",
        &["would change nothing", "\"b1\", \"b2\", \"generator\""],
    );
}

#[test]
fn a_map_to_an_undefined_host_is_refused() {
    check(
        "hosts = { b1 = \"b1-passthrough\" }\n",
        "configuration[1].hosts.b1",
        &[
            "`b1-passthrough` is not a defined host",
            "[[host]]",
            "\"b1-direct\"",
        ],
    );
}

#[test]
fn a_map_to_itself_or_to_a_non_name_is_refused() {
    check(
        "hosts = { b1 = \"b1\" }\n",
        "configuration[1].hosts.b1",
        &["to itself"],
    );
    check(
        "hosts = { b1 = 3 }\n",
        "configuration[1].hosts.b1",
        &["expected a host name", "\"b1-direct\""],
    );
    check(
        "hosts = \"b1-direct\"\n",
        "configuration[1].hosts",
        &["expected a table"],
    );
}

#[test]
fn a_map_that_merges_two_targets_is_refused_naming_the_workload() {
    check(
        "hosts = { b1 = \"b2\" }\n",
        "configuration[1].hosts",
        &["workload `fake`", "`b1` and `b2`", "both run on `b2`"],
    );
}

/// A plan stored before this key (its configurations have no `hosts`)
/// reads as a configuration on the study's hosts; one without a map
/// stores none.
#[test]
fn configurations_without_a_map_store_none_and_old_ones_read() {
    let s = parse("hosts = { b1 = \"b1-direct\" }\n").unwrap();
    let old = serde_json::to_value(config(&s, "bridged")).unwrap();
    assert!(old.get("hosts").is_none(), "{old}");
    let back: Configuration = serde_json::from_value(old).unwrap();
    assert!(back.hosts.is_empty());
    let new = serde_json::to_value(config(&s, "direct")).unwrap();
    assert_eq!(new["hosts"]["b1"], "b1-direct");
    let back: Configuration = serde_json::from_value(new).unwrap();
    assert_eq!(back.host("b1"), "b1-direct");
}
