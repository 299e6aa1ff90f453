//! The prose of every skill and command body.

use std::fmt::Write as _;

use handoff_core::{MAX_PANEL_MEMBERS, ProviderSpec, Verdict};

use super::{Host, Target, Verb};

fn caller_line(host: Host) -> &'static str {
    match host {
        Host::Either => {
            "`--caller-harness` is you: `claude` when you are Claude Code, `codex` when you are \
Codex."
        }
        Host::ClaudeCode => "`--caller-harness claude`: you are Claude Code.",
    }
}

fn caller_value(host: Host) -> &'static str {
    match host {
        Host::Either => "<claude|codex>",
        Host::ClaudeCode => "claude",
    }
}

pub(super) const FIND_BINARY: &str = r#"## 1. Find handoff

This plugin starts handoff through its launcher, `<plugin>/bin/handoff`, where `<plugin>` is the
plugin's root: `${CLAUDE_PLUGIN_ROOT}` when that reads as an absolute path here, else the
directory two levels above this file's folder. Run this once and note the absolute path it
prints:

```sh
sh '<plugin>/bin/handoff' --which-handoff
```

It looks on PATH (never in the repository you are working in), then in `~/.cargo/bin`, the npm
global prefix and Homebrew's prefix. If it prints `handoff is not installed: …`, stop and give
the person that line. Do not look for another way to reach the agent.

Call handoff by the absolute path it printed in every command below (shell variables do not
survive between tool calls, so write the path out). Never run an agent CLI yourself (`codex`,
`claude`, `grok`, `kiro-cli`, `opencode`, `cursor-agent`, `copilot`, `gemini`, `qwen`), not even to check that it is
installed: `'<handoff>' capabilities` does that without a model call.
"#;

const PRIVATE_DIR: &str = r#"## 2. Write the instructions to a private file

Make a private directory outside the repository and note the path it prints:

```sh
mktemp -d "${TMPDIR:-/tmp}/handoff.XXXXXXXX"
```

`mktemp -d` makes it readable by you only. If that path is inside the repository, make one
under `$HOME` instead. Never write the instructions, the result or any note inside the
repository. Use a new directory for each run: handoff never overwrites a result file.

Write `<dir>/instructions.md` with your file tool (or a quoted heredoc, `cat > … <<'EOF'`).
The other agent sees the repository but not this conversation, so make the file
self-contained: the goal, the files and functions involved, constraints and non-goals, what
"done" means and the commands that prove it. Never put secrets in it.
"#;

pub(super) fn delegation_body(
    host: Host,
    verb: Verb,
    target: Option<&Target>,
    mode: Option<&str>,
) -> String {
    let mut s = String::new();
    let who = target.map_or("another agent CLI".to_owned(), |t| t.name.to_owned());
    let title = match (verb, mode) {
        (Verb::Advice, _) => "# Ask another agent for advice".to_owned(),
        (_, Some("build")) => format!("# Have {who} build it"),
        (_, Some(_)) => format!("# Have {who} review it"),
        (Verb::Run, None) => format!("# Delegate a task to {who}"),
        (Verb::RunWithAdvice, None) => format!("# Delegate a task to {who}, with advice"),
    };
    let _ = writeln!(s, "{title}\n");
    if host == Host::ClaudeCode {
        let _ = writeln!(
            s,
            "The task: $ARGUMENTS\n\nIf no task was given, ask the person what to {} and stop \
until they answer.\n",
            if mode == Some("build") {
                "build"
            } else {
                "review"
            }
        );
    }
    let intro = match verb {
        Verb::Advice => format!(
            "`handoff advice` asks {who} for a read-only answer: it must not change the worktree, \
and the adviser may itself ask further advisers. handoff starts it with exact controls, checks \
the worktree before and after, and prints one JSON result (`handoff.result.v1`)."
        ),
        Verb::Run => format!(
            "`handoff run` hands one bounded task to {who}, which cannot call handoff itself. \
handoff starts it with exact controls, fingerprints the git worktree before and after, and prints \
one JSON result (`handoff.result.v1`)."
        ),
        Verb::RunWithAdvice => format!(
            "`handoff run-with-advice` hands one bounded task to {who}, which may ask other agents \
for read-only advice through a supervisor handoff starts for the run (budgeted: depth, nodes, \
time). handoff fingerprints the git worktree before and after and prints one JSON result \
(`handoff.result.v1`) whose `dag` lists every adviser that was asked."
        ),
    };
    let _ = writeln!(s, "{intro}\n");
    s.push_str(FIND_BINARY);
    s.push('\n');
    s.push_str(PRIVATE_DIR);
    s.push('\n');
    s.push_str(&run_section(host, verb, target, mode));
    s.push('\n');
    s.push_str(&read_section(verb));
    s
}

