//! The little HTTP/1.1 this server needs: one request per connection
//! (`Connection: close`), GET and HEAD only, bounded header size, no
//! bodies. Everything a client sends is checked here, and a malformed
//! request gets a 400, never a panic.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The largest request head read (request line and headers), bytes.
const MAX_HEAD: usize = 16 * 1024;

/// How long a client may take to send its request head or read the
/// answer: a stalled client holds one thread, not the server.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

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

    /// Writes the response (the body left out for HEAD).
    pub fn write_to(&self, w: &mut impl Write, head_only: bool) -> std::io::Result<()> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nContent-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; form-action 'self'\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        for (k, v) in &self.headers {
            head.push_str(k);
            head.push_str(": ");
            head.push_str(v);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        w.write_all(head.as_bytes())?;
        if !head_only {
            w.write_all(&self.body)?;
        }
        w.flush()
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
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
    /// The head is larger than [`MAX_HEAD`].
    #[error("request head larger than {MAX_HEAD} bytes")]
    TooLarge,
    /// A percent escape or the UTF-8 behind it is invalid.
    #[error("bad percent-encoding in the URL")]
    Encoding,
}

impl BadRequest {
    /// The status to answer with.
    pub fn status(&self) -> u16 {
        match self {
            BadRequest::TooLarge => 431,
            _ => 400,
        }
    }
}

/// Reads one request head from `stream`. `Ok(None)`: the client closed
/// the connection without sending anything.
pub fn read_request(stream: &TcpStream) -> std::io::Result<Option<Result<Request, BadRequest>>> {
    let mut reader = BufReader::new(stream.take(MAX_HEAD as u64 + 1));
    let mut lines = Vec::new();
    let mut total = 0;
    loop {
        let mut line = Vec::new();
        let n = reader.read_until(b'\n', &mut line)?;
        total += n;
        if total > MAX_HEAD {
            return Ok(Some(Err(BadRequest::TooLarge)));
        }
        if n == 0 {
            if lines.is_empty() {
                return Ok(None);
            }
            return Ok(Some(Err(BadRequest::Malformed("the head ended early"))));
        }
        let Ok(text) = String::from_utf8(line) else {
            return Ok(Some(Err(BadRequest::Malformed("the head is not UTF-8"))));
        };
        let text = text.trim_end_matches(['\r', '\n']).to_string();
        if text.is_empty() {
            break;
        }
        lines.push(text);
    }
    Ok(Some(parse_head(&lines)))
}

/// Parses the request line and headers.
pub fn parse_head(lines: &[String]) -> Result<Request, BadRequest> {
    let first = lines
        .first()
        .ok_or(BadRequest::Malformed("no request line"))?;
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BadRequest::Malformed(
            "the request line is not `METHOD TARGET VERSION`",
        ));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(BadRequest::Malformed("only HTTP/1.x is spoken"));
    }
    if !target.starts_with('/') {
        return Err(BadRequest::Malformed("the target must be a path"));
    }
    let (raw_path, raw_query) = target.split_once('?').unwrap_or((target, ""));
    let path = decode(raw_path, false)?;
    let query = parse_query(raw_query)?;
    let mut headers = Vec::new();
    for l in &lines[1..] {
        let (k, v) = l
            .split_once(':')
            .ok_or(BadRequest::Malformed("a header line without `:`"))?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    Ok(Request {
        method: method.to_string(),
        path,
        query,
        headers,
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

    fn head(s: &str) -> Result<Request, BadRequest> {
        parse_head(&s.lines().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn parses_path_query_headers_and_cookies() {
        let r = head(
            "GET /compare?c=1%3Aa&c=1:b+x&base= HTTP/1.1\nHost: x\nCookie: a=1; benchlab_token=t0k",
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
    fn rejects_bad_heads() {
        for bad in [
            "",
            "GET",
            "GET / HTTP/1.1 extra",
            "GET http://x/ HTTP/1.1",
            "GET / HTTP/2",
            "GET /%zz HTTP/1.1",
            "GET /%ff HTTP/1.1",
            "GET /%4 HTTP/1.1",
            "GET /?a=%e2%82 HTTP/1.1",
            "GET / HTTP/1.1\nno colon",
        ] {
            assert!(head(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn encode_round_trips() {
        for s in ["1:base", "a b&c=d/é", "%+"] {
            assert_eq!(decode(&encode(s), true).unwrap(), s);
        }
    }
}
