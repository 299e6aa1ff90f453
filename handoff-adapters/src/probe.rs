//! Short, auth-free probes of an agent CLI: `--version`, help texts, behaviour probes.

use std::time::Duration;

use camino::Utf8Path;
use handoff_core::{
    AnswerSource, Ending, Invocation, ProbeEnv, ProcessReport, StdinSource, run_command,
};

/// How long one probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// What a probe printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOutput {
    /// Exit code (None when killed).
    pub code: Option<i32>,
    /// stdout, lossily decoded.
    pub stdout: String,
    /// stderr, lossily decoded.
    pub stderr: String,
}

impl ProbeOutput {
    /// stdout and stderr together.
    pub fn text(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }
}

/// Runs `exe args…` in the probe's scratch directory with the probe environment and `stdin`,
/// in its own process group, which is killed after [`PROBE_TIMEOUT`].
pub async fn run(
    exe: &Utf8Path,
    args: &[&str],
    probe: &ProbeEnv,
    stdin: &[u8],
) -> Result<ProbeOutput, String> {
    let command = Invocation {
        sandbox: None,
        program: exe.to_owned(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env: probe.env.clone(),
        cwd: probe.scratch.clone(),
        stdin: StdinSource::Prompt,
        dirs: Vec::new(),
        files: Vec::new(),
        answer: AnswerSource::Stdout,
        policy: serde_json::Value::Null,
        secrets: Vec::new(),
    };
    let shown = format!("{exe} {}", args.join(" "));
    let report = run_command(&command, stdin, PROBE_TIMEOUT, None)
        .await
        .map_err(|e| format!("cannot run `{shown}`: {e}"))?;
    finished(&shown, PROBE_TIMEOUT, &report)?;
    Ok(ProbeOutput {
        code: report.exit_code,
        stdout: String::from_utf8_lossy(&report.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&report.stderr).into_owned(),
    })
}

/// Why a short command `shown` did not run to its end, if it did not.
pub fn finished(shown: &str, timeout: Duration, report: &ProcessReport) -> Result<(), String> {
    match &report.ending {
        Ending::Exited => Ok(()),
        Ending::TimedOut => Err(format!(
            "`{shown}` did not finish within {}s",
            timeout.as_secs()
        )),
        Ending::OutputLimit { stream } => {
            Err(format!("`{shown}` wrote more than 1 MiB to {stream}"))
        }
        Ending::Cancelled => Err(format!("`{shown}` was cancelled")),
        Ending::SpawnFailed { message } => Err(message.clone()),
    }
}

/// `exe --version`: must exit 0; the first non-blank line of stdout (else stderr), ≤512 chars.
pub async fn version(exe: &Utf8Path, probe: &ProbeEnv) -> Result<String, String> {
    let out = run(exe, &["--version"], probe, b"").await?;
    if out.code != Some(0) {
        return Err(format!(
            "`{exe} --version` exited with {}: {}",
            out.code.map_or("a signal".to_owned(), |c| c.to_string()),
            first_line(&out.text()).unwrap_or_default()
        ));
    }
    first_line(&out.stdout)
        .or_else(|| first_line(&out.stderr))
        .map(|l| l.chars().take(512).collect())
        .ok_or_else(|| format!("`{exe} --version` printed nothing"))
}

/// Runs a help command and returns the flags (from `required`) it does not mention.
pub async fn missing_flags(
    exe: &Utf8Path,
    args: &[&str],
    required: &[&str],
    probe: &ProbeEnv,
) -> Result<Vec<String>, String> {
    let out = run(exe, args, probe, b"").await?;
    if out.code != Some(0) {
        return Err(format!(
            "`{exe} {}` exited with {:?}",
            args.join(" "),
            out.code
        ));
    }
    let text = out.text();
    Ok(required
        .iter()
        .filter(|flag| !mentions(&text, flag))
        .map(|f| f.to_string())
        .collect())
}

/// Whether `text` mentions `flag` as a whole word (`--tools` does not count for `--toolsx`).
pub fn mentions(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(i, _)| {
        let next = text[i + flag.len()..].chars().next();
        !matches!(next, Some(c) if c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// The probes every adapter starts with: `--version`, then the help text of `help_args` must
/// list every flag of `required`. Returns the version, or the failed preflight to report.
pub async fn version_and_flags(
    exe: &Utf8Path,
    probe: &ProbeEnv,
    help_args: &[&str],
    required: &[&str],
) -> Result<String, handoff_core::Preflight> {
    let version = version(exe, probe)
        .await
        .map_err(|e| handoff_core::Preflight {
            version: None,
            failure: Some(e),
        })?;
    let failure = match missing_flags(exe, help_args, required, probe).await {
        Ok(missing) if missing.is_empty() => return Ok(version),
        Ok(missing) => format!(
            "`{} {}` does not list {}; this version is not supported",
            exe.file_name().unwrap_or(exe.as_str()),
            help_args.join(" "),
            missing.join(", ")
        ),
        Err(e) => e,
    };
    Err(handoff_core::Preflight {
        version: Some(version),
        failure: Some(failure),
    })
}

/// First non-blank trimmed line.
pub fn first_line(text: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned)
}

/// Like [`line_with`], ignoring ASCII case; prefers a line that starts with `needle` after an
/// `Error: ` prefix, as CLIs print their own message.
pub fn line_with_ci(text: &str, needle: &str) -> Option<String> {
    let needle = needle.to_ascii_lowercase();
    let mut hits = text
        .lines()
        .filter(|l| l.to_ascii_lowercase().contains(&needle));
    let first = hits.next()?;
    let best = std::iter::once(first)
        .chain(hits)
        .find(|l| l.trim_start().to_ascii_lowercase().starts_with("error:"))
        .unwrap_or(first);
    Some(best.trim().chars().take(1024).collect())
}

/// The line of `text` containing `needle`, trimmed (for quoting a CLI's own message).
pub fn line_with(text: &str, needle: &str) -> Option<String> {
    text.lines()
        .find(|l| l.contains(needle))
        .map(|l| l.trim().chars().take(1024).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_mentions_are_whole_words() {
        assert!(mentions("  --tools <tools...>", "--tools"));
        assert!(mentions("--tools,", "--tools"));
        assert!(!mentions("--tools-x", "--tools"));
        assert!(!mentions("--toolsx", "--tools"));
    }
}
