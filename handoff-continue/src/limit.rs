//! When the agent a person drives stops on its limit: Claude Code's `StopFailure` hook hands
//! handoff the session, the worktree and the error ([`StopFailure`]); the configuration's
//! `[failover]` table says whether the task moves ([`plan`]). A move is a background
//! `handoff continue` to the receiver with a note handoff writes from the conversation
//! ([`generated_note`]); either way a [`Notice`] tells the person, the next time Claude Code
//! starts in that worktree, where the task went or what would move it.

use std::time::{Duration, SystemTime};

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{FailoverConfig, FailureCause, OnLimit};
use serde::{Deserialize, Serialize};

/// The hour `max_hops` counts moves in.
const HOP_WINDOW: Duration = Duration::from_secs(3600);

/// Longest excerpt of the conversation a generated note quotes.
const EXCERPT_CHARS: usize = 2000;

/// What Claude Code's `StopFailure` hook receives on stdin (the fields handoff reads).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopFailure {
    /// The session that stopped.
    pub session_id: String,
    /// Its transcript (JSONL), when Claude Code names it.
    #[serde(default)]
    pub transcript_path: Option<String>,
    /// Where it ran.
    pub cwd: String,
    /// Claude Code's class of the error (`rate_limit`, `billing_error`, …).
    #[serde(default)]
    pub error: Option<String>,
    /// The error as the session showed it.
    #[serde(default)]
    pub last_assistant_message: Option<String>,
}

impl StopFailure {
    /// Reads a payload; one line saying what is wrong otherwise.
    pub fn parse(bytes: &[u8]) -> Result<StopFailure, String> {
        let payload: StopFailure =
            serde_json::from_slice(bytes).map_err(|e| format!("not a StopFailure payload: {e}"))?;
        if !payload.cwd.starts_with('/') {
            return Err(format!(
                "the payload's cwd {:?} is not absolute",
                payload.cwd
            ));
        }
        Ok(payload)
    }

    /// The error class, `unknown` when the payload has none.
    pub fn error(&self) -> &str {
        self.error.as_deref().unwrap_or("unknown")
    }
}

/// handoff's cause for one of Claude Code's error classes.
pub fn cause_of(error: &str) -> FailureCause {
    match error {
        "rate_limit" => FailureCause::RateLimited,
        "billing_error" => FailureCause::Billing,
        "server_error" => FailureCause::ServerError,
        "authentication_failed" | "oauth_org_not_allowed" => FailureCause::Auth,
        "model_not_found" => FailureCause::ModelNotFound,
        _ => FailureCause::Other,
    }
}

/// What the person is told about a limit in a worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// `moved`, `would-move` (notify only) or `hop-limit` (moved too often this hour).
    pub kind: NoticeKind,
    /// The worktree.
    pub worktree: String,
    /// The error class Claude Code reported.
    pub error: String,
    /// The receiver the configuration names, if any.
    pub receiver: Option<String>,
    /// The background job that moves the task, once started.
    pub job: Option<String>,
    /// When it happened.
    pub at: String,
    /// Whether a session start has shown it already.
    pub shown: bool,
}

/// The kind of a [`Notice`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NoticeKind {
    /// The task is moving (or moved) to the receiver.
    Moved,
    /// Nothing moved (`on_limit = "notify"`, or no receiver).
    WouldMove,
    /// Nothing moved: the task moved `max_hops` times this hour already.
    HopLimit,
}

