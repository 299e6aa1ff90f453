//! Test support for handoff.
//!
//! - [`fake_agent_bin`]: the `fake-agent` binary, which imitates every agent CLI handoff drives
//!   (`claude`, `codex`, `grok`, `kiro-cli`, `opencode`, `cursor-agent`, `copilot`, `gemini`, `qwen`) and dispatches on the
//!   basename of `argv[0]`.
//! - [`FakeAgents`]: a `bin/` directory of symlinks to it, plus the `fake-agent.env` switches and
//!   the invocation records.
//! - [`ScratchRepo`]: a throwaway Git repository with one commit.
//! - [`FakeSshHost`]: "another machine" reached through `fake-ssh`, a stand-in for the `ssh`
//!   client that needs no server ([`fake_ssh`]); [`SshHost`] is a real throwaway `sshd`
//!   ([`ssh`]), for the suite of `cargo xtask e2e-real`.
//! - [`fixtures`]: the help texts and versions the fake prints.
//!
//! # Switches
//!
//! The fake reads the keys in [`keys`] from its environment and from `fake-agent.env` next to
//! `argv[0]` (real environment variables win; handoff scrubs the environment of the agents it
//! launches, so tests normally use the file through [`FakeAgents::set`]).
//!
//! `HANDOFF_FAKE_MODE` (default `success`) only changes *runs*; `--version`, `--help` and the
//! adapters' behavioural probes always answer normally:
//!
//! | mode | effect |
//! |---|---|
//! | `success` | writes `fake-<mode>.txt` in the target dir if the run is writable; answers `completed` |
//! | `no-change` | answers `completed`, writes nothing |
//! | `mutate` | writes `fake-mutation.txt` even in a read-only run (never in an advice run); answers `completed` |
//! | `blocked` / `failed` | answers with that status, writes nothing |
//! | `hang` | writes its pid to `HANDOFF_FAKE_READY_FILE`, sleeps forever |
//! | `grandchild` | spawns `sleep 1000`, writes its pid to `HANDOFF_FAKE_GRANDCHILD_PID_FILE`, then as `hang` |
//! | `exit` | one stderr line, exit `HANDOFF_FAKE_EXIT` (default 23), no output |
//! | `prose` | the envelope carries prose instead of JSON |
//! | `oversized` | more than 1.1 MiB on stdout (a 1.2 MB `response`) |
//! | `invalid-utf8` | the answer contains invalid UTF-8 bytes |
//! | `stderr-secret` | as `success`, plus an API key and a bearer token on stderr |
//! | `agent-error` | the CLI reports a failed model call (exit 1) |
//! | `max-turns` | Claude: `error_max_turns` result, exit 1; other CLIs: as `agent-error` |
//! | `schema-drift` | the answer's `schemaVersion` is `handoff.provider-output.v0` |
//!
//! `prose`, `oversized`, `invalid-utf8` and `schema-drift` write the file like `success` (the
//! agent did the work; only its answer is bad). `<mode>` is the handoff mode named by the
//! prompt's `Mode: <mode>` line (`advice` for an `Operation: advice` prompt). An advice run never
//! writes a file, whatever the mode and grants.
//!
//! Escapes, before any of the above: `HANDOFF_FAKE_ESCAPEE_PID_FILE` starts `sleep 1000` in a
//! new session whose parent exits at once (`(setsid sleep 1000 &)`) and writes its pid there;
//! `HANDOFF_FAKE_KILL_PARENT=1` sends SIGKILL to the fake's parent process (`STOP`: SIGSTOP).
//!
//! Leftovers, first of all (before the nested-advice steps below), in runs and continuation
//! receiver turns alike: `HANDOFF_FAKE_LEFTOVERS` acts on the git directories of the repository
//! holding the fake's working directory (the nearest directory at or above it that contains
//! `.git`; a `.git` file's `gitdir:` line names the worktree's own git directory, whose
//! `commondir` file names the common one).
//!
//! - `claude-sandbox` leaves what Claude Code 2.1.332 leaves after its Bash tool ran in
//!   bubblewrap: for each deny-listed path that is absent, the empty file or directory it mounts
//!   over, missing parents included; an existing path is never touched. In the common git
//!   directory: the files `config.worktree` and `objects/info/alternates`, the directories
//!   `NOTES_MERGE_WORKTREE/`, `glab-cli/`, `worktrees/`, `remotes/`,
//!   `info/.claude-sandbox-noreplace/`, `objects/info/.claude-sandbox-noreplace/`,
//!   `objects/info/commit-graphs/` and `objects/info/commit-graphs/.claude-sandbox-noreplace/`.
//!   In a linked worktree's own git directory, in addition: the file `config.worktree` and the
//!   directories `NOTES_MERGE_WORKTREE/` and `glab-cli/`.
//! - `hostile` writes content under those names instead, overwriting existing files: in the
//!   common git directory `config.worktree` (`[core]` with `fsmonitor =
//!   /tmp/fake-agent-fsmonitor`), `objects/info/alternates` (`/tmp/fake-agent-alternates`),
//!   `glab-cli/config.yml` (`editor: /tmp/fake-agent-editor`),
//!   `objects/info/commit-graphs/commit-graph-chain` (forty zeros) and
//!   `NOTES_MERGE_WORKTREE/planted` (`planted`); in a linked worktree's own git directory, the
//!   same `config.worktree`.
//!
//! An unknown value prints `fake-agent: unknown HANDOFF_FAKE_LEFTOVERS=<value>` and exits 2; a
//! path that cannot be created or written, or a working directory outside any repository, prints
//! one stderr line and the run goes on.
//!
//! A key of the settings file may be suffixed `@<exe>` (`HANDOFF_FAKE_MODE@codex=failed`): that
//! CLI reads it in place of the plain key, so agents sharing the file can behave differently.
//! `HANDOFF_FAKE_FINDINGS` is a JSON array of provider-output findings the answer carries;
//! `HANDOFF_FAKE_VERDICT` the `verdict` it states, as given.
//!
//! Other keys: `HANDOFF_FAKE_HELP=missing` drops one flag the adapter requires from the help text
//! (Claude `--json-schema`, Codex `--strict-config`, Grok `--json-schema`, Kiro `--trust-tools`,
//! OpenCode `--pure`, Cursor `--force` / `--readonly-paths`, community Grok `--max-tool-rounds`);
//! `HANDOFF_FAKE_GROK=community` makes `grok` the community `@vibe-kit/grok-cli` (`-p`, one chat
//! message a line, API errors as an assistant message with exit 0, shell commands with `/bin/sh`
//! whatever `$SHELL` says, `-k/-u` saved into `~/.grok/user-settings.json`) instead of xAI's
//! CLI; `HANDOFF_FAKE_VERSION` replaces the
//! version number; `HANDOFF_FAKE_RECORD_DIR` makes every invocation (probes included) write
//! `<dir>/invocation-<pid>-<nanos>.json` = `{"exe", "argv", "env", "cwd", "stdin", "pid"}`,
//! atomically, at start (`stdin: null`) and again once stdin has been read.
//!
//!
//! ## Continuation receivers
//!
//! A run handoff starts as a task's new owner is told apart by what decides persistence in the
//! real CLI: Claude `-p` without `--no-session-persistence` and without `--json-schema`; Codex
//! `exec` without `--ephemeral`, and `exec resume`; OpenCode `run` without `OPENCODE_CONFIG_DIR`
//! in its environment (the delegated adapter gives OpenCode private configuration roots, a
//! receiver keeps the user's). Such a run reads its prompt and follows `HANDOFF_FAKE_MODE`:
//! `success` (and the other modes in which the work is done) writes `fake-receiver-<exe>.txt` in
//! the target directory, overwriting it, with a line naming the CLI and the session — only when
//! the role may write (the same rule as runs: Claude's `--tools` has `Write`, Codex's sandbox —
//! `--sandbox`, else `-c sandbox_mode=…`, else a `default_permissions` profile extending
//! `:workspace` — is not `read-only`, OpenCode's `edit` permission allows); `mutate` writes it
//! anyway; `no-change`, `blocked` and `failed` write nothing; `agent-error` and `max-turns` print
//! the CLI's own failure and exit 1; `exit`, `hang` and `grandchild` behave as for runs. The last
//! message is `Continued the task as <exe> (session <id>).`, in the CLI's native events (Claude
//! stream-json `init` … `result`, Codex `thread.started` … `turn.completed`, OpenCode
//! `step_start` / `text` / `step_finish`), each naming the session in use.
//!
//! A prompt containing `What were you last working on? Answer in one or two sentences.` is
//! answered, without doing any work, with `FAKE_AGENT_PROBE_ANSWER` when set, else the last
//! assistant text of the session resumed (before this turn), else `I don't know.`.
//! `FAKE_AGENT_RECEIVER_DELAY_MS=<ms>` makes a receiver sleep before it writes anything to its
//! session store; `FAKE_AGENT_RECEIVER_FRESH=1` makes it ignore the session it was told to resume
//! (Claude `--resume`, Codex `exec resume`, OpenCode `--session`) and start a new one.
//!
//! **Claude Code** keeps its sessions in its real store and format:
//! `${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/<slug(cwd)>/<id>.jsonl`, the slug being the
//! absolute directory with every character other than an ASCII letter or digit replaced by `-`.
//! A turn appends `queue-operation` enqueue/dequeue lines, a `user` line with the prompt, the
//! `assistant` lines (and the tool-result `user` line of a file write) of the answer, and a
//! `last-prompt` line; conversation lines carry `uuid` / `parentUuid` (chained to the previous
//! line), `sessionId`, `cwd`, `version`, `gitBranch`, `timestamp` and an Anthropic-shaped
//! `message`; a failed model call is an `assistant` line with `isApiErrorMessage`. The session:
//! `--session-id <uuid>` or a fresh UUID for a new one (an id already in use, or not a UUID, is
//! Claude's error); `--resume <id>` appends to `<id>.jsonl` when it can be resumed from the
//! current directory (its project folder, or another one whose lines record this directory),
//! else `No conversation found with session ID: <id>` (exit 1); `--resume <src> --fork-session
//! [--session-id <new>]` copies the source's lines to `<new>.jsonl` in the current directory's
//! project folder with `sessionId` rewritten, then appends; `--session-id` with `--resume` or
//! `--continue` but without `--fork-session` is Claude's error (exit 1).
//!
//! **Codex** keeps rollouts in its real store and format:
//! `${CODEX_HOME:-$HOME/.codex}/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDThh-mm-ss-<id>.jsonl`
//! (UTC), each line `{"timestamp", "ordinal", "type", "payload"}`: `session_meta` first, then per
//! turn `event_msg` `task_started`, the injected `<environment_context>` user message,
//! `turn_context`, the prompt as a `response_item` user message (`input_text`) and an `event_msg`
//! `user_message`, the `function_call` / `function_call_output` of a file write, the answer as an
//! `event_msg` `agent_message` and a `response_item` assistant message (`output_text`), and
//! `event_msg` `task_complete`. `exec` starts a thread with a new UUID v7; `exec resume <id>
//! [options] [-]` (the options of Codex's `exec resume`: no `--sandbox` or `--cd`) appends a turn
//! to the rollout of `<id>` found in any date folder, or prints `Error: thread/resume:
//! thread/resume failed: no rollout found for thread id <id> (code -32600)` and exits 1.
//!
//! **OpenCode**'s real store is a database; the fake keeps
//! `${XDG_DATA_HOME:-$HOME/.local/share}/opencode/fake-agent-sessions/<id>.json` = `{"cwd",
//! "prompts": [...], "lastMessage"}` (`null` after a failed turn). `run` starts a `ses_…`
//! session; `run --session <id>` continues `<id>` (created when missing); with `--fork` it
//! continues a new session that starts with `<id>`'s prompts. `export <id>` prints it as an
//! export document, `import <file>` writes one back (`HANDOFF_FAKE_IMPORT_WAIT_FILE` holds it,
//! `HANDOFF_FAKE_IMPORT_FAIL=1` fails it), `session delete <id>` removes it.
//!
//! The resume commands — `claude --resume <id>`, `codex resume <id>`, `opencode --session <id>` —
//! print `resumed <id>: <last assistant text>` and exit 0 when the session exists (Claude and
//! OpenCode: and belongs to the current directory; Codex threads are not tied to one);
//! otherwise they print the CLI's kind of error on stderr (`No conversation found with session
//! ID: <id>`, `Error: No saved session found with ID <id>. …`, `Error: Session not found: <id>`)
//! and exit 1.
//!
//! ## Nested advice
//!
//! Every CLI does the following at the start of a run (not of a probe), in this order, before
//! the `HANDOFF_FAKE_MODE` behaviour (so a `hang` run asks first, then hangs):
//!
//! 1. `HANDOFF_FAKE_CONTEXT_FILE=<path>`: writes the value of `HANDOFF_SUPERVISOR_CONTEXT` (empty
//!    when unset) to `<path>`, atomically.
//! 2. `HANDOFF_FAKE_ADVICE=<target>,<target>…` (e.g. `codex,claude`): for each target in turn,
//!    takes the first prompt line whose trimmed text contains ` advice --harness AGENT ` and ends
//!    with `--instructions -`, replaces that `AGENT` with the target, inserts
//!    `HANDOFF_FAKE_ADVICE_ARGS` (raw shell words, e.g. `--bash true`) before `--instructions -`,
//!    and runs the line with `/bin/sh -c`: stdin is `HANDOFF_FAKE_ADVICE_QUESTION` (default
//!    `What is the riskiest part of this change? (asked by <exe>)`) followed by ` [to <target>]`,
//!    the environment is the fake's own, minus `HANDOFF_SUPERVISOR_CONTEXT` when
//!    `HANDOFF_FAKE_ADVICE_STRIP=1`. Stdout is kept up to 4 MiB, stderr's last 8 KiB. Without
//!    such a line nothing is run (one stderr line says so) and the run answers normally. Each
//!    call adds an evidence item to the answer, before the `file` item:
//!    `{"kind":"advice","summary":"<target>: exit <code> <status> <response>"}`, where `<code>` is
//!    the exit code (`signal <n>` when killed, `none` when `/bin/sh` did not start), `<status>` the
//!    `status` of the last JSON object line on stdout (`unparsed` without one) and `<response>` the
//!    first 200 characters of its `output.response` (left out, with its space, when absent).
//! 3. `HANDOFF_FAKE_WAIT_FILE=<path>`: polls every 20 ms until `<path>` exists.
//!
//! An advice run (an `Operation: advice` prompt) then sleeps `HANDOFF_FAKE_ADVICE_DELAY_MS`
//! milliseconds, when set, before it answers.
//!
//! With `HANDOFF_FAKE_ADVICE` set, the invocation record gains `"nestedCommand"` (the trimmed
//! template line, or `null`) and `"nested"`: one `{"target", "command", "exitCode", "stdout",
//! "stderrTail", "durationMs"}` per call (`command` as run; `exitCode` `null` when killed by a
//! signal or not started), the record being rewritten after every call.
//!
//! `fake-agent.env` is looked up in the directory of `argv[0]` when it contains a `/`, else in the
//! first `$PATH` directory holding that name, else next to `current_exe()`.
#![deny(missing_docs)]