fn run_section(host: Host, verb: Verb, target: Option<&Target>, mode: Option<&str>) -> String {
    let mut s =
        String::from("## 3. Run handoff\n\nFrom the repository, in one shell command:\n\n```sh\n");
    let harness = target.map_or("<agent>", Target::id);
    let _ = write!(
        s,
        "'<handoff>' {} --caller-harness {} --harness {harness}",
        verb.command(),
        caller_value(host)
    );
    if verb != Verb::Advice {
        let _ = write!(s, " --mode {}", mode.unwrap_or("<mode>"));
    }
    s.push_str(
        " \\\n  --cwd \"$(pwd -P)\" --instructions '<dir>/instructions.md' --result \
'<dir>/result.json'; echo \"exit=$?\"\n```\n\n",
    );
    let _ = writeln!(s, "- {}", caller_line(host));
    if target.is_none() {
        s.push_str(
            "- `--harness` is the agent that does the work: `codex`, `claude`, `grok`, `kiro`, \
`opencode`, `cursor`, `copilot`, `gemini` or `qwen`. Use the one the person named; if they left it to you, pick one that is \
not you and that `'<handoff>' capabilities` reports as ok.\n",
        );
    }
    if verb != Verb::Advice && mode.is_none() {
        s.push_str(
            "- `--mode` from what the person asked: `build` (implement or fix; must change the \
worktree), `phase` (one phase of a larger plan; must change it), `review` (read and report; must \
not change it) or `verify` (run the checks and report; must not change it). Ask if unclear.\n",
        );
    }
    if let Some(m) = mode {
        let rule = if m == "build" {
            "a build must leave a git-visible change"
        } else {
            "a review must leave the worktree exactly as it was"
        };
        let _ = writeln!(s, "- `--mode {m}`: {rule}.");
    }
    s.push_str(
        "- `--cwd \"$(pwd -P)\"` exactly: an absolute path without symlinks inside the git \
worktree.\n",
    );
    match target {
        Some(t) => {
            let _ = writeln!(
                s,
                "- Add only the controls the person asked for. {} accepts: {}.",
                t.name,
                controls(t.spec).join("; ")
            );
        }
        None => s.push_str(
            "- Add only the controls the person asked for (`--model`, `--effort`, \
`--max-turns`, `--bash`, `--web-search`, `--mcp-config`, `--timeout-ms`); \
`'<handoff>' capabilities` lists what each agent accepts, and anything it does not is refused \
before the agent starts.\n",
        ),
    }
    if verb == Verb::RunWithAdvice {
        s.push_str(
            "- The advice budgets have defaults; change them only when asked: `--max-depth`, \
`--max-nodes`, `--max-advice-nodes`, `--max-concurrency`, `--root-timeout-ms`.\n",
        );
    }
    s.push_str(
        "- A run can take minutes (`--timeout-ms`, default 600000). Give the shell call the \
longest timeout your tool allows, or run it in the background and wait for it; if your tool's \
limit is shorter, pass a `--timeout-ms` below it, or add `--detach`: handoff then prints a job \
id at once and the run goes on by itself; `'<handoff>' wait <job-id>` later prints the same \
result JSON and exits with the same code.\n",
    );
    s.push_str(
        "- If another run holds the worktree, handoff refuses (exit 5) and names it; add `--wait` \
only if the person wants to queue behind it.\n",
    );
    s.push_str(
        "- If the person wants another agent to carry on when this one hits its usage limit, add \
`--failover AGENT[@ACCOUNT][:MODEL],…` (e.g. `--failover codex`): the same request then runs on \
the next entry when an attempt ends rate-limited, with a server error, without credit, or with \
its CLI missing.\n",
    );
    s
}

