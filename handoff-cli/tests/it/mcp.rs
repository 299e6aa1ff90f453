//! `handoff mcp`: the MCP server, driven by rmcp's client over the real binary's stdio, with the
//! fake agents standing in for the CLIs.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use handoff_testkit::keys::{MODE, READY_FILE};
use nix::sys::signal::kill;
use nix::unistd::Pid;
use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::support::{Sandbox, work_dir};

/// Every tool the server offers.
const TOOLS: [&str; 8] = [
    "handoff_advice",
    "handoff_cancel",
    "handoff_capabilities",
    "handoff_continue",
    "handoff_result",
    "handoff_run",
    "handoff_start",
    "handoff_status",
];
/// How long a process may take to disappear once it should be gone.
const GONE_WITHIN: Duration = Duration::from_secs(5);

/// The client side: records the progress notifications it receives.
#[derive(Clone, Default)]
struct Recorder {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

/// `handoff mcp` in the sandbox and an rmcp client connected to its stdin/stdout.
struct Mcp {
    client: RunningService<RoleClient, Recorder>,
    child: tokio::process::Child,
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    /// The server's private directory for inline instructions.
    dir: PathBuf,
}

impl Mcp {
    async fn start(sb: &Sandbox) -> Mcp {
        let mut command = tokio::process::Command::from(sb.command());
        command
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let recorder = Recorder::default();
        let progress = recorder.progress.clone();
        let client = recorder.serve((stdout, stdin)).await.unwrap();
        // The server made its directory before it answered, and holds it open (locked) for
        // its life.
        let dir = open_private_dir(child.id().unwrap());
        Mcp {
            client,
            child,
            progress,
            dir,
        }
    }

    async fn call(&self, tool: &str, arguments: Value) -> CallToolResult {
        let Value::Object(arguments) = arguments else {
            panic!("arguments must be an object");
        };
        self.client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
            .await
            .unwrap_or_else(|e| panic!("{tool}: {e}"))
    }

    /// Closes the client's side (the server's stdin) and waits for the server to exit.
    async fn close(mut self) -> std::process::ExitStatus {
        let _ = self.client.cancel().await;
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the server did not exit after its stdin closed")
            .unwrap()
    }
}

fn structured(result: &CallToolResult) -> &Value {
    result
        .structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("no structured content: {result:#?}"))
}