mod agents;
mod binary;
#[doc(hidden)]
pub mod fake;
pub mod fake_ssh;
pub mod fixtures;
pub mod model_server;
mod repo;
pub mod ssh;

pub use agents::FakeAgents;
pub use binary::{fake_agent_bin, fake_ssh_bin};
pub use fake::EXECUTABLES;
pub use fake_ssh::FakeSshHost;
pub use model_server::{ModelServer, Script, Step};
pub use repo::{ScratchRepo, git_dir_paths};
pub use ssh::SshHost;

/// The switches the fake reads (environment variables or `fake-agent.env` lines).
pub mod keys {
    pub use crate::fake::settings::{
        ADVICE, ADVICE_ARGS, ADVICE_DELAY_MS, ADVICE_FROM, ADVICE_QUESTION, ADVICE_STRIP,
        API_ERROR, API_ERROR_AFTER_WRITE, CONTEXT_FILE, ENV_FILE_NAME, ESCAPEE_PID_FILE, EXIT,
        FINDINGS, GRANDCHILD_PID_FILE, GROK, HELP, IMPORT_FAIL, IMPORT_WAIT_FILE, KILL_PARENT,
        LEFTOVERS, MODE, NET, PROBE_ANSWER, READY_FILE, RECEIVER_DELAY_MS, RECEIVER_FRESH,
        RECORD_DIR, SHELL, VERDICT, VERSION, WAIT_FILE,
    };
}
