//! Whether the handoff plugin is installed in Claude Code and Codex, as each host reports it
//! (`claude plugin list --json`: `[{id, version, enabled, installPath, …}]`; `codex plugin list
//! --json`: `{installed: [{pluginId, name, version, installed, enabled, source, …}]}`). No model call; a host that is missing or
//! does not answer within its time limit is reported as such.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use camino::Utf8PathBuf;
use serde::Serialize;
use serde_json::Value;

/// How long a host may take to list its plugins.
const LIST_TIMEOUT: Duration = Duration::from_secs(20);

/// The plugin's state in one host.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PluginStatus {
    /// `claude-code` or `codex`.
    pub host: &'static str,
    /// Whether the host lists the plugin as installed; `None` when it could not be asked.
    pub installed: Option<bool>,
    /// The entry the host reported, or why it could not be asked.
    pub detail: String,
}

/// The plugin's state in each host.
pub fn plugin_status(env: &BTreeMap<String, String>) -> Vec<PluginStatus> {
    vec![claude(env), codex(env)]
}

fn on_path(name: &str, env: &BTreeMap<String, String>) -> Option<Utf8PathBuf> {
    env.get("PATH")?
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Utf8PathBuf::from(d).join(name))
        .find(|p| handoff_core::is_executable(p))
}

/// Runs `program args` with a time limit; its stdout, or why not.
fn list(program: &Utf8PathBuf, args: &[&str]) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        if let Some(mut s) = stdout {
            let _ = std::io::Read::read_to_string(&mut s, &mut out);
        }
        out
    });
    let deadline = std::time::Instant::now() + LIST_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{program} {} did not answer in time",
                    args.join(" ")
                ));
            }
        }
    };
    let out = reader.join().unwrap_or_default();
    if status.success() {
        Ok(out)
    } else {
        Err(format!("{program} {} failed ({status})", args.join(" ")))
    }
}

fn claude(env: &BTreeMap<String, String>) -> PluginStatus {
    let host = "claude-code";
    let Some(exe) = on_path("claude", env) else {
        return PluginStatus {
            host,
            installed: None,
            detail: "claude is not on PATH".into(),
        };
    };
    match list(&exe, &["plugin", "list", "--json"]) {
        Err(e) => PluginStatus {
            host,
            installed: None,
            detail: e,
        },
        Ok(out) => {
            let entries: Vec<Value> = serde_json::from_str(&out).unwrap_or_default();
            let ours = entries.iter().find(|e| {
                e.get("id")
                    .and_then(Value::as_str)
                    .is_some_and(|v| v.starts_with("handoff@"))
            });
            match ours {
                Some(e) => PluginStatus {
                    host,
                    installed: Some(true),
                    detail: describe(e, "id"),
                },
                None => PluginStatus {
                    host,
                    installed: Some(false),
                    detail: format!(
                        "{} plugin(s) installed, handoff not among them",
                        entries.len()
                    ),
                },
            }
        }
    }
}

fn codex(env: &BTreeMap<String, String>) -> PluginStatus {
    let host = "codex";
    let Some(exe) = on_path("codex", env) else {
        return PluginStatus {
            host,
            installed: None,
            detail: "codex is not on PATH".into(),
        };
    };
    match list(&exe, &["plugin", "list", "--json"]) {
        Err(e) => PluginStatus {
            host,
            installed: None,
            detail: e,
        },
        Ok(out) => {
            let listed: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
            let installed = listed
                .get("installed")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let ours = installed.iter().find(|e| {
                e.get("pluginId")
                    .and_then(Value::as_str)
                    .is_some_and(|v| v.starts_with("handoff@"))
            });
            match ours {
                Some(e) => PluginStatus {
                    host,
                    installed: Some(e.get("installed") != Some(&Value::Bool(false))),
                    detail: describe(e, "pluginId"),
                },
                None => PluginStatus {
                    host,
                    installed: Some(false),
                    detail: format!(
                        "{} plugin(s) installed, handoff not among them",
                        installed.len()
                    ),
                },
            }
        }
    }
}

/// `<id> <version>[, disabled]` of a host's plugin entry.
fn describe(entry: &Value, id_key: &str) -> String {
    let text = |k: &str| entry.get(k).and_then(Value::as_str).unwrap_or("?");
    let mut out = format!("{} {}", text(id_key), text("version"));
    if entry.get("enabled") == Some(&Value::Bool(false)) {
        out.push_str(", disabled");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_as_id_version_and_state() {
        let claude: Value =
            serde_json::json!({"id": "handoff@handoff-local", "version": "0.1.0", "enabled": true});
        assert_eq!(describe(&claude, "id"), "handoff@handoff-local 0.1.0");
        let codex: Value =
            serde_json::json!({"pluginId": "handoff@x", "version": "0.1.0", "enabled": false});
        assert_eq!(describe(&codex, "pluginId"), "handoff@x 0.1.0, disabled");
    }
}
