//! handoff's own sandbox, for agents whose CLI has none (OpenCode, Kiro): on Linux the agent
//! runs under bubblewrap (`bwrap`), in a mount, PID, IPC and UTS namespace of its own.
//!
//! What the agent sees:
//!
//! * the system (`/usr`, `/etc`, `/opt`, `/sys`, the `/bin`-style links) read-only;
//! * the CLI's install directory and every `PATH` directory read-only, so that the CLI and the
//!   tools its shell runs are found; the user's toolchains (`~/.cargo`, `~/.rustup`) read-only,
//!   so that builds that need nothing new work; npm's cache private to the run;
//! * the worktree read-write for writing runs and read-only otherwise, but its git directories
//!   (`.git`, a linked worktree's common directory) and the `core.hooksPath` directory
//!   read-only always ([`crate::Workspace::protected_paths`]): nothing the user's git runs later
//!   (hooks, `core.fsmonitor`, filters) can be planted;
//! * the run's private directory read-write (the CLI's configuration roots and state), plus
//!   what the adapter binds ([`SandboxSpec::binds`]: e.g. credentials, read-only);
//! * a private `/tmp` that vanishes with the run; nothing else of the user's home directory,
//!   `/run` (session bus, agent sockets) or `/var`.
//!
//! With `--unshare-pid --die-with-parent` nothing the agent starts outlives it: when the
//! sandbox's first process ends, the kernel kills every process left in the namespace.
//!
//! The network: a CLI that honours `HTTPS_PROXY` ([`SandboxSpec::network`]) gets a network
//! namespace of its own, where the [`relay`] carries its proxy connections to handoff's
//! filtering [`proxy`], which allows only the endpoints the adapter names (its model
//! provider's). Another CLI keeps the host's network. Either way, under
//! [`SandboxSpec::offline_shell`] the commands of its model run in a namespace with no
//! network at all; without it they reach what the CLI reaches. The receipt says which, and
//! [`crate::Isolation`] ranks it so.

mod network;
use network::own_network;
mod proof;
pub use proof::{bubblewrap, bubblewrap_here, remember_proofs_in};
pub mod packages;
pub mod proxy;
pub mod relay;

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use serde_json::json;

/// Exit code of the probe command: proves that `bwrap` ran it.
const PROBE_EXIT: i32 = 42;

/// System directories mounted read-only when they exist (symbolic links are recreated as
/// links).
const SYSTEM: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix",
    "/sys",
    // `/etc/resolv.conf` may link here (systemd-resolved).
    "/run/systemd/resolve",
];

/// Toolchain directories under the user's home mounted read-only when they exist, with the
/// variable that names each to the tools.
pub(crate) const TOOLCHAINS: &[(&str, &str)] = &[
    (".cargo", "CARGO_HOME"),
    (".rustup", "RUSTUP_HOME"),
    ("go", "GOPATH"),
];

/// Files inside the toolchain directories that hold credentials (a crates.io token): covered
/// with an empty file.
pub(crate) const TOOLCHAIN_SECRETS: &[&str] = &[".cargo/credentials", ".cargo/credentials.toml"];

/// The variables that name a proxy, set to the relay for a CLI in a network namespace of its
/// own (a user's proxy named in them is chained by handoff's).
const PROXY_VARS: &[&str] = &[
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// The variables that exempt hosts from the proxy: removed, so that nothing goes around it.
const NO_PROXY_VARS: &[&str] = &["NO_PROXY", "no_proxy"];

/// A path the adapter mounts at a place of its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// The path on the host.
    pub source: Utf8PathBuf,
    /// Where the agent sees it.
    pub dest: Utf8PathBuf,
    /// Whether the agent may write it.
    pub writable: bool,
    /// A credential or state the CLI reads but its model's shell commands must not: under
    /// [`SandboxSpec::offline_shell`] each command sees it empty (an empty file, or an empty
    /// directory).
    pub secret: bool,
}

