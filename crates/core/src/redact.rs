//! The one redaction function: what every message, log line, report and
//! page runs its text through before it leaves benchlab, wherever the
//! text may name a store, a service or a host.
//!
//! Two kinds of secret are masked. Those benchlab can recognise by their
//! shape: the password of a URL's user part (`scheme://user:PASSWORD@host`)
//! and the value of a `password=` parameter (a PostgreSQL URL's query, a
//! libpq connection string). And those it knows by value: a service's
//! passwords, the agents' key, serve's token, handed to [`redact_known`].
//! A secret is replaced, never shortened: the message keeps its shape, and
//! the user can see that something was there.

/// What a masked secret reads as.
pub const MASK: &str = "***";

/// `text` with every password it holds in a recognisable shape masked:
/// URL user-part passwords and `password=` values.
pub fn redact(text: &str) -> String {
    mask_password_params(&mask_url_passwords(text))
}

/// `text` redacted as [`redact`] does, and every occurrence of each of
/// `secrets` (values benchlab knows to be secret) masked as well. Empty
/// secrets are ignored.
pub fn redact_known<S: AsRef<str>>(text: &str, secrets: &[S]) -> String {
    let mut out = redact(text);
    for s in secrets.iter().map(AsRef::as_ref).filter(|s| !s.is_empty()) {
        if out.contains(s) {
            out = out.replace(s, MASK);
        }
    }
    out
}

/// True for the bytes a URL scheme is made of (RFC 3986 §3.1).
fn is_scheme_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')
}

/// Masks `PASSWORD` in every `scheme://user:PASSWORD@` of `text`.
fn mask_url_passwords(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let scheme_ok = head[..i].bytes().next_back().is_some_and(is_scheme_byte);
        // The authority ends at the first '/', '?', '#' or white space; a
        // password holds '@' only percent-encoded, so the last '@' before
        // that end closes the user part.
        let auth_end = tail
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace() || c == '`')
            .unwrap_or(tail.len());
        let auth = &tail[..auth_end];
        match (scheme_ok, auth.rfind('@')) {
            (true, Some(at)) => {
                let user = &auth[..at];
                match user.split_once(':') {
                    Some((name, _)) => {
                        out.push_str(name);
                        out.push(':');
                        out.push_str(MASK);
                    }
                    None => out.push_str(user),
                }
                out.push_str(&auth[at..]);
                rest = &tail[auth_end..];
            }
            _ => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// Masks the value of every `password=VALUE` (case-insensitive key, the
/// value up to '&', white space, a quote or the end).
fn mask_password_params(text: &str) -> String {
    const KEY: &str = "password=";
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(i) = lower[at..].find(KEY) {
        let start = at + i;
        // A key of its own: `password=`, not `my_password=`.
        let own = start == 0
            || !text.as_bytes()[start - 1].is_ascii_alphanumeric()
                && text.as_bytes()[start - 1] != b'_';
        let value_start = start + KEY.len();
        out.push_str(&text[at..value_start]);
        let value_end = text[value_start..]
            .find(|c: char| c == '&' || c.is_whitespace() || matches!(c, '\'' | '"' | '`'))
            .map_or(text.len(), |j| value_start + j);
        if own && value_end > value_start {
            out.push_str(MASK);
        } else {
            out.push_str(&text[value_start..value_end]);
        }
        at = value_end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_passwords_are_masked_anywhere_in_a_message() {
        for (text, shown) in [
            (
                "postgres://lab:s3cret@db.lab:5432/bench",
                "postgres://lab:***@db.lab:5432/bench",
            ),
            (
                "cannot open the store postgresql://lab:p%40ss@h/b?sslmode=disable: refused",
                "cannot open the store postgresql://lab:***@h/b?sslmode=disable: refused",
            ),
            (
                "postgres://lab@h/b?password=s3cret&application_name=x",
                "postgres://lab@h/b?password=***&application_name=x",
            ),
            (
                "two: amqp://u:pw1@h/ and `http://a:pw2@b`",
                "two: amqp://u:***@h/ and `http://a:***@b`",
            ),
            (
                "postgres:///b?host=/run/pg&user=lab",
                "postgres:///b?host=/run/pg&user=lab",
            ),
            ("host=h password=x dbname=d", "host=h password=*** dbname=d"),
            ("PASSWORD=x", "PASSWORD=***"),
            ("my_password=x stays", "my_password=x stays"),
            ("no secret: a://b and c@d", "no secret: a://b and c@d"),
            ("", ""),
        ] {
            assert_eq!(redact(text), shown, "{text}");
        }
    }

    #[test]
    fn known_secrets_are_masked_by_value() {
        assert_eq!(
            redact_known("pw=hunter2 ok, key hunter3", &["hunter2", "", "hunter3"]),
            "pw=*** ok, key ***"
        );
    }

    #[test]
    fn redaction_never_panics_on_odd_text() {
        for text in [
            "://",
            "a://",
            "://@",
            "é://ü:ß@x",
            "password=",
            "x password=é&",
        ] {
            let _ = redact(text);
        }
    }
}
