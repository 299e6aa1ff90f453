//! User configuration: per-agent defaults, environment and endpoint settings.
//!
//! handoff isolates every agent CLI from its own user configuration, so a user behind a gateway,
//! a proxy or a local model says here what each agent needs: `$HANDOFF_CONFIG`, else
//! `$XDG_CONFIG_HOME/handoff/config.toml`, else `~/.config/handoff/config.toml`. No file means
//! defaults. Unknown keys and wrong types are errors that name the key and the line.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;

use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};

use crate::names::{AgentId, check_model};
use crate::redact::credential_name;

/// The whole configuration file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Settings per agent, keyed by agent id.
    #[serde(default)]
    pub agents: BTreeMap<String, AgentConfig>,
    /// The failover chain of runs that name none (`--failover`).
    #[serde(default, skip_serializing_if = "crate::config::is_default")]
    pub failover: crate::FailoverConfig,
    /// Other machines runs and continuations can go to (`--on NAME`), keyed by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hosts: BTreeMap<String, crate::HostConfig>,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// Settings for one agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// Default `--model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Default `--effort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// Default `--max-turns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Extra variables for the agent's process, literal values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// More of handoff's own environment to pass through, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_env: Vec<String>,
    /// Codex only: extra `--config key=value` overrides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config: Vec<String>,
    /// OpenCode only: merged into the generated inline config's `provider` table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<toml::Table>,
    /// Named accounts (logins, profiles) of this CLI, chosen with `handoff continue --account`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub accounts: BTreeMap<String, AccountConfig>,
}

/// One account of an agent CLI: the variables that select it (for example `CLAUDE_CONFIG_DIR`
/// or `CODEX_HOME` naming that login's directory).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountConfig {
    /// Variables set for the agent's process when it runs as this account.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

/// Whether `name` can name an account: 1–64 ASCII letters, digits, `.`, `_` or `-`, not
/// starting with `.` or `-`.
pub fn valid_account_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// Where the configuration came from.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedConfig {
    /// The file read, if any.
    pub path: Option<Utf8PathBuf>,
    /// Its contents (defaults when there is no file).
    pub config: Config,
    /// Warnings to show the user (e.g. a world-readable file with credentials).
    pub warnings: Vec<String>,
}

/// Why the configuration is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    /// The file.
    pub path: String,
    /// What is wrong, naming the key and line when known.
    pub message: String,
}

/// Codex config keys handoff pins for isolation; overrides may not touch them.
const CODEX_PINNED: &[&str] = &[
    "approval_policy",
    "ask_for_approval",
    "sandbox_mode",
    "sandbox_workspace_write",
    "sandbox_permissions",
    "project_doc_max_bytes",
    "project_doc_fallback_filenames",
    "project_root_markers",
    "web_search",
    "tools",
    "mcp_servers",
    "features",
    "rules",
    "execpolicy",
    "profile",
    "profiles",
    "experimental_instructions_file",
    "default_permissions",
    "permissions",
];

/// Codex keys that have their own config entries (`model`, `effort`).
const CODEX_OWN: &[(&str, &str)] = &[("model", "model"), ("model_reasoning_effort", "effort")];

/// OpenCode inline-config keys a provider table must not reach.
const OPENCODE_REFUSED: &[&str] = &[
    "permission",
    "agent",
    "mcp",
    "tools",
    "plugin",
    "instructions",
];

impl Config {
    /// The default file location for `env` (`HANDOFF_CONFIG`, `XDG_CONFIG_HOME`, `HOME`).
    pub fn location(env: &BTreeMap<String, String>) -> Option<(Utf8PathBuf, bool)> {
        if let Some(p) = env.get("HANDOFF_CONFIG").filter(|p| !p.is_empty()) {
            return Some((Utf8PathBuf::from(p), true));
        }
        if let Some(x) = env.get("XDG_CONFIG_HOME").filter(|p| p.starts_with('/')) {
            return Some((Utf8PathBuf::from(x).join("handoff/config.toml"), false));
        }
        env.get("HOME").filter(|p| p.starts_with('/')).map(|h| {
            (
                Utf8PathBuf::from(h).join(".config/handoff/config.toml"),
                false,
            )
        })
    }

