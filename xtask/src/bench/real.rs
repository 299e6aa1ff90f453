//! What handoff adds to a real agent CLI: for each installed CLI (Claude Code, Codex, OpenCode,
//! found in `HANDOFF_REAL_BIN` as the real-CLI lane does, else on `PATH`), the same one-question
//! review through `handoff run --mode review` and through the CLI alone, both against the
//! testkit's scripted model server on 127.0.0.1, alternating run by run after one warm-up each.
//!
//! The CLI alone is run the way a person runs it in a terminal: its own configuration pointing
//! at the model server (the same provider, key and variables handoff's configuration gives it),
//! its own caches kept from run to run, in the repository. handoff's runs share one `HOME`, one
//! preflight cache and one task store across runs, as on a user's machine.
//!
//! `HANDOFF_REAL_ONLY=opencode,codex` measures those alone, as in the real-CLI lane.
//!
//! Target: through handoff ≤ [`RATIO_TARGET`] × the CLI alone + [`SLACK`].

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use handoff_testkit::ScratchRepo;
use handoff_testkit::model_server::{ModelServer, Script, provider_output};

/// Through handoff may take this many times the CLI alone …
const RATIO_TARGET: f64 = 1.1;
/// … plus this much.
const SLACK: Duration = Duration::from_millis(300);
/// The key the model server is given as.
const MODEL_KEY: &str = "sk-bench-model-key-0123456789";
/// The question of every run.
const QUESTION: &str = "Review the repository and answer in one sentence.";
/// The CLIs measured, by executable (the handoff agent id is the same).
const CLIS: [&str; 3] = ["claude", "codex", "opencode"];

/// Where the real CLIs are: `HANDOFF_REAL_BIN`, else each one's directory on `PATH`.
fn locate(exe: &str) -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("HANDOFF_REAL_BIN") {
        let path = Path::new(&dir).join(exe);
        return path.is_file().then_some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(exe))
        .find(|p| p.is_file())
}

/// One CLI's world: its private home, configuration roots and caches, kept across runs.
struct World {
    root: PathBuf,
    path: OsString,
}

impl World {
    fn new(base: &Path, bin: &Path) -> Result<World> {
        for d in [
            "home",
            "codex-home",
            "data",
            "cache",
            "tmp",
            "alone-codex-home",
        ] {
            let dir = base.join(d);
            std::fs::create_dir_all(&dir)?;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display()).into();
        Ok(World {
            root: base.to_owned(),
            path,
        })
    }

    /// The variables both ways of running share.
    fn base(&self, command: &mut Command) {
        command
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", self.root.join("home"))
            .env("XDG_DATA_HOME", self.root.join("data"))
            .env("XDG_CACHE_HOME", self.root.join("cache"))
            .env("TMPDIR", self.root.join("tmp"))
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::null());
    }
}

/// handoff's configuration for the three CLIs, pointing each at `server`.
fn handoff_config(server: &ModelServer) -> String {
    let (url, v1) = (server.url(), server.v1_url());
    format!(
        r#"
[agents.claude]
env = {{ {claude_env} }}

[agents.codex]
model = "fake-model"
config = [{codex_config}]
env = {{ E2E_MODEL_KEY = "{MODEL_KEY}" }}

[agents.opencode]
model = "e2e/fake-model"
env = {{ OPENCODE_DISABLE_MODELS_FETCH = "1" }}

[agents.opencode.provider.e2e]
npm = "@ai-sdk/openai-compatible"
name = "E2E"
options = {{ baseURL = "{v1}", apiKey = "{MODEL_KEY}" }}
models = {{ "fake-model" = {{ name = "Fake Model", tool_call = true }} }}
"#,
        claude_env = claude_env(&url)
            .iter()
            .map(|(k, v)| format!("{k} = \"{v}\""))
            .collect::<Vec<_>>()
            .join(", "),
        codex_config = codex_config(&v1)
            .iter()
            .map(|c| format!("'{c}'"))
            .collect::<Vec<_>>()
            .join(", "),
    )
}

fn claude_env(url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("ANTHROPIC_BASE_URL", url.to_owned()),
        ("ANTHROPIC_API_KEY", MODEL_KEY.to_owned()),
        ("CLAUDE_CODE_MAX_RETRIES", "0".to_owned()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
        ("DISABLE_TELEMETRY", "1".to_owned()),
    ]
}