/// What an adapter asks of handoff's sandbox for one run ([`crate::Invocation::sandbox`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSpec {
    /// Paths mounted at a place of their own, after everything else (so a credential can be
    /// mounted read-only inside the run's writable directory). A source that does not exist
    /// is left out.
    pub binds: Vec<Bind>,
    /// How the CLI's own state is kept, for the receipt.
    pub state: String,
    /// The CLI runs its model's shell commands through `$SHELL -c`: `SHELL` is set to a
    /// read-only wrapper that runs each command in a network namespace of its own (no network,
    /// none of the host's abstract Unix sockets), while the CLI keeps the network
    /// [`SandboxSpec::network`] gives it.
    pub offline_shell: bool,
    /// The CLI honours `HTTPS_PROXY`/`HTTP_PROXY`: it runs in a network namespace of its own
    /// and reaches only these endpoints, through handoff's filtering [`proxy`]. `None`: the
    /// host's network.
    pub network: Option<proxy::NetworkSpec>,
    /// Packages the CLI loads as it starts, shared read-only from handoff's own cache
    /// ([`packages`]) instead of fetched into the run's private one.
    pub packages: Option<packages::Packages>,
}

/// Where the sandbox of one run is: what the engine knows of it beyond the adapter's spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The worktree root.
    pub worktree: Utf8PathBuf,
    /// Whether the agent may write the worktree.
    pub writable: bool,
    /// Paths in or around the worktree mounted read-only always.
    pub protected: Vec<Utf8PathBuf>,
    /// The run's private directory (read-write).
    pub run_dir: Utf8PathBuf,
    /// The user's home directory (from the password database), for the toolchains.
    pub home: Option<Utf8PathBuf>,
    /// Extra paths the agent needs read-only (the handoff binary of a worker with advice).
    pub read_only: Vec<Utf8PathBuf>,
    /// Extra paths the agent needs read-write (a worker's way to its supervisor).
    pub writable_extra: Vec<Utf8PathBuf>,
    /// The handoff binary, which runs as the [`relay`] of a network namespace of the run's
    /// own; `None` keeps the host's network.
    pub relay: Option<Utf8PathBuf>,
}

/// One bubblewrap operation, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mount {
    ReadOnly(Utf8PathBuf, Utf8PathBuf),
    ReadWrite(Utf8PathBuf, Utf8PathBuf),
    Symlink(String, Utf8PathBuf),
    Tmpfs(Utf8PathBuf),
    Proc,
    Dev,
}

/// The sandbox a run was wrapped in, for the receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wrapped {
    /// The receipt (`policy.sandbox`).
    pub receipt: serde_json::Value,
    /// The proxy to serve for the run's network namespace: its socket and policy
    /// ([`proxy::Proxy::start`], before the agent starts).
    pub proxy: Option<ProxyPlan>,
}

/// The proxy a run's own network namespace needs: the socket it listens on and its policy.
pub type ProxyPlan = (Utf8PathBuf, proxy::Policy);

fn push_flags(args: &mut Vec<String>) {
    args.extend(
        [
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--new-session",
        ]
        .map(String::from),
    );
}

fn push_mount(args: &mut Vec<String>, m: &Mount) {
    let mut push = |flag: &str, a: &str, b: Option<&str>| {
        args.push(flag.into());
        args.push(a.into());
        if let Some(b) = b {
            args.push(b.into());
        }
    };
    match m {
        Mount::ReadOnly(s, d) => push("--ro-bind", s.as_str(), Some(d.as_str())),
        Mount::ReadWrite(s, d) => push("--bind", s.as_str(), Some(d.as_str())),
        Mount::Symlink(t, d) => push("--symlink", t, Some(d.as_str())),
        Mount::Tmpfs(d) => push("--tmpfs", d.as_str(), None),
        Mount::Proc => push("--proc", "/proc", None),
        Mount::Dev => push("--dev", "/dev", None),
    }
}

/// The directory a CLI is installed in, read-only in the sandbox: for a program inside a
/// `node_modules` tree the outermost `node_modules` (its launcher finds its native package
/// there), else the program's own directory.
pub(crate) fn install_dirs(program: &Utf8Path) -> Vec<Utf8PathBuf> {
    let mut dirs = Vec::new();
    if let Some(parent) = program.parent() {
        dirs.push(parent.to_owned());
    }
    if let Ok(real) = program.canonicalize_utf8() {
        let outermost = real
            .ancestors()
            .filter(|a| a.file_name() == Some("node_modules"))
            .last()
            .map(Utf8Path::to_owned);
        match outermost {
            Some(modules) => dirs.push(modules),
            None => {
                if let Some(parent) = real.parent() {
                    dirs.push(parent.to_owned());
                }
            }
        }
    }
    dirs
}

