//! Whether the handoff plugin is installed in Claude Code and Codex, as each host reports it
//! (`claude plugin list --json`: `[{id, version, enabled, installPath, …}]`; `codex plugin list
//! --json`: `{installed: [{pluginId, name, version, installed, enabled, source, …}]}`). No model call; a host that is missing or
//! does not answer within its time limit is reported as such.

use std::collections::BTreeMap;
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{AnswerSource, Ending, Invocation, StdinSource, locate_on_path, supervise};
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
pub async fn plugin_status(env: &BTreeMap<String, String>) -> Vec<PluginStatus> {
    vec![claude(env).await, codex(env).await]
}

/// Runs `program args` under the process supervisor, in handoff's directory with `env`, for at
/// most `timeout`; its stdout, or why not.
async fn list(
    program: &Utf8Path,
    args: &[&str],
    env: &BTreeMap<String, String>,
    timeout: Duration,
) -> Result<String, String> {
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|d| Utf8PathBuf::from_path_buf(d).ok())
        .unwrap_or_else(|| Utf8PathBuf::from("/"));
    let invocation = Invocation {
        sandbox: None,
        program: program.to_owned(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env: env.clone(),
        cwd,
        stdin: StdinSource::Null,
        dirs: Vec::new(),
        files: Vec::new(),
        answer: AnswerSource::Stdout,
        policy: Value::Null,
        secrets: Vec::new(),
    };
    // Nothing cancels a listing but its time limit.
    let (_, never) = tokio::sync::watch::channel(false);
    let report = supervise(&invocation, &[], timeout, never).await;
    let shown = format!("{program} {}", args.join(" "));
    match report.ending {
        Ending::SpawnFailed { message } => Err(message),
        Ending::TimedOut | Ending::Cancelled => Err(format!("{shown} did not answer in time")),
        Ending::OutputLimit { stream } => Err(format!("{shown} printed too much on {stream}")),
        Ending::Exited if report.exit_code == Some(0) => {
            Ok(String::from_utf8_lossy(&report.stdout).into_owned())
        }
        Ending::Exited => Err(match (report.exit_code, report.signal) {
            (Some(code), _) => format!("{shown} failed (exit status: {code})"),
            (None, Some(signal)) => format!("{shown} failed (killed by {signal})"),
            (None, None) => format!("{shown} failed"),
        }),
    }
}

async fn claude(env: &BTreeMap<String, String>) -> PluginStatus {
    let host = "claude-code";
    let Some(exe) = locate_on_path("claude", env) else {
        return PluginStatus {
            host,
            installed: None,
            detail: "claude is not on PATH".into(),
        };
    };
    match list(&exe, &["plugin", "list", "--json"], env, LIST_TIMEOUT).await {
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

async fn codex(env: &BTreeMap<String, String>) -> PluginStatus {
    let host = "codex";
    let Some(exe) = locate_on_path("codex", env) else {
        return PluginStatus {
            host,
            installed: None,
            detail: "codex is not on PATH".into(),
        };
    };
    match list(&exe, &["plugin", "list", "--json"], env, LIST_TIMEOUT).await {
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

    /// A host CLI: a `/bin/sh` script in its own `PATH` directory.
    fn host(dir: &Utf8Path, name: &str, script: &str) -> BTreeMap<String, String> {
        use std::os::unix::fs::PermissionsExt;
        let exe = dir.join(name);
        std::fs::write(&exe, format!("#!/bin/sh\n{script}")).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        BTreeMap::from([("PATH".to_owned(), dir.to_string())])
    }

    fn scratch() -> (tempfile::TempDir, Utf8PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Utf8PathBuf::from_path_buf(tmp.path().canonicalize().unwrap()).unwrap();
        (tmp, dir)
    }

    #[tokio::test]
    async fn each_host_is_asked_and_read() {
        let (_tmp, dir) = scratch();
        host(
            &dir,
            "claude",
            r#"[ "$*" = "plugin list --json" ] && echo '[{"id": "handoff@handoff-local", "version": "0.1.0"}]'"#,
        );
        let env = host(&dir, "codex", "echo broken >&2; exit 3");
        let status = plugin_status(&env).await;
        assert_eq!(status[0].installed, Some(true), "{status:?}");
        assert_eq!(status[0].detail, "handoff@handoff-local 0.1.0");
        assert_eq!(status[1].installed, None, "{status:?}");
        assert_eq!(
            status[1].detail,
            format!("{dir}/codex plugin list --json failed (exit status: 3)")
        );

        let env = BTreeMap::from([("PATH".to_owned(), "/nonexistent".to_owned())]);
        let status = plugin_status(&env).await;
        assert_eq!(status[0].detail, "claude is not on PATH");
        assert_eq!(status[1].detail, "codex is not on PATH");
    }

    /// A host that does not answer in time is killed with everything it started.
    #[tokio::test]
    async fn a_host_that_hangs_is_killed_with_its_children() {
        let (_tmp, dir) = scratch();
        let pid_file = dir.join("grandchild.pid");
        let env = host(
            &dir,
            "claude",
            &format!("/bin/sleep 30 &\necho $! > {pid_file}\nwait\n"),
        );
        let exe = dir.join("claude");
        let started = std::time::Instant::now();
        let listed = list(&exe, &["plugin", "list"], &env, Duration::from_millis(300)).await;
        assert_eq!(
            listed,
            Err(format!("{exe} plugin list did not answer in time"))
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let gone = (0..50).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            // Gone, or a zombie waiting for its reaper.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_or(true, |s| s.split_whitespace().nth(2) == Some("Z"))
        });
        assert!(gone, "the host's child {pid} outlived the time limit");
    }
}
