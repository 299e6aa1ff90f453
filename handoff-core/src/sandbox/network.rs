//! The network namespace of one run: the relay's addresses and the proxy's policy.

use super::*;

/// The network namespace of one run: where its proxy listens and what it allows.
pub(super) struct OwnNetwork {
    pub(super) relay: Utf8PathBuf,
    pub(super) dir: Utf8PathBuf,
    pub(super) socket: Utf8PathBuf,
    pub(super) policy: proxy::Policy,
    /// Where the relay listens.
    pub(super) listen: Vec<relay::Listen>,
    /// The sandbox's `/etc/hosts`, naming each endpoint's address (transparent endpoints).
    pub(super) hosts: Option<Utf8PathBuf>,
    /// Endpoints a transparent relay cannot stand in for.
    pub(super) unreachable: Vec<String>,
}

/// The relay's addresses for a CLI that ignores proxy variables: each endpoint at its own
/// loopback literal, or at `127.0.0.<n>` under its name. Returns them, the lines of the
/// sandbox's `/etc/hosts`, and the endpoints left out of reach.
fn transparent_endpoints(
    endpoints: &[proxy::Endpoint],
) -> (Vec<relay::Listen>, Vec<String>, Vec<String>) {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    let mut listen: Vec<relay::Listen> = Vec::new();
    let mut hosts: Vec<String> = Vec::new();
    let mut named: Vec<(String, Ipv4Addr)> = Vec::new();
    let mut unreachable = Vec::new();
    for e in endpoints {
        let ip = match e.host.parse::<IpAddr>() {
            Ok(ip) if ip.is_loopback() => ip,
            Ok(_) => {
                unreachable.push(e.label());
                continue;
            }
            Err(_) if e.host.starts_with("*.") => {
                unreachable.push(e.label());
                continue;
            }
            Err(_) => match named.iter().find(|(h, _)| *h == e.host) {
                Some((_, ip)) => IpAddr::V4(*ip),
                None => {
                    let Ok(n) = u8::try_from(named.len() + 2) else {
                        unreachable.push(e.label());
                        continue;
                    };
                    let ip = Ipv4Addr::new(127, 0, 0, n);
                    named.push((e.host.clone(), ip));
                    hosts.push(format!("{ip} {}", e.host));
                    IpAddr::V4(ip)
                }
            },
        };
        let addr = SocketAddr::new(ip, e.port);
        if !listen.iter().any(|l| l.addr == addr) {
            listen.push(relay::Listen {
                addr,
                endpoint: Some(e.label()),
            });
        }
    }
    (listen, hosts, unreachable)
}

/// The run's own network namespace, when its adapter asks for one and the handoff binary can
/// relay it; the directory of its proxy socket is made (private).
pub(super) fn own_network(
    layout: &Layout,
    spec: &SandboxSpec,
    env: &BTreeMap<String, String>,
) -> Result<Option<OwnNetwork>, String> {
    let Some(network) = &spec.network else {
        return Ok(None);
    };
    let Some(relay) = &layout.relay else {
        if network.transparent {
            // Its ranking counts on the namespace: without the relay there is none.
            return Err(
                "this agent's network namespace needs the handoff binary as its relay \
                 (EngineOptions::handoff_exe)"
                    .into(),
            );
        }
        return Ok(None);
    };
    // A proxy the user set for the CLI is the way out of their network: handoff's proxy
    // goes through it.
    let upstream = match PROXY_VARS
        .iter()
        .find_map(|k| env.get(*k).filter(|v| !v.is_empty()))
    {
        Some(url) => Some(proxy::Upstream::from_url(url).ok_or_else(|| {
            "the proxy named in the agent's environment (HTTPS_PROXY and the like) is not an \
             http:// proxy, which handoff's proxy can go through"
                .to_string()
        })?),
        None => None,
    };
    let dir = layout.run_dir.join("net");
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("cannot create {dir}: {e}"))?;
    }
    let (listen, hosts, unreachable) = if network.transparent {
        let (listen, lines, unreachable) = transparent_endpoints(&network.endpoints);
        // The system's names, then the endpoints' (the first match wins).
        let system = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        let mut text = lines.join("\n");
        text.push_str("\n# the system's /etc/hosts\n");
        text.push_str(&system);
        let path = dir.join("hosts");
        std::fs::write(&path, text).map_err(|e| format!("cannot write {path}: {e}"))?;
        (listen, Some(path), unreachable)
    } else {
        let proxy = relay::Listen {
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], relay::RELAY_PORT)),
            endpoint: None,
        };
        (vec![proxy], None, Vec::new())
    };
    Ok(Some(OwnNetwork {
        relay: relay.clone(),
        socket: dir.join("proxy.sock"),
        dir,
        policy: proxy::Policy {
            network: network.clone(),
            upstream,
        },
        listen,
        hosts,
        unreachable,
    }))
}
