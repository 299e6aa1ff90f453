//! The environment an agent process receives: an explicit allowlist, never the whole parent env.

use std::collections::BTreeMap;

use crate::provider::ProviderSpec;

/// Variables every agent receives when handoff has them: the basics of a login session, the
/// locale, temporary files, and proxy / certificate settings (so corporate networks keep
/// working). A trailing `*` matches a prefix.
pub const COMMON_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TERM",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
];

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// Whether `name` passes the allowlist of `spec`.
pub fn allowed(spec: &ProviderSpec, name: &str) -> bool {
    COMMON_ENV
        .iter()
        .chain(spec.env_passthrough.iter())
        .any(|p| matches(p, name))
}

/// The allowlisted subset of `parent` for the agent described by `spec`.
pub fn agent_env(
    spec: &ProviderSpec,
    parent: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    parent
        .iter()
        .filter(|(k, _)| allowed(spec, k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}
