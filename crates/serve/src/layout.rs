//! What every page shares: the frame with its navigation, and a
//! page-level failure with its HTTP status.

use std::fmt::Write;

use benchlab_report::html::esc;
use benchlab_report::LoadError;
use benchlab_store::StoreError;

use crate::http::Response;

/// The navigation: (id, path, text).
const NAV: &[(&str, &str, &str)] = &[
    ("runs", "/", "Runs"),
    ("history", "/history", "History"),
    ("compare", "/compare", "Compare"),
    ("hosts", "/hosts", "Hosts"),
    ("queue", "/queue", "Queue"),
    ("bisect", "/bisect", "Bisections"),
];

/// A whole page: the header with the navigation (`here` marked), then
/// `body`; the stylesheet and icon are this server's files.
pub(crate) fn page(title: &str, here: &str, body: &str) -> Response {
    let mut nav = String::new();
    for (id, href, text) in NAV {
        let _ = write!(
            nav,
            "<a href=\"{href}\" id=\"nav-{id}\"{}>{text}</a>",
            if *id == here {
                " class=\"here\" aria-current=\"page\""
            } else {
                ""
            }
        );
    }
    Response::html(format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{} — benchlab</title><link rel=\"stylesheet\" href=\"/style.css\"><link rel=\"icon\" href=\"/favicon.svg\" type=\"image/svg+xml\"></head><body>\n<header class=\"top\"><a class=\"brand\" href=\"/\"><img src=\"/favicon.svg\" width=\"22\" height=\"22\" alt=\"\">benchlab</a><nav>{nav}</nav></header>\n<main>\n{body}</main></body></html>\n",
        esc(title),
    ))
}

/// Opens a container that scrolls a wide table sideways, with a shadow
/// at the edge that has more and the first column kept in view (the
/// report's `div.scroll`); focusable, so the keyboard scrolls it too.
/// Close it with `</div>`.
pub(crate) fn scroll(label: &str) -> String {
    format!(
        "<div class=\"scroll\" role=\"region\" tabindex=\"0\" aria-label=\"{}\">",
        esc(label)
    )
}

/// A page-level failure, with its status.
#[derive(Debug)]
pub(crate) struct Fail(pub(crate) u16, pub(crate) String);

/// What a 500 page says when the store fails: the store's error names its
/// user, host, port and database, which are for the operator's log, not
/// for whoever asked.
pub(crate) const STORE_FAILED: &str =
    "the store could not answer just now (the server's log says why); try again later";

/// A store failure: logged in full (redacted) on standard error, answered
/// as a 500 that names nothing of the store.
pub(crate) fn store_failed(what: &str, e: &dyn std::fmt::Display) -> Fail {
    eprintln!(
        "{}",
        benchlab_core::redact::redact(&format!("benchlab serve: {what}: {e}"))
    );
    Fail(500, STORE_FAILED.to_string())
}

impl From<StoreError> for Fail {
    fn from(e: StoreError) -> Fail {
        match e {
            StoreError::NoRun(_) => Fail(404, e.to_string()),
            other => store_failed("a store query failed", &other),
        }
    }
}

impl From<LoadError> for Fail {
    fn from(e: LoadError) -> Fail {
        match e {
            LoadError::Store(s) => s.into(),
            LoadError::NoConfiguration { .. } => Fail(404, e.to_string()),
            LoadError::BadColumn(_) | LoadError::Baseline(_) | LoadError::NoColumns => {
                Fail(400, e.to_string())
            }
            other => Fail(500, other.to_string()),
        }
    }
}