pub(crate) fn exists(p: &Utf8Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// The absolute `PATH` directories of `env`, each `bin` with its prefix's `lib`: a prefix's
/// `bin/` links into its `lib/` (nvm's Node, `~/.local`, a `--prefix` install), and the tools
/// on `PATH` need both.
pub(crate) fn path_dirs(env: &BTreeMap<String, String>) -> Vec<Utf8PathBuf> {
    let mut dirs = Vec::new();
    for dir in env
        .get("PATH")
        .into_iter()
        .flat_map(|p| p.split(':'))
        .filter(|d| d.starts_with('/'))
    {
        let dir = Utf8PathBuf::from(dir);
        if dir.file_name() == Some("bin")
            && let Some(prefix) = dir.parent()
        {
            dirs.extend(["lib", "lib64"].map(|l| prefix.join(l)));
        }
        dirs.push(dir);
    }
    dirs
}

/// The mounts of a run, in order (later ones cover earlier ones).
fn mounts(
    layout: &Layout,
    spec: &SandboxSpec,
    program: &Utf8Path,
    env: &BTreeMap<String, String>,
) -> Vec<Mount> {
    let mut m = Vec::new();
    for dir in SYSTEM {
        let path = Utf8Path::new(dir);
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    m.push(Mount::Symlink(
                        target.to_string_lossy().into_owned(),
                        path.to_owned(),
                    ));
                }
            }
            Ok(meta) if meta.is_dir() => m.push(Mount::ReadOnly(path.to_owned(), path.to_owned())),
            _ => {}
        }
    }
    m.push(Mount::Proc);
    m.push(Mount::Dev);
    m.push(Mount::Tmpfs("/tmp".into()));
    m.push(Mount::Tmpfs("/var/tmp".into()));
    let mut read_only: Vec<Utf8PathBuf> = install_dirs(program);
    read_only.extend(path_dirs(env));
    if let Some(home) = &layout.home {
        read_only.extend(TOOLCHAINS.iter().map(|(d, _)| home.join(d)));
    }
    read_only.extend(layout.read_only.iter().cloned());
    let mut seen: Vec<Utf8PathBuf> = Vec::new();
    for p in read_only {
        if exists(&p) && !seen.contains(&p) && !under_system(&p) {
            m.push(Mount::ReadOnly(p.clone(), p.clone()));
            seen.push(p);
        }
    }
    if let Some(home) = &layout.home {
        for secret in TOOLCHAIN_SECRETS {
            let path = home.join(secret);
            if seen.iter().any(|s| path.starts_with(s)) && exists(&path) {
                m.push(Mount::ReadOnly("/dev/null".into(), path));
            }
        }
    }
    m.push(Mount::ReadWrite(
        layout.run_dir.clone(),
        layout.run_dir.clone(),
    ));
    m.push(if layout.writable {
        Mount::ReadWrite(layout.worktree.clone(), layout.worktree.clone())
    } else {
        Mount::ReadOnly(layout.worktree.clone(), layout.worktree.clone())
    });
    if layout.writable {
        // A protected path deeper in the worktree (a `core.hooksPath` such as `.husky/_`)
        // cannot be swapped out by renaming a directory above it: each directory between the
        // worktree and it is a mount point of its own, still writable, which can be neither
        // renamed nor removed.
        let mut pinned: Vec<Utf8PathBuf> = Vec::new();
        for p in &layout.protected {
            let Ok(rel) = p.strip_prefix(&layout.worktree) else {
                continue;
            };
            let mut dir = layout.worktree.clone();
            let parts: Vec<&str> = rel.iter().collect();
            for part in parts.iter().take(parts.len().saturating_sub(1)) {
                dir.push(part);
                if !pinned.contains(&dir) && exists(&dir) {
                    m.push(Mount::ReadWrite(dir.clone(), dir.clone()));
                    pinned.push(dir.clone());
                }
            }
        }
    }
    // A protected path that does not exist outside the worktree (a hooks directory not made
    // yet) cannot be mounted; nothing outside the worktree is writable anyway.
    for p in layout.protected.iter().filter(|p| exists(p)) {
        m.push(Mount::ReadOnly(p.clone(), p.clone()));
    }
    for p in &layout.writable_extra {
        if exists(p) {
            m.push(Mount::ReadWrite(p.clone(), p.clone()));
        }
    }
    for b in &spec.binds {
        if exists(&b.source) {
            m.push(if b.writable {
                Mount::ReadWrite(b.source.clone(), b.dest.clone())
            } else {
                Mount::ReadOnly(b.source.clone(), b.dest.clone())
            });
        }
    }
    m
}