impl Notice {
    /// The line the person reads.
    pub fn text(&self) -> String {
        let why = format!("Claude Code stopped on an API error ({})", self.error);
        let receiver = self.receiver.as_deref().unwrap_or("codex");
        match self.kind {
            NoticeKind::Moved => format!(
                "{why}; handoff moved this task to {receiver}{}. See it with `handoff log --cwd {}`; take it back with `handoff continue claude --cwd {} --note-file <note>`.",
                self.job
                    .as_deref()
                    .map(|j| format!(" (job {j}: `handoff wait {j}`)"))
                    .unwrap_or_default(),
                self.worktree,
                self.worktree,
            ),
            NoticeKind::WouldMove => format!(
                "{why}; nothing moved. To hand the task over: `handoff continue \"{receiver}\" --cwd {} --note-file <note>` (or set [failover] on_limit = \"continue\").",
                self.worktree
            ),
            NoticeKind::HopLimit => format!(
                "{why}; nothing moved: this task already moved on a limit as often as [failover] max_hops allows this hour."
            ),
        }
    }
}

/// What is kept per worktree: the notice to show, and when the task moved on a limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NoticeFile {
    /// The latest notice.
    pub notice: Option<Notice>,
    /// When the task moved on a limit (ISO-8601 UTC), newest last.
    #[serde(default)]
    pub hops: Vec<String>,
}

/// The notices of every worktree: `<state>/handoff/notices/<digest of the worktree>.json`.
#[derive(Debug, Clone)]
pub struct Notices {
    dir: Utf8PathBuf,
}

impl Notices {
    /// Notices kept in `dir`.
    pub fn new(dir: impl Into<Utf8PathBuf>) -> Notices {
        Notices { dir: dir.into() }
    }

    fn path(&self, worktree: &Utf8Path) -> Utf8PathBuf {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(worktree.as_str().as_bytes());
        let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{name}.json"))
    }

    /// What is kept for `worktree` (nothing when none or unreadable).
    pub fn load(&self, worktree: &Utf8Path) -> NoticeFile {
        std::fs::read(self.path(worktree))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Keeps `file` for `worktree` (private: 0700 directory, 0600 file, replaced whole).
    pub fn save(&self, worktree: &Utf8Path, file: &NoticeFile) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)?;
        let path = self.path(worktree);
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&serde_json::to_vec(file).unwrap_or_default())?;
        }
        std::fs::rename(&tmp, &path)
    }
}

/// The Claude Code process a hook runs under: the nearest ancestor of this process whose
/// command name is `claude` (its hooks may run through a shell), else the parent.
pub fn claude_ancestor() -> Option<u32> {
    let parent = handoff_core::parent_pid(std::process::id())?;
    let mut pid = parent;
    for _ in 0..64 {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim().starts_with("claude") {
            return Some(pid);
        }
        match handoff_core::parent_pid(pid) {
            Some(p) if p > 1 => pid = p,
            _ => break,
        }
    }
    Some(parent)
}

/// The worktree holding `cwd`: the nearest directory up from it with a `.git` entry.
pub fn worktree_root(cwd: &Utf8Path) -> Option<Utf8PathBuf> {
    let real = cwd.canonicalize_utf8().ok()?;
    real.ancestors()
        .find(|d| d.join(".git").symlink_metadata().is_ok())
        .map(Utf8Path::to_owned)
}

/// What a limit does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitPlan {
    /// Not an error the configuration acts on: nothing happens.
    Ignore,
    /// Tell the person; move nothing.
    Notify(Notice),
    /// Move the task: `handoff continue <args…> --note-file -` with `note` on its stdin.
    Continue {
        /// The command line after `continue`.
        args: Vec<String>,
        /// The generated note.
        note: String,
        /// What the person is told (its job filled in once started).
        notice: Notice,
    },
}

