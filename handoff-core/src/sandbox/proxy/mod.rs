//! The filtering proxy of a sandbox with a network namespace of its own: handoff serves it on
//! a Unix socket in the run directory, which the [`super::relay`] inside the namespace
//! connects to. It speaks enough HTTP/1.1 proxying for a CLI that honours `HTTPS_PROXY` and
//! `HTTP_PROXY`: `CONNECT host:port` (TLS tunnels) and absolute-form requests
//! (`POST http://host:port/path`, for a plain-HTTP endpoint such as a local gateway). Each is
//! allowed only to the endpoints of the run's [`NetworkSpec`]; when public hosts are allowed
//! too (web tools granted), a host that resolves to a loopback, private or link-local address
//! (the cloud metadata service included) is refused unless it is a listed endpoint.
//! Everything reached and refused is counted for the receipt.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use camino::Utf8Path;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};

/// The largest request head the proxy reads.
const MAX_HEAD: usize = 64 * 1024;

/// How long a request head may take to arrive.
const HEAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Connections served at once: more wait for one to end, so that a run cannot exhaust
/// handoff's descriptors.
const MAX_CONNECTIONS: usize = 64;

/// A host (or `*.domain`, any name below it) and port the CLI may reach.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    /// The host name or address, lower case; `*.example.com` matches every name below
    /// `example.com`.
    pub host: String,
    /// The port.
    pub port: u16,
    /// Why the run may reach it (for the receipt).
    pub why: String,
}

impl Endpoint {
    /// An endpoint named by a URL (`https://host[:port]/…`; the scheme's port by default).
    pub fn from_url(url: &str, why: &str) -> Option<Endpoint> {
        let (scheme, rest) = url.split_once("://")?;
        let default = match scheme.to_ascii_lowercase().as_str() {
            "https" | "wss" => 443,
            "http" | "ws" => 80,
            _ => return None,
        };
        let authority = rest.split(['/', '?', '#']).next()?;
        let authority = authority.rsplit('@').next()?;
        let (host, port) = split_authority(authority, default)?;
        Some(Endpoint {
            host,
            port,
            why: why.into(),
        })
    }

    /// `host:port`, as the receipt names it.
    pub fn label(&self) -> String {
        label(&self.host, self.port)
    }

    fn matches(&self, host: &str, port: u16) -> bool {
        port == self.port
            && match self.host.strip_prefix("*.") {
                Some(domain) => host
                    .strip_suffix(domain)
                    .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
                None => host == self.host,
            }
    }
}

/// What the CLI of a sandbox with its own network namespace may reach
/// ([`super::SandboxSpec::network`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkSpec {
    /// The endpoints it may reach: its model provider's, and its own service's.
    pub endpoints: Vec<Endpoint>,
    /// Why any public host is allowed as well (web tools granted), if it is.
    pub public_hosts: Option<String>,
    /// The CLI ignores proxy variables: each endpoint is reached at an address of its own in
    /// the namespace (its loopback literal, or one the sandbox's `/etc/hosts` gives its name),
    /// which the relay tunnels through the proxy. A wildcard endpoint, another address literal
    /// and public hosts are then out of reach.
    pub transparent: bool,
}

/// A proxy of the user's, which the filtering proxy goes through (an `http://` one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    host: String,
    port: u16,
    /// `Proxy-Authorization` value, when the URL carries credentials.
    authorization: Option<String>,
}

impl Upstream {
    /// `host:port`, as the receipt names it (never its credentials).
    pub fn label(&self) -> String {
        label(&self.host, self.port)
    }

    /// The user's proxy from an `HTTPS_PROXY`-style URL (`http://[user:pass@]host[:port]`);
    /// `None` for anything else.
    pub fn from_url(url: &str) -> Option<Upstream> {
        let url = url.trim();
        let rest = url
            .strip_prefix("http://")
            .or_else(|| (!url.contains("://")).then_some(url))?;
        let authority = rest.split('/').next()?;
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (host, port) = split_authority(hostport, 80)?;
        let authorization = userinfo.map(|u| format!("Basic {}", base64(&percent_decode(u))));
        Some(Upstream {
            host,
            port,
            authorization,
        })
    }
}

/// Standard base64 with padding (for a `Basic` credential).
fn base64(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Splits `host[:port]` (`[v6]:port` too), lower-casing the host and dropping a final dot.
fn split_authority(authority: &str, default: u16) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None if after.is_empty() => default,
            None => return None,
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse().ok()?),
            None => (authority, default),
        }
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let valid = !host.is_empty()
        && host
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_' | b':'));
    (valid && port != 0).then_some((host, port))
}

fn label(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Whether an address is one a public host has (not loopback, private, link-local, shared,
/// multicast or unspecified).
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || (o[0] == 198 && (o[1] & 0xfe) == 18)
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80)
        }
    }
}

