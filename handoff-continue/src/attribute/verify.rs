//! Verification: the note's commands, run and recorded.

use super::*;

// Verification: the note's commands, run and recorded.
// ---------------------------------------------------------------------------------------------

/// The commands of the latest started handoff's note, or why there are none.
pub(super) fn verify_commands(plan: &Plan<'_>) -> Result<Vec<String>, String> {
    let Some(latest) = plan.transfers.last() else {
        return Err(
            "--verify: no started handoff in this task, so no note to take commands from"
                .to_owned(),
        );
    };
    let Some(path) = &latest.row.context.note_path else {
        return Err(format!(
            "--verify: handoff {} recorded no note",
            latest.row.id
        ));
    };
    let text = read_note(path.as_std_path())
        .map_err(|e| format!("--verify: cannot read the note '{path}': {e}"))?;
    let commands = note_commands(&text);
    if commands.is_empty() {
        return Err(format!(
            "--verify: the note '{path}' lists no commands under \"How to verify\" (shell code \
             blocks, or list items that start with a backticked command)"
        ));
    }
    Ok(commands)
}

/// The commands under "How to verify": the lines of fenced shell code blocks (only the `$ `
/// lines when a block has prompts; comments and blank lines skipped; `\` continues a line), and
/// list items that start with a backticked command (the rest of the item is the expected
/// result). The note's Markdown is read by core's reader, the one that finds its sections.
pub(super) fn note_commands(text: &str) -> Vec<String> {
    const SHELLS: [&str; 8] = [
        "",
        "sh",
        "bash",
        "shell",
        "zsh",
        "console",
        "shell-session",
        "shellsession",
    ];
    let Some(body) = parse_note(text).body(Section::HowToVerify) else {
        return Vec::new();
    };
    let mut commands = Vec::new();
    for piece in Markdown::read(&body).pieces() {
        match &piece.kind {
            MarkdownKind::CodeBlock {
                info: Some(info),
                text,
            } => {
                let language = info.split_whitespace().next().unwrap_or("");
                if SHELLS.contains(&language.to_ascii_lowercase().as_str()) {
                    commands.extend(block_commands(&text.lines().collect::<Vec<_>>()));
                }
            }
            MarkdownKind::ListItem {
                code: Some(command),
            } => commands.push(command.clone()),
            _ => {}
        }
    }
    commands
}

pub(super) fn block_commands(block: &[&str]) -> Vec<String> {
    let prompted = block.iter().any(|l| l.trim_start().starts_with("$ "));
    let mut commands = Vec::new();
    let mut pending: Option<String> = None;
    for line in block {
        let t = line.trim();
        if let Some(mut joined) = pending.take() {
            joined.push(' ');
            joined.push_str(t.trim_end_matches('\\').trim_end());
            if t.ends_with('\\') {
                pending = Some(joined);
            } else {
                commands.push(joined);
            }
            continue;
        }
        let t = if prompted {
            match t.strip_prefix("$ ") {
                Some(c) => c.trim(),
                None => continue,
            }
        } else {
            t
        };
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            pending = Some(head.trim_end().to_owned());
        } else {
            commands.push(t.to_owned());
        }
    }
    commands.extend(pending.filter(|p| !p.is_empty()));
    commands
}

/// One verification command as it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// The command (`sh -c`).
    pub command: String,
    /// The commit it tested: HEAD when it started.
    pub commit: String,
    /// Its exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that killed it.
    pub signal: Option<String>,
    /// `exited`, `timed-out`, `output-limit` or `spawn-failed`.
    pub ending: &'static str,
    /// How long it ran.
    pub duration: Duration,
    /// The last lines of its output (stdout, then stderr) when it did not pass.
    pub output_tail: Vec<String>,
}

impl CheckResult {
    /// Exited 0.
    pub fn passed(&self) -> bool {
        self.ending == "exited" && self.exit_code == Some(0)
    }