/// Decides what a `StopFailure` does in `worktree`, as `config` says; `kept` is what is kept
/// for that worktree, `source_pid` the Claude Code process that stopped (not counted as an
/// agent working in the worktree by the move).
pub fn plan(
    config: &FailoverConfig,
    payload: &StopFailure,
    worktree: &Utf8Path,
    kept: &NoticeFile,
    now: SystemTime,
    source_pid: Option<u32>,
) -> LimitPlan {
    if !config.limit_errors().iter().any(|e| e == payload.error()) {
        return LimitPlan::Ignore;
    }
    let notice = |kind| Notice {
        kind,
        worktree: worktree.to_string(),
        error: payload.error().to_owned(),
        receiver: config.receiver.clone(),
        job: None,
        at: handoff_core::now_iso(),
        shown: false,
    };
    let receiver = match (&config.receiver, config.on_limit()) {
        (Some(r), OnLimit::Continue) => r.clone(),
        _ => return LimitPlan::Notify(notice(NoticeKind::WouldMove)),
    };
    let recent = kept
        .hops
        .iter()
        .filter_map(|at| handoff_core::parse_iso(at))
        .filter(|at| now.duration_since(*at).map_or(true, |age| age < HOP_WINDOW))
        .count();
    if recent >= config.max_hops() as usize {
        return LimitPlan::Notify(notice(NoticeKind::HopLimit));
    }
    let mut args = vec![
        receiver,
        "--cwd".to_owned(),
        worktree.to_string(),
        "--from".to_owned(),
        "claude".to_owned(),
        "--fallback".to_owned(),
        "fresh-agent".to_owned(),
        "--wait".to_owned(),
        "--generated-note".to_owned(),
        "--trigger".to_owned(),
        format!("limit:{}", cause_of(payload.error())),
        "--message".to_owned(),
        "Claude Code stopped on its limit. The handoff note was generated by handoff from the conversation and the repository, not written by the agent: check the repository (git status, git diff, the tests) rather than trust it.".to_owned(),
    ];
    // The session's own file: carried from there wherever Claude Code keeps it (an id alone is
    // looked up in the default store only).
    if let Some(path) = payload
        .transcript_path
        .as_deref()
        .filter(|p| p.starts_with('/') && Utf8Path::new(p).is_file())
    {
        args.push("--session".to_owned());
        args.push(path.to_owned());
    }
    if let Some(pid) = source_pid {
        args.push("--source-pid".to_owned());
        args.push(pid.to_string());
    }
    let transcript = payload
        .transcript_path
        .as_deref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    LimitPlan::Continue {
        args,
        note: generated_note(payload, &transcript),
        notice: notice(NoticeKind::Moved),
    }
}

/// The texts of a Claude Code transcript's messages of `role` (`user` prompts, `assistant`
/// text), in order; tool results and other events left out.
fn texts(transcript: &str, role: &str) -> Vec<String> {
    transcript
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("type").and_then(|t| t.as_str()) == Some(role))
        .filter(|v| v.get("isApiErrorMessage").and_then(|b| b.as_bool()) != Some(true))
        .filter_map(|v| {
            let content = v.pointer("/message/content")?;
            let text = match content {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Array(parts) => parts
                    .iter()
                    .filter(|p| p.get("type").and_then(|t| t.as_str()) == Some("text"))
                    .filter_map(|p| p.get("text").and_then(|t| t.as_str()))
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => return None,
            };
            (!text.trim().is_empty()).then_some(text)
        })
        .collect()
}

fn excerpt(text: &str) -> String {
    let t: String = text.trim().chars().take(EXCERPT_CHARS).collect();
    let quoted: Vec<String> = t.lines().map(|l| format!("> {l}")).collect();
    quoted.join("\n")
}