    /// Loads the configuration named by `env`. A missing default file is no error; a missing
    /// `$HANDOFF_CONFIG` is.
    pub fn load(env: &BTreeMap<String, String>) -> Result<LoadedConfig, ConfigError> {
        match Config::location(env) {
            None => Ok(LoadedConfig {
                path: None,
                config: Config::default(),
                warnings: vec![],
            }),
            Some((path, explicit)) => match std::fs::metadata(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                    Ok(LoadedConfig {
                        path: None,
                        config: Config::default(),
                        warnings: vec![],
                    })
                }
                _ => Config::load_file(&path),
            },
        }
    }

    /// Loads and checks one file.
    pub fn load_file(path: &Utf8Path) -> Result<LoadedConfig, ConfigError> {
        let err = |message: String| ConfigError {
            path: path.to_string(),
            message,
        };
        let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
        if !meta.is_file() {
            return Err(err("not a regular file".into()));
        }
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let config = Config::parse(&text).map_err(err)?;
        let mut warnings = Vec::new();
        if meta.permissions().mode() & 0o044 != 0 && config.has_literal_credentials() {
            warnings.push(format!(
                "{path} holds credentials and is readable by group or others; run `chmod 600 {path}`"
            ));
        }
        Ok(LoadedConfig {
            path: Some(path.to_owned()),
            config,
            warnings,
        })
    }

    /// Parses TOML text and checks every rule that does not depend on an agent's capabilities.
    pub fn parse(text: &str) -> Result<Config, String> {
        let config: Config = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_owned();
            match e.span() {
                Some(span) => {
                    let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                    format!("line {line}: {msg}")
                }
                None => msg,
            }
        })?;
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> Result<(), String> {
        for (id, a) in &self.agents {
            let at = |key: &str| format!("agents.{id}.{key}");
            let agent =
                AgentId::parse(id).ok_or_else(|| format!("[agents.{id}]: invalid agent id"))?;
            if let Some(m) = &a.model {
                check_model(m).map_err(|e| format!("{}: {e}", at("model")))?;
            }
            if let Some(t) = a.max_turns
                && !(1..=100).contains(&t)
            {
                return Err(format!("{}: must be between 1 and 100", at("max_turns")));
            }
            for k in a.env.keys() {
                if !crate::mcp::valid_env_name(k) && !valid_lower_env(k) {
                    return Err(format!(
                        "{}: invalid variable name",
                        at(&format!("env.{k}"))
                    ));
                }
                if k.starts_with("HANDOFF_") {
                    return Err(format!(
                        "{}: HANDOFF_* variables are handoff's own",
                        at(&format!("env.{k}"))
                    ));
                }
            }
            for (name, account) in &a.accounts {
                if !valid_account_name(name) {
                    return Err(format!(
                        "{}: invalid account name (letters, digits, '.', '_', '-'; at most 64)",
                        at(&format!("accounts.{name}"))
                    ));
                }
                for k in account.env.keys() {
                    if !crate::mcp::valid_env_name(k) && !valid_lower_env(k) {
                        return Err(format!(
                            "{}: invalid variable name",
                            at(&format!("accounts.{name}.env.{k}"))
                        ));
                    }
                    if k.starts_with("HANDOFF_") {
                        return Err(format!(
                            "{}: HANDOFF_* variables are handoff's own",
                            at(&format!("accounts.{name}.env.{k}"))
                        ));
                    }
                }
            }
            for k in &a.pass_env {
                if !crate::mcp::valid_env_name(k) && !valid_lower_env(k) {
                    return Err(format!("{}: invalid variable name {k:?}", at("pass_env")));
                }
            }
            if !a.config.is_empty() {
                if agent != AgentId::CODEX {
                    return Err(format!(
                        "{}: only Codex takes --config overrides",
                        at("config")
                    ));
                }
                for o in &a.config {
                    check_codex_override(o).map_err(|e| format!("{}: {e}", at("config")))?;
                }
            }
            if let Some(p) = &a.provider {
                if agent != AgentId::OPENCODE {
                    return Err(format!(
                        "{}: only OpenCode takes a provider table",
                        at("provider")
                    ));
                }
                check_opencode_provider(p).map_err(|e| format!("{}: {e}", at("provider")))?;
            }
        }
        Ok(())
    }

    fn has_literal_credentials(&self) -> bool {
        self.agents.values().any(|a| {
            a.env.keys().any(|k| credential_name(k))
                || a.accounts
                    .values()
                    .any(|acc| acc.env.keys().any(|k| credential_name(k)))
                || a.provider.as_ref().is_some_and(table_has_credentials)
        })
    }

    /// The settings for `agent` (defaults when absent).
    pub fn agent(&self, agent: &AgentId) -> AgentConfig {
        self.agents.get(agent.as_str()).cloned().unwrap_or_default()
    }

    /// The configuration with every credential value replaced by `********`.
    pub fn masked(&self) -> Config {
        let mut c = self.clone();
        // Every other string through the masking service too: a URL with userinfo, a token in
        // an override, a secret of one agent repeated in another's settings.
        let masker = crate::Masker::new(known_secrets(&BTreeMap::new(), self));
        let mask = |v: &mut String| {
            if let std::borrow::Cow::Owned(m) = masker.mask(v).text {
                *v = m;
            }
        };
        for a in c.agents.values_mut() {
            for (k, v) in a
                .env
                .iter_mut()
                .chain(a.accounts.values_mut().flat_map(|acc| acc.env.iter_mut()))
            {
                if credential_name(k) {
                    *v = "********".into();
                } else {
                    mask(v);
                }
            }
            a.config.iter_mut().for_each(mask);
            if let Some(p) = a.provider.as_mut() {
                mask_table(p);
                mask_strings(p, &mask);
            }
        }
        c
    }
}