/// What the proxy did, for the receipt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Connections made, per `host:port`.
    pub reached: BTreeMap<String, u32>,
    /// Connections refused, per `host:port` (or the malformed request's first word).
    pub refused: BTreeMap<String, u32>,
}

impl Traffic {
    /// The receipt's `traffic`.
    pub fn receipt(&self) -> serde_json::Value {
        json!({ "reached": self.reached, "refused": self.refused })
    }
}

/// The policy one proxy enforces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// What may be reached.
    pub network: NetworkSpec,
    /// The user's own proxy, which every allowed connection goes through.
    pub upstream: Option<Upstream>,
}

enum Decision {
    /// A listed endpoint.
    Endpoint,
    /// A public host (resolved here unless an upstream proxy resolves it).
    Public,
    Refused(&'static str),
}

impl Policy {
    fn decide(&self, host: &str, port: u16) -> Decision {
        if self.network.endpoints.iter().any(|e| e.matches(host, port)) {
            return Decision::Endpoint;
        }
        if self.network.public_hosts.is_none() {
            return Decision::Refused("not an endpoint this run may reach");
        }
        if host == "localhost" || host.ends_with(".localhost") {
            return Decision::Refused("not a public host");
        }
        if let Ok(ip) = host.parse::<IpAddr>()
            && !is_public(ip)
        {
            return Decision::Refused("not a public address");
        }
        Decision::Public
    }
}

/// A running proxy: stopped (and its traffic read) with [`Proxy::stop`].
pub struct Proxy {
    accept: tokio::task::JoinHandle<()>,
    traffic: Arc<Mutex<Traffic>>,
}

impl Proxy {
    /// Listens on `socket` (a new path; its directory should be private) and serves each
    /// connection under `policy`. Needs a Tokio runtime.
    pub fn start(socket: &Utf8Path, policy: Policy) -> std::io::Result<Proxy> {
        let listener = UnixListener::bind(socket.as_std_path())?;
        let traffic = Arc::new(Mutex::new(Traffic::default()));
        let policy = Arc::new(policy);
        let counts = Arc::clone(&traffic);
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        let accept = tokio::spawn(async move {
            loop {
                let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                    return;
                };
                let Ok((conn, _)) = listener.accept().await else {
                    return;
                };
                let policy = Arc::clone(&policy);
                let counts = Arc::clone(&counts);
                tokio::spawn(async move {
                    let _slot = slot;
                    serve(conn, &policy, &counts).await;
                });
            }
        });
        Ok(Proxy { accept, traffic })
    }

