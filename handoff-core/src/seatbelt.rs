//! handoff's own sandbox on macOS: the agent runs under `sandbox-exec` with a Seatbelt profile
//! (SBPL) that handoff writes for the run, denying everything it does not allow. The same
//! [`Layout`] and [`SandboxSpec`] as bubblewrap's ([`crate::sandbox`]) decide what is allowed.
//!
//! What the agent sees:
//!
//! * the system read-only: `/usr`, `/bin`, `/sbin`, `/System` (not the data volume behind
//!   `/System/Volumes/Data`), `/Library`, `/private/etc`, the time zones, `/opt/homebrew`,
//!   `/opt/local`, `/nix` and Xcode's developer directory;
//! * the CLI's install directory and every `PATH` directory read-only (with the `lib` next to a
//!   `bin`), the user's toolchains (`~/.cargo`, `~/.rustup`, `~/go`) read-only with cargo's
//!   credentials unreadable;
//! * the worktree read-write for writing runs and read-only otherwise; its git directories and
//!   the `core.hooksPath` directory ([`Layout::protected`]) are never writable, and the
//!   directories above a protected path inside a writable area can be neither renamed nor
//!   made, so `mv scripts away && mv planted scripts` cannot put hooks where git looks;
//! * the run's private directory read-write, with `TMPDIR` inside it; `/tmp`, `/var/tmp` and the
//!   per-user `/var/folders` are not writable;
//! * of the adapter's binds ([`SandboxSpec::binds`]), each source where it is: Seatbelt allows
//!   or denies paths, it cannot show one path at another. [`wrap`] refuses a bind whose `dest`
//!   differs from its `source`;
//! * of the rest of the home directory, only the metadata (not the listing) of the directories
//!   above the paths above, so that `realpath` works.
//!
//! Hard links cannot be made (a link to a file under `.git` would reach it by another path).
//! Seatbelt matches real paths, so every path in the profile is resolved first (`/tmp` is
//! `/private/tmp`, `/var` is `/private/var`).
//!
//! What Seatbelt cannot do, and the receipt says:
//!
//! * there is no PID namespace: what the agent starts is contained by handoff's reaper
//!   ([`crate::reaper`]), not by the kernel;
//! * one profile holds for the CLI and everything it starts: a secret bind (a login the CLI
//!   reads) is readable by its model's commands too, and [`SandboxSpec::offline_shell`] cannot
//!   give those commands a network of their own;
//! * the network is either the host's ([`SeatbeltNetwork::Host`], with no Unix socket but the
//!   system's DNS resolver) or one loopback port, a filtering proxy's
//!   ([`SeatbeltNetwork::ProxyOnly`], no Unix socket at all).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use camino::{Utf8Component, Utf8Path, Utf8PathBuf};
use serde_json::json;

use crate::sandbox::{
    Layout, SandboxSpec, TOOLCHAIN_SECRETS, TOOLCHAINS, Wrapped, exists, install_dirs, path_dirs,
};

/// The only `sandbox-exec` handoff runs: one earlier on `PATH` is not taken.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The system's DNS resolver: every name lookup on macOS goes through this socket.
const DNS_SOCKET: &str = "/private/var/run/mDNSResponder";

/// System directories readable (with their executables mappable) by every run.
const SYSTEM: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/System",
    "/Library",
    "/private/etc",
    // `/etc/localtime` links into it.
    "/private/var/db/timezone",
    // `/bin/sh` runs the shell this names.
    "/private/var/select",
    // `/usr/bin/git` and the other developer shims find Xcode's tools through this.
    "/private/var/db/xcode_select_link",
    "/Applications/Xcode.app",
    "/opt/homebrew",
    "/opt/local",
    "/nix",
];

/// Mach services every run may look up.
const MACH_SERVICES: &[(&str, &str)] = &[
    (
        "com.apple.system.opendirectoryd.libinfo",
        "users and groups (getpwuid: the home directory, `git`, `ssh`)",
    ),
    (
        "com.apple.system.opendirectoryd.membership",
        "group membership",
    ),
    (
        "com.apple.system.notification_center",
        "the C library's change notices (time zone, configuration)",
    ),
    (
        "com.apple.trustd.agent",
        "TLS certificate checks against the system's trust store (through the proxy too)",
    ),
    ("com.apple.SecurityServer", "the same"),
    ("com.apple.ocspd", "certificate revocation"),
];