fn read_section(verb: Verb) -> String {
    let mut s = String::from(
        "## 4. Read the result\n\nThe JSON is on stdout and in `<dir>/result.json`. Only exit 0 \
with `\"status\": \"succeeded\"` is success; anything else is not, whatever the output says, and \
an empty or failed answer never means \"no findings\".\n\n",
    );
    s.push_str(&exit_table());
    s.push('\n');
    s.push_str(
        "Tell the person the status and exit code, then what matters from the result: \
`output.response`, `output.findings` and `output.evidence`; `git.changedFiles`; and on failure \
`diagnostics.message` quoted exactly, with the fix it points to (3: install or log in to that \
CLI; 5: correct the request; 8: narrow the task or raise `--timeout-ms`; 10: look at \
`git.changedFiles`). `diagnostics.cause` says why in one word: on `rate_limited`, say when it \
may be tried again (`diagnostics.retryAfterSeconds`, when known) and offer another agent with \
`--failover`. When the result has `attempts`, say which agents could not answer and why, and \
which one did (`target.harness`).\n",
    );
    match verb {
        Verb::Advice => s.push_str(
            "\nAdvice is an opinion: weigh it against the code before you act on it, and say \
which agent gave it.\n",
        ),
        Verb::Run | Verb::RunWithAdvice => s.push_str(
            "\nA build's changes are left uncommitted in the worktree: read the diff (`git diff`, \
`git status`) before you call the work done, and run the checks that prove it. A review's \
findings are claims to verify, not facts.\n",
        ),
    }
    if verb == Verb::RunWithAdvice {
        s.push_str(
            "\nThe result's `dag.nodes` lists every node after the root: say which agents were \
consulted and in what state they ended.\n",
        );
    }
    s
}

/// The documented exit codes, from the core's verdicts.
fn exit_table() -> String {
    let rows: [(Verdict, &str); 9] = [
        (
            Verdict::SUCCEEDED,
            "the agent finished and every check passed",
        ),
        (
            Verdict::AGENT_FAILED,
            "the agent failed (API error, turn limit, non-zero exit)",
        ),
        (
            Verdict::AGENT_BLOCKED,
            "the agent answered that it is blocked",
        ),
        (
            Verdict::NOT_RUN,
            "the CLI is not installed, failed its preflight or refused to start",
        ),
        (
            Verdict::REJECTED,
            "the request was refused before anything ran",
        ),
        (
            Verdict::INVALID_OUTPUT,
            "the agent's output (or the result file) is not what the contract says",
        ),
        (
            Verdict::TIMED_OUT,
            "`--timeout-ms` expired; the agent's processes were killed",
        ),
        (Verdict::CANCELLED, "handoff was interrupted"),
        (
            Verdict::POLICY_BLOCKED,
            "policy: a build changed nothing, or the worktree changed during a read-only run",
        ),
    ];
    table(&rows)
}

/// An exit-code table of `rows`, each code and status from its verdict.
fn table(rows: &[(Verdict, &str)]) -> String {
    let mut s = String::from("| exit | status | meaning |\n|---:|---|---|\n");
    for (v, meaning) in rows {
        let _ = writeln!(
            s,
            "| {} | `{}` | {meaning} |",
            v.code(),
            v.status().as_str()
        );
    }
    s
}

/// The panel's own exit codes, from the core's verdicts (`decide_panel`).
fn panel_exit_table() -> String {
    table(&[
        (
            Verdict::SUCCEEDED,
            "at least the quorum (default: every member) succeeded; any other member is in \
`agreement.failed`",
        ),
        (
            Verdict::AGENT_FAILED,
            "fewer members than the quorum succeeded",
        ),
        (
            Verdict::NOT_RUN,
            "no member could run (CLIs missing, preflight failed)",
        ),
        (
            Verdict::REJECTED,
            "refused before any agent started: an unknown or repeated member, a writing mode, a \
bad `--quorum`, a member's request refused, or the worktree held by another run",
        ),
        (Verdict::CANCELLED, "handoff or a member was interrupted"),
        (
            Verdict::POLICY_BLOCKED,
            "policy: a member changed the worktree (this overrides every other outcome)",
        ),
    ])
}

