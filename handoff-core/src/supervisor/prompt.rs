//! The text that tells a worker how to ask for nested advice.

use camino::Utf8Path;

use crate::request::BudgetLimits;

/// `s` as one word for `sh`: bare when every byte is safe, else quoted.
///
/// The words quoted here are the handoff executable and a `--cwd` checked on disk: paths, which
/// cannot hold the NUL byte no shell word can carry. Should one ever hold it, the word is `''`,
/// which both `sh` (as a command) and handoff (as `--cwd`) refuse, so the nested command fails
/// instead of running with a different argument.
fn sh_word(s: &str) -> std::borrow::Cow<'_, str> {
    shlex::try_quote(s).unwrap_or(std::borrow::Cow::Borrowed("''"))
}

/// The prompt text of a worker that may ask for advice: the exact command, what it prints,
/// the flags it takes and the limits.
pub(crate) fn nested_text(
    handoff_exe: &Utf8Path,
    cwd: &str,
    agents: &[String],
    limits: &BudgetLimits,
    deadline: &str,
) -> String {
    format!(
        "Nested advice is available: you may ask another agent for a read-only opinion while you \
         work. Run this shell command with your question on standard input, replacing AGENT with \
         one of {agents}:\n    {exe} advice --harness AGENT --cwd {cwd} --instructions -\n\
         It prints one result JSON line (handoff.result.v1): the answer is in output.response, and \
         exit code 0 with status \"succeeded\" means the adviser answered. Optional flags: --model \
         NAME, --effort LEVEL, --bash false, --web-search true (only if you have web search), \
         --timeout-ms N, --dependency advises:<runId> (a lineage.runId from an earlier result). \
         Do not pass --caller-harness or budget flags. An adviser that would be less isolated \
         than you runs with fewer grants (its result's grants say which), or is refused. The \
         adviser reads this worktree as it is \
         while you wait (read-only: in place, or a snapshot when its sandbox could write) and \
         cannot change your files; change nothing until it answers: a change made meanwhile, \
         even by a process you left running, fails the advice. Limits for the \
         whole run: {advice} advice nodes, depth {depth}, {conc} nodes running at once (you \
         included); every nested call ends by {deadline}.",
        agents = agents.join(", "),
        exe = sh_word(handoff_exe.as_str()),
        cwd = sh_word(cwd),
        advice = limits.max_advice_nodes,
        depth = limits.max_depth,
        conc = limits.max_concurrency,
    )
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use camino::Utf8PathBuf;

    use super::*;

    /// The command line of the nested-advice prompt, run by `sh` with `AGENT` filled in, reaches
    /// the program with every path as one argument, whatever it holds.
    #[test]
    fn the_nested_command_survives_sh() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("it's a \"handoff\" $HOME");
        std::fs::write(
            &exe,
            "#!/bin/sh\nfor a in \"$@\"; do printf '<%s>' \"$a\"; done\n",
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let exe = Utf8PathBuf::from_path_buf(exe).unwrap();
        let cwd = "/w/a b/~it's\\ *";
        let text = nested_text(
            &exe,
            cwd,
            &["codex".into()],
            &BudgetLimits::default(),
            "now",
        );
        let line = text
            .lines()
            .find(|l| l.contains(" advice --harness AGENT "))
            .unwrap()
            .trim()
            .replace("AGENT", "codex");
        let out = std::process::Command::new("/bin/sh")
            .args(["-c", &line])
            .output()
            .unwrap();
        assert!(out.status.success(), "{line}: {out:?}");
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            format!("<advice><--harness><codex><--cwd><{cwd}><--instructions><->")
        );
    }

    #[test]
    fn plain_paths_stay_bare_and_nul_is_refused() {
        assert_eq!(sh_word("/usr/local/bin/handoff"), "/usr/local/bin/handoff");
        assert_eq!(sh_word("/w/a b"), "'/w/a b'");
        assert_eq!(sh_word("/w/a\0b"), "''");
    }
}
