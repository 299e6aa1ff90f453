//! A headless Gemini run: the prompt on stdin, JSONL events on stdout, a Gemini home private to
//! the run whose settings carry the auth type, the tool list, the turn limit, the thinking
//! budget and the MCP servers, and deny rules of the admin tier for what is not granted.

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AnswerSource, Invocation, InvocationError, PrivateFile, Request, RunDir, StdinSource, agent_env,
};
use serde_json::{Value, json};

use super::{Gemini, SPEC};
use crate::common::{PROVIDER_DEFAULT_STR, ResolvedMcp, effective_env, render_mcp};

/// The model a run names when none is selected: Gemini CLI's own default model. Without an
/// explicit model Gemini routes every turn through a classifier model first.
pub const DEFAULT_MODEL: &str = "gemini-2.5-pro";

/// The tools every run has: reading and searching files.
pub const READ_TOOLS: &[&str] = &["list_directory", "read_file", "grep_search", "glob"];

/// The file-writing tools, for writing runs.
pub const WRITE_TOOLS: &[&str] = &["write_file", "replace"];

/// The shell tools, when the shell is granted.
pub const SHELL_TOOLS: &[&str] = &[
    "run_shell_command",
    "list_background_processes",
    "read_background_output",
];

/// The web tools, when the web is granted.
pub const WEB_TOOLS: &[&str] = &["web_fetch", "google_web_search"];

/// Credentials kept out of the environment of the commands the model runs
/// (`security.environmentVariableRedaction`).
pub const SECRET_VARS: &[&str] = &[
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GOOGLE_APPLICATION_CREDENTIALS",
];

/// The deny rules' file (`--admin-policy`), in the run's Gemini directory.
pub const POLICY_FILE: &str = "deny.toml";

/// The thinking budget (tokens) of an effort: `low` 1024, `medium` 8192, `high` 24576.
pub fn thinking_budget(effort: &str) -> Option<u32> {
    match effort {
        "low" => Some(1024),
        "medium" => Some(8192),
        "high" => Some(24576),
        _ => None,
    }
}

/// The built-in tools a run is given (with its MCP servers' tools, `tools.core`), by grant.
pub fn granted_tools(write: bool, bash: bool, web: bool) -> Vec<&'static str> {
    let mut t = READ_TOOLS.to_vec();
    for (granted, tools) in [(write, WRITE_TOOLS), (bash, SHELL_TOOLS), (web, WEB_TOOLS)] {
        if granted {
            t.extend(tools);
        }
    }
    t
}

/// The built-in tools a run is denied by policy: those of every kind not granted.
pub fn denied_tools(write: bool, bash: bool, web: bool) -> Vec<&'static str> {
    let mut t = Vec::new();
    for (granted, tools) in [(write, WRITE_TOOLS), (bash, SHELL_TOOLS), (web, WEB_TOOLS)] {
        if !granted {
            t.extend(tools);
        }
    }
    t
}

/// The policy file denying `tools`: one rule of the admin tier, above any other policy.
pub fn deny_policy(tools: &[&str]) -> String {
    let names: Vec<String> = tools.iter().map(|t| (*t).to_owned()).collect();
    format!(
        "# Tools this run is not granted.\n[[rule]]\ntoolName = {}\ndecision = \"deny\"\npriority = 900\n",
        crate::common::toml_array(&names)
    )
}

/// The flags of every headless run: the workspace trusted for the run, the model named,
/// every listed tool approved, JSONL events, no extensions.
pub(super) fn base_args(model: &str) -> Vec<String> {
    [
        "--skip-trust",
        "--model",
        model,
        "--approval-mode",
        "yolo",
        "--output-format",
        "stream-json",
        "--extensions",
        "none",
    ]
    .map(String::from)
    .to_vec()
}

/// The directories of the run's Gemini root: its `GEMINI_CLI_HOME` (holding `.gemini/`).
pub(super) fn home(root: &Utf8Path) -> Utf8PathBuf {
    root.join("home")
}

/// The auth type the settings select: Vertex AI when the user's environment asks for it, else
/// the Gemini API key (the one that honours `GOOGLE_GEMINI_BASE_URL`).
pub(super) fn auth_type(env: &std::collections::BTreeMap<String, String>) -> &'static str {
    let vertex = env
        .get("GOOGLE_GENAI_USE_VERTEXAI")
        .is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    if vertex {
        "vertex-ai"
    } else {
        "gemini-api-key"
    }
}

/// The settings every run of Gemini gets, whatever it does: the auth type, no usage
/// statistics, telemetry, updates or sandbox of its own, credentials kept from its shell.
pub(super) fn base_settings(env: &std::collections::BTreeMap<String, String>) -> Value {
    json!({
        "security": {
            "auth": {"selectedType": auth_type(env)},
            "environmentVariableRedaction": {"enabled": true, "blocked": SECRET_VARS},
        },
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "tools": {"sandbox": false},
    })
}

/// The run's MCP servers as Gemini's `mcpServers` setting holds them, and their names.
fn mcp_servers(
    run: &RunDir,
    secrets: &mut Vec<String>,
) -> Result<(serde_json::Map<String, Value>, Vec<String>), InvocationError> {
    render_mcp(run, secrets, |server| match server {
        ResolvedMcp::Stdio { command, args, env } => json!({
            "command": command,
            "args": args,
            "env": env,
        }),
        ResolvedMcp::Remote {
            transport,
            url,
            headers,
        } => {
            let key = if transport == "http" {
                "httpUrl"
            } else {
                "url"
            };
            json!({ key: url, "headers": headers })
        }
    })
}

