//! The relay inside a sandbox with a network namespace of its own (`handoff __net-relay …`,
//! the handoff binary re-executing itself as the sandbox's first program).
//!
//! The namespace has a loopback interface and nothing else. The relay listens on
//! `127.0.0.1:<port>` there, starts the CLI with its proxy variables naming that address, and
//! carries each connection to the run's proxy socket (a Unix socket by path, the one way out
//! of the namespace), where handoff's [`super::proxy`] decides where it may go. It exits
//! with the CLI's status once the CLI has ended.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::process::Command;

/// The first argument that turns the handoff binary into the relay.
pub const RELAY_ARG: &str = "__net-relay";

/// The port the relay listens on inside the namespace: the namespace is new, so it is free.
pub const RELAY_PORT: u16 = 3128;

/// The relay's command line after [`RELAY_ARG`]: `<proxy socket> <port> -- <program> <args…>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Args {
    pub socket: OsString,
    pub port: u16,
    pub program: OsString,
    pub args: Vec<OsString>,
}

/// The command line that runs a program under the relay: `<exe> __net-relay <socket> <port>
/// --`, then the program and its arguments.
pub(crate) fn prefix(exe: &camino::Utf8Path, socket: &camino::Utf8Path) -> Vec<String> {
    vec![
        exe.to_string(),
        RELAY_ARG.into(),
        socket.to_string(),
        RELAY_PORT.to_string(),
        "--".into(),
    ]
}

impl Args {
    fn parse(mut it: impl Iterator<Item = OsString>) -> Result<Args, String> {
        let socket = it.next().ok_or("expected the proxy socket")?;
        let port = it
            .next()
            .and_then(|p| p.into_string().ok())
            .and_then(|p| p.parse().ok())
            .ok_or("expected a port after the proxy socket")?;
        if it.next().as_deref() != Some(OsStr::new("--")) {
            return Err("expected `--` after the port".into());
        }
        let program = it.next().ok_or("expected the program after `--`")?;
        Ok(Args {
            socket,
            port,
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
    let listener = match TcpListener::bind(("127.0.0.1", args.port)) {
        Ok(l) => l,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "handoff {RELAY_ARG}: cannot listen on 127.0.0.1:{}: {e}",
                args.port
            );
            return 125;
        }
    };
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
    let socket = std::path::PathBuf::from(&args.socket);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let socket = socket.clone();
            std::thread::spawn(move || {
                if let Ok(out) = UnixStream::connect(&socket) {
                    splice(conn, out);
                }
            });
        }
    });
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
        let mut line = prefix("/h/handoff".into(), "/run/x/net/proxy.sock".into());
        line.extend(["/usr/bin/opencode", "run", "--", "a b"].map(String::from));
        let mut it = line.into_iter().map(OsString::from);
        assert_eq!(it.next().as_deref(), Some(OsStr::new("/h/handoff")));
        assert_eq!(it.next().as_deref(), Some(OsStr::new(RELAY_ARG)));
        assert_eq!(
            Args::parse(it).unwrap(),
            Args {
                socket: "/run/x/net/proxy.sock".into(),
                port: RELAY_PORT,
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
            vec!["/s", "x", "--", "p"],
            vec!["/s", "3128", "p"],
            vec!["/s", "3128", "--"],
        ] {
            let it = bad.into_iter().map(OsString::from);
            assert!(Args::parse(it).is_err());
        }
    }
}