/// Mach services a run with the host's network may look up besides.
const NETWORK_MACH_SERVICES: &[(&str, &str)] = &[
    (
        "com.apple.SystemConfiguration.configd",
        "the network configuration",
    ),
    (
        "com.apple.SystemConfiguration.DNSConfiguration",
        "the DNS configuration",
    ),
    ("com.apple.dnssd.service", "name lookups (newer systems)"),
    ("com.apple.networkd", "the system's network stack"),
];

/// The network a run's profile allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeatbeltNetwork {
    /// The host's: any host, for the CLI and its commands alike. Unix sockets stay closed but
    /// for the system's DNS resolver, without which no name resolves.
    Host,
    /// Only TCP to `localhost:port`, where a filtering HTTP proxy on the host listens (the CLI
    /// reaches it through `HTTPS_PROXY`): no other address, no name lookup, no Unix socket.
    ProxyOnly {
        /// The proxy's loopback port.
        port: u16,
    },
}

/// `sandbox-exec` when it can run a sandbox here: only on macOS, only
/// [`/usr/bin/sandbox-exec`](SANDBOX_EXEC), and only once it has run a command under a profile
/// (it cannot inside another sandbox, e.g. a CLI's own). The answer is kept for the life of
/// the process.
pub fn sandbox_exec_here() -> Option<Utf8PathBuf> {
    if !crate::platform::SEATBELT {
        return None;
    }
    static PROVED: OnceLock<bool> = OnceLock::new();
    let path = Utf8Path::new(SANDBOX_EXEC);
    let proved = *PROVED.get_or_init(|| path.is_file() && probe(path));
    proved.then(|| path.to_owned())
}