pub(super) fn panel_body() -> String {
    let mut s = String::from(
        "# Ask a panel of agents\n\n`handoff advice --harness codex,claude` (or `handoff run \
--mode review|verify` with the same list) puts one read-only question to several agent CLIs at \
once. Each member is a complete run of its own that sees the repository but neither this \
conversation nor the other members' answers; none may change the worktree. handoff checks the \
worktree before and after and prints one JSON result (`handoff.panel.v1`) holding every member's \
result, their findings merged, and where they agree and where they do not.\n\n",
    );
    s.push_str(
        "Use it when independent opinions help: the person asks to \"ask Codex and Claude and \
compare\", wants a second and third opinion or a panel, or the question is one where a single \
reviewer could easily miss something (a risky design choice, a subtle bug, a change about to be \
merged). For one opinion, `get-advice` is enough; for work that changes the worktree, delegate \
instead: a panel only reads.\n\n",
    );
    s.push_str(FIND_BINARY);
    s.push('\n');
    s.push_str(PRIVATE_DIR);
    let _ = write!(
        s,
        r#"
Ask one clear question (or name what to review and what to look for) and ask for findings with
the file and line they concern: that is what lets handoff see where members agree.

## 3. Run handoff

From the repository, in one shell command. A question:

```sh
'<handoff>' advice --caller-harness <claude|codex> --harness <agent>,<agent> \
  --cwd "$(pwd -P)" --instructions '<dir>/instructions.md' --result '<dir>/result.json'; echo "exit=$?"
```

A review (or `--mode verify`: run the checks and report) of the work in the worktree:

```sh
'<handoff>' run --mode review --caller-harness <claude|codex> --harness <agent>,<agent> \
  --cwd "$(pwd -P)" --instructions '<dir>/instructions.md' --result '<dir>/result.json'; echo "exit=$?"
```

- {caller}
- `--harness` lists the members, comma-separated without spaces: `codex`, `claude`, `grok`,
  `kiro`, `opencode`, `cursor`, `copilot`, `gemini` or `qwen`, each optionally with a model (`claude:opus`); the same agent
  may sit twice with different models, at most {max} members. Use the ones the person named; if
  they left it to you, pick two or three that `'<handoff>' capabilities` reports as ok, other
  than you where you can: independent opinions are the point.
- `--mode` only `review` or `verify` with `run`: `build` and `phase` are refused (exit 5).
- `--quorum N`: how many members must succeed for exit 0 (default: every member). Add it only
  when the person accepts fewer answers, e.g. `--quorum 2` of three. `--max-concurrency N` runs
  fewer members at once.
- `--cwd "$(pwd -P)"` exactly: an absolute path without symlinks inside the git worktree.
- Every other control is shared by every member and must be accepted by each (`--model` applies
  to the members that name no model of their own); add only the ones the person asked for.
  `'<handoff>' capabilities` lists what each agent accepts, and anything one does not is refused
  before any agent starts.
- Members run at once, so the panel takes as long as its slowest member (`--timeout-ms` each,
  default 600000). Give the shell call the longest timeout your tool allows, or run it in the
  background and wait for it; if your tool's limit is shorter, pass a `--timeout-ms` below it.
- If another run holds the worktree, handoff refuses (exit 5) and names it; add `--wait` only if
  the person wants to queue behind it.

## 4. Read the panel

The JSON is on stdout and in `<dir>/result.json`: one `handoff.panel.v1` object. Only exit 0
with `"status": "succeeded"` is success; anything else is not, whatever the members said, and a
panel that did not succeed never means "no findings".

"#,
        caller = caller_line(Host::Either),
        max = MAX_PANEL_MEMBERS,
    );
    s.push_str(&panel_exit_table());
    s.push_str(
        "\nEach member's own outcome (`members[i].status` and `members[i].exit.driver`, repeated \
in `agreement.failed`) is that of a single run:\n\n",
    );
    s.push_str(&exit_table());
    s.push_str(
        r#"
What the panel holds:

- `members`: one full `handoff.result.v1` per member, in the order named: `target.harness`,
  `output.response`, `output.findings`, and on failure `diagnostics.message`.
- `findings`: the members' findings merged. Two are one finding when they name the same file,
  overlapping lines, the same category and mostly the same words. Each has `path`, `lines`,
  `severity` (the highest any member gave), `title`, `agreedBy` (the members that raised it) and
  `wordings` (each member's own title, severity and explanation).
- `agreement.singleMemberFindings`: indices into `findings` of those only one member raised:
  not wrong for that, but unconfirmed.
- `agreement.verdicts`: each member's status and verdict, `approve`, `changes-requested` or
  `unsure`, with its `verdictSource`: `stated` (the member's answer gave it), `findings` (it
  gave none: `changes-requested` when it raised a `medium` or worse finding, else `approve`) or
  `status` (it did not succeed: `unsure`); `agreement.majority` is the most common verdict of
  the members that succeeded, and `agreement.dissenting` lists those that succeeded with
  another (`agreement.verdictsDiffer`).
- `agreement.failed`: the members that did not succeed, with their status and exit code; the
  panel's `message` names them too. A member that failed gave no opinion: its silence is not
  agreement.

## 5. Tell the person

Put the agreement and the disagreement in front of the person; do not pick a side silently.

- The panel's status and exit code, who sat on it, and which members failed, with each one's
  `diagnostics.message` quoted exactly and the fix it points to (3: install or log in to that
  CLI; 5: correct the request; 8: narrow the question or raise `--timeout-ms`; 10: look at that
  member's `git.changedFiles`).
- The findings several members agree on first, naming them ("Codex and Claude Code both
  found…"), then each single-member finding with the member that raised it. Where members gave
  one finding different severities, say so.
- The verdicts: the majority and every dissenting member, with its reasons from its
  `output.response` and findings.
- If you lean one way, say which and why from the code, as your own judgement. Agreement is not
  proof (members can share a mistake) and a lone finding may be the one that matters: check the
  claims against the code before you act on any of them.
"#,
    );
    s
}

/// What an agent accepts beyond `--model`, from its adapter's static spec.
fn controls(spec: &ProviderSpec) -> Vec<String> {
    let mut out = vec!["`--model` (the exact name its CLI takes)".to_owned()];
    if spec.effort.is_empty() {
        out.push("no `--effort`".into());
    } else {
        out.push(format!(
            "`--effort` {}",
            spec.effort
                .iter()
                .map(|e| format!("`{e}`"))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    match spec.max_turns {
        Some(d) => out.push(format!(
            "`--max-turns` 1-100 (default {} for a task, {} for advice)",
            d.handoff, d.advice
        )),
        None => out.push("no `--max-turns`".into()),
    }
    out.push(if spec.grants.bash_disable {
        "`--bash false` to withhold the shell".into()
    } else {
        "no `--bash false`".into()
    });
    out.push(if spec.grants.web_search {
        "`--web-search true`".into()
    } else {
        "no web search".into()
    });
    out.push(if spec.grants.mcp {
        "`--mcp-config` (a `handoff.mcp.v1` descriptor)".into()
    } else {
        "no MCP".into()
    });
    out.push("`--timeout-ms`".into());
    out
}

pub(super) fn continue_body() -> String {
    let mut s = String::from(
        "# Hand the task over to another agent\n\n`handoff continue` hands over the task itself, \
not a piece of it: it checkpoints the work in a commit, writes your handoff note (outside the \
repository, with the Git state read from the repository), carries this conversation into the \
receiving agent's own session store (your session is only read), starts the receiver headless in \
the same worktree on that session, checks in its store that it really continued, and records the \
handoff in the task's timeline. The person can then resume the receiver's session in that agent's own \
interface. Receivers: `claude`, `codex`, `opencode`, `copilot`, `gemini`, `qwen` with this conversation; `cursor` and `kiro` from the note and a recap alone (they need `--fallback fresh-agent`).\n\n",
    );
    s.push_str(FIND_BINARY);
    s.push_str(
        r#"
## 2. Write the handoff note

Make a private directory outside the repository and note the path it prints:

```sh
mktemp -d "${TMPDIR:-/tmp}/handoff.XXXXXXXX"
```

If that path is inside the repository, make one under `$HOME` instead. Then write the template
there and fill it in:

```sh
'<handoff>' note template > '<dir>/note.md'
```

Fill in all nine sections for a reader with none of your context; write "None" where one does
not apply. Check what you claim: run the commands you list under "Done and verified" and quote
what they printed. Leave "Git state" as it is and add no front matter: handoff fills both in from
the repository. Never put secrets in the note.

Then check it until it passes (exit 0); the JSON names each missing or empty section:

```sh
'<handoff>' note check '<dir>/note.md' --json; echo "exit=$?"
```

## 3. Dry run

```sh
'<handoff>' continue '<destination>' --cwd "$(pwd -P)" --from <claude|codex> \
  --note-file '<dir>/note.md' --message '<what the receiver should do first>' --dry-run; echo "exit=$?"
```

- `<destination>` is the receiver as the person named it, in one phrase: the agent, then the
  model and the effort if they named them, then `on <ssh host>[:<path>]` or `on this machine`:
  `'codex gpt-5 high'`, `'opencode'`, `'claude opus on devbox'`. Copy their words; do not
  correct or complete them. If the dry run refuses a word (exit 5, `reason` names it), ask the
  person what they meant rather than guessing. The JSON's `destination` shows how the phrase
  was read: check it says what they asked for. (`--to <receiver>` with `--model`/`--effort`
  does the same without a phrase.)
- `--from` is you (`claude` when you are Claude Code, `codex` when you are Codex). Add
  `--account` only if the person named one,
  `--role review` if the receiver should only review, `--new-thread` if the work should go on in
  a new linked worktree and branch, and `--push` only if the person asked you to push.
  Another machine (`on <host>` in the phrase, or `--on`) needs `--push` unless the branch is
  already on its remote at HEAD; the other machine needs `handoff` and the receiver's CLI.
- Your own session is found by itself (your session variable, else the newest session that ran
  in this worktree). If the dry run says it can't be carried (`reason`), pass `--session <id>` if
  you know your session id; add `--fallback fresh-agent` only if the person accepts that the
  receiver starts from the note and a recap alone.
- If the person only wants to save where things are, without starting anyone, use
  `--note-only` instead of a receiver run: it checkpoints and writes the note.
- Read the JSON: `outcome` must be `dry-run`. `carry` says whether the conversation will be
  carried (`carried`, `mode`, `messages`, `bytes`). Show the person what would be committed
  (`checkpoint.committed`) and what stays uncommitted (`checkpoint.uncommitted`: untracked files
  are left alone). If something there does not belong to the task, or looks like a secret,
  stop and ask. Exit 5 means refused with nothing changed: fix what `reason` says and try again.

## 4. Hand over

Run the same command without `--dry-run`. The receiver's first turn can take a long time
(`--timeout`, default 1800 seconds): give the shell call the longest timeout your tool allows or
run it in the background and wait for it; if your tool's limit is shorter, pass a smaller
`--timeout`.

## 5. Read the result

One JSON line (`handoff.continue.v1`) on stdout, whatever happened:

| exit | outcome | what it means |
|---:|---|---|
| 0 | `started` | the receiver started and finished its first turn: the task is the receiver's now |
| 0 | `note-written` | `--note-only`: checkpoint and note written, no receiver started |
| 1 | `not-started` | the receiver did not start or its first turn failed; the task stays with you and the message was not delivered |
| 1 | `not-continued` | the receiver ran but did not continue the carried conversation (`continuity.reason`); the task stays with you |
| 5 | `rejected` | refused before anything changed |
| 9 | `cancelled` | handoff was interrupted; `'<handoff>' log --cwd "$(pwd -P)"` shows what was recorded |
| 10 | `review-changed` | a `--role review` receiver changed the worktree; its changes (`receiver.changed`) are left for the person |

On `started`, tell the person:

- that the task is with the receiver now, and its last message (`receiver.lastMessage`);
- `continuity.result`: `continued` (its store shows it resumed this conversation),
  `inconclusive` (it could not be told; quote `continuity.next`) or `fresh-agent`;
- how to resume the receiver: `receiver.resume.shell`, quoted exactly as printed;
- where the note is (`note.path`), the checkpoint commit (`checkpoint.commit`), and any files
  left uncommitted.

Then stop: make no more changes on this branch and start nothing else in this worktree; the
receiver owns it now. End your turn.

On `not-continued`, quote `continuity.reason` and `continuity.next`: the task is still yours.
On `not-started`, quote `reason`, say that the task is still yours and that the checkpoint and
note are kept, and offer to retry or to hand over to another receiver. On `rejected`, quote
`reason` and fix it. `'<handoff>' log --cwd "$(pwd -P)"` shows the task's timeline.
"#,
    );
    s
}