fn codex_config(v1: &str) -> Vec<String> {
    vec![
        "model_provider=\"e2e\"".to_owned(),
        "model_providers.e2e.name=\"E2E\"".to_owned(),
        format!("model_providers.e2e.base_url=\"{v1}\""),
        "model_providers.e2e.wire_api=\"responses\"".to_owned(),
        "model_providers.e2e.env_key=\"E2E_MODEL_KEY\"".to_owned(),
        "model_providers.e2e.request_max_retries=0".to_owned(),
        "model_providers.e2e.stream_max_retries=0".to_owned(),
    ]
}

/// OpenCode's own configuration file for the CLI alone: the provider handoff's configuration
/// names.
fn opencode_config(v1: &str) -> serde_json::Value {
    serde_json::json!({
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": false,
        "share": "disabled",
        "provider": {"e2e": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "E2E",
            "options": {"baseURL": v1, "apiKey": MODEL_KEY},
            "models": {"fake-model": {"name": "Fake Model", "tool_call": true}},
        }},
    })
}

/// The review through handoff.
fn through_handoff(
    handoff: &Path,
    cli: &str,
    world: &World,
    repo: &Path,
    instructions: &Path,
) -> Command {
    let mut c = Command::new(handoff);
    world.base(&mut c);
    let caller = if cli == "codex" { "claude" } else { "codex" };
    c.current_dir(&world.root)
        .env("CODEX_HOME", world.root.join("codex-home"))
        .env("HANDOFF_CONFIG", world.root.join("config.toml"))
        .args(["run", "--caller-harness", caller, "--harness", cli])
        .args(["--mode", "review", "--cwd"])
        .arg(repo)
        .arg("--instructions")
        .arg(instructions);
    c
}

/// The same review with the CLI alone, as a person runs it.
fn alone(exe: &Path, cli: &str, world: &World, server: &ModelServer, repo: &Path) -> Command {
    let mut c = Command::new(exe);
    world.base(&mut c);
    c.current_dir(repo);
    match cli {
        "claude" => {
            c.envs(claude_env(&server.url()))
                .args(["-p", QUESTION, "--output-format", "json"]);
        }
        "codex" => {
            c.env("CODEX_HOME", world.root.join("alone-codex-home"))
                .env("E2E_MODEL_KEY", MODEL_KEY)
                .args([
                    "exec",
                    "--json",
                    "--sandbox",
                    "read-only",
                    "-m",
                    "fake-model",
                ]);
            for config in codex_config(&server.v1_url()) {
                c.args(["-c", &config]);
            }
            c.arg(QUESTION);
        }
        _ => {
            c.env("OPENCODE_DISABLE_MODELS_FETCH", "1").args([
                "run",
                "--format",
                "json",
                "--model",
                "e2e/fake-model",
                QUESTION,
            ]);
        }
    }
    c
}

/// Runs `command` once: its wall time and stdout, failing when it fails.
fn timed(mut command: Command, what: &str) -> Result<(Duration, String)> {
    let start = Instant::now();
    let out = command
        .output()
        .with_context(|| format!("cannot run {what}"))?;
    let elapsed = start.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok((elapsed, stdout))
}