/// Whether `sandbox-exec` applies a profile and runs a command under it.
fn probe(sandbox_exec: &Utf8Path) -> bool {
    Command::new(sandbox_exec.as_std_path())
        .args(["-p", "(version 1)(allow default)", "/usr/bin/true"])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `s` as an SBPL string literal, or `None` when it holds a character that cannot be written
/// safely (a control character). Inside the literal only `"` and `\` are special, and both
/// are escaped with `\`, so the literal ends exactly at its closing quote.
fn sbpl_string(s: &str) -> Option<String> {
    if s.chars().any(char::is_control) {
        return None;
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    Some(out)
}

/// `p` as an SBPL string literal of an absolute path, or `None`.
fn path_literal(p: &Utf8Path) -> Option<String> {
    if p.is_absolute() {
        sbpl_string(p.as_str())
    } else {
        None
    }
}

/// Why `p` cannot be written into a profile, if it cannot.
fn inexpressible(p: &Utf8Path) -> Option<String> {
    if !p.is_absolute() {
        Some(format!("{p} is not an absolute path"))
    } else if sbpl_string(p.as_str()).is_none() {
        Some(format!(
            "{p:?} holds a control character, which a sandbox profile cannot name"
        ))
    } else {
        None
    }
}

/// The real path of `p` as Seatbelt matches it: the longest existing ancestor resolved
/// (symbolic links, `/tmp` → `/private/tmp`), the rest appended as written, `.` and `..`
/// folded. A relative path is returned as is (and left out of any profile).
fn real_path(p: &Utf8Path) -> Utf8PathBuf {
    if !p.is_absolute() {
        return p.to_owned();
    }
    let mut lexical = Utf8PathBuf::from("/");
    for c in p.components() {
        match c {
            Utf8Component::Normal(part) => lexical.push(part),
            Utf8Component::ParentDir => {
                lexical.pop();
            }
            _ => {}
        }
    }
    let mut rest: Vec<&str> = Vec::new();
    let mut base: &Utf8Path = &lexical;
    loop {
        if let Ok(real) = base.canonicalize_utf8() {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (base.parent(), base.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                base = parent;
            }
            _ => return lexical,
        }
    }
}

/// The paths of one run's profile, each real ([`real_path`]) and in the order given.
#[derive(Debug, Default)]
struct Paths {
    /// Readable (beyond the system).
    read: Vec<Utf8PathBuf>,
    /// Readable and writable.
    write: Vec<Utf8PathBuf>,
    /// Neither readable nor writable, inside something readable (credentials).
    hidden: Vec<Utf8PathBuf>,
    /// Never writable, nor anything under them.
    protected: Vec<Utf8PathBuf>,
    /// Directories above a protected path inside something writable: neither made nor
    /// removed, nor renamed in either direction.
    pinned: Vec<Utf8PathBuf>,
    /// The directories above everything allowed: their metadata only.
    ancestors: Vec<Utf8PathBuf>,
}

fn push_new(list: &mut Vec<Utf8PathBuf>, p: Utf8PathBuf) {
    if !list.contains(&p) {
        list.push(p);
    }
}

fn under_system(p: &Utf8Path) -> bool {
    SYSTEM.iter().any(|s| p.starts_with(s))
}

fn paths(
    layout: &Layout,
    spec: &SandboxSpec,
    program: &Utf8Path,
    env: &BTreeMap<String, String>,
) -> Paths {
    let mut out = Paths::default();
    let mut read: Vec<Utf8PathBuf> = install_dirs(program);
    read.extend(path_dirs(env));
    if let Some(home) = &layout.home {
        read.extend(TOOLCHAINS.iter().map(|(d, _)| home.join(d)));
    }
    read.extend(layout.read_only.iter().cloned());
    // A protected path outside the worktree (a linked worktree's common git directory) is
    // still read by git.
    read.extend(layout.protected.iter().cloned());
    if !layout.writable {
        read.push(layout.worktree.clone());
    }
    read.extend(
        spec.binds
            .iter()
            .filter(|b| !b.writable)
            .map(|b| b.source.clone()),
    );
    // A `PATH` entry of `/` or of the home directory (or above it) would open the whole home.
    let home = layout.home.as_deref().map(real_path);
    for p in read {
        let real = real_path(&p);
        let above_home = home.as_ref().is_some_and(|h| h.starts_with(&real)) || real == "/";
        if exists(&real) && !under_system(&real) && !above_home {
            push_new(&mut out.read, real);
        }
    }
    if let Some(home) = &layout.home {
        for secret in TOOLCHAIN_SECRETS {
            let real = real_path(&home.join(secret));
            if out.read.iter().any(|r| real.starts_with(r)) {
                push_new(&mut out.hidden, real);
            }
        }
    }

    let mut write = vec![layout.run_dir.clone()];
    if layout.writable {
        write.push(layout.worktree.clone());
    }
    write.extend(layout.writable_extra.iter().cloned());
    write.extend(
        spec.binds
            .iter()
            .filter(|b| b.writable)
            .map(|b| b.source.clone()),
    );
    for p in write {
        let real = real_path(&p);
        // The run's directory and the worktree are named even before they exist; an extra
        // or a bind only when it is there.
        let named = real == real_path(&layout.run_dir) || real == real_path(&layout.worktree);
        if named || exists(&real) {
            out.read.retain(|r| *r != real);
            push_new(&mut out.write, real);
        }
    }

    // What lies inside something already allowed at least as widely adds nothing.
    let covered =
        |p: &Utf8PathBuf, by: &[Utf8PathBuf]| by.iter().any(|b| b != p && p.starts_with(b));
    let write = out.write.clone();
    out.write.retain(|p| !covered(p, &write));
    let read = out.read.clone();
    out.read
        .retain(|p| !covered(p, &read) && !covered(p, &write));

    for p in &layout.protected {
        let real = real_path(p);
        for dir in real.ancestors().skip(1) {
            if out.write.iter().any(|w| dir.starts_with(w)) {
                push_new(&mut out.pinned, dir.to_owned());
            }
        }
        push_new(&mut out.protected, real);
    }

    let mut ancestors: Vec<Utf8PathBuf> = Vec::new();
    let allowed: Vec<Utf8PathBuf> = out.read.iter().chain(&out.write).cloned().collect();
    for p in out.read.iter().chain(&out.write).chain(&out.protected) {
        for dir in p.ancestors().skip(1) {
            if dir != "/" && !under_system(dir) && !allowed.iter().any(|a| dir.starts_with(a)) {
                push_new(&mut ancestors, dir.to_owned());
            }
        }
    }
    ancestors.sort();
    out.ancestors = ancestors;
    out
}

/// A profile being written.
struct Profile(String);

impl Profile {
    /// `; comment` lines after a blank one.
    fn comment(&mut self, comment: &str) {
        self.0.push('\n');
        for line in comment.lines() {
            self.0.push_str("; ");
            self.0.push_str(line);
            self.0.push('\n');
        }
    }

    /// A line as is.
    fn line(&mut self, line: &str) {
        self.0.push_str(line);
        self.0.push('\n');
    }

    /// `(allow|deny OPERATIONS` and its filters one to a line; nothing without filters.
    fn rule(&mut self, head: &str, filters: &[String]) {
        if filters.is_empty() {
            return;
        }
        self.0.push('(');
        self.0.push_str(head);
        for f in filters {
            self.0.push_str("\n  ");
            self.0.push_str(f);
        }
        self.0.push_str(")\n");
    }

    /// A commented rule; nothing without filters.
    fn block(&mut self, comment: &str, head: &str, filters: &[String]) {
        if !filters.is_empty() {
            self.comment(comment);
            self.rule(head, filters);
        }
    }
}

/// `(kind "p")` for each path that can be written.
fn filters(kind: &str, paths: &[Utf8PathBuf]) -> Vec<String> {
    paths
        .iter()
        .filter_map(|p| path_literal(p))
        .map(|lit| format!("({kind} {lit})"))
        .collect()
}

/// `(kind "s")` for each of a fixed list.
fn fixed(kind: &str, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .filter_map(|n| sbpl_string(n))
        .map(|lit| format!("({kind} {lit})"))
        .collect()
}

/// The Seatbelt profile of one run: deny by default, then what the agent needs (see the
/// module's documentation), and last the denials that hold whatever came before (the last
/// rule that matches decides): credentials, the protected paths and the directories above
/// them, hard links; then the network.
///
/// A path that cannot be written into a profile ([`wrap`] refuses those) is left out of what
/// is allowed; if it is one to protect, nothing at all is writable.
pub fn profile(
    layout: &Layout,
    spec: &SandboxSpec,
    program: &Utf8Path,
    env: &BTreeMap<String, String>,
    net: &SeatbeltNetwork,
) -> String {
    let p = paths(layout, spec, program, env);
    let mut out = Profile(String::new());
    out.line("(version 1)");
    out.line("(deny default)");

    out.comment("Processes: the CLI and what it starts run under this same profile.");
    out.line("(allow process-fork)");
    out.line("(allow process-exec)");
    out.line("(allow signal (target same-sandbox))");
    out.line("(allow process-info* (target same-sandbox))");
    out.line("(allow sysctl-read)");
    out.block(
        "Another process's arguments and environment (`ps eww`) are not the agent's to read.",
        "deny sysctl-read",
        &fixed("sysctl-name", &["kern.procargs", "kern.procargs2"]),
    );
    out.comment(
        "The CPU count (Node's os.cpus()), POSIX semaphores (Python's multiprocessing),\n\
         pseudo-terminals (a CLI's interactive shell).",
    );
    out.line("(allow mach-host*)");
    out.line("(allow ipc-posix-sem)");
    out.line("(allow pseudo-tty)");
    let mut services: Vec<(&str, &str)> = MACH_SERVICES.to_vec();
    if *net == SeatbeltNetwork::Host {
        services.extend_from_slice(NETWORK_MACH_SERVICES);
    }
    let comment: Vec<String> = std::iter::once("System services:".to_owned())
        .chain(services.iter().map(|(name, why)| format!("{name}: {why}")))
        .collect();
    let names: Vec<&str> = services.iter().map(|(name, _)| *name).collect();
    out.block(
        &comment.join("\n"),
        "allow mach-lookup",
        &fixed("global-name", &names),
    );

    out.block(
        "The system, read-only.",
        "allow file-read* file-map-executable",
        &fixed("subpath", SYSTEM),
    );
    out.comment("The data volume is reached through its own paths, not through /System.");
    out.line("(deny file-read* file-map-executable (subpath \"/System/Volumes/Data\"))");
    out.block(
        "The root and the system's links into /private: themselves only.",
        "allow file-read*",
        &fixed("literal", &["/", "/etc", "/tmp", "/var"]),
    );
    out.comment("Devices: the null device, terminals, a process's own descriptors.");
    out.line("(allow file-read-metadata (literal \"/dev\"))");
    out.rule(
        "allow file-read*",
        &fixed("literal", &["/dev/random", "/dev/urandom"]),
    );
    let mut devices = fixed(
        "literal",
        &["/dev/null", "/dev/zero", "/dev/tty", "/dev/ptmx"],
    );
    devices.push("(regex #\"^/dev/ttys[0-9]+$\")".into());
    devices.push("(subpath \"/dev/fd\")".into());
    out.rule("allow file-read* file-write* file-ioctl", &devices);

    out.block(
        "The directories above what follows: their metadata only (realpath), not their listing.",
        "allow file-read-metadata",
        &filters("literal", &p.ancestors),
    );
    out.block(
        "Read-only: the CLI's install and PATH directories, the toolchains, the worktree of a\n\
         run that does not write it, the adapter's read-only binds, the git directories.",
        "allow file-read* file-map-executable",
        &filters("subpath", &p.read),
    );
    out.block(
        "Writable: the run's directory (TMPDIR is inside it), the worktree of a writing run,\n\
         the writable extras and binds.",
        "allow file-read* file-write* file-map-executable",
        &filters("subpath", &p.write),
    );

    out.comment("Last, so that nothing above overrides them.");
    out.block(
        "Credentials inside the toolchains.",
        "deny file-read* file-write*",
        &filters("literal", &p.hidden),
    );
    let protected = filters("subpath", &p.protected);
    out.block(
        "The git directories and the hooks directory: nothing in them is written, made,\n\
         removed or renamed, and they cannot be made anew after being moved.",
        "deny file-write*",
        &protected,
    );
    let pinned = filters("literal", &p.pinned);
    out.block(
        "The directories above a protected path: neither removed nor renamed away (unlink),\n\
         nor made or renamed into place (create), so a planted tree cannot take their place.",
        "deny file-write-create file-write-unlink",
        &pinned,
    );
    if protected.len() != p.protected.len() || pinned.len() != p.pinned.len() {
        out.comment("A protected path that cannot be named: nothing is writable.");
        out.line("(deny file-write*)");
    }
    out.comment("Hard links: a link to a protected file would be a way to write it.");
    out.line("(deny file-link)");

    match net {
        SeatbeltNetwork::Host => {
            out.comment("Network: the host's. No Unix socket but the system's DNS resolver.");
            out.line("(allow network*)");
            out.line("(allow system-socket)");
            out.line("(deny network-outbound (remote unix-socket))");
            out.line(&format!(
                "(allow network-outbound (remote unix-socket (subpath \"{DNS_SOCKET}\")))"
            ));
        }
        SeatbeltNetwork::ProxyOnly { port } => {
            out.comment("Network: only the filtering proxy on the loopback; no Unix socket.");
            out.rule(
                "allow system-socket",
                &[
                    "(socket-domain AF_INET)".into(),
                    "(socket-domain AF_INET6)".into(),
                ],
            );
            out.line(&format!(
                "(allow network-outbound (remote tcp \"localhost:{port}\"))"
            ));
            out.line("(deny network-outbound (remote unix-socket))");
        }
    }
    out.0
}

/// Wraps `invocation` in `sandbox-exec`: its program becomes
/// `sandbox-exec -p <profile> -- <program> <args…>` (`--` ends `sandbox-exec`'s own options,
/// so none of the agent's arguments is read as one), its environment gets a private `TMPDIR`
/// (`<run>/tmp`, made here) and the toolchains' homes. Returns the receipt of what the agent
/// can reach.
///
/// Refused: a program that is not an absolute path, a bind whose `dest` differs from its
/// `source` (Seatbelt cannot show one path at another: the adapter must use the path in
/// place), and any path of the layout or of a bind that a profile cannot name.
pub fn wrap(
    sandbox_exec: &Utf8Path,
    layout: &Layout,
    spec: &SandboxSpec,
    net: &SeatbeltNetwork,
    invocation: &mut crate::provider::Invocation,
) -> Result<Wrapped, String> {
    if !invocation.program.is_absolute() {
        return Err(format!(
            "the sandboxed program {} is not an absolute path",
            invocation.program
        ));
    }
    for b in &spec.binds {
        if b.dest != b.source {
            return Err(format!(
                "sandbox-exec cannot show {} at {}: a Seatbelt profile allows paths where they \
                 are, so the adapter must use the path in place",
                b.source, b.dest
            ));
        }
    }
    let named = [&layout.worktree, &layout.run_dir]
        .into_iter()
        .chain(&layout.protected)
        .chain(&layout.read_only)
        .chain(&layout.writable_extra)
        .chain(spec.binds.iter().map(|b| &b.source));
    for p in named {
        if let Some(why) = inexpressible(p).or_else(|| inexpressible(&real_path(p))) {
            return Err(format!("the sandbox profile cannot be written: {why}"));
        }
    }
    // A writable place the CLI keeps its state in may not exist yet: it is made, as the CLI
    // would make it, so that the profile can allow it.
    for b in spec.binds.iter().filter(|b| b.writable) {
        if !exists(&b.source) {
            std::fs::create_dir_all(&b.source)
                .map_err(|e| format!("cannot create {}: {e}", b.source))?;
        }
    }
    let tmp = layout.run_dir.join("tmp");
    make_private_dir(&tmp)?;

    let p = paths(layout, spec, &invocation.program, &invocation.env);
    let text = profile(layout, spec, &invocation.program, &invocation.env, net);
    let mut args = vec!["-p".to_owned(), text, "--".to_owned()];
    args.push(invocation.program.to_string());
    args.append(&mut invocation.args);
    invocation.program = sandbox_exec.to_owned();
    invocation.args = args;

    let env = &mut invocation.env;
    for k in ["TMPDIR", "TMP", "TEMP"] {
        env.remove(k);
    }
    env.insert("TMPDIR".into(), real_path(&tmp).to_string());
    crate::sandbox::cache_env(layout, env);

    let mut read_only: Vec<String> = SYSTEM.iter().map(ToString::to_string).collect();
    read_only.extend(p.read.iter().map(ToString::to_string));
    let secrets: Vec<&Utf8PathBuf> = spec
        .binds
        .iter()
        .filter(|b| b.secret)
        .map(|b| &b.source)
        .collect();
    let network = match net {
        SeatbeltNetwork::Host => "the host's, for the CLI and its commands alike: any host; no \
                                  Unix socket but the system's DNS resolver"
            .to_owned(),
        SeatbeltNetwork::ProxyOnly { port } => format!(
            "only the filtering proxy at localhost:{port}, for the CLI and its commands alike: \
             no other address, no name lookup, no Unix socket"
        ),
    };
    let receipt = json!({
        "enforcement": "handoff",
        "tool": "sandbox-exec",
        "worktree": if layout.writable { "read-write" } else { "read-only" },
        "protected": p.protected,
        "pinned": p.pinned,
        "readOnly": read_only,
        "writable": p.write,
        "hidden": p.hidden,
        "tmp": format!("private to the run (TMPDIR={}); /tmp, /var/tmp and /var/folders are not writable", real_path(&tmp)),
        "home": "not readable: only the paths listed are, and the metadata of the directories above them",
        "state": spec.state,
        "secrets": if secrets.is_empty() {
            serde_json::Value::Null
        } else {
            json!({
                "paths": secrets,
                "hiddenFromCommands": false,
                "why": "one Seatbelt profile holds for the CLI and every command it runs: what the CLI reads, its model's commands can read",
            })
        },
        "caches": "~/.cargo (its credentials unreadable), ~/.rustup and ~/go read-only; npm's and Go's build caches private to the run",
        "network": network,
        "shell": if spec.offline_shell {
            json!("not offline: Seatbelt cannot give the CLI's commands a network other than the CLI's")
        } else {
            serde_json::Value::Null
        },
        "hardLinks": "denied",
        "processes": "no PID namespace under sandbox-exec: what the agent starts is contained by handoff's reaper",
    });
    Ok(Wrapped {
        receipt,
        proxy: None,
    })
}

/// Makes `dir` (0700) unless it is already a directory (not a link to one).
fn make_private_dir(dir: &Utf8Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(format!("{dir} exists and is not a directory")),
        Err(_) => std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {dir}: {e}")),
    }
}

/// The receipt of a run whose adapter asked for handoff's sandbox on macOS when
/// `sandbox-exec` cannot run here.
pub fn unavailable_receipt() -> serde_json::Value {
    json!({
        "enforcement": "none",
        "tool": "sandbox-exec",
        "unavailable": "/usr/bin/sandbox-exec is missing or cannot apply a profile here (inside another sandbox): the agent runs unconfined",
    })
}

#[cfg(test)]
mod tests;