/// Whether `p` is already visible through the system directories (`/bin` included where it
/// links to `/usr/bin`).
fn under_system(p: &Utf8Path) -> bool {
    let real = p.canonicalize_utf8().unwrap_or_else(|_| p.to_owned());
    ["/usr", "/etc", "/opt", "/nix", "/sys"]
        .iter()
        .any(|s| real.starts_with(s))
}

/// The build caches and toolchains in a sandboxed agent's environment: the caches a build
/// writes (npm's, Go's) in the run's own directory, the read-only toolchains named by their
/// variables unless the environment names them already.
pub(crate) fn cache_env(layout: &Layout, env: &mut BTreeMap<String, String>) {
    env.insert(
        "npm_config_cache".into(),
        layout.run_dir.join("npm-cache").to_string(),
    );
    env.insert(
        "GOCACHE".into(),
        layout.run_dir.join("go-build").to_string(),
    );
    if let Some(home) = &layout.home {
        for (dir, var) in TOOLCHAINS {
            let path = home.join(dir);
            if exists(&path) && !env.contains_key(*var) {
                env.insert((*var).into(), path.to_string());
            }
        }
    }
}

/// Wraps `invocation` in bubblewrap: its program becomes `bwrap`, the agent's command line
/// follows `--`, its environment gets a private `TMPDIR` and the toolchains' homes. Returns
/// the receipt of what the agent can reach.
pub fn wrap(
    bwrap: &Utf8Path,
    layout: &Layout,
    spec: &SandboxSpec,
    invocation: &mut crate::provider::Invocation,
) -> Result<Wrapped, String> {
    // A writable place the CLI keeps its state in (the user's own, for a receiver) may not
    // exist yet: it is made, as the CLI would make it, so that its writes land there and not
    // in the sandbox's throwaway root.
    for b in spec.binds.iter().filter(|b| b.writable) {
        if !exists(&b.source) {
            std::fs::create_dir_all(&b.source)
                .map_err(|e| format!("cannot create {}: {e}", b.source))?;
        }
    }
    let mut mounts = mounts(layout, spec, &invocation.program, &invocation.env);
    let net = own_network(layout, spec, &invocation.env)?;
    if let Some(net) = &net {
        mounts.push(Mount::ReadOnly(net.relay.clone(), net.relay.clone()));
        // The proxy's socket: reachable by path from the CLI's namespace, and read-only.
        mounts.push(Mount::ReadOnly(net.dir.clone(), net.dir.clone()));
        if let Some(hosts) = &net.hosts {
            mounts.push(Mount::ReadOnly(hosts.clone(), "/etc/hosts".into()));
        }
    }
    let shell = if spec.offline_shell {
        let dir = layout.run_dir.join("sandbox-shell");
        // Directories first: a file hidden inside a hidden directory is covered again.
        let mut hidden: Vec<(bool, Utf8PathBuf)> = spec
            .binds
            .iter()
            .filter(|b| b.secret && exists(&b.source))
            .map(|b| (!b.source.is_dir(), b.dest.clone()))
            .collect();
        // A command reaches no proxy either: the socket's directory is empty to it.
        hidden.extend(net.iter().map(|n| (false, n.dir.clone())));
        hidden.sort();
        let path = offline_shell(bwrap, &dir, &hidden)?;
        // The directory is a mount point of its own: it can be neither written nor renamed.
        mounts.push(Mount::ReadOnly(dir.clone(), dir));
        Some(path)
    } else {
        None
    };
    let mut args: Vec<String> = Vec::new();
    push_flags(&mut args);
    if net.is_some() {
        args.push("--unshare-net".into());
    }
    for mount in &mounts {
        push_mount(&mut args, mount);
    }
    // The sandbox's own root (where the mount points live) is read-only too: a write outside
    // the writable mounts fails instead of landing in a directory that vanishes.
    args.extend(["--remount-ro".into(), "/".into()]);
    args.extend(["--chdir".into(), invocation.cwd.to_string()]);
    args.push("--".into());
    if let Some(net) = &net {
        // The relay runs the CLI.
        args.extend(relay::prefix(&net.relay, &net.socket, &net.listen));
    }
    args.push(invocation.program.to_string());
    args.append(&mut invocation.args);
    invocation.program = bwrap.to_owned();
    invocation.args = args;

    let env = &mut invocation.env;
    for k in ["TMPDIR", "TMP", "TEMP", "HANDOFF_OFFLINE_SHELL"] {
        env.remove(k);
    }
    if net.as_ref().is_some_and(|n| n.hosts.is_none()) {
        for k in PROXY_VARS.iter().chain(NO_PROXY_VARS) {
            env.remove(*k);
        }
        let url = format!("http://127.0.0.1:{}", relay::RELAY_PORT);
        for k in PROXY_VARS {
            env.insert((*k).into(), url.clone());
        }
    }
    env.insert("TMPDIR".into(), "/tmp".into());
    if let Some(shell) = &shell {
        env.insert("SHELL".into(), shell.to_string());
        // A CLI that runs `bash` by name finds the wrapper first.
        if let Some(dir) = shell.parent() {
            let path = env
                .get("PATH")
                .map_or_else(String::new, |p| format!(":{p}"));
            env.insert("PATH".into(), format!("{dir}{path}"));
        }
    }
    cache_env(layout, env);

    let list = |pick: fn(&Mount) -> Option<&Utf8PathBuf>| -> Vec<String> {
        mounts
            .iter()
            .filter_map(pick)
            .map(ToString::to_string)
            .collect()
    };
    let receipt = json!({
        "enforcement": "handoff",
        "tool": "bubblewrap",
        "worktree": if layout.writable { "read-write" } else { "read-only" },
        "protected": layout.protected,
        "readOnly": list(|m| match m {
            Mount::ReadOnly(_, d) => Some(d),
            _ => None,
        }),
        "writable": list(|m| match m {
            Mount::ReadWrite(_, d) => Some(d),
            _ => None,
        }),
        "tmp": "private to the run (/tmp, /var/tmp)",
        "home": "not mounted: only the paths listed are visible",
        "state": spec.state,
        "caches": "~/.cargo (its credentials emptied), ~/.rustup and ~/go read-only; npm's and Go's build caches private to the run",
        "network": match (&net, shell.is_some()) {
            (Some(_), true) => "the CLI's: a namespace of its own, reaching only the proxy's \
                endpoints (no other host, none of the host's loopback services or abstract Unix \
                sockets); its shell commands run in a namespace of their own (no network at all)",
            (Some(_), false) => "a namespace of its own, reaching only the proxy's endpoints \
                (no other host, none of the host's loopback services or abstract Unix sockets)",
            (None, true) => "the CLI's: the host's, for its model provider; its shell commands \
                run in a network namespace of their own (no network, no abstract Unix sockets)",
            (None, false) => "the host's: the shell reaches any host and the host's abstract \
                Unix sockets",
        },
        "proxy": net.as_ref().map(|n| json!({
            "endpoints": n.policy.network.endpoints.iter()
                .map(|e| json!({ "endpoint": e.label(), "why": e.why }))
                .collect::<Vec<_>>(),
            "publicHosts": n.policy.network.public_hosts.as_ref().map(|why| format!(
                "{why}: any public host as well (never a loopback, private or link-local address)"
            )),
            "through": n.policy.upstream.as_ref().map(|u| u.label()),
            "reachedBy": if n.hosts.is_some() {
                json!({
                    "addresses": n.listen.iter()
                        .map(|l| json!({ "address": l.addr.to_string(), "endpoint": l.endpoint }))
                        .collect::<Vec<_>>(),
                    "hosts": "/etc/hosts of the sandbox names each endpoint's address",
                    "unreachable": n.unreachable,
                })
            } else {
                json!({ "variables": PROXY_VARS })
            },
        })),
        "shell": shell,
        "processes": "own PID namespace (--unshare-pid --die-with-parent): nothing outlives the run",
    });
    Ok(Wrapped {
        receipt,
        proxy: net.map(|n| (n.socket, n.policy)),
    })
}

