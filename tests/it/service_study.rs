//! `[[service]]` in study files: every mistake is reported before anything
//! runs, naming the file, the line, the key and what is allowed.

use benchlab_testkit::Scratch;

const HEAD: &str = r#"
[study]
name = "svc"
[[configuration]]
name = "base"
[[workload]]
kind = "fake"
"#;

fn check_err(text: &str) -> String {
    let s = Scratch::new();
    let f = s.study("svc.toml", text);
    let out = s.run(&["check", f.to_str().unwrap()]);
    assert!(!out.status.success(), "accepted:\n{text}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn an_unknown_service_key_names_the_key_and_the_allowed_ones() {
    let err = check_err(&format!(
        "{HEAD}\n[[service]]\nname = \"web\"\nkind = \"nginx\"\nworkerz = 4\n"
    ));
    assert!(err.contains("svc.toml:"), "{err}");
    assert!(err.contains("service[0].workerz"), "{err}");
    assert!(err.contains("kind"), "lists what is allowed: {err}");
}

#[test]
fn an_unknown_kind_and_a_duplicate_name_are_refused() {
    let err = check_err(&format!(
        "{HEAD}\n[[service]]\nname = \"web\"\nkind = \"iis\"\n"
    ));
    assert!(err.contains("service[0]"), "{err}");
    assert!(err.contains("nginx"), "names the kinds: {err}");
    let err = check_err(&format!(
        "{HEAD}\n[[service]]\nname = \"web\"\nkind = \"nginx\"\n[[service]]\nname = \"web\"\nkind = \"apache2\"\n"
    ));
    assert!(err.contains("service[1].name"), "{err}");
    assert!(err.contains("defined twice"), "{err}");
}

#[test]
fn overrides_name_an_existing_service_and_keep_its_name_and_host() {
    let svc = "\n[[service]]\nname = \"web\"\nkind = \"nginx\"\n";
    let text = HEAD.replace(
        "name = \"base\"\n",
        "name = \"base\"\nservice.www = { cpus = \"0\" }\n",
    );
    let err = check_err(&format!("{text}{svc}"));
    assert!(err.contains("configuration[0].service.www"), "{err}");
    assert!(err.contains("\"web\""), "names the services: {err}");
    let text = HEAD.replace(
        "name = \"base\"\n",
        "name = \"base\"\nservice.web = { host = \"generator\" }\n",
    );
    let err = check_err(&format!("{text}{svc}"));
    assert!(err.contains("configuration[0].service.web.host"), "{err}");
    let text = HEAD.replace(
        "name = \"base\"\n",
        "name = \"base\"\nservice.web = { cpus = \"zero\" }\n",
    );
    let err = check_err(&format!("{text}{svc}"));
    assert!(err.contains("configuration[0].service.web"), "{err}");
}

#[test]
fn a_valid_service_table_passes_the_check() {
    let s = Scratch::new();
    let text = HEAD.replace(
        "name = \"base\"\n",
        "name = \"base\"\nservice.web = { cpus = \"0\" }\n",
    ) + "\n[[service]]\nname = \"web\"\nkind = \"nginx\"\nrestart = \"point\"\n";
    let f = s.study("svc.toml", &text);
    s.run_ok(&["check", f.to_str().unwrap()]);
}

/// A service on a host no workload names is still reached and checked
/// there before the run (it used to panic looking up the host's address,
/// which only workload hosts had); no workload uses it, so it is never
/// started.
#[test]
fn a_service_on_a_host_no_workload_names_runs_and_stops() {
    if benchlab_testkit::find_program("nginx").is_none() {
        return benchlab_testkit::missing("nginx (scripts/setup.sh installs it)");
    }
    let s = Scratch::new();
    let tmp = s.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let text = HEAD.to_string()
        + "\n[defaults]\nrepetitions = 1\nquiesce_s = 0\n\
           \n[[host]]\nname = \"aux\"\nlocal = true\n\
           \n[[service]]\nname = \"web\"\nkind = \"nginx\"\nhost = \"aux\"\n";
    let f = s.study("svc.toml", &text);
    benchlab_testkit::output_ok(
        s.benchlab()
            .env("TMPDIR", &tmp)
            .args(["run", f.to_str().unwrap()]),
    );
    // Not started (no description stored), and nothing made for it.
    let db = rusqlite::Connection::open(s.db()).unwrap();
    let n: i64 = db
        .query_row("SELECT count(*) FROM service", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