    /// Stops accepting and returns what was reached and refused.
    pub fn stop(self) -> Traffic {
        self.accept.abort();
        self.traffic
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// A parsed request head.
struct Head {
    connect: bool,
    host: String,
    port: u16,
    /// For an absolute-form request, the head to send on (origin-form, `Connection: close`).
    forward: Vec<u8>,
    /// For an upstream proxy: the original head, proxy headers dropped.
    absolute: Vec<u8>,
    /// Bytes read past the head (the start of a body, or of a TLS handshake).
    rest: Vec<u8>,
}

async fn read_head(conn: &mut UnixStream) -> Result<(Vec<u8>, Vec<u8>), &'static str> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err("request head too large");
        }
        let n = conn.read(&mut chunk).await.map_err(|_| "connection lost")?;
        if n == 0 {
            return Err("connection closed before a request");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn parse_head(head: &[u8], rest: Vec<u8>) -> Result<Head, &'static str> {
    let text = std::str::from_utf8(head).map_err(|_| "request head is not UTF-8")?;
    let mut lines = text.split("\r\n");
    let request = lines.next().ok_or("empty request")?;
    let mut words = request.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err("malformed request line");
    };
    if !version.starts_with("HTTP/1.") {
        return Err("not HTTP/1");
    }
    let headers: Vec<&str> = lines
        .filter(|l| !l.is_empty())
        .filter(|l| {
            let name = l
                .split(':')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            !matches!(
                name.as_str(),
                "proxy-connection" | "proxy-authorization" | "connection" | "keep-alive"
            )
        })
        .collect();
    if method == "CONNECT" {
        let (host, port) = split_authority(target, 0).ok_or("bad CONNECT target")?;
        return Ok(Head {
            connect: true,
            host,
            port,
            forward: Vec::new(),
            absolute: Vec::new(),
            rest,
        });
    }
    let after = target
        .strip_prefix("http://")
        .ok_or("only CONNECT and absolute http:// requests are proxied")?;
    let (authority, path) = match after.find(['/', '?']) {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    if authority.contains('@') {
        return Err("credentials in a proxied URL");
    }
    let (host, port) = split_authority(authority, 80).ok_or("bad request target")?;
    let mut forward = format!("{method} {path} {version}\r\n");
    let mut absolute = format!("{method} {target} {version}\r\n");
    for h in &headers {
        forward.push_str(h);
        forward.push_str("\r\n");
        absolute.push_str(h);
        absolute.push_str("\r\n");
    }
    forward.push_str("Connection: close\r\n\r\n");
    absolute.push_str("Connection: close\r\n");
    Ok(Head {
        connect: false,
        host,
        port,
        forward: forward.into_bytes(),
        absolute: absolute.into_bytes(),
        rest,
    })
}

async fn refuse(conn: &mut UnixStream, status: &str, why: &str) {
    let body = format!("handoff's sandbox: {why}\n");
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(reply.as_bytes()).await;
    let _ = conn.shutdown().await;
}

/// Serves one connection; returns the key it is counted under and whether it went through.
/// Counts a connection as reached or refused, as soon as that is decided: a connection still
/// open when the proxy stops (its agent killed, the run over) is counted all the same.
fn note(counts: &Mutex<Traffic>, key: String, reached: bool) {
    let mut t = counts.lock().unwrap_or_else(|e| e.into_inner());
    let map = if reached {
        &mut t.reached
    } else {
        &mut t.refused
    };
    *map.entry(key).or_default() += 1;
}

async fn serve(mut conn: UnixStream, policy: &Policy, counts: &Mutex<Traffic>) {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut conn)).await {
        Ok(Ok((head, rest))) => parse_head(&head, rest),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("no request in time"),
    };
    let head = match head {
        Ok(h) => h,
        Err(why) => {
            note(counts, "(malformed request)".into(), false);
            refuse(&mut conn, "400 Bad Request", why).await;
            return;
        }
    };
    let key = label(&head.host, head.port);
    let public = match policy.decide(&head.host, head.port) {
        Decision::Refused(why) => {
            note(counts, key.clone(), false);
            refuse(&mut conn, "403 Forbidden", &format!("{key}: {why}")).await;
            return;
        }
        Decision::Endpoint => false,
        Decision::Public => true,
    };
    let mut upstream = match connect(policy, &head, public).await {
        Ok(s) => s,
        Err(why) => {
            note(counts, key.clone(), false);
            refuse(&mut conn, "502 Bad Gateway", &format!("{key}: {why}")).await;
            return;
        }
    };
    note(counts, key, true);
    let opened = if head.connect {
        conn.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .await
            .is_ok()
    } else {
        true
    };
    if opened && (head.rest.is_empty() || upstream.write_all(&head.rest).await.is_ok()) {
        let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
    }
}

/// Opens the connection a request asked for: directly, or through the user's proxy (then the
/// absolute-form head, or a `CONNECT`, has been sent on already).
async fn connect(policy: &Policy, head: &Head, public: bool) -> Result<TcpStream, String> {
    if let Some(up) = &policy.upstream {
        let mut s = TcpStream::connect((up.host.as_str(), up.port))
            .await
            .map_err(|e| format!("the configured proxy {}: {e}", label(&up.host, up.port)))?;
        let auth = up
            .authorization
            .as_ref()
            .map(|a| format!("Proxy-Authorization: {a}\r\n"))
            .unwrap_or_default();
        if head.connect {
            let target = label(&head.host, head.port);
            let req = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{auth}\r\n");
            s.write_all(req.as_bytes())
                .await
                .map_err(|e| e.to_string())?;
            let reply = read_reply_head(&mut s).await?;
            let ok = reply
                .split(' ')
                .nth(1)
                .is_some_and(|code| code.starts_with('2'));
            if !ok {
                return Err(format!(
                    "the configured proxy answered {}",
                    reply.lines().next().unwrap_or("")
                ));
            }
        } else {
            let mut h = head.absolute.clone();
            h.extend_from_slice(auth.as_bytes());
            h.extend_from_slice(b"\r\n");
            s.write_all(&h).await.map_err(|e| e.to_string())?;
        }
        return Ok(s);
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((head.host.as_str(), head.port))
        .await
        .map_err(|e| format!("cannot resolve: {e}"))?
        .collect();
    // A public host must resolve to public addresses only: a name that points at the
    // loopback or the metadata service is refused, and the addresses checked are the ones
    // connected to.
    if public && addrs.iter().any(|a| !is_public(a.ip())) {
        return Err("resolves to an address that is not public".into());
    }
    let mut s = TcpStream::connect(&addrs[..])
        .await
        .map_err(|e| e.to_string())?;
    if !head.connect {
        s.write_all(&head.forward)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(s)
}

/// Reads a reply head from the user's proxy, byte by byte (nothing past it is consumed).
async fn read_reply_head(s: &mut TcpStream) -> Result<String, String> {
    let mut buf = Vec::new();
    let mut b = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if buf.len() > MAX_HEAD {
            return Err("the configured proxy's reply is too large".into());
        }
        let n = s.read(&mut b).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the configured proxy closed the connection".into());
        }
        buf.push(b[0]);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests;
