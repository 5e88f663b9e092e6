//! A minimal HTTP/1.0 GET (or POST without a body) over a plain TcpStream: enough to scrape
//! `schedlat serve` and to query Prometheus' API without an HTTP client
//! dependency. HTTP/1.0 makes both servers close the connection after the
//! response and send no chunked encoding, so the body is "the rest".

use std::{
    io::{self, Read, Write},
    net::{SocketAddr, TcpStream},
    time::Duration,
};

#[derive(Debug)]
pub(crate) struct Response {
    pub status: u16,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// The body as sent (a protobuf exposition is not UTF-8).
    pub bytes: Vec<u8>,
}

impl Response {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `GET target` (path and query) from `addr`, with an optional Accept.
pub(crate) fn get(addr: SocketAddr, target: &str, accept: Option<&str>) -> io::Result<Response> {
    let accept: Vec<_> = accept.map(|a| ("Accept", a)).into_iter().collect();
    request(addr, "GET", target, &accept)
}

/// `GET target` with these request headers (e.g. Accept-Encoding).
pub(crate) fn get_with(
    addr: SocketAddr,
    target: &str,
    headers: &[(&str, &str)],
) -> io::Result<Response> {
    request(addr, "GET", target, headers)
}

/// `POST target` with an empty body.
pub(crate) fn post(addr: SocketAddr, target: &str) -> io::Result<Response> {
    request(addr, "POST", target, &[])
}

fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
) -> io::Result<Response> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut request = format!("{method} {target} HTTP/1.0\r\nHost: {addr}\r\n");
    if method == "POST" {
        request.push_str("Content-Length: 0\r\n");
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let bad = || {
        let text = String::from_utf8_lossy(&raw);
        io::Error::new(io::ErrorKind::InvalidData, format!("not HTTP: {text:?}"))
    };
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(bad)?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let bytes = raw[end + 4..].to_vec();
    let body = String::from_utf8_lossy(&bytes).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(Response {
        status,
        headers,
        body,
        bytes,
    })
}

/// Percent-encodes a query parameter value (everything but unreserved).
pub(crate) fn encode_query_value(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// True when nothing accepts connections on `addr` any more.
pub(crate) fn nothing_listens(addr: SocketAddr) -> bool {
    TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err()
}
