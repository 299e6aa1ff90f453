//! OpenCode sessions, through its `export` and `import` commands.
//!
//! OpenCode (≥ 1.2) keeps sessions in SQLite (`$XDG_DATA_HOME/opencode/opencode.db`); handoff
//! never opens that database and reaches it only through the CLI:
//!
//! - `opencode export <id>` prints the session as one JSON document, `{info, messages:[{info,
//!   parts}]}` (stdout; `Exporting session: <id>` goes to stderr). An unknown id exits 1 with
//!   `Session not found: <id>`. It works from any directory.
//! - `opencode session list --format json` lists `{id, title, updated, created, projectId,
//!   directory}` of the sessions of the *project* of the current directory (a Git repository's
//!   root commit, else `global`, which every non-Git directory shares), newest first.
//! - `opencode import <file>` (the file's path resolved from the process's directory) keeps the
//!   ids in the file and prints `Imported session: <id>`. The session is filed under the
//!   project and directory the *import runs in*, whatever the file says. Importing an id that
//!   exists already updates only that session's project and directory (it re-roots it); its
//!   messages and parts are inserted only when their ids are new, so a message id that exists
//!   in another session stays there. A message that fails OpenCode's schema (a user message
//!   needs `agent` and `model`, an assistant one `mode`, `path`, `tokens` and the rest) stops
//!   the import with exit 1 *after* the session row was written: handoff deletes that partial
//!   session (`opencode session delete <id>`; the id is its own, fresh).
//! - `opencode run --session <id>` resumes a session, imported ones included: the model is sent
//!   every earlier turn, tool calls and their results too. It must run in the session's own
//!   directory: from another directory (`--dir` or not) the turn is answered by the model but
//!   the command never ends (seen with 1.18.33). Without `--model` the session's last user
//!   message names the model, so a carried session records a real one.
//! - `--session <id> --fork` copies the whole session into a new one (its own `ses_…` id, which
//!   can't be chosen; title `<title> (fork #1)`), leaves the source untouched, and continues the
//!   copy; the copy keeps the *source's* directory and project, so it is used only when the
//!   receiver works in the source's own directory (`native_fork`). Elsewhere a copy is exported,
//!   given fresh ids and imported in the receiver's directory ([`copy`]).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{
    AgentId, AnswerSource, CarriedSession, CarryTarget, Ending, Invocation, SessionQuery,
    SessionRef, Sessions, StdinSource, StoreEnv, Transcript, TranscriptError, run_command,
};
use serde_json::Value;

use super::OpenCode;
use super::export::{IdGen, build_export, is_session_id, now_ms, recopy, split_model};
use super::transcript::{MAX_EXPORT_BYTES, read};
use crate::probe;

