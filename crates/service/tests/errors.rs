//! Bad input: a clear error naming the service, the key and what is
//! wrong — and nothing started, made or journaled (or, for a server that
//! fails while starting, everything removed again).

mod common;

use std::net::TcpListener;

use benchlab_service::{Service, ServiceError, ServicePlan, Template, MARKER};
use common::*;

fn start_err(p: &ServicePlan, d: &Dirs) -> String {
    match Service::start(p, &d.opts()) {
        Ok(s) => panic!("started {}", s.name()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_missing_program_is_named() {
    let d = Dirs::new();
    let e = start_err(
        &plan("name='app'\nkind='command'\nargv=['/nonexistent/server']"),
        &d,
    );
    assert_eq!(
        e,
        "service `app`: /nonexistent/server is not installed (no executable file there)"
    );
    let e = start_err(
        &plan("name='app'\nkind='command'\nargv=['benchlab-no-such-server', '-x']"),
        &d,
    );
    assert_eq!(
        e,
        "service `app`: benchlab-no-such-server is not installed (no `benchlab-no-such-server` in PATH or the sbin directories)"
    );
    d.assert_nothing_left(None);
}

#[test]
fn a_port_in_use_is_refused_before_anything_starts() {
    require("nginx", "nginx");
    let d = Dirs::new();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let e = start_err(&plan(&format!("name='web'\nkind='nginx'\nport={port}")), &d);
    assert_eq!(
        e,
        format!("service `web`: port {port} is already in use on 127.0.0.1 (another server listens there): choose another `port`, or stop that server")
    );
    d.assert_nothing_left(None);
}

#[test]
fn an_unset_template_variable_is_refused_at_start_too() {
    require("nginx", "nginx");
    let d = Dirs::new();
    // A plan as it could arrive over the wire from another benchlab: the
    // agent checks it again.
    let mut p = plan("name='web'\nkind='nginx'");
    p.template = Some(Template {
        origin: "my.conf".into(),
        file_name: "my.conf".into(),
        text: "daemon off;\nevents {}\nhttp { server { listen {{listen}}; root {{webroot}}; } }\n"
            .into(),
    });
    let e = start_err(&p, &d);
    assert!(
        e.starts_with("service `web`: template my.conf: variable(s) not set: `webroot` (line 3)"),
        "{e}"
    );
    d.assert_nothing_left(None);
}

#[test]
fn a_document_root_benchlab_did_not_make_is_refused_and_left_alone() {
    require("nginx", "nginx");
    let d = Dirs::new();
    let theirs = tempfile::tempdir().unwrap();
    let index = put_file(theirs.path(), "index.html", 10);
    let e = start_err(
        &plan(&format!(
            "name='web'\nkind='nginx'\ndocument_root='{}'",
            theirs.path().display()
        )),
        &d,
    );
    assert_eq!(
        e,
        format!(
            "service `web`: document_root {} exists and was not created by benchlab (no {MARKER} in it): benchlab never writes into or deletes what it did not create; name a path that does not exist yet (benchlab makes it and removes it when the service stops), a directory benchlab made (holding {MARKER}), or leave document_root out (benchlab makes one in its scratch directory)",
            theirs.path().display()
        )
    );
    assert_eq!(std::fs::read(&index).unwrap().len(), 10);
    assert_eq!(entries(theirs.path()), vec!["index.html"]);
    // A plain file there is not ours either.
    let file_root = theirs.path().join("index.html");
    let e = start_err(
        &plan(&format!(
            "name='web'\nkind='nginx'\ndocument_root='{}'",
            file_root.display()
        )),
        &d,
    );
    assert!(e.contains("exists and was not created by benchlab"), "{e}");
    d.assert_nothing_left(None);
}

#[test]
fn a_new_document_root_is_made_marked_and_removed() {
    require_root();
    require("nginx", "nginx");
    let d = Dirs::new();
    let parent = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        parent.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let root = parent.path().join("www");
    let p = plan(&format!(
        "name='web'\nkind='nginx'\ndocument_root='{}'",
        root.display()
    ));
    let svc = Service::start(&p, &d.opts()).unwrap();
    assert_eq!(svc.description().document_root, root);
    assert!(root.join(MARKER).is_file());
    put_file(&root, "a.html", 300);
    assert_eq!(get(svc.address(), "/a.html"), (200, put_body(300)));
    let pgid = svc.pgid();
    svc.stop().unwrap();
    assert!(!root.exists());
    assert!(parent.path().is_dir());
    d.assert_nothing_left(Some(pgid));
}

fn put_body(len: usize) -> Vec<u8> {
    (0..len).map(|i| b'a' + (i % 26) as u8).collect()
}

#[test]
fn a_server_that_fails_to_start_is_reported_with_its_log_and_removed() {
    require_root();
    require("nginx", "nginx");
    let d = Dirs::new();
    let study = tempfile::tempdir().unwrap();
    std::fs::write(
        study.path().join("bad.conf"),
        "daemon off;\nerror_log {{scratch}}/error.log;\npid {{scratch}}/nginx.pid;\nevents {}\nhttp { server { listen {{listen}}; no_such_directive on; } }\n",
    )
    .unwrap();
    let p = plan_in("name='web'\nkind='nginx'\nconfig='bad.conf'", study.path());
    let e = Service::start(&p, &d.opts()).unwrap_err();
    let ServiceError::Start { message, log, .. } = &e else {
        panic!("{e}")
    };
    assert!(
        message.ends_with("nginx exited with code 1 while starting"),
        "{message}"
    );
    assert!(
        log.contains("unknown directive \"no_such_directive\""),
        "{log}"
    );
    d.assert_nothing_left(None);
}

#[test]
fn a_server_that_never_answers_is_stopped_at_the_timeout() {
    require("sleep", "coreutils");
    let d = Dirs::new();
    let e = start_err(
        &plan("name='mute'\nkind='command'\nargv=['sleep', '60']\nready_timeout_s=0.3"),
        &d,
    );
    assert!(
        e.starts_with("service `mute`: /usr/bin/sleep did not become ready within 0.3 s (last probe: connect to 127.0.0.1:")
            && e.contains("it was stopped"),
        "{e}"
    );
    d.assert_nothing_left(None);
}

#[test]
fn other_bad_inputs_name_their_key() {
    require("nginx", "nginx");
    let d = Dirs::new();
    let e = start_err(&plan("name='web'\nkind='nginx'\ncpus='63'"), &d);
    assert!(
        e.starts_with("service `web`: cpus: CPU 63 not online on host `local` (online: "),
        "{e}"
    );
    let e = start_err(&plan("name='web'\nkind='nginx'\nbind='192.0.2.1'"), &d);
    assert_eq!(
        e,
        "service `web`: bind: 192.0.2.1 is not an address of host `local`"
    );
    let e = start_err(
        &plan("name='web'\nkind='nginx'\nsecrets={pw={env='BENCHLAB_TEST_NO_SUCH_VAR'}}"),
        &d,
    );
    assert_eq!(
        e,
        "service `web`: secrets.pw: environment variable BENCHLAB_TEST_NO_SUCH_VAR is not set on host `local`"
    );
    let mut opts = d.opts();
    opts.scratch_base = d.base.path().join("missing");
    let e = Service::start(&plan("name='web'\nkind='nginx'"), &opts)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("is not a directory"), "{e}");
    d.assert_nothing_left(None);
}

#[test]
fn a_place_the_server_user_cannot_enter_is_refused() {
    require_root();
    require("nginx", "nginx");
    let d = Dirs::new();
    let closed = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        closed.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let mut opts = d.opts();
    opts.scratch_base = closed.path().to_path_buf();
    let e = Service::start(&plan("name='web'\nkind='nginx'"), &opts)
        .err()
        .unwrap()
        .to_string();
    let prefix = format!(
        "service `web`: scratch: {} (mode 0700) does not let the server's user `www-data` through to {}/benchlab-service-web-",
        closed.path().display(),
        closed.path().display()
    );
    assert!(e.starts_with(&prefix), "{e}");
    assert!(e.ends_with("/htdocs: every request would be refused; choose a place under a directory others may enter (such as /tmp or /srv)"), "{e}");
    assert_eq!(entries(closed.path()), Vec::<String>::new());
    let root = closed.path().join("www");
    let e = start_err(
        &plan(&format!(
            "name='web'\nkind='apache2'\ndocument_root='{}'",
            root.display()
        )),
        &d,
    );
    assert!(e.starts_with("service `web`: document_root: "), "{e}");
    let e = start_err(
        &plan("name='web'\nkind='nginx'\nvars={user='benchlab-no-such-user'}"),
        &d,
    );
    assert_eq!(
        e,
        "service `web`: vars.user: user `benchlab-no-such-user` does not exist on host `local`"
    );
    d.assert_nothing_left(None);
}

#[test]
fn a_secret_in_a_failing_server_s_output_is_masked() {
    require("python3", "python3");
    let d = Dirs::new();
    let study = tempfile::tempdir().unwrap();
    std::fs::write(study.path().join("pw"), "hunter2-secret\n").unwrap();
    let p = plan_in(
        "name='app'\nkind='command'\nsecrets={pw={file='pw'}}\n\
         argv=['python3', '-c', 'import sys; print(\"bad password\", sys.argv[1]); sys.exit(2)', '{{pw}}']",
        study.path(),
    );
    let e = Service::start(&p, &d.opts()).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("python3 exited with code 2 while starting"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "output.log: bad password {}",
            benchlab_service::MASK
        )),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
    d.assert_nothing_left(None);
}
