//! The relay inside a sandbox with a network namespace of its own (`handoff __net-relay …`,
//! the handoff binary re-executing itself as the sandbox's first program).
//!
//! The namespace has a loopback interface and nothing else. The relay listens there, starts
//! the CLI, and carries each connection to the run's proxy socket (a Unix socket by path, the
//! one way out of the namespace), where handoff's [`super::proxy`] decides where it may go. It
//! exits with the CLI's status once the CLI has ended. It listens in one of two ways:
//!
//! - as the proxy, on `127.0.0.1:3128`, which the CLI's proxy variables name: each connection
//!   is passed on as it is (`CONNECT`, or a plain-HTTP request in absolute form);
//! - as each endpoint, for a CLI that ignores proxy variables: on an address of the endpoint's
//!   own (its loopback literal, or one the sandbox's `/etc/hosts` gives its name), each
//!   connection opened with a `CONNECT` to that endpoint.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::process::Command;

/// The first argument that turns the handoff binary into the relay.
pub const RELAY_ARG: &str = "__net-relay";

/// The port the relay listens on as the proxy: the namespace is new, so it is free.
pub const RELAY_PORT: u16 = 3128;

/// One address the relay listens on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listen {
    /// Where, inside the namespace.
    pub addr: SocketAddr,
    /// The endpoint (`host:port`) each connection is a tunnel to; `None`: the proxy itself.
    pub endpoint: Option<String>,
}

/// The relay's command line after [`RELAY_ARG`]: `<proxy socket> [--proxy <addr>]
/// [--forward <addr>=<host:port>]… -- <program> <args…>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Args {
    pub socket: OsString,
    pub listen: Vec<Listen>,
    pub program: OsString,
    pub args: Vec<OsString>,
}

/// The command line that runs a program under the relay: `<exe> __net-relay <socket>
/// <listeners> --`, then the program and its arguments.
pub(crate) fn prefix(
    exe: &camino::Utf8Path,
    socket: &camino::Utf8Path,
    listen: &[Listen],
) -> Vec<String> {
    let mut out = vec![exe.to_string(), RELAY_ARG.into(), socket.to_string()];
    for l in listen {
        match &l.endpoint {
            None => out.extend(["--proxy".into(), l.addr.to_string()]),
            Some(e) => out.extend(["--forward".into(), format!("{}={e}", l.addr)]),
        }
    }
    out.push("--".into());
    out
}

impl Args {
    fn parse(mut it: impl Iterator<Item = OsString>) -> Result<Args, String> {
        let socket = it.next().ok_or("expected the proxy socket")?;
        let mut listen = Vec::new();
        loop {
            let word = it
                .next()
                .ok_or("expected `--` before the program")?
                .into_string()
                .map_err(|_| "an option is not UTF-8")?;
            let mut value = || {
                it.next()
                    .and_then(|v| v.into_string().ok())
                    .ok_or(format!("expected a value after {word}"))
            };
            match word.as_str() {
                "--proxy" => {
                    let v = value()?;
                    let addr = v.parse().map_err(|_| format!("bad address {v:?}"))?;
                    listen.push(Listen {
                        addr,
                        endpoint: None,
                    });
                }
                "--forward" => {
                    let v = value()?;
                    let (addr, endpoint) = v
                        .split_once('=')
                        .ok_or(format!("expected <addr>=<host:port>, not {v:?}"))?;
                    let addr = addr.parse().map_err(|_| format!("bad address {addr:?}"))?;
                    listen.push(Listen {
                        addr,
                        endpoint: Some(endpoint.to_owned()),
                    });
                }
                "--" => break,
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        if listen.is_empty() {
            return Err("nothing to listen on".into());
        }
        let program = it.next().ok_or("expected the program after `--`")?;
        Ok(Args {
            socket,
            listen,
            program,
            args: it.collect(),
        })
    }
}

/// Runs the relay when this process was started as one (`<exe> __net-relay …`) and exits with
/// the CLI's status; returns at once otherwise. [`crate::reaper::main_if_reaper`] calls it.
pub(crate) fn main_if_relay(first: &OsStr, rest: impl Iterator<Item = OsString>) {
    if first != OsStr::new(RELAY_ARG) {
        return;
    }
    let code = match Args::parse(rest) {
        Ok(args) => run(&args),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "handoff {RELAY_ARG}: {e}");
            125
        }
    };
    std::process::exit(code);
}