/// How long one OpenCode command (export, import, list, delete, debug config) may take.
pub(crate) const CLI_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest session list read, in bytes (a project's sessions, one JSON object each).
const MAX_LIST_BYTES: u64 = 64 * 1024 * 1024;

/// What one OpenCode command printed.
struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Output {
    /// The first line of its errors (colour codes removed), for a message.
    fn why(&self) -> String {
        let text = strip_ansi(&format!("{}\n{}", self.stderr, self.stdout));
        text.lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("Exporting session"))
            .map(|l| l.chars().take(300).collect())
            .unwrap_or_else(|| format!("exit {:?}", self.code))
    }
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The environment of an OpenCode command: the store's variables, with colour, updates and
/// sharing off.
fn cli_env(store: &StoreEnv) -> BTreeMap<String, String> {
    let mut env = store.vars.clone();
    for (k, v) in [
        ("NO_COLOR", "1"),
        ("TERM", "dumb"),
        ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
        ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
        ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
        ("OPENCODE_AUTO_SHARE", "false"),
        // Without this, every OpenCode command reads and writes the project's configuration
        // from the directory it runs in up to the repository's root (or `/`): it rewrites an
        // `opencode.json` there, writes `.opencode/.gitignore` and installs `.opencode`'s
        // dependencies, outside any sandbox. A worktree, and the run directory above a
        // scratch, may hold what an agent wrote.
        ("OPENCODE_DISABLE_PROJECT_CONFIG", "1"),
    ] {
        env.insert(k.into(), v.into());
    }
    env
}

fn executable(store: &StoreEnv) -> Result<Utf8PathBuf, TranscriptError> {
    store.executable.clone().ok_or_else(|| {
        TranscriptError::Unsupported(
            "OpenCode's executable is not known: its sessions are reached through it".to_owned(),
        )
    })
}

fn scratch(store: &StoreEnv) -> Result<Utf8PathBuf, TranscriptError> {
    store.scratch.clone().ok_or_else(|| {
        TranscriptError::Unsupported(
            "no scratch directory to export OpenCode's session into".to_owned(),
        )
    })
}

/// Runs `opencode --pure <args…>` in `cwd` with `env` as its whole environment, stdout to
/// `stdout_file` when given, in its own process group, which is killed after [`CLI_TIMEOUT`].
async fn run(
    exe: &Utf8Path,
    args: &[&str],
    cwd: &Utf8Path,
    env: &BTreeMap<String, String>,
    stdout_file: Option<(&Utf8Path, u64)>,
) -> Result<Output, TranscriptError> {
    let mut argv: Vec<String> = vec!["--pure".to_owned()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let command = Invocation {
        sandbox: None,
        program: exe.to_owned(),
        args: argv,
        env: env.clone(),
        cwd: cwd.to_owned(),
        stdin: StdinSource::Null,
        dirs: Vec::new(),
        files: Vec::new(),
        answer: AnswerSource::Stdout,
        policy: Value::Null,
        secrets: Vec::new(),
    };
    let shown = format!("opencode {}", args.join(" "));
    let io = |message: String| TranscriptError::Io {
        path: exe.to_owned(),
        message,
    };
    let report = run_command(&command, b"", CLI_TIMEOUT, stdout_file)
        .await
        .map_err(|e| io(format!("cannot run `{shown}`: {e}")))?;
    if let (Ending::OutputLimit { stream: "stdout" }, Some((_, limit))) =
        (&report.ending, stdout_file)
    {
        return Err(io(format!("`{shown}` wrote more than {limit} bytes")));
    }
    probe::finished(&shown, CLI_TIMEOUT, &report).map_err(io)?;
    Ok(Output {
        code: report.exit_code,
        stdout: String::from_utf8_lossy(&report.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&report.stderr).into_owned(),
    })
}

/// A directory to run commands in that are not tied to one: the scratch directory.
fn neutral_dir(store: &StoreEnv) -> Result<Utf8PathBuf, TranscriptError> {
    scratch(store)
}

/// Exports session `id` into the scratch directory: `Ok(None)` when OpenCode has no such
/// session.
async fn export(store: &StoreEnv, id: &str) -> Result<Option<SessionRef>, TranscriptError> {
    if !is_session_id(id) {
        return Ok(None);
    }
    let exe = executable(store)?;
    let dir = scratch(store)?;
    let file = dir.join(format!("opencode-export-{id}.json"));
    let out = run(
        &exe,
        &["export", id],
        &dir,
        &cli_env(store),
        Some((&file, MAX_EXPORT_BYTES)),
    )
    .await
    .inspect_err(|_| {
        let _ = std::fs::remove_file(&file);
    })?;
    if out.code != Some(0) {
        let _ = std::fs::remove_file(&file);
        if strip_ansi(&out.stderr).contains("Session not found") {
            return Ok(None);
        }
        return Err(TranscriptError::Io {
            path: exe,
            message: format!("`opencode export {id}` failed: {}", out.why()),
        });
    }
    let transcript = read(&file)?;
    Ok(Some(SessionRef {
        provider: AgentId::OPENCODE,
        session_id: transcript.source.session_id,
        path: file,
        cwd: transcript.source.cwd,
    }))
}

/// Finds a session: by id (`opencode export`), or the newest one whose directory is `cwd`
/// (`opencode session list` run in `cwd`, whose project it lists).
pub(crate) async fn find(
    store: &StoreEnv,
    query: &SessionQuery,
) -> Result<Option<SessionRef>, TranscriptError> {
    match query {
        SessionQuery::Id(id) => export(store, id).await,
        SessionQuery::Latest { cwd } => {
            if !cwd.is_dir() {
                return Ok(None);
            }
            let exe = executable(store)?;
            // The list grows with every session of the project: it goes to a file.
            let file = scratch(store)?.join(format!("opencode-sessions-{}.json", now_ms()));
            let out = run(
                &exe,
                &["session", "list", "--format", "json"],
                cwd,
                &cli_env(store),
                Some((&file, MAX_LIST_BYTES)),
            )
            .await;
            let list = std::fs::read(&file);
            let _ = std::fs::remove_file(&file);
            let out = out?;
            if out.code != Some(0) {
                return Err(TranscriptError::Io {
                    path: exe,
                    message: format!("`opencode session list` failed: {}", out.why()),
                });
            }
            let list = list.map_err(|e| TranscriptError::Io {
                path: file.clone(),
                message: e.to_string(),
            })?;
            let Some(id) = newest_in(&String::from_utf8_lossy(&list), cwd) else {
                return Ok(None);
            };
            export(store, &id).await
        }
    }
}

/// The id of the most recently updated session listed in `list` (`session list --format
/// json`) whose directory is `cwd`.
pub(crate) fn newest_in(list: &str, cwd: &Utf8Path) -> Option<String> {
    let start = list.find('[')?;
    let sessions: Vec<Value> = serde_json::from_str(list[start..].trim()).ok()?;
    let canon = |p: &Utf8Path| p.canonicalize_utf8().unwrap_or_else(|_| p.to_owned());
    let want = canon(cwd);
    sessions
        .iter()
        .filter(|s| {
            s.get("directory")
                .and_then(Value::as_str)
                .is_some_and(|d| Utf8Path::new(d) == cwd || canon(Utf8Path::new(d)) == want)
        })
        .filter_map(|s| {
            let id = s.get("id").and_then(Value::as_str)?;
            let updated = s
                .get("updated")
                .or_else(|| s.get("created"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            is_session_id(id).then(|| (updated, id.to_owned()))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, id)| id)
}

/// The model a carried session's user messages name: the target's, else the one OpenCode
/// resolves from the user's configuration in `cwd`.
async fn carried_model(
    store: &StoreEnv,
    target: &CarryTarget,
) -> Result<(String, String), TranscriptError> {
    let named = match &target.model {
        Some(m) => m.clone(),
        None => {
            // The project's configuration is read here, never by an OpenCode started in the
            // worktree; the user's own, by `opencode debug config` with the project's off.
            let model = match project_model(&target.cwd) {
                Some(m) => Some(m),
                None => {
                    let exe = executable(store)?;
                    let dir = neutral_dir(store)?;
                    let out = run(&exe, &["debug", "config"], &dir, &cli_env(store), None).await?;
                    out.stdout
                        .find('{')
                        .and_then(|i| serde_json::from_str::<Value>(out.stdout[i..].trim()).ok())
                        .and_then(|c| c.get("model").and_then(Value::as_str).map(str::to_owned))
                }
            };
            model.ok_or_else(|| {
                TranscriptError::Unsupported(
                    "OpenCode has no default model to record in the carried session: choose one \
                     (provider/model) for the receiver"
                        .to_owned(),
                )
            })?
        }
    };
    split_model(&named).ok_or_else(|| {
        TranscriptError::Unsupported(format!(
            "OpenCode names models provider/model; '{named}' is not one"
        ))
    })
}

/// The `model` of the project's OpenCode configuration at `cwd`: the nearest `opencode.jsonc`,
/// `opencode.json` or `.opencode/opencode.json[c]` naming one, from `cwd` up to the repository's
/// root, read as text (no `{env:…}` or `{file:…}` is expanded).
fn project_model(cwd: &Utf8Path) -> Option<String> {
    const MAX_CONFIG_BYTES: usize = 1024 * 1024;
    for dir in cwd.ancestors() {
        for file in [
            "opencode.jsonc",
            "opencode.json",
            ".opencode/opencode.jsonc",
            ".opencode/opencode.json",
        ] {
            // A regular file only, never waited on (a FIFO is refused at once).
            let model = handoff_core::read_regular_file(dir.join(file).as_str(), MAX_CONFIG_BYTES)
                .ok()
                .and_then(|bytes| {
                    let text = String::from_utf8_lossy(&bytes);
                    serde_json::from_str::<Value>(&super::network::strip_jsonc(&text)).ok()
                })
                .and_then(|c| c.get("model").and_then(Value::as_str).map(str::to_owned));
            if model.is_some() {
                return model;
            }
        }
        if dir.join(".git").exists() {
            break;
        }
    }
    None
}

/// Writes `doc` into the scratch directory and, unless a dry run, imports it in `cwd`:
/// the id OpenCode reports is the carried session's.
async fn import(
    store: &StoreEnv,
    session_id: String,
    doc: &Value,
    target: &CarryTarget,
) -> Result<CarriedSession, TranscriptError> {
    let dir = scratch(store)?;
    let file = dir.join(format!("opencode-import-{session_id}.json"));
    let bytes = serde_json::to_vec_pretty(doc).map_err(|e| TranscriptError::Io {
        path: file.clone(),
        message: e.to_string(),
    })?;
    write_new(&file, &bytes)?;
    let carried = CarriedSession {
        session_id: session_id.clone(),
        files: vec![file.clone()],
        bytes: bytes.len() as u64,
    };
    if target.dry_run {
        return Ok(carried);
    }
    if !target.cwd.is_dir() {
        return Err(TranscriptError::Io {
            path: target.cwd.clone(),
            message: "the receiver's directory does not exist".to_owned(),
        });
    }
    let exe = executable(store)?;
    let env = cli_env(store);
    let out = run(&exe, &["import", file.as_str()], &target.cwd, &env, None).await?;
    let reported = out
        .stdout
        .lines()
        .find_map(|l| {
            strip_ansi(l)
                .trim()
                .strip_prefix("Imported session:")
                .map(|s| s.trim().to_owned())
        })
        .filter(|id| is_session_id(id));
    match (out.code, reported) {
        (Some(0), Some(id)) => Ok(CarriedSession {
            session_id: id,
            ..carried
        }),
        _ => {
            // The session row may be written before a message failed: remove that partial
            // session (its id is the fresh one handoff made).
            let _ = run(
                &exe,
                &["session", "delete", &session_id],
                &target.cwd,
                &env,
                None,
            )
            .await;
            Err(TranscriptError::Io {
                path: exe,
                message: format!("`opencode import` failed: {}", out.why()),
            })
        }
    }
}

/// The one session a run's event stream (`run --format json`) speaks of: `None` when no line
/// names one or lines name different ones.
pub(crate) fn session_of_run(stdout: &[u8]) -> Option<String> {
    let mut found: Option<String> = None;
    for line in stdout.split(|b| *b == b'\n') {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if let Some(id) = value.get("sessionID").and_then(Value::as_str) {
            match &found {
                Some(f) if f != id => return None,
                Some(_) => {}
                None => found = Some(id.to_owned()),
            }
        }
    }
    found.filter(|id| is_session_id(id))
}

/// Carries session `id` of a run's private store (`private`) into the user's (`user`), filed
/// at `cwd` with its id kept. The private store was writable by the agent, so the export is
/// checked: it must be session `id`, and the user's store must not have that id already
/// (an import of an existing id would re-root the user's session).
pub(crate) async fn import_private(
    private: &StoreEnv,
    user: &StoreEnv,
    id: &str,
    cwd: &Utf8Path,
) -> Result<String, TranscriptError> {
    // Each OpenCode command takes a second or two to start: the user's store is asked while
    // the run's session is exported.
    let (in_user, exported) = tokio::join!(export(user, id), export(private, id));
    if in_user?.is_some() {
        return Err(TranscriptError::Unsupported(format!(
            "the user's OpenCode store already has a session {id}"
        )));
    }
    let exported = exported?
        .ok_or_else(|| TranscriptError::Unsupported(format!("the run kept no session {id}")))?;
    if exported.session_id != id {
        return Err(TranscriptError::Malformed {
            path: exported.path,
            message: format!("the export of {id} holds session {}", exported.session_id),
        });
    }
    let exe = executable(user)?;
    let env = cli_env(user);
    let out = run(&exe, &["import", exported.path.as_str()], cwd, &env, None).await?;
    let reported = out.stdout.lines().find_map(|l| {
        strip_ansi(l)
            .trim()
            .strip_prefix("Imported session:")
            .map(|s| s.trim().to_owned())
    });
    match (out.code, reported) {
        (Some(0), Some(got)) if got == id => Ok(got),
        _ => {
            let _ = run(&exe, &["session", "delete", id], cwd, &env, None).await;
            Err(TranscriptError::Io {
                path: exe,
                message: format!("`opencode import` failed: {}", out.why()),
            })
        }
    }
}

/// Checks that the tree at `root` (a run's private data directory, which its agent could
/// write) holds only directories and plain files: no symlink, FIFO, socket or device, no file
/// with a second name (a hard link would take OpenCode's writes to that file's other name),
/// and at most [`PLAIN_TREE_ENTRIES`] entries. A missing root is fine.
pub(crate) fn plain_tree(root: &Utf8Path) -> Result<(), String> {
    let mut pending = vec![root.to_owned()];
    let mut seen = 0usize;
    while let Some(dir) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir == root => return Ok(()),
            Err(e) => return Err(format!("cannot read {dir}: {e}")),
        };
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {dir}: {e}"))?;
            seen += 1;
            if seen > PLAIN_TREE_ENTRIES {
                return Err(format!(
                    "the run's OpenCode store holds more than {PLAIN_TREE_ENTRIES} entries: not imported"
                ));
            }
            let path = dir.join(entry.file_name().to_string_lossy().as_ref());
            let kind = entry
                .file_type()
                .map_err(|e| format!("cannot inspect {path}: {e}"))?;
            if kind.is_dir() {
                pending.push(path);
            } else if !kind.is_file() {
                return Err(format!(
                    "the run's OpenCode store holds {path}, which is not a plain file or \
                     directory (the agent's doing): not imported"
                ));
            } else {
                use std::os::unix::fs::MetadataExt;
                let meta = entry
                    .metadata()
                    .map_err(|e| format!("cannot inspect {path}: {e}"))?;
                if meta.nlink() > 1 {
                    return Err(format!(
                        "the run's OpenCode store holds {path}, a file with another name \
                         elsewhere (the agent's doing): not imported"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Checks that `path` lies in `base` (a run's private directory, which handoff made) and that
/// each of its components below `base` that exists is a directory, not a symlink: the agent
/// could have swapped one for a link elsewhere, and OpenCode, run outside the sandbox, would
/// write through it.
pub(crate) fn real_dirs_below(base: &Utf8Path, path: &Utf8Path) -> Result<(), String> {
    let rel = path.strip_prefix(base).map_err(|_| {
        format!("the run's OpenCode store {path} is not in the run's directory: not imported")
    })?;
    let mut at = base.to_owned();
    for part in rel.components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "the run's OpenCode store has {at} where a directory belongs (the agent's \
                     doing): not imported"
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("cannot inspect {at}: {e}")),
        }
    }
    Ok(())
}

/// The most entries [`plain_tree`] walks.
const PLAIN_TREE_ENTRIES: usize = 100_000;

/// Creates `path` (never overwriting) holding `bytes`, 0600.
fn write_new(path: &Utf8Path, bytes: &[u8]) -> Result<(), TranscriptError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |e: std::io::Error| TranscriptError::Io {
        path: path.to_owned(),
        message: e.to_string(),
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)
}

/// Writes `transcript` as a new OpenCode session filed at `target.cwd`.
pub(crate) async fn write(
    store: &StoreEnv,
    transcript: &Transcript,
    target: &CarryTarget,
) -> Result<CarriedSession, TranscriptError> {
    let (provider, model) = carried_model(store, target).await?;
    let now = now_ms();
    let mut ids = IdGen::new(now, &format!("{}:{now}", target.session_id));
    let (session_id, doc) =
        build_export(transcript, &target.cwd, (&provider, &model), &mut ids, now);
    import(store, session_id, &doc, target).await
}

/// Copies OpenCode session `source` into a new session filed at `target.cwd`: exported, given
/// fresh ids, re-rooted and imported. The source is only read.
pub(crate) async fn copy(
    store: &StoreEnv,
    source: &SessionRef,
    target: &CarryTarget,
) -> Result<CarriedSession, TranscriptError> {
    let exported = if source.path.is_file() && read(&source.path).is_ok() {
        source.path.clone()
    } else {
        export(store, &source.session_id)
            .await?
            .ok_or_else(|| TranscriptError::Io {
                path: source.path.clone(),
                message: format!("OpenCode has no session {}", source.session_id),
            })?
            .path
    };
    let bytes = std::fs::read(&exported).map_err(|e| TranscriptError::Io {
        path: exported.clone(),
        message: e.to_string(),
    })?;
    let start = bytes.iter().position(|b| *b == b'{').unwrap_or(0);
    let doc: Value =
        serde_json::from_slice(&bytes[start..]).map_err(|e| TranscriptError::Malformed {
            path: exported.clone(),
            message: e.to_string(),
        })?;
    let now = now_ms();
    let mut ids = IdGen::new(now, &format!("{}:{now}", target.session_id));
    let (session_id, doc) =
        recopy(&doc, &target.cwd, &mut ids).ok_or_else(|| TranscriptError::Malformed {
            path: exported.clone(),
            message: "not an OpenCode export".to_owned(),
        })?;
    import(store, session_id, &doc, target).await
}

#[async_trait]
impl Sessions for OpenCode {
    fn read_transcript(&self, path: &Utf8Path) -> Result<Transcript, TranscriptError> {
        super::transcript::read(path)
    }

    async fn find_session(
        &self,
        store: &StoreEnv,
        query: &SessionQuery,
    ) -> Result<Option<SessionRef>, TranscriptError> {
        find(store, query).await
    }

    async fn write_session(
        &self,
        store: &StoreEnv,
        transcript: &Transcript,
        target: &CarryTarget,
    ) -> Result<CarriedSession, TranscriptError> {
        write(store, transcript, target).await
    }

    async fn copy_session(
        &self,
        store: &StoreEnv,
        source: &SessionRef,
        target: &CarryTarget,
    ) -> Result<CarriedSession, TranscriptError> {
        copy(store, source, target).await
    }
}

#[cfg(test)]
mod tests {
    use super::{plain_tree, project_model, real_dirs_below, session_of_run};

    #[test]
    fn a_store_reached_through_a_symlink_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let run = camino::Utf8Path::from_path(tmp.path()).unwrap();
        let data = run.join("opencode/data");
        assert_eq!(real_dirs_below(run, &data), Ok(()));
        std::fs::create_dir_all(&data).unwrap();
        assert_eq!(real_dirs_below(run, &data), Ok(()));
        // The agent moves the store aside and links its name elsewhere.
        let elsewhere = run.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::fs::rename(&data, run.join("opencode/data2")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &data).unwrap();
        let why = real_dirs_below(run, &data).unwrap_err();
        assert!(why.contains("opencode/data"), "{why}");
        // Or a directory above it.
        std::fs::remove_file(&data).unwrap();
        std::fs::rename(run.join("opencode"), run.join("opencode2")).unwrap();
        std::os::unix::fs::symlink(run.join("opencode2"), run.join("opencode")).unwrap();
        assert!(real_dirs_below(run, &data).is_err());
        assert!(real_dirs_below(&run.join("other"), &data).is_err());
    }

    #[test]
    fn the_project_model_is_the_nearest_one_up_to_the_repository_root() {
        let tmp = tempfile::tempdir().unwrap();
        let top = camino::Utf8Path::from_path(tmp.path()).unwrap();
        let repo = top.join("repo");
        let deep = repo.join("a/b");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(deep.join(".opencode")).unwrap();
        // A FIFO in a config file's place is passed over, never waited on.
        let fifo = std::process::Command::new("mkfifo")
            .arg(deep.join("opencode.json"))
            .status()
            .unwrap();
        assert!(fifo.success());
        // Above the repository: not the project's.
        std::fs::write(top.join("opencode.json"), r#"{"model":"x/above"}"#).unwrap();
        assert_eq!(project_model(&deep), None);
        std::fs::write(
            repo.join("opencode.jsonc"),
            "{\n  // the team's\n  \"model\": \"e2e/root\", /* kept */\n}\n",
        )
        .unwrap();
        std::fs::write(repo.join("a/opencode.json"), r#"{"theme":"x"}"#).unwrap();
        assert_eq!(project_model(&deep).as_deref(), Some("e2e/root"));
        std::fs::write(
            deep.join(".opencode/opencode.json"),
            r#"{"model":"{file:~/.ssh/id_rsa}"}"#,
        )
        .unwrap();
        // Read as text: nothing is expanded.
        assert_eq!(
            project_model(&deep).as_deref(),
            Some("{file:~/.ssh/id_rsa}")
        );
    }

    #[test]
    fn a_store_with_a_symlink_or_a_fifo_anywhere_is_not_plain() {
        let tmp = tempfile::tempdir().unwrap();
        let root = camino::Utf8Path::from_path(tmp.path()).unwrap();
        assert_eq!(plain_tree(&root.join("missing")), Ok(()));
        std::fs::create_dir_all(root.join("opencode/storage/session")).unwrap();
        std::fs::write(root.join("opencode/opencode.db"), "").unwrap();
        assert_eq!(plain_tree(root), Ok(()));
        std::os::unix::fs::symlink("/home", root.join("opencode/storage/log")).unwrap();
        let why = plain_tree(root).unwrap_err();
        assert!(why.contains("opencode/storage/log"), "{why}");
        std::fs::remove_file(root.join("opencode/storage/log")).unwrap();
        let _socket =
            std::os::unix::net::UnixListener::bind(root.join("opencode/storage/session/x"))
                .unwrap();
        assert!(plain_tree(root).is_err());
        std::fs::remove_file(root.join("opencode/storage/session/x")).unwrap();
        assert_eq!(plain_tree(root), Ok(()));
        // A hard link to a file outside the store: OpenCode's writes would land there.
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("bashrc"), "").unwrap();
        std::fs::hard_link(outside.join("bashrc"), root.join("opencode/log")).unwrap();
        let why = plain_tree(&root.join("opencode")).unwrap_err();
        assert!(why.contains("another name"), "{why}");
    }

    #[test]
    fn a_run_names_one_session_or_none() {
        let id = "ses_01a234256f215a869b7614ea48";
        let other = "ses_01a234256f215a869b7614ea49";
        let line = |s: &str| format!("{{\"type\":\"text\",\"sessionID\":\"{s}\"}}\n");
        let one = format!("{}not json\n{}", line(id), line(id));
        assert_eq!(session_of_run(one.as_bytes()).as_deref(), Some(id));
        // Two sessions in one run: which to carry is not clear, so none is.
        let two = format!("{}{}", line(id), line(other));
        assert_eq!(session_of_run(two.as_bytes()), None);
        // Not an OpenCode session id (an agent writing its own event stream).
        assert_eq!(session_of_run(line("../../x").as_bytes()), None);
        assert_eq!(session_of_run(b""), None);
    }
}