/// Writes the shell wrapper of [`SandboxSpec::offline_shell`] into `dir` (new, 0755) and
/// returns its path: `bash`, so that a CLI that looks at its shell's name treats it as one.
fn offline_shell(
    bwrap: &Utf8Path,
    dir: &Utf8Path,
    hidden: &[(bool, Utf8PathBuf)],
) -> Result<Utf8PathBuf, String> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(dir)
        .map_err(|e| format!("cannot create {dir}: {e}"))?;
    let path = dir.join("bash");
    let shell = ["/bin/bash", "/usr/bin/bash"]
        .into_iter()
        .find(|p| Utf8Path::new(p).is_file())
        .unwrap_or("/bin/sh");
    // A hidden directory is an empty tmpfs to a command, a hidden file an empty file.
    let masks: String = hidden
        .iter()
        .map(|(file, p)| {
            if *file {
                format!(" --ro-bind /dev/null {}", sh_quote(p.as_str()))
            } else {
                format!(" --tmpfs {}", sh_quote(p.as_str()))
            }
        })
        .collect();
    // Inside, the wrapper is still first on PATH: a command that runs `bash` again is already
    // offline and gets the shell itself (the variable can only be set from inside).
    // `--cap-drop ALL`: when handoff runs as root, bubblewrap keeps root's capabilities for the
    // sandbox's first process (the CLI, which needs them to start this wrapper's namespaces);
    // a command gets none, so it can neither unmount the read-only covers (`.git`) nor make
    // device nodes, and bubblewrap's no-new-privileges keeps setuid programs from giving them
    // back.
    let script = format!(
        "#!/bin/sh\n\
         # handoff: each command runs without network, in namespaces of its own, and without\n\
         # the CLI's credentials.\n\
         if [ \"$HANDOFF_OFFLINE_SHELL\" = 1 ]; then exec {shell} \"$@\"; fi\n\
         HANDOFF_OFFLINE_SHELL=1 exec {bwrap} --die-with-parent --unshare-net --unshare-pid \
         --unshare-ipc --bind / / --proc /proc --dev-bind /dev /dev{masks} --cap-drop ALL \
         -- {shell} \"$@\"\n",
        bwrap = sh_quote(bwrap.as_str()),
    );
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| format!("cannot write {path}: {e}"))?;
    f.write_all(script.as_bytes())
        .map_err(|e| format!("cannot write {path}: {e}"))?;
    Ok(path)
}