fn valid_lower_env(k: &str) -> bool {
    // Proxy variables are conventionally lowercase too (`https_proxy`).
    !k.is_empty()
        && k.len() <= 128
        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !k.as_bytes()[0].is_ascii_digit()
}

/// Checks one Codex `key=value` override: a dotted key that does not touch what handoff pins.
pub fn check_codex_override(o: &str) -> Result<(), String> {
    let Some((key, value)) = o.split_once('=') else {
        return Err(format!("{o:?} is not key=value"));
    };
    let key = key.trim();
    if key.is_empty()
        || value.trim().is_empty()
        || !key.split('.').all(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        })
    {
        return Err(format!("{o:?} is not key=value with a dotted key"));
    }
    let first = key.split('.').next().unwrap_or("");
    if CODEX_PINNED.contains(&first) || first.starts_with("sandbox") {
        return Err(format!(
            "`{key}` is pinned by handoff for isolation and cannot be overridden"
        ));
    }
    if codex_credential_key(key) {
        return Err(format!(
            "`{key}` would put a credential on Codex's command line, which every local user can \
             read: name a variable with `model_providers.<id>.env_key` (or \
             `env_http_headers`) and pass it with pass_env or env"
        ));
    }
    if let Some((_, own)) = CODEX_OWN.iter().find(|(k, _)| *k == key) {
        return Err(format!(
            "set `{own}` in [agents.codex] instead of overriding `{key}`"
        ));
    }
    Ok(())
}

/// Whether a Codex configuration key holds a credential's value (rather than the name of the
/// variable that holds it, like `env_key` and `env_http_headers`).
fn codex_credential_key(key: &str) -> bool {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.contains(&"env_http_headers") {
        return false;
    }
    let last = parts.last().copied().unwrap_or("");
    parts.contains(&"http_headers")
        || last == "experimental_bearer_token"
        || (last != "env_key" && credential_name(last))
}

fn check_opencode_provider(table: &toml::Table) -> Result<(), String> {
    // Each entry is one provider: `{ npm, name, options = { baseURL, apiKey, … }, models }`.
    for (name, value) in table {
        if OPENCODE_REFUSED.contains(&name.as_str()) {
            return Err(format!(
                "`{name}` is not a provider; it is pinned by handoff"
            ));
        }
        let Some(t) = value.as_table() else {
            return Err(format!("`{name}` must be a table"));
        };
        for key in t.keys() {
            if OPENCODE_REFUSED.contains(&key.as_str()) {
                return Err(format!(
                    "`{name}.{key}` is pinned by handoff and cannot be set"
                ));
            }
        }
    }
    Ok(())
}

