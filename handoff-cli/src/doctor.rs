//! `handoff doctor`: what this installation looks like — the binary, the configuration, the
//! task store, the runtime directory, every agent CLI and its preflight, and the plugin.
//!
//! Exit codes: 0 when handoff itself is usable (the configuration loads, the task store opens);
//! 1 when one of those is broken. Agents that are missing or fail preflight are reported, not
//! errors: handoff works with whichever are installed.

use std::collections::BTreeMap;
use std::io::Write;

use camino::Utf8PathBuf;
use clap::Args;
use handoff_core::{Engine, TaskStore};
use serde_json::{Value, json};

use handoff_adapters::plugins::{PluginStatus, plugin_status};

/// Arguments of `handoff doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the report as one JSON line (`handoff.doctor.v1`).
    #[arg(long)]
    pub json: bool,
}

/// Runs `handoff doctor`; returns the exit code.
pub async fn main(args: DoctorArgs, config: Result<handoff_core::LoadedConfig, String>) -> u8 {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let exe = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok())
        .and_then(|p| Utf8PathBuf::from_path_buf(p).ok());
    let on_path = which("handoff", &env);
    let mut healthy = true;

    let config_report = match &config {
        Ok(loaded) => json!({
            "ok": true,
            "file": loaded.path,
            "warnings": loaded.warnings,
        }),
        Err(e) => {
            healthy = false;
            json!({"ok": false, "error": e})
        }
    };

    let store_report = match handoff_store::default_path(&env) {
        Err(e) => {
            healthy = false;
            json!({"ok": false, "error": e.to_string()})
        }
        Ok(path) if !path.exists() => {
            json!({"ok": true, "path": path, "created": false})
        }
        Ok(path) => match handoff_store::SqliteStore::open(&path) {
            Ok(store) => {
                let tasks = store.tasks(None).map(|t| t.len());
                let version = store.schema_version();
                let integrity = store.integrity_problems();
                let access = handoff_store::access_problems(&path);
                match (tasks, version, integrity) {
                    (Ok(tasks), Ok(version), Ok(problems)) if problems.is_empty() => {
                        if !access.is_empty() {
                            healthy = false;
                        }
                        json!({
                            "ok": access.is_empty(), "path": path, "created": true,
                            "schema": version, "tasks": tasks, "integrity": "ok",
                            "access": access,
                            "error": access.first(),
                        })
                    }
                    (Ok(_), Ok(_), Ok(problems)) => {
                        healthy = false;
                        json!({
                            "ok": false, "path": path, "created": true,
                            "integrity": problems,
                            "error": format!(
                                "the integrity check failed: {}",
                                problems.first().map_or("", String::as_str)
                            ),
                        })
                    }
                    (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                        healthy = false;
                        json!({"ok": false, "path": path, "error": e.to_string()})
                    }
                }
            }
            Err(e) => {
                healthy = false;
                json!({"ok": false, "path": path, "error": e.to_string()})
            }
        },
    };

    let runtime = handoff_core::default_runtime_dir()
        .map(|d| json!({"ok": true, "path": d}))
        .unwrap_or_else(|e| json!({"ok": false, "error": e.to_string()}));

    let engine: Engine = crate::engine(config.ok());
    let caps = engine.capabilities().await;
    let agents: Vec<Value> = caps
        .providers
        .iter()
        .map(|p| {
            json!({
                "id": p.id,
                "executable": p.executable,
                "installed": p.preflight.installed,
                "ok": p.preflight.ok,
                "path": p.preflight.path,
                "version": p.preflight.version,
                "tested": p.version.tested,
                "versionStatus": p.version.status,
                "versionWarning": p.version.warning,
                "reason": p.preflight.reason,
                "continuation": p.continuation,
            })
        })
        .collect();

    let plugins: Vec<PluginStatus> = plugin_status(&env).await;
    // The programs handoff itself starts, as it finds them: never from a worktree it works on.
    let programs: serde_json::Map<String, Value> = ["git", "bwrap", "socat", "ssh"]
        .into_iter()
        .map(|name| (name.to_owned(), json!(handoff_core::program(name))))
        .collect();

    // What runs on other machines left there, to be removed at the next contact.
    let hosts_left: Vec<Value> = crate::remote::state_dir(&env)
        .map(|d| handoff_remote::leftovers(&d))
        .unwrap_or_default()
        .into_iter()
        .filter(handoff_remote::Leftover::abandoned)
        .map(|l| json!({"host": l.host, "run": l.run, "job": l.job, "dir": l.dir}))
        .collect();

    // Sandboxed runs' state on its way to the user's stores: under way, failed, or lost.
    let imports: Vec<Value> = handoff_core::private_dir_base(None)
        .map(|base| handoff_core::state_import::records(&base))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| serde_json::to_value(r).ok())
        .collect();

    let report = json!({
        "schemaVersion": "handoff.doctor.v1",
        "ok": healthy,
        "handoff": {
            "version": env!("CARGO_PKG_VERSION"),
            "path": exe,
            "onPath": on_path,
            "onPathIsThis": on_path.is_some() && on_path == exe,
        },
        "config": config_report,
        "taskStore": store_report,
        "runtimeDir": runtime,
        "sandbox": caps.sandbox,
        "programs": programs,
        "agents": agents,
        "plugin": plugins,
        "hostLeftovers": hosts_left,
        "stateImports": imports,
    });

    let mut out = std::io::stdout().lock();
    if args.json {
        let _ = writeln!(out, "{report}");
    } else {
        let _ = print_human(&mut out, &report);
    }
    let _ = out.flush();
    if healthy { 0 } else { 1 }
}

