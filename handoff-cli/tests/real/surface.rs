//! What the real agents handoff holds in its own sandbox (Copilot CLI, Gemini CLI, Qwen Code)
//! are checked for alike: a control refused before any model call, a seat on a panel, and the
//! run's own MCP server (the echo server below) called under handoff's sandbox.

use std::path::PathBuf;

use handoff_testkit::model_server::{Script, provider_output};

use super::{Rig, Run};

/// A one-tool stdio MCP server (`echo`), in Python's standard library only.
pub(super) const MCP_ECHO: &str = r#"import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    method = m.get("method")
    if method == "initialize":
        r = {"protocolVersion": m["params"].get("protocolVersion", "2024-11-05"),
             "capabilities": {"tools": {}}, "serverInfo": {"name": "echo", "version": "1"}}
    elif method == "tools/list":
        r = {"tools": [{"name": "echo", "description": "echo its text",
                        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}
    elif method == "tools/call":
        r = {"content": [{"type": "text", "text": "echoed " + m["params"]["arguments"].get("text", "")}]}
    else:
        r = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}) + "\n")
    sys.stdout.flush()
"#;

/// `cli` refuses `extra` (exit 5, `rejected`) before any model call.
pub(super) fn refused_before_any_model_call(cli: &'static str, extra: &[&str]) {
    let rig = Rig::new(cli, Script::answer(provider_output("unused")));
    let run = rig.run("review", extra);
    assert_eq!(run.code, 5, "{} {}", run.json, run.stderr);
    assert_eq!(run.json["status"], "rejected");
    assert!(rig.server.model_calls().is_empty());
}

/// An advice panel of `cli` and `other`, both real: both answer, in that order.
pub(super) fn sits_on_a_panel(cli: &'static str, other: &str) {
    let rig = Rig::new(cli, Script::answer(provider_output("one view")));
    let (code, panel, members) = rig.panel(&format!("{cli},{other}"), "Is this safe?");
    assert_eq!(code, 0, "{panel:#}");
    assert_eq!(
        members,
        [
            (cli.to_owned(), "succeeded".to_owned()),
            (other.to_owned(), "succeeded".to_owned())
        ]
    );
}

/// The echo server's script in the worktree (not committed: the caller commits it with what
/// else it plants) and a `handoff.mcp.v1` descriptor naming it `docs`; the descriptor's path.
pub(super) fn mcp_echo(rig: &Rig) -> PathBuf {
    rig.repo.write("mcp_echo.py", MCP_ECHO);
    let script = rig.file("mcp_echo.py");
    let descriptor = rig.root.join("private/mcp.json");
    std::fs::write(
        &descriptor,
        serde_json::json!({
            "schemaVersion": "handoff.mcp.v1",
            "servers": [{"name": "docs", "transport": "stdio",
                         "command": "/usr/bin/python3", "args": [script], "env": {}}],
        })
        .to_string(),
    )
    .unwrap();
    descriptor
}

/// A review with the MCP `descriptor` and no shell; it must succeed, and the echo of
/// `marker` must reach the model.
pub(super) fn review_calls_mcp(rig: &Rig, descriptor: &std::path::Path, marker: &str) -> Run {
    let run = rig.run(
        "review",
        &[
            "--mcp-config",
            descriptor.to_str().unwrap(),
            "--bash",
            "false",
        ],
    );
    assert_eq!(run.code, 0, "{} {}", run.json, run.stderr);
    let echoed = rig
        .server
        .requests()
        .iter()
        .any(|r| r.body.to_string().contains(&format!("echoed {marker}")));
    assert!(echoed, "the MCP tool's output did not reach the model");
    run
}