fn table_has_credentials(t: &toml::Table) -> bool {
    t.iter().any(|(k, v)| {
        (credential_name(k) && v.is_str()) || v.as_table().is_some_and(table_has_credentials)
    })
}

fn mask_strings(t: &mut toml::Table, mask: &dyn Fn(&mut String)) {
    for (_, v) in t.iter_mut() {
        match v {
            toml::Value::String(s) => mask(s),
            toml::Value::Table(inner) => mask_strings(inner, mask),
            toml::Value::Array(items) => {
                for item in items {
                    if let toml::Value::String(s) = item {
                        mask(s);
                    }
                }
            }
            _ => {}
        }
    }
}

fn mask_table(t: &mut toml::Table) {
    for (k, v) in t.iter_mut() {
        if credential_name(k) && v.is_str() {
            *v = toml::Value::String("********".into());
        } else if let Some(inner) = v.as_table_mut() {
            mask_table(inner);
        }
    }
}

/// The values handoff masks wherever they appear: the credentials of `env` (handoff's
/// environment) and every secret of `config`.
pub fn known_secrets(env: &BTreeMap<String, String>, config: &Config) -> Vec<String> {
    let mut known = crate::redact::credential_values(env);
    for agent in config.agents.values() {
        known.extend(config_secrets(agent));
    }
    known.sort();
    known.dedup();
    known
}