impl Gemini {
    pub(super) fn plan(
        &self,
        request: &Request,
        run: &RunDir,
    ) -> Result<Invocation, InvocationError> {
        let spec = &*SPEC;
        let g = &request.grants.resolved;
        let write = request.writes();
        let sel = &request.selection.resolved;
        let mut secrets = Vec::new();
        let (servers, names) = mcp_servers(run, &mut secrets)?;
        let root = run.file("gemini");
        let home = home(&root);
        let base = agent_env(spec, &run.parent_env);
        // What Gemini will see once the user's configuration (`[agents.gemini]`) is applied:
        // their endpoint and auth decide the settings and the network.
        let user = effective_env(&base, run);

        let model = if sel.model == PROVIDER_DEFAULT_STR {
            DEFAULT_MODEL.to_owned()
        } else {
            sel.model.clone()
        };
        let turns = sel
            .max_turns
            .unwrap_or(spec.max_turns.map_or(12, |d| d.handoff));
        let tools = granted_tools(write, g.bash, g.web_search);
        let denied = denied_tools(write, g.bash, g.web_search);
        // `tools.core` holds MCP tools too: each run's server by the prefix of its tools.
        let mut core: Vec<String> = tools.iter().map(|t| (*t).to_owned()).collect();
        core.extend(names.iter().map(|n| format!("mcp_{n}_*")));

        let mut settings = base_settings(&user);
        settings["tools"]["core"] = json!(core);
        settings["model"] = json!({ "maxSessionTurns": turns });
        let budget = if sel.effort == PROVIDER_DEFAULT_STR {
            None
        } else {
            Some(thinking_budget(&sel.effort).ok_or_else(|| {
                InvocationError::Unsupported(format!(
                    "effort {} (Gemini CLI takes low, medium or high)",
                    sel.effort
                ))
            })?)
        };
        if let Some(budget) = budget {
            settings["modelConfigs"] = json!({"overrides": [{
                "match": {"model": model},
                "modelConfig": {"generateContentConfig": {
                    "thinkingConfig": {"thinkingBudget": budget},
                }},
            }]});
        }
        if !servers.is_empty() {
            settings["mcpServers"] = Value::Object(servers.clone());
        }

        let mut env = base.clone();
        env.insert("GEMINI_CLI_HOME".into(), home.to_string());
        env.insert("GEMINI_CLI_NO_RELAUNCH".into(), "true".into());
        env.insert("GEMINI_SANDBOX".into(), "false".into());
        env.insert("NO_COLOR".into(), "1".into());
        let settings_path = home.join(".gemini/settings.json");
        let mut files = vec![PrivateFile {
            path: settings_path,
            contents: serde_json::to_vec_pretty(&settings).unwrap_or_default(),
        }];
        let dirs = vec![root.clone(), home.clone(), home.join(".gemini")];

        let mut args = base_args(&model);
        if !denied.is_empty() {
            let path = root.join(POLICY_FILE);
            files.push(PrivateFile {
                path: path.clone(),
                contents: deny_policy(&denied).into_bytes(),
            });
            args.extend(["--admin-policy".into(), path.to_string()]);
        }
        if !names.is_empty() {
            args.extend(["--allowed-mcp-server-names".into(), names.join(",")]);
        }

        let sandbox = run
            .handoff_sandbox
            .then(|| handoff_core::sandbox::SandboxSpec {
                binds: Vec::new(),
                state: "a Gemini home private to the run (settings, sessions, logs)".into(),
                // Gemini's shell runs `bash -c`, not `$SHELL`: a wrapper would not be used.
                offline_shell: false,
                network: Some(super::network::network(&user, &servers, g.web_search)),
                packages: None,
            });

        let mut policy = json!({
            "enforcement": "handoff-sandbox-and-tool-policy",
            "nativeFilesystemIsolation": false,
            "nativeSandbox": "not used: Gemini CLI's sandbox needs docker or podman and an image it fetches",
            "geminiHome": "private to the run (GEMINI_CLI_HOME): no user settings, MCP servers, extensions, hooks or skills",
            "model": model,
            "approvalMode": "yolo: only the listed tools exist",
            "tools": core,
            "toolList": "allowlist (settings tools.core; an MCP server's tools by their prefix mcp_<server>_)",
            "deny": denied,
            "denyTier": "admin (--admin-policy)",
            "auth": auth_type(&user),
            "thinkingBudget": budget,
            "mcpServers": names,
            "maxTurns": turns,
            "turnLimit": "Gemini's own (settings model.maxSessionTurns: model calls)",
            "secretEnvVars": SECRET_VARS,
            "usage": "token counts from the result event; no cost",
            "structuredResult": "driver-normalized from the assistant text after the last tool call",
            "environment": "allowlist",
        });
        if sandbox.is_none() {
            policy["sandbox"] = handoff_core::sandbox::unavailable_receipt();
        }
        if let Some(nested) = &run.nested {
            policy["nestedAdvice"] =
                crate::common::nested_receipt(nested, sandbox.is_some(), "Gemini");
        }
        Ok(Invocation {
            sandbox,
            program: run.executable.clone(),
            args,
            env,
            cwd: request.cwd.clone().into(),
            stdin: StdinSource::Prompt,
            dirs,
            files,
            answer: AnswerSource::Stdout,
            policy,
            secrets,
        })
    }
}