    /// The check as the report's JSON lists it.
    pub fn json(&self) -> Value {
        json!({
            "command": self.command,
            "exitCode": self.exit_code,
            "signal": self.signal,
            "ending": self.ending,
            "passed": self.passed(),
            "commit": self.commit,
            "durationMs": u64::try_from(self.duration.as_millis()).unwrap_or(u64::MAX),
        })
    }

    /// One line for a person: the command, the commit, passed or FAILED and how it ended.
    pub fn line(&self) -> String {
        let how = match (self.ending, self.exit_code, &self.signal) {
            ("exited", Some(code), _) => format!("exit {code}"),
            ("timed-out", ..) => format!("killed after {} minutes", CHECK_TIMEOUT.as_secs() / 60),
            ("output-limit", ..) => "killed: too much output".to_owned(),
            ("spawn-failed", ..) => "could not start /bin/sh".to_owned(),
            (_, _, Some(signal)) => format!("killed by {signal}"),
            _ => "ended".to_owned(),
        };
        let verdict = if self.passed() { "passed" } else { "FAILED" };
        format!(
            "check `{}` on {}: {verdict} ({how}, {:.1} s)",
            self.command,
            short(&self.commit),
            self.duration.as_secs_f64()
        )
    }
}

/// The checks that ran.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checks {
    /// Each command that ran to its end, in order.
    pub results: Vec<CheckResult>,
    /// A signal stopped a check (it is not recorded, and no further check ran).
    pub cancelled: bool,
    /// The task store could not record a check (no further check ran).
    pub store_error: Option<String>,
}

impl Checks {
    /// Every check passed and none was cancelled.
    pub fn all_passed(&self) -> bool {
        !self.cancelled && self.results.iter().all(CheckResult::passed)
    }
}

pub(super) async fn run_checks(
    store: &dyn TaskStore,
    task: &Task,
    git: &Git,
    (commands, head): (&[String], &str),
    env: &BTreeMap<String, String>,
    cancel: tokio::sync::watch::Receiver<bool>,
    on_check: &mut dyn FnMut(&CheckResult),
) -> Checks {
    let mut checks = Checks::default();
    for command in commands {
        // The commit each check tests: HEAD when it starts (an earlier check may commit).
        let commit = git.commit_id("HEAD").unwrap_or_else(|| head.to_owned());
        let invocation = Invocation {
            sandbox: None,
            program: Utf8PathBuf::from("/bin/sh"),
            args: vec!["-c".to_owned(), command.clone()],
            env: env.clone(),
            cwd: git.root().to_owned(),
            stdin: StdinSource::Null,
            dirs: Vec::new(),
            files: Vec::new(),
            answer: AnswerSource::Stdout,
            policy: Value::Null,
            secrets: Vec::new(),
        };
        let started = Instant::now();
        let report = supervise(&invocation, &[], CHECK_TIMEOUT, cancel.clone()).await;
        let ending = match &report.ending {
            Ending::Exited => "exited",
            Ending::TimedOut => "timed-out",
            Ending::OutputLimit { .. } => "output-limit",
            Ending::SpawnFailed { .. } => "spawn-failed",
            Ending::Cancelled => {
                checks.cancelled = true;
                break;
            }
        };
        let mut result = CheckResult {
            command: command.clone(),
            commit,
            exit_code: report.exit_code,
            signal: report.signal.clone(),
            ending,
            duration: started.elapsed(),
            output_tail: Vec::new(),
        };
        if !result.passed() {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&report.stdout),
                String::from_utf8_lossy(&report.stderr)
            );
            let lines: Vec<&str> = text.lines().collect();
            result.output_tail = lines[lines.len().saturating_sub(OUTPUT_TAIL_LINES)..]
                .iter()
                .map(|l| (*l).to_owned())
                .collect();
        }
        let recorded = store.append(
            &task.id,
            &Record::Check(CheckRun {
                command: result.command.clone(),
                exit_code: if ending == "exited" {
                    result.exit_code
                } else {
                    None
                },
                commit: result.commit.clone(),
            }),
        );
        on_check(&result);
        checks.results.push(result);
        if let Err(e) = recorded {
            checks.store_error = Some(format!("could not record the check `{command}`: {e}"));
            break;
        }
    }
    checks
}