/// Every secret value of one agent's configuration: credential-named `env` entries (its
/// accounts' too) and credential-named strings in its tables.
pub fn config_secrets(config: &AgentConfig) -> Vec<String> {
    fn walk(t: &toml::Table, out: &mut Vec<String>) {
        for (k, v) in t {
            match v {
                toml::Value::String(s) if credential_name(k) => out.push(s.clone()),
                toml::Value::Table(inner) => walk(inner, out),
                _ => {}
            }
        }
    }
    let mut out: Vec<String> = config
        .env
        .iter()
        .chain(config.accounts.values().flat_map(|a| a.env.iter()))
        .filter(|(k, _)| credential_name(k))
        .map(|(_, v)| v.clone())
        .collect();
    if let Some(p) = &config.provider {
        walk(p, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_file() {
        let c = Config::parse(
            r#"
[agents.claude]
model = "claude-sonnet-4-5"
effort = "high"
max_turns = 20
env = { ANTHROPIC_BASE_URL = "https://gw.example/anthropic", ANTHROPIC_AUTH_TOKEN = "tok-123" }
pass_env = ["MY_GATEWAY_HEADER"]

[agents.codex]
config = ['model_provider="gw"', 'model_providers.gw.base_url="http://127.0.0.1:8080/v1"', 'model_providers.gw.wire_api="responses"']

[agents.opencode.provider.gw]
npm = "@ai-sdk/openai-compatible"
options = { baseURL = "http://127.0.0.1:8080/v1", apiKey = "sk-local" }
"#,
        )
        .unwrap();
        assert_eq!(c.agent(&AgentId::CLAUDE).max_turns, Some(20));
        assert_eq!(c.agent(&AgentId::CODEX).config.len(), 3);
        let masked = c.masked();
        let text = toml::to_string(&masked).unwrap();
        assert!(
            !text.contains("tok-123") && !text.contains("sk-local"),
            "{text}"
        );
        assert!(text.contains("https://gw.example/anthropic"));
        assert_eq!(
            config_secrets(&c.agent(&AgentId::OPENCODE)),
            vec!["sk-local".to_string()]
        );
    }

    #[test]
    fn accounts_are_checked_and_masked() {
        let c = Config::parse(
            r#"
[agents.claude.accounts.work]
env = { CLAUDE_CONFIG_DIR = "/home/u/.claude-work", ANTHROPIC_API_KEY = "sk-work" }
"#,
        )
        .unwrap();
        let claude = c.agent(&AgentId::CLAUDE);
        assert_eq!(
            claude.accounts["work"].env["CLAUDE_CONFIG_DIR"],
            "/home/u/.claude-work"
        );
        assert_eq!(config_secrets(&claude), vec!["sk-work".to_string()]);
        let text = toml::to_string(&c.masked()).unwrap();
        assert!(
            !text.contains("sk-work") && text.contains(".claude-work"),
            "{text}"
        );
        for (bad, want) in [
            (
                "[agents.claude.accounts.\"a b\"]\nenv = {}\n",
                "invalid account name",
            ),
            (
                "[agents.claude.accounts.w]\nenv = { HANDOFF_X = \"1\" }\n",
                "handoff's own",
            ),
            ("[agents.claude.accounts.w]\nenvs = {}\n", "unknown field"),
        ] {
            let e = Config::parse(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
        assert!(valid_account_name("work-2.b_c"));
        assert!(!valid_account_name("-x") && !valid_account_name("") && !valid_account_name(".x"));
    }

    #[test]
    fn unknown_keys_and_wrong_types_name_key_and_line() {
        let e = Config::parse("[agents.claude]\nmodel = \"x\"\nmodle = \"y\"\n").unwrap_err();
        assert!(e.contains("line 3") && e.contains("modle"), "{e}");
        let e = Config::parse("[agents.codex]\n\nmax_turns = \"ten\"\n").unwrap_err();
        assert!(e.contains("line 3"), "{e}");
        let e = Config::parse("[agent.codex]\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("agent"), "{e}");
    }

    #[test]
    fn literal_credentials_are_refused_and_variable_names_accepted() {
        for o in [
            "model_providers.gw.experimental_bearer_token=\"tok\"",
            "model_providers.gw.http_headers.Authorization=\"Bearer x\"",
            "model_providers.gw.http_headers={ X-Org = \"a\" }",
            "model_providers.gw.api_key=\"sk-1\"",
        ] {
            let e = check_codex_override(o).unwrap_err();
            assert!(e.contains("env_key"), "{o}: {e}");
        }
        for o in [
            "model_providers.gw.env_key=\"GW_TOKEN\"",
            "model_providers.gw.env_http_headers.X-Token=\"GW_TOKEN\"",
            "model_providers.gw.base_url=\"https://gw/v1\"",
            "model_provider=\"gw\"",
        ] {
            assert_eq!(check_codex_override(o), Ok(()), "{o}");
        }
    }

    #[test]
    fn pinned_keys_are_refused() {
        for bad in [
            "sandbox_mode=\"danger-full-access\"",
            "approval_policy=\"on-request\"",
            "mcp_servers.x.command=\"/bin/sh\"",
            "features.shell_tool=true",
            "project_doc_max_bytes=100",
            "web_search=\"live\"",
            "model=\"x\"",
            "default_permissions=\"open\"",
            "permissions.open.network.enabled=true",
            "novalue",
        ] {
            assert!(check_codex_override(bad).is_err(), "{bad}");
        }
        assert!(check_codex_override("model_providers.gw.env_key=\"GW_KEY\"").is_ok());
        let e = Config::parse("[agents.claude]\nconfig = [\"a=1\"]\n").unwrap_err();
        assert!(e.contains("only Codex"), "{e}");
        let e = Config::parse("[agents.opencode.provider.permission]\nx = 1\n").unwrap_err();
        assert!(e.contains("pinned"), "{e}");
        let e = Config::parse("[agents.claude]\nenv = { HANDOFF_X = \"1\" }\n").unwrap_err();
        assert!(e.contains("HANDOFF_"), "{e}");
    }

    #[test]
    fn location_precedence() {
        let mut env = BTreeMap::new();
        env.insert("HOME".to_string(), "/home/u".to_string());
        assert_eq!(
            Config::location(&env).unwrap().0,
            "/home/u/.config/handoff/config.toml"
        );
        env.insert("XDG_CONFIG_HOME".into(), "/x".into());
        assert_eq!(Config::location(&env).unwrap().0, "/x/handoff/config.toml");
        env.insert("HANDOFF_CONFIG".into(), "/c.toml".into());
        assert_eq!(Config::location(&env).unwrap(), ("/c.toml".into(), true));
    }

    #[test]
    fn world_readable_credentials_warn() {
        let dir = tempfile::tempdir().unwrap();
        let p = Utf8PathBuf::from_path_buf(dir.path().join("c.toml")).unwrap();
        std::fs::write(
            &p,
            "[agents.claude]\nenv = { ANTHROPIC_API_KEY = \"sk-x\" }\n",
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(Config::load_file(&p).unwrap().warnings.len(), 1);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Config::load_file(&p).unwrap().warnings.is_empty());
    }
}