fn print_human(out: &mut impl Write, r: &Value) -> std::io::Result<()> {
    let s = |v: &Value| v.as_str().map(str::to_owned).unwrap_or_else(|| "-".into());
    let h = &r["handoff"];
    writeln!(out, "handoff {} at {}", s(&h["version"]), s(&h["path"]))?;
    match (h["onPath"].as_str(), h["onPathIsThis"].as_bool()) {
        (None, _) => writeln!(
            out,
            "  not on PATH: skills and plugins look for `handoff` there (or ~/.cargo/bin)"
        )?,
        (Some(p), Some(false)) => {
            writeln!(out, "  the `handoff` on PATH is another binary: {p}")?;
        }
        _ => {}
    }
    let c = &r["config"];
    if c["ok"] == true {
        match c["file"].as_str() {
            Some(f) => writeln!(out, "config      {f}")?,
            None => writeln!(out, "config      none (defaults)")?,
        }
        for w in c["warnings"].as_array().into_iter().flatten() {
            writeln!(out, "  warning: {}", s(w))?;
        }
    } else {
        writeln!(out, "config      BROKEN: {}", s(&c["error"]))?;
    }
    let t = &r["taskStore"];
    match (t["ok"].as_bool(), t["created"].as_bool()) {
        (Some(true), Some(true)) => writeln!(
            out,
            "task store  {} (schema {}, {} task(s))",
            s(&t["path"]),
            t["schema"],
            t["tasks"]
        )?,
        (Some(true), _) => writeln!(out, "task store  {} (not created yet)", s(&t["path"]))?,
        _ => writeln!(out, "task store  BROKEN: {}", s(&t["error"]))?,
    }
    if let Some(programs) = r["programs"].as_object() {
        let found: Vec<String> = programs
            .iter()
            .map(|(name, path)| format!("{name} {}", path.as_str().unwrap_or("(not found)")))
            .collect();
        writeln!(out, "programs    {}", found.join(", "))?;
    }
    let d = &r["runtimeDir"];
    if d["ok"] == true {
        writeln!(out, "runtime     {}", s(&d["path"]))?;
    } else {
        writeln!(out, "runtime     BROKEN: {}", s(&d["error"]))?;
    }
    let b = &r["sandbox"];
    if b["available"] == true {
        writeln!(
            out,
            "sandbox     bubblewrap {} (for OpenCode, Copilot, Gemini, Qwen)",
            s(&b["path"])
        )?;
    } else {
        writeln!(
            out,
            "sandbox     unavailable: no working bwrap on PATH, OpenCode, Copilot, Gemini and Qwen run unconfined \
             (Debian: apt-get install bubblewrap)"
        )?;
    }
    writeln!(out, "agents")?;
    for a in r["agents"].as_array().into_iter().flatten() {
        let state = if a["ok"] == true {
            format!("ok   {} ({})", s(&a["version"]), s(&a["path"]))
        } else if a["installed"] == true {
            format!("FAILS preflight: {}", s(&a["reason"]))
        } else {
            format!("not installed ({} not on PATH)", s(&a["executable"]))
        };
        let tested = match (a["tested"]["min"].as_str(), a["tested"]["max"].as_str()) {
            (Some(min), Some(max)) => format!(" (tested {min} – {max})"),
            _ => String::new(),
        };
        writeln!(out, "  {:<9} {state}{tested}", s(&a["id"]))?;
        if let Some(w) = a["versionWarning"].as_str() {
            writeln!(out, "    warning: {w}")?;
        }
    }
    writeln!(out, "plugin")?;
    for p in r["plugin"].as_array().into_iter().flatten() {
        let state = match p["installed"].as_bool() {
            Some(true) => format!("installed {}", s(&p["detail"])),
            _ => format!("not installed ({})", s(&p["detail"])),
        };
        writeln!(out, "  {:<11} {state}", s(&p["host"]))?;
    }
    for l in r["hostLeftovers"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "left on {}: run {} (job {}), removed at the next run there",
            s(&l["host"]),
            s(&l["run"]),
            s(&l["job"])
        )?;
    }
    for i in r["stateImports"].as_array().into_iter().flatten() {
        let why = match i["message"].as_str() {
            Some(m) => format!(": {}", handoff_core::printable(m, false)),
            None => String::new(),
        };
        // Records are files: what one says is shown, never obeyed by the terminal.
        let shown = |v: &Value| handoff_core::printable(&s(v), false).into_owned();
        writeln!(
            out,
            "import of {} after run {}: {}{why}",
            shown(&i["what"]),
            shown(&i["runId"]),
            shown(&i["state"])
        )?;
    }
    Ok(())
}

/// The first executable file named `name` on `PATH`, canonicalized.
fn which(name: &str, env: &BTreeMap<String, String>) -> Option<Utf8PathBuf> {
    handoff_core::locate_on_path(name, env).and_then(|p| p.canonicalize_utf8().ok())
}