/// Waits for the import a handoff result says is under way (`stateAfterRun.record` gone);
/// how long it took from now, or `None` when there was none. An import that failed fails.
fn imported(stdout: &str) -> Result<Option<Duration>> {
    let json: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_default();
    let Some(record) = json["policy"]["sandbox"]["stateAfterRun"]["record"].as_str() else {
        return Ok(None);
    };
    let start = Instant::now();
    while Path::new(record).exists() {
        let text = std::fs::read_to_string(record).unwrap_or_default();
        if text.contains("\"failed\"") {
            bail!("the session import after a run failed: {text}");
        }
        if start.elapsed() > Duration::from_secs(120) {
            bail!("the session import after a run did not finish in 120 s: {text}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(Some(start.elapsed()))
}

/// Checks a handoff result: the review succeeded.
fn check_handoff(stdout: &str, cli: &str) -> Result<()> {
    let json: serde_json::Value = serde_json::from_str(stdout.trim())
        .with_context(|| format!("handoff printed no result for {cli}: {stdout}"))?;
    if json["status"] != "succeeded" {
        bail!("the review through handoff on {cli} did not succeed: {json}");
    }
    Ok(())
}

/// Prints, for each installed CLI, the median wall time of the review through handoff and alone
/// (`runs` alternating rounds after a warm-up of each, at least five), and their ratio against
/// the target.
pub(super) fn real_runs(handoff: &Path, runs: usize) -> Result<()> {
    let runs = runs.max(5);
    let only = std::env::var("HANDOFF_REAL_ONLY").ok();
    let found: Vec<(&str, PathBuf)> = CLIS
        .iter()
        .filter(|cli| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|o| o == **cli))
        })
        .filter_map(|&cli| Some((cli, locate(cli)?)))
        .collect();
    if found.is_empty() {
        println!("real: no real agent CLI found (HANDOFF_REAL_BIN or PATH); not measured");
        return Ok(());
    }
    let server = ModelServer::start_blocking(Script::answer(provider_output("Looks fine.")));
    let tmp = tempfile::Builder::new()
        .prefix("handoff-bench-real-")
        .tempdir()?;
    let root = std::fs::canonicalize(tmp.path())?;
    println!(
        "\nreal: one review question through handoff and with the CLI alone (scripted model \
         server on 127.0.0.1):"
    );
    println!(
        "{:<10} {:>10} {:>10} {:>8} {:>24}",
        "agent",
        "handoff",
        "alone",
        "ratio",
        format!("target (≤{RATIO_TARGET}x + {:.1} s)", SLACK.as_secs_f64())
    );
    let mut notes = Vec::new();
    for (cli, exe) in found {
        let bin = exe.parent().context("a CLI path has a directory")?;
        let world = World::new(&root.join(cli), bin)?;
        std::fs::write(world.root.join("config.toml"), handoff_config(&server))?;
        let config = world.root.join("home/.config/opencode");
        std::fs::create_dir_all(&config)?;
        std::fs::write(
            config.join("opencode.json"),
            opencode_config(&server.v1_url()).to_string(),
        )?;
        let instructions = world.root.join("instructions.txt");
        std::fs::write(&instructions, QUESTION)?;
        let repo = ScratchRepo::new();
        let via = || through_handoff(handoff, cli, &world, repo.path(), &instructions);
        let direct = || alone(&exe, cli, &world, &server, repo.path());
        eprintln!("==> {cli}: warm-up");
        let warm = timed(via(), "handoff")?.1;
        check_handoff(&warm, cli)?;
        imported(&warm)?;
        timed(direct(), cli)?;
        let mut through = Vec::with_capacity(runs);
        let mut by_itself = Vec::with_capacity(runs);
        let mut imports = Vec::new();
        let mut last = String::new();
        for _ in 0..runs {
            let (t, out) = timed(via(), "handoff")?;
            check_handoff(&out, cli)?;
            through.push(t);
            // A session imported after the result: not part of the run's time, but waited
            // for, so that it takes nothing from the next run measured.
            imports.extend(imported(&out)?);
            last = out;
            by_itself.push(timed(direct(), cli)?.0);
        }
        notes.push(format!("{cli}: {}", sandbox_note(&last)));
        if !imports.is_empty() {
            notes.push(format!(
                "{cli}: its session was in the user's store {:.2} s after the result (median; \
                 imported in the background)",
                super::run::median(imports).as_secs_f64()
            ));
        }
        let (h, a) = (super::run::median(through), super::run::median(by_itself));
        let ratio = h.as_secs_f64() / a.as_secs_f64().max(1e-9);
        let limit = a.as_secs_f64() * RATIO_TARGET + SLACK.as_secs_f64();
        println!(
            "{:<10} {:>8.2} s {:>8.2} s {:>7.2}x {:>24}",
            cli,
            h.as_secs_f64(),
            a.as_secs_f64(),
            ratio,
            format!(
                "≤{limit:.2} s {}",
                if h.as_secs_f64() <= limit {
                    "met"
                } else {
                    "missed"
                }
            ),
        );
    }
    println!("(median of {runs} alternating runs after one warm-up each)");
    for note in notes {
        println!("  {note}");
    }
    Ok(())
}

/// What the last run through handoff says of its sandbox: the traffic through the proxy and
/// the packages shared from handoff's cache.
fn sandbox_note(stdout: &str) -> String {
    let json: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_default();
    let sandbox = &json["policy"]["sandbox"];
    if sandbox["enforcement"] != "handoff" {
        return format!("its own sandbox ({})", json["isolation"]["enforcement"]);
    }
    format!(
        "handoff's sandbox; proxy traffic {}; packages {}",
        sandbox["proxy"]["traffic"], sandbox["packages"]
    )
}