fn run(args: &Args) -> i32 {
    let mut listeners = Vec::new();
    for l in &args.listen {
        match TcpListener::bind(l.addr) {
            Ok(t) => listeners.push((t, l.endpoint.clone())),
            Err(e) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "handoff {RELAY_ARG}: cannot listen on {}: {e}",
                    l.addr
                );
                return 125;
            }
        }
    }
    // A stop signal is for the CLI (the reaper signals every process of the run): the relay
    // outlives it only to report its status. The signals are caught (and never read), not
    // ignored, so the CLI starts with default handlers.
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return 125;
    };
    let _guard = rt.enter();
    let _caught: Vec<_> = [
        tokio::signal::unix::SignalKind::terminate(),
        tokio::signal::unix::SignalKind::interrupt(),
        tokio::signal::unix::SignalKind::hangup(),
    ]
    .into_iter()
    .filter_map(|k| tokio::signal::unix::signal(k).ok())
    .collect();
    let mut child = match Command::new(&args.program).args(&args.args).spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "handoff {RELAY_ARG}: cannot start {}: {e}",
                args.program.to_string_lossy()
            );
            return 127;
        }
    };
    for (listener, endpoint) in listeners {
        let socket = std::path::PathBuf::from(&args.socket);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let socket = socket.clone();
                let endpoint = endpoint.clone();
                std::thread::spawn(move || {
                    let Ok(mut out) = UnixStream::connect(&socket) else {
                        return;
                    };
                    if let Some(endpoint) = &endpoint
                        && !open_tunnel(&mut out, endpoint)
                    {
                        return;
                    }
                    splice(conn, out);
                });
            }
        });
    }
    match child.wait() {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            status
                .code()
                .or_else(|| status.signal().map(|s| 128 + s))
                .unwrap_or(1)
        }
        Err(_) => 1,
    }
}

/// Asks the proxy for a tunnel to `endpoint`; whether it opened one.
fn open_tunnel(proxy: &mut UnixStream, endpoint: &str) -> bool {
    let request = format!("CONNECT {endpoint} HTTP/1.1\r\nHost: {endpoint}\r\n\r\n");
    if proxy.write_all(request.as_bytes()).is_err() {
        return false;
    }
    // The reply's head, byte by byte: nothing after it may be consumed.
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 || !matches!(proxy.read(&mut b), Ok(1)) {
            return false;
        }
        head.push(b[0]);
    }
    head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200")
}

/// Copies both ways until both sides are done, passing each end-of-stream on.
fn splice(tcp: TcpStream, unix: UnixStream) {
    let (Ok(tcp2), Ok(unix2)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        copy(&tcp, &unix);
        let _ = unix.shutdown(Shutdown::Write);
    });
    copy(&unix2, &tcp2);
    let _ = tcp2.shutdown(Shutdown::Write);
    let _ = up.join();
}

fn copy(mut from: impl Read, mut to: impl Write) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_round_trips() {
        let listen = vec![
            Listen {
                addr: "127.0.0.1:3128".parse().unwrap(),
                endpoint: None,
            },
            Listen {
                addr: "127.0.0.2:443".parse().unwrap(),
                endpoint: Some("api.x.ai:443".into()),
            },
        ];
        let mut line = prefix("/h/handoff".into(), "/run/x/net/proxy.sock".into(), &listen);
        line.extend(["/usr/bin/opencode", "run", "--", "a b"].map(String::from));
        let mut it = line.into_iter().map(OsString::from);
        assert_eq!(it.next().as_deref(), Some(OsStr::new("/h/handoff")));
        assert_eq!(it.next().as_deref(), Some(OsStr::new(RELAY_ARG)));
        assert_eq!(
            Args::parse(it).unwrap(),
            Args {
                socket: "/run/x/net/proxy.sock".into(),
                listen,
                program: "/usr/bin/opencode".into(),
                args: vec!["run".into(), "--".into(), "a b".into()],
            }
        );
    }

    #[test]
    fn a_malformed_command_line_is_refused() {
        for bad in [
            vec![],
            vec!["/s"],
            vec!["/s", "--", "p"],
            vec!["/s", "--proxy", "x", "--", "p"],
            vec!["/s", "--forward", "127.0.0.1:1", "--", "p"],
            vec!["/s", "--proxy", "127.0.0.1:1", "p"],
            vec!["/s", "--proxy", "127.0.0.1:1", "--"],
            vec!["/s", "--other", "--", "p"],
        ] {
            let it = bad.into_iter().map(OsString::from);
            assert!(Args::parse(it).is_err());
        }
    }
}
