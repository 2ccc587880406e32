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

/// Masks the value of every `password=VALUE` (case-insensitive key,
/// `sslpassword` too; the value up to '&', white space, a quote or the
/// end). libpq's connection strings also allow spaces around `=` and a
/// value in single quotes with `\'` and `\\` escapes: masked to the
/// closing quote.
fn mask_password_params(text: &str) -> String {
    const KEY: &str = "password";
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(i) = lower[at..].find(KEY) {
        let start = at + i;
        let key_end = start + KEY.len();
        // A key of its own: `password=` or `sslpassword=`, not
        // `my_password=`.
        let own = start == 0
            || !bytes[start - 1].is_ascii_alphanumeric() && bytes[start - 1] != b'_'
            || lower[..start].ends_with("ssl")
                && (start == 3
                    || !bytes[start - 4].is_ascii_alphanumeric() && bytes[start - 4] != b'_');
        let after_key = &text[key_end..];
        let eq = after_key.len() - after_key.trim_start_matches(' ').len();
        if !own || !after_key[eq..].starts_with('=') {
            out.push_str(&text[at..key_end]);
            at = key_end;
            continue;
        }
        let after_eq = key_end + eq + 1;
        let value_start =
            after_eq + (text[after_eq..].len() - text[after_eq..].trim_start_matches(' ').len());
        out.push_str(&text[at..value_start]);
        let rest = &text[value_start..];
        let value_end = if rest.starts_with('\'') {
            quoted_end(rest).map_or(text.len(), |j| value_start + j)
        } else {
            rest.find(|c: char| c == '&' || c.is_whitespace() || matches!(c, '\'' | '"' | '`'))
                .map_or(text.len(), |j| value_start + j)
        };
        if value_end > value_start {
            out.push_str(MASK);
        }
        at = value_end;
    }
    out.push_str(&text[at..]);
    out
}

/// The end of a single-quoted libpq value that `s` begins with: just past
/// the closing quote, `\'` and `\\` being escapes.
fn quoted_end(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'\'' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
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
            (
                "host=h password='a b\\' c' dbname=d",
                "host=h password=*** dbname=d",
            ),
            (
                "host=h password = 'x y' dbname=d",
                "host=h password = *** dbname=d",
            ),
            ("sslpassword=x host=h", "sslpassword=*** host=h"),
            ("notsslpassword=x", "notsslpassword=x"),
            ("the password is wrong", "the password is wrong"),
            ("password = 'unterminated", "password = ***"),
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