fn texts(result: &CallToolResult) -> Vec<String> {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn is_error(result: &CallToolResult) -> bool {
    result.is_error == Some(true)
}

/// Waits until `path` holds a pid.
async fn pid_in(path: &Path) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether `pid` is gone (or a zombie nobody waits for any more).
fn gone(pid: i32) -> bool {
    if kill(Pid::from_raw(pid), None).is_err() {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

async fn assert_gone(pid: i32, what: &str) {
    let start = Instant::now();
    while !gone(pid) {
        assert!(
            start.elapsed() < GONE_WITHIN,
            "{what} (pid {pid}) is still running"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The server's private directory for inline instructions: the `handoff-mcp-…` directory
/// process `pid` holds open. It is in the private work directory, which is shared with every
/// other handoff of this user (see `support::work_dir`), so it is found by what the server
/// holds, not by listing.
fn open_private_dir(pid: u32) -> PathBuf {
    let open: Vec<PathBuf> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("handoff-mcp-"))
        })
        .collect();
    assert_eq!(open.len(), 1, "{open:?}");
    open.into_iter().next().unwrap()
}

/// What a private directory holds.
fn files_in(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|f| f.file_name().to_string_lossy().into_owned())
        .collect()
}

fn run_args(sb: &Sandbox, mode: &str) -> Value {
    json!({
        "harness": "codex",
        "callerHarness": "claude",
        "mode": mode,
        "cwd": sb.cwd(),
        "instructions": "Make the change described here, then report.",
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_its_tools_and_reports_capabilities() {
    let sb = Sandbox::new();
    let mcp = Mcp::start(&sb).await;
    let info = mcp.client.peer_info().expect("server info");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("handoff")
    );

    let tools = mcp.client.list_all_tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(names, TOOLS);
    for tool in &tools {
        assert_eq!(
            tool.input_schema.get("type"),
            Some(&json!("object")),
            "{}",
            tool.name
        );
        assert!(
            tool.description.is_some(),
            "{} has no description",
            tool.name
        );
    }
    let run = tools.iter().find(|t| t.name == "handoff_run").unwrap();
    let properties = run.input_schema["properties"].as_object().unwrap();
    for field in [
        "harness",
        "mode",
        "cwd",
        "instructions",
        "withAdvice",
        "maxNodes",
    ] {
        assert!(properties.contains_key(field), "handoff_run lacks {field}");
    }

    let caps = mcp.call("handoff_capabilities", json!({})).await;
    assert!(!is_error(&caps), "{caps:#?}");
    let s = structured(&caps);
    assert_eq!(s["exitCode"], 0);
    let providers = s["result"]["providers"].as_array().unwrap();
    let codex = providers.iter().find(|p| p["id"] == "codex").unwrap();
    assert_eq!(codex["preflight"]["ok"], true, "{codex:#}");
    // The text content is the command's own JSON line.
    let first: Value = serde_json::from_str(&texts(&caps)[0]).unwrap();
    assert_eq!(&first, &s["result"]);

    assert!(mcp.close().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advice_on_the_fake_codex_returns_the_result_json() {
    let sb = Sandbox::new();
    let mcp = Mcp::start(&sb).await;
    let advice = mcp
        .call(
            "handoff_advice",
            json!({
                "harness": "codex",
                "callerHarness": "claude",
                "cwd": sb.cwd(),
                "instructions": "Is the retry loop safe?",
            }),
        )
        .await;
    assert!(!is_error(&advice), "{advice:#?}");
    let s = structured(&advice);
    assert_eq!(s["exitCode"], 0, "{s:#}");
    assert_eq!(s["result"]["status"], "succeeded", "{s:#}");
    assert_eq!(s["result"]["exit"]["driver"], 0);
    assert_eq!(s["result"]["operation"], "advice");
    let first: Value = serde_json::from_str(&texts(&advice)[0]).unwrap();
    assert_eq!(&first, &s["result"]);
    assert_eq!(
        texts(&advice).last().unwrap().split(':').next(),
        Some("exit 0")
    );

    // The client sent a progress token, so the call reported progress while it ran.
    let progress = mcp.progress.lock().unwrap().clone();
    assert!(
        progress.iter().any(|p| p
            .message
            .as_deref()
            .is_some_and(|m| m.contains("running, ") && m.ends_with(" s"))),
        "{progress:?}"
    );
    // The instructions went through a private file that is gone once the call ended, in a
    // private directory in the private work directory, not in TMPDIR (where a sandboxed agent
    // may write).
    let dir = mcp.dir.clone();
    assert!(files_in(&dir).is_empty(), "{dir:?}");
    let mode = std::fs::metadata(&dir).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o700
    );
    assert_eq!(dir.parent(), Some(work_dir().as_path()), "{dir:?}");
    assert!(
        !dir.starts_with(&sb.tmp) && !dir.starts_with("/tmp"),
        "{dir:?}"
    );

    assert!(mcp.close().await.success());
    assert!(!dir.exists(), "the private directory is removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continue_names_its_receiver_in_one_phrase() {
    let sb = crate::continuation::sandbox();
    let note = crate::continuation::note_file(&sb, "note.md", &crate::note::SECTIONS);
    let mcp = Mcp::start(&sb).await;
    let dry = mcp
        .call(
            "handoff_continue",
            json!({
                "destination": "codex gpt-5 high",
                "from": "claude",
                "cwd": sb.cwd(),
                "noteFile": note,
                "fallback": "fresh-agent",
                "dryRun": true,
            }),
        )
        .await;
    assert!(!is_error(&dry), "{dry:#?}");
    let s = structured(&dry);
    assert_eq!(s["exitCode"], 0, "{s:#}");
    assert_eq!(s["result"]["outcome"], "dry-run", "{s:#}");
    assert_eq!(s["result"]["destination"]["effort"], "high");
    assert_eq!(s["result"]["target"]["model"], "gpt-5");
    let typo = mcp
        .call(
            "handoff_continue",
            json!({
                "destination": "codex hgih",
                "from": "claude",
                "cwd": sb.cwd(),
                "noteFile": note,
                "dryRun": true,
            }),
        )
        .await;
    let s = structured(&typo);
    assert_eq!(s["exitCode"], 5, "{s:#}");
    assert!(
        s["result"]["reason"].as_str().unwrap().contains("'hgih'"),
        "{s:#}"
    );
    assert!(mcp.close().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_harness_list_asks_a_panel() {
    let sb = Sandbox::new();
    let mcp = Mcp::start(&sb).await;
    let panel = mcp
        .call(
            "handoff_advice",
            json!({
                "harness": ["codex", "claude"],
                "callerHarness": "claude",
                "cwd": sb.cwd(),
                "instructions": "Is the retry loop safe?",
            }),
        )
        .await;
    assert!(!is_error(&panel), "{panel:#?}");
    let s = structured(&panel);
    assert_eq!(s["exitCode"], 0, "{s:#}");
    assert_eq!(s["result"]["schemaVersion"], "handoff.panel.v1", "{s:#}");
    let members: Vec<&str> = s["result"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["target"]["harness"].as_str().unwrap())
        .collect();
    assert_eq!(members, ["codex", "claude"]);
    assert!(mcp.close().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_build_runs_from_start_to_result() {
    let sb = Sandbox::new();
    let mcp = Mcp::start(&sb).await;
    let started = mcp
        .call("handoff_start", json!({ "run": run_args(&sb, "build") }))
        .await;
    assert!(!is_error(&started), "{started:#?}");
    let job = structured(&started)["jobId"].as_str().unwrap().to_owned();
    assert_eq!(structured(&started)["verb"], "run");
    assert!(structured(&started)["pid"].as_u64().is_some());

    let status = mcp.call("handoff_status", json!({ "jobId": job })).await;
    let s = structured(&status);
    assert!(s["state"] == "running" || s["state"] == "finished", "{s:#}");
    assert!(s["pid"].as_u64().is_some(), "{s:#}");
    assert!(s["elapsedMs"].as_u64().is_some(), "{s:#}");

    let result = mcp
        .call(
            "handoff_result",
            json!({ "jobId": job, "waitSeconds": 120 }),
        )
        .await;
    assert!(!is_error(&result), "{result:#?}");
    let r = structured(&result);
    assert_eq!(r["exitCode"], 0, "{r:#}");
    assert_eq!(r["jobId"], job.as_str());
    assert_eq!(r["result"]["status"], "succeeded", "{r:#}");
    assert_eq!(r["result"]["mode"], "build");
    assert!(sb.repo.path().join("fake-build.txt").exists());

    let status = mcp.call("handoff_status", json!({ "jobId": job })).await;
    let s = structured(&status);
    assert_eq!(s["state"], "finished", "{s:#}");
    assert_eq!(s["exitCode"], 0);
    assert_eq!(s["status"], "succeeded");
    let all = mcp.call("handoff_status", json!({})).await;
    assert_eq!(structured(&all)["jobs"].as_array().unwrap().len(), 1);

    let unknown = mcp
        .call("handoff_result", json!({ "jobId": "job-nope" }))
        .await;
    assert!(is_error(&unknown), "{unknown:#?}");

    assert!(mcp.close().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_job_is_cancelled() {
    let sb = Sandbox::new();
    let ready = sb.root.join("agent.pid");
    sb.agents.set(MODE, "hang");
    sb.agents.set(READY_FILE, &ready);
    let mcp = Mcp::start(&sb).await;
    let started = mcp
        .call("handoff_start", json!({ "run": run_args(&sb, "build") }))
        .await;
    let job = structured(&started)["jobId"].as_str().unwrap().to_owned();
    let handoff_pid = i32::try_from(structured(&started)["pid"].as_u64().unwrap()).unwrap();
    let agent = pid_in(&ready).await;

    // `handoff jobs` lists the server's job while it runs.
    let listed = sb.run(&["jobs", "--json"]);
    let line = listed
        .stdout
        .lines()
        .find(|l| l.contains(&job))
        .unwrap_or_else(|| panic!("{job} not in `handoff jobs`: {listed:?}"));
    let listed: Value = serde_json::from_str(line).unwrap();
    assert_eq!(listed["origin"], "mcp");
    assert_eq!(listed["state"], "running");

    let pending = mcp
        .call("handoff_result", json!({ "jobId": job, "waitSeconds": 1 }))
        .await;
    assert!(!is_error(&pending), "{pending:#?}");
    assert_eq!(structured(&pending)["state"], "running");
    assert!(texts(&pending)[0].contains("still running"), "{pending:#?}");

    let cancelled = mcp.call("handoff_cancel", json!({ "jobId": job })).await;
    let c = structured(&cancelled);
    assert_eq!(c["state"], "cancelled", "{c:#}");
    assert_eq!(c["exitCode"], 9, "{c:#}");
    assert_eq!(c["status"], "cancelled", "{c:#}");
    assert_eq!(c["cancelRequested"], true);

    let result = mcp.call("handoff_result", json!({ "jobId": job })).await;
    assert!(is_error(&result), "{result:#?}");
    let r = structured(&result);
    assert_eq!(r["exitCode"], 9);
    let recorded = sb.run(&["result", &job]);
    assert_eq!(recorded.code, 9, "{recorded:?}");
    assert_eq!(recorded.json["status"], "cancelled");
    assert_eq!(r["result"]["status"], "cancelled", "{r:#}");
    assert_eq!(r["result"]["exit"]["driver"], 9);
    assert_gone(agent, "the agent").await;
    assert_gone(handoff_pid, "the job's handoff process").await;

    assert!(mcp.close().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_rejected_with_the_cli_message() {
    let sb = Sandbox::new();
    let mcp = Mcp::start(&sb).await;
    let mut args = run_args(&sb, "sideways");
    let rejected = mcp.call("handoff_run", args.clone()).await;
    assert!(is_error(&rejected), "{rejected:#?}");
    let r = structured(&rejected);
    assert_eq!(r["exitCode"], 5, "{r:#}");
    assert_eq!(r["result"]["status"], "rejected", "{r:#}");

    // The message is the one line the command itself prints for the same flags.
    let ins = sb.instructions("Make the change described here, then report.");
    let cwd = sb.cwd();
    let cli = sb.run(&[
        "run",
        "--mode",
        "sideways",
        "--harness",
        "codex",
        "--caller-harness",
        "claude",
        "--cwd",
        &cwd,
        "--instructions",
        &ins,
    ]);
    assert_eq!(cli.code, 5, "{cli:#?}");
    let line = cli.stderr.lines().next().unwrap();
    let message = r["message"].as_str().unwrap();
    assert_eq!(Some(message), line.strip_prefix("handoff: "), "{cli:#?}");
    assert_eq!(
        texts(&rejected).last().unwrap(),
        &format!("exit 5: {message}")
    );

    // Both forms of the instructions: refused before anything starts, in the same shape.
    args["instructionsFile"] = json!(ins);
    args["mode"] = json!("build");
    let both = mcp.call("handoff_run", args).await;
    assert!(is_error(&both), "{both:#?}");
    assert_eq!(structured(&both)["exitCode"], 5);
    assert_eq!(
        structured(&both)["message"],
        "give instructions or instructionsFile, not both"
    );
    let none = mcp.call("handoff_start", json!({})).await;
    assert!(is_error(&none), "{none:#?}");
    assert_eq!(structured(&none)["exitCode"], 5);

    // A misspelt field is refused, not ignored.
    let Value::Object(typo) = json!({ "harness": "codex", "cwd": cwd, "timeout": 5 }) else {
        unreachable!()
    };
    let err = mcp
        .client
        .call_tool(CallToolRequestParams::new("handoff_advice").with_arguments(typo))
        .await
        .unwrap();
    assert!(is_error(&err), "{err:#?}");
    assert!(
        texts(&err)[0].contains("unknown field `timeout`"),
        "{err:#?}"
    );

    assert!(mcp.close().await.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_stdin_stops_the_server_and_its_jobs() {
    let sb = Sandbox::new();
    let ready = sb.root.join("agent.pid");
    sb.agents.set(MODE, "hang");
    sb.agents.set(READY_FILE, &ready);
    let mcp = Mcp::start(&sb).await;
    let server = i32::try_from(mcp.child.id().unwrap()).unwrap();
    let started = mcp
        .call("handoff_start", json!({ "run": run_args(&sb, "build") }))
        .await;
    let handoff_pid = i32::try_from(structured(&started)["pid"].as_u64().unwrap()).unwrap();
    let agent = pid_in(&ready).await;

    let began = Instant::now();
    let dir = mcp.dir.clone();
    let status = mcp.close().await;
    assert!(status.success(), "{status:?}");
    assert!(
        began.elapsed() < Duration::from_secs(15),
        "shutdown took {:?}",
        began.elapsed()
    );
    assert_gone(server, "the server").await;
    assert_gone(handoff_pid, "the job's handoff process").await;
    assert_gone(agent, "the agent").await;
    assert!(!dir.exists(), "the private directory is removed");
}

/// However the server ends — here SIGKILL, which it cannot handle — its jobs stop: each job's
/// standard input is a lifeline from the server, and its end cancels the job, which stops its
/// agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_server_stops_its_jobs() {
    let sb = Sandbox::new();
    let ready = sb.root.join("agent.pid");
    sb.agents.set(MODE, "hang");
    sb.agents.set(READY_FILE, &ready);
    let mut mcp = Mcp::start(&sb).await;
    let server = i32::try_from(mcp.child.id().unwrap()).unwrap();
    let started = mcp
        .call("handoff_start", json!({ "run": run_args(&sb, "build") }))
        .await;
    let handoff_pid = i32::try_from(structured(&started)["pid"].as_u64().unwrap()).unwrap();
    let agent = pid_in(&ready).await;

    let job = structured(&started)["jobId"].as_str().unwrap().to_owned();
    kill(Pid::from_raw(server), nix::sys::signal::Signal::SIGKILL).unwrap();
    let _ = mcp.child.wait().await;
    assert_gone(handoff_pid, "the job's handoff process").await;
    assert_gone(agent, "the agent").await;
    // It died with the server, which could not record its end: lost, not running.
    let lost = sb.run(&["result", &job]);
    assert_eq!(lost.code, 2, "{lost:?}");
    assert!(lost.stderr.contains("was lost"), "{lost:?}");
    // A killed server cannot remove its directory; a later root run sweeps it once it is no
    // longer new. The test doesn't leave it in the shared work directory meanwhile.
    assert!(mcp.dir.is_dir(), "{:?}", mcp.dir);
    std::fs::remove_dir_all(&mcp.dir).unwrap();
}
