//! `--on` on `run`, `advice` and `run-with-advice`, `capabilities --on`, and `handoff __host`
//! (the host's side). The work is the library's (`handoff_remote`); this parses and prints.

use std::io::{Read as _, Write as _};

use handoff_core::RunInput;

/// The hidden verb a host answers through.
pub const HOST_VERB: &str = "__host";

/// A run on the host `on` names, with this machine's configuration: `--on`.
pub async fn run_on(
    input: RunInput,
    on: &str,
    config: handoff_core::LoadedConfig,
    cancel: tokio::sync::watch::Receiver<bool>,
) -> handoff_core::RunOutcome {
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let known = handoff_core::known_secrets(&env, &config.config);
    let state_dir = match state_dir(&env) {
        Ok(dir) => dir,
        Err(e) => return crate::engine(None).reject(input, e).await,
    };
    let engine = crate::engine_with(Some(config), None);
    let ctx = handoff_remote::RemoteContext {
        engine: &engine,
        env,
        state_dir,
        known_secrets: known,
    };
    handoff_remote::run_on_host(&ctx, input, on, cancel).await
}

/// Where what runs left on hosts is remembered: `hosts/` next to the task store.
pub fn state_dir(
    env: &std::collections::BTreeMap<String, String>,
) -> Result<camino::Utf8PathBuf, String> {
    let store = handoff_store::default_path(env).map_err(|e| format!("the task store: {e}"))?;
    Ok(store
        .parent()
        .map_or_else(|| "hosts".into(), |d| d.join("hosts")))
}

/// `handoff capabilities --on HOST`: that host's agents and preflight.
pub async fn capabilities_on(on: &str, json: bool) -> u8 {
    let fail = |e: &str| {
        let _ = writeln!(
            std::io::stderr(),
            "handoff: {}",
            handoff_core::printable(e, true)
        );
        handoff_core::exit::USAGE
    };
    let config = match crate::load_config() {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    match handoff_remote::host_capabilities(on, &config.config.hosts, &env).await {
        Ok(caps) => {
            let mut out = std::io::stdout().lock();
            if json {
                let _ = writeln!(out, "{}", serde_json::to_string(&caps).unwrap_or_default());
            } else {
                let _ = writeln!(out, "handoff {} on {on}", caps.driver_version);
                for line in handoff_core::summary::agent_lines(&caps) {
                    let _ = writeln!(out, "{line}");
                }
            }
            handoff_core::exit::OK
        }
        Err(e) => fail(&e),
    }
}

/// `handoff __host`: one request on standard input, one reply line on standard output.
pub async fn serve() -> u8 {
    let mut request = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(handoff_remote::protocol::MAX_REQUEST as u64 + 1)
        .read_to_end(&mut request);
    let reply = match (read, crate::open_store(), std::env::current_exe()) {
        (Err(e), _, _) => {
            handoff_remote::protocol::HostReply::error(format!("cannot read the request: {e}"))
        }
        (_, Err(e), _) => {
            handoff_remote::protocol::HostReply::error(format!("the task store: {e}"))
        }
        (_, _, Err(e)) => handoff_remote::protocol::HostReply::error(format!("this binary: {e}")),
        (Ok(_), Ok(store), Ok(exe)) => {
            let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
            let config = crate::load_config().map(|c| c.config).unwrap_or_default();
            let side = handoff_remote::HostSide {
                store: &store,
                exe: camino::Utf8PathBuf::from_path_buf(exe).unwrap_or_default(),
                jobs_dir: store.sibling_dir("jobs"),
                home: camino::Utf8PathBuf::from(env.get("HOME").cloned().unwrap_or_default()),
                known_secrets: handoff_core::known_secrets(&env, &config),
            };
            handoff_remote::serve(&side, &request).await
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", serde_json::to_string(&reply).unwrap_or_default());
    handoff_core::exit::OK
}
