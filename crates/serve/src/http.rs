//! The interface between the HTTP server ([`crate::server`], hyper) and
//! the page handlers: a [`Request`] as the pages read it (the path and
//! query decoded, header names in lower case) and the [`Response`] they
//! answer with. hyper parses the request line, the headers and the
//! framing; this module decodes the URL (percent-escapes, UTF-8) and
//! turns a malformed one into a 400, never a panic.

/// A parsed request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// `GET` or `HEAD`.
    pub method: String,
    /// The decoded path, without the query.
    pub path: String,
    /// The decoded query pairs, in order (a key may repeat).
    pub query: Vec<(String, String)>,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// The first value of query key `k`.
    pub fn param(&self, k: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of query key `k`.
    pub fn params(&self, k: &str) -> Vec<&str> {
        self.query
            .iter()
            .filter(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The first header named `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of cookie `name`, if sent.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == "cookie")
            .flat_map(|(_, v)| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }
}

/// An answer.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// Further headers.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A page.
    pub fn html(body: String) -> Response {
        Response {
            status: 200,
            content_type: "text/html; charset=utf-8",
            headers: Vec::new(),
            body: body.into_bytes(),
        }
    }

    /// A JSON document.
    pub fn json(body: String) -> Response {
        Response {
            status: 200,
            content_type: "application/json",
            headers: Vec::new(),
            body: body.into_bytes(),
        }
    }

    /// A file to save as `name`.
    pub fn download(content_type: &'static str, name: &str, body: String) -> Response {
        Response {
            status: 200,
            content_type,
            headers: vec![(
                "Content-Disposition".into(),
                format!("attachment; filename=\"{name}\""),
            )],
            body: body.into_bytes(),
        }
    }

    /// An error in plain text: `status` and what went wrong.
    pub fn error(status: u16, message: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            headers: Vec::new(),
            body: format!("{} {}: {message}\n", status, reason(status)).into_bytes(),
        }
    }
}

/// The reason phrase of the statuses this server sends.
pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        403 => "Forbidden",
        405 => "Method Not Allowed",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        500 => "Internal Server Error",
        _ => "Error",
    }
}

/// Why a request could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BadRequest {
    /// The head is not HTTP/1.x.
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    /// A percent escape or the UTF-8 behind it is invalid.
    #[error("bad percent-encoding in the URL")]
    Encoding,
}

impl BadRequest {
    /// The status to answer with.
    pub fn status(&self) -> u16 {
        400
    }
}

/// The request as the pages see it, from what hyper parsed: `target` is
/// the request target (`/path?query`), `headers` the header names and
/// values (names in any case; values that are not UTF-8 are a 400).
pub fn request_from_parts<'a>(
    method: &str,
    target: &str,
    headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<Request, BadRequest> {
    if !target.starts_with('/') {
        return Err(BadRequest::Malformed("the target must be a path"));
    }
    let (raw_path, raw_query) = target.split_once('?').unwrap_or((target, ""));
    let path = decode(raw_path, false)?;
    let query = parse_query(raw_query)?;
    let mut out = Vec::new();
    for (k, v) in headers {
        let v = std::str::from_utf8(v)
            .map_err(|_| BadRequest::Malformed("a header value is not UTF-8"))?;
        out.push((k.to_ascii_lowercase(), v.trim().to_string()));
    }
    Ok(Request {
        method: method.to_string(),
        path,
        query,
        headers: out,
    })
}

/// Parses `a=1&b=x%20y`.
pub fn parse_query(q: &str) -> Result<Vec<(String, String)>, BadRequest> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Ok((decode(k, true)?, decode(v, true)?))
        })
        .collect()
}

/// Percent-decodes `s` (and `+` as a space in a query).
pub fn decode(s: &str, plus_is_space: bool) -> Result<String, BadRequest> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = b.get(i + 1..i + 3).ok_or(BadRequest::Encoding)?;
                let hex = std::str::from_utf8(hex).map_err(|_| BadRequest::Encoding)?;
                out.push(u8::from_str_radix(hex, 16).map_err(|_| BadRequest::Encoding)?);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| BadRequest::Encoding)
}

/// Percent-encodes `s` for a query value.
pub fn encode(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~:".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(target: &str, headers: &[(&str, &str)]) -> Result<Request, BadRequest> {
        request_from_parts(
            "GET",
            target,
            headers.iter().map(|(k, v)| (*k, v.as_bytes())),
        )
    }

    #[test]
    fn parses_path_query_headers_and_cookies() {
        let r = head(
            "/compare?c=1%3Aa&c=1:b+x&base=",
            &[("Host", "x"), ("Cookie", "a=1; benchlab_token=t0k")],
        )
        .unwrap();
        assert_eq!(r.path, "/compare");
        assert_eq!(r.params("c"), ["1:a", "1:b x"]);
        assert_eq!(r.param("base"), Some(""));
        assert_eq!(r.header("host"), Some("x"));
        assert_eq!(r.cookie("benchlab_token"), Some("t0k"));
        assert_eq!(r.cookie("nope"), None);
    }

    #[test]
    fn rejects_bad_urls() {
        for bad in ["http://x/", "*", "/%zz", "/%ff", "/%4", "/?a=%e2%82"] {
            assert!(head(bad, &[]).is_err(), "{bad:?}");
        }
        assert!(request_from_parts("GET", "/", [("x", &b"\xff"[..])]).is_err());
    }

    #[test]
    fn encode_round_trips() {
        for s in ["1:base", "a b&c=d/é", "%+"] {
            assert_eq!(decode(&encode(s), true).unwrap(), s);
        }
    }
}