/// A handoff note handoff writes when the agent could not (it stopped on its limit): the nine
/// sections, from the conversation's first request and last answer and what is known of the
/// stop; Git state is written by `handoff continue` from the repository, as for any note. Every
/// section says it was generated, so the receiver checks the repository instead of trusting it.
pub fn generated_note(payload: &StopFailure, transcript: &str) -> String {
    let asked = texts(transcript, "user");
    let answered = texts(transcript, "assistant");
    let goal = asked.first().map_or_else(
        || "Not known: the conversation could not be read. Ask the person.".to_owned(),
        |first| {
            format!(
                "As the person first asked it (quoted from the conversation):\n\n{}",
                excerpt(first)
            )
        },
    );
    let last = answered
        .last()
        .map(|a| {
            format!(
                "\n\nThe agent's last answer before it stopped:\n\n{}",
                excerpt(a)
            )
        })
        .unwrap_or_default();
    let stopped = payload
        .last_assistant_message
        .as_deref()
        .map(|m| format!(" It said: \"{}\".", m.trim()))
        .unwrap_or_default();
    format!(
        "# Handoff note (generated)\n\n\
         This note was generated by handoff when Claude Code stopped on an API error ({error}); \
         the agent did not write it. Check the repository rather than trust it.\n\n\
         ## Goal\n\n{goal}\n\n\
         ## Current state\n\n\
         Claude Code stopped on an API error ({error}) in session {session}.{stopped} Its \
         conversation ({turns} requests from the person) is carried when the receiver can take \
         it; the uncommitted work is in the checkpoint below.{last}\n\n\
         ## Done and verified\n\n\
         Nothing is verified by this note: handoff cannot tell what the agent checked. Run \
         `git log -3 --stat` and `git show --stat HEAD` to see what was committed.\n\n\
         ## In progress\n\n\
         Whatever the last answer above describes; `git show HEAD` shows the checkpoint of the \
         work as it was when the agent stopped.\n\n\
         ## Next steps\n\n\
         1. Read the checkpoint (`git show HEAD`) and the carried conversation.\n\
         2. Run the project's tests to see where the work stands.\n\
         3. Carry on with the goal above.\n\n\
         ## Decisions and constraints\n\n\
         Not recorded: they are in the carried conversation, if anywhere.\n\n\
         ## Open questions\n\n\
         Whether the goal above is still the person's: the note was generated without them.\n\n\
         ## How to verify\n\n\
         - `git status` (expected: the state the receiver left)\n\
         - the project's own test command (see its README)\n\n\
         ## Git state\n\n(written by handoff)\n",
        error = payload.error(),
        session = payload.session_id,
        turns = asked.len(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(error: &str) -> StopFailure {
        StopFailure {
            session_id: "e4deea45-17fa-4e8a-b3a5-b9183beb054e".into(),
            transcript_path: None,
            cwd: "/w".into(),
            error: Some(error.into()),
            last_assistant_message: Some("API Error: Request rejected (429)".into()),
        }
    }

    fn config(on_limit: OnLimit) -> FailoverConfig {
        FailoverConfig {
            receiver: Some("codex gpt-5 high".into()),
            on_limit: Some(on_limit),
            ..FailoverConfig::default()
        }
    }

    #[test]
    fn the_recorded_payload_reads() {
        let recorded = r#"{"session_id":"e4deea45-17fa-4e8a-b3a5-b9183beb054e","transcript_path":"/h/.claude/projects/x/e4deea45.jsonl","cwd":"/w","prompt_id":"9e45fbbb","effort":{"level":"high"},"hook_event_name":"StopFailure","error":"rate_limit","last_assistant_message":"API Error: Request rejected (429) · This request would exceed your account's rate limit. Please try again later."}"#;
        let p = StopFailure::parse(recorded.as_bytes()).unwrap();
        assert_eq!(p.error(), "rate_limit");
        assert_eq!(cause_of(p.error()), FailureCause::RateLimited);
        assert!(StopFailure::parse(b"{}").is_err());
        assert!(StopFailure::parse(br#"{"session_id":"s","cwd":"rel"}"#).is_err());
    }

    #[test]
    fn notify_continue_and_the_hop_limit() {
        let now = SystemTime::now();
        let w = Utf8Path::new("/w");
        let kept = NoticeFile::default();
        assert_eq!(
            plan(
                &config(OnLimit::Continue),
                &payload("server_error"),
                w,
                &kept,
                now,
                None
            ),
            LimitPlan::Ignore
        );
        match plan(
            &config(OnLimit::Notify),
            &payload("rate_limit"),
            w,
            &kept,
            now,
            None,
        ) {
            LimitPlan::Notify(n) => assert_eq!(n.kind, NoticeKind::WouldMove),
            other => panic!("{other:?}"),
        }
        match plan(
            &config(OnLimit::Continue),
            &payload("rate_limit"),
            w,
            &kept,
            now,
            Some(42),
        ) {
            LimitPlan::Continue { args, note, .. } => {
                assert_eq!(args[0], "codex gpt-5 high");
                assert!(
                    args.windows(2)
                        .any(|w| w == ["--trigger", "limit:rate_limited"])
                );
                assert!(args.windows(2).any(|w| w == ["--source-pid", "42"]));
                assert!(note.contains("generated by handoff"));
            }
            other => panic!("{other:?}"),
        }
        let hopped = NoticeFile {
            notice: None,
            hops: vec![handoff_core::now_iso()],
        };
        match plan(
            &config(OnLimit::Continue),
            &payload("rate_limit"),
            w,
            &hopped,
            now,
            None,
        ) {
            LimitPlan::Notify(n) => assert_eq!(n.kind, NoticeKind::HopLimit),
            other => panic!("{other:?}"),
        }
        let old = NoticeFile {
            notice: None,
            hops: vec!["2020-01-01T00:00:00.000Z".into()],
        };
        assert!(matches!(
            plan(
                &config(OnLimit::Continue),
                &payload("rate_limit"),
                w,
                &old,
                now,
                None
            ),
            LimitPlan::Continue { .. }
        ));
    }

    /// Every error class Claude Code's hook reports: acted on only when `errors` names it,
    /// `rate_limit` alone by default; each maps to handoff's cause in the handoff's trigger.
    #[test]
    fn every_error_class_the_hook_reports() {
        let now = SystemTime::now();
        let w = Utf8Path::new("/w");
        let kept = NoticeFile::default();
        let mut all = config(OnLimit::Continue);
        all.errors = Some(
            handoff_core::CLAUDE_STOP_ERRORS
                .iter()
                .map(|e| (*e).to_owned())
                .collect(),
        );
        assert!(all.check_limit().is_ok());
        for error in handoff_core::CLAUDE_STOP_ERRORS {
            let by_default = plan(
                &config(OnLimit::Continue),
                &payload(error),
                w,
                &kept,
                now,
                None,
            );
            assert_eq!(
                matches!(by_default, LimitPlan::Continue { .. }),
                error == "rate_limit",
                "{error}"
            );
            match plan(&all, &payload(error), w, &kept, now, None) {
                LimitPlan::Continue { args, .. } => {
                    let trigger = format!("limit:{}", cause_of(error));
                    assert!(args.contains(&trigger), "{error}: {args:?}");
                }
                other => panic!("{error}: {other:?}"),
            }
        }
        let mut bad = config(OnLimit::Continue);
        bad.errors = Some(vec!["rate-limit".into()]);
        assert!(bad.check_limit().unwrap_err().contains("rate-limit"));
    }

    #[test]
    fn a_generated_note_passes_the_note_check() {
        let transcript = [
            r#"{"type":"user","message":{"role":"user","content":"Add a --verbose flag to the CLI."}}"#,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"I added the flag; tests next."}]}}"#,
            r#"{"type":"assistant","isApiErrorMessage":true,"message":{"content":[{"type":"text","text":"API Error: 429"}]}}"#,
        ]
        .join("\n");
        let note = generated_note(&payload("rate_limit"), &transcript);
        let parsed = handoff_core::parse_note(&note);
        assert!(handoff_core::check_note(&parsed).is_ok(), "{note}");
        assert!(note.contains("> Add a --verbose flag"));
        assert!(note.contains("> I added the flag"));
        assert!(!note.contains("API Error: 429\n"));
    }
}