/// `s` as one single-quoted `sh` word.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Makes each protected path inside the worktree that does not exist yet (a `core.hooksPath`
/// not made yet), so that it can be mounted read-only; returns the directories made, deepest
/// first, for [`remove_made`]. A path outside the worktree is left alone (nothing there is
/// writable in the sandbox anyway).
pub fn make_protected(layout: &Layout) -> Result<Vec<Utf8PathBuf>, String> {
    let mut made = Vec::new();
    for p in &layout.protected {
        if exists(p) || !p.starts_with(&layout.worktree) {
            continue;
        }
        let mut missing: Vec<Utf8PathBuf> = p
            .ancestors()
            .take_while(|a| !exists(a))
            .map(Utf8Path::to_owned)
            .collect();
        std::fs::create_dir_all(p).map_err(|e| format!("cannot create {p}: {e}"))?;
        made.append(&mut missing);
    }
    Ok(made)
}

/// Removes what [`make_protected`] made, deepest first, where it is still empty.
pub fn remove_made(made: &[Utf8PathBuf]) {
    for dir in made {
        if std::fs::remove_dir(dir).is_err() {
            break;
        }
    }
}

/// Why an agent that needs handoff's sandbox is not run on this operating system at all, where
/// bubblewrap does not exist (rather than run unconfined, as where `bwrap` is merely missing or
/// cannot create namespaces).
pub fn refused_here() -> Option<String> {
    (!crate::platform::BUBBLEWRAP).then(|| {
        format!(
            "it needs handoff's own sandbox, which needs bubblewrap, and {} has none",
            crate::platform::NAME
        )
    })
}

/// The receipt of a run whose adapter asked for handoff's sandbox when none can run here.
pub fn unavailable_receipt() -> serde_json::Value {
    json!({
        "enforcement": "none",
        "tool": "bubblewrap",
        "unavailable": "bwrap is not on PATH or cannot create namespaces here: the agent runs unconfined",
    })
}

#[cfg(test)]
mod tests;
