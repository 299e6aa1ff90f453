//! What the scripted model answers: [`Script`], [`Step`], [`ToolChoice`], and the decision for
//! one request.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::errors::ApiError;
use super::log::Reply;

/// The text answered to requests that offer no tools, unless [`Script::with_side_text`] says
/// otherwise.
pub const DEFAULT_SIDE_TEXT: &str = "Scripted model reply";

/// The text answered when a [`Step`] needs a tool the client did not offer.
pub const NO_SUITABLE_TOOL: &str = "NO_SUITABLE_TOOL";

/// The tool names [`Step::WriteFile`] tries, in order.
pub const WRITE_FILE_TOOLS: [&str; 8] = [
    "Write",
    "write",
    "create_file",
    "create",
    "write_file",
    "apply_patch",
    "exec_command",
    "shell",
];

/// The tool names [`Step::Shell`] tries, in order.
pub const SHELL_TOOLS: [&str; 5] = ["Bash", "bash", "run_shell_command", "exec_command", "shell"];

/// The tool Claude Code offers when run with `--json-schema`; [`Step::Answer`] calls it.
pub const STRUCTURED_OUTPUT_TOOL: &str = "StructuredOutput";

/// The text answered when a [`Step::NestedAdvice`] finds no nested-advice command in the
/// conversation's prompt text.
pub const NO_NESTED_COMMAND: &str = "NO_NESTED_ADVICE_COMMAND";

/// The placeholder of the nested-advice command a worker's prompt names.
pub const NESTED_PLACEHOLDER: &str = " advice --harness AGENT ";

/// How long Codex's `exec_command` may wait for a [`Step::NestedAdvice`] command before it
/// returns with the process still running. Codex clamps it to its own maximum (30 s in
/// 0.171), so the adviser must answer within that.
pub const NESTED_YIELD_MS: u64 = 120_000;

/// What the model does, request by request.
///
/// The step played for a request is decided by the request alone, so side requests (title
/// generation, non-streaming retries) cannot shift the script:
///
/// 0. When a [`Route`]'s needle occurs in the conversation's prompt text (system, developer and
///    user messages, tool results excluded), the first such route's script decides instead,
///    by these same rules.
/// 1. The step index `k` is the number of tool results already in the conversation (Anthropic
///    `tool_result` blocks, Responses `*_call_output` items, Chat `role:"tool"` messages); past
///    the last step the last step is repeated. An empty script answers every request with the
///    side text.
/// 2. A [`Step::Hang`], [`Step::Status`] or [`Step::Fail`] applies to every model request,
///    tools or not.
/// 3. Otherwise a request that offers no tools gets the side text ([`DEFAULT_SIDE_TEXT`]).
/// 4. Otherwise step `k` is played.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Script {
    /// The steps, played by tool-result count.
    pub steps: Vec<Step>,
    /// The answer to requests that offer no tools.
    #[serde(default = "default_side_text")]
    pub side_text: String,
    /// Scripts for conversations whose prompt text contains a needle, tried in order before
    /// this script's own steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
}

/// A sub-script for the conversations whose prompt text contains `needle` (see [`Script`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// Matched exactly (case-sensitive) against the system, developer and user text.
    pub needle: String,
    /// What those conversations get.
    pub script: Script,
}

fn default_side_text() -> String {
    DEFAULT_SIDE_TEXT.to_owned()
}

impl Default for Script {
    fn default() -> Script {
        Script::new([])
    }
}

impl Script {
    /// A script of these steps.
    pub fn new(steps: impl IntoIterator<Item = Step>) -> Script {
        Script {
            steps: steps.into_iter().collect(),
            side_text: default_side_text(),
            routes: Vec::new(),
        }
    }

    /// Routes each conversation to the first script whose needle occurs in its prompt text,
    /// and the others to `default`: e.g. a worker (`Operation: handoff`) and its adviser
    /// (`Operation: advice`) on one server.
    pub fn route<S: Into<String>>(
        routes: impl IntoIterator<Item = (S, Script)>,
        default: Script,
    ) -> Script {
        let mut script = default;
        script.routes = routes
            .into_iter()
            .map(|(needle, script)| Route {
                needle: needle.into(),
                script,
            })
            .collect();
        script
    }

    /// The script that answers a conversation with this prompt text, and the needle of the
    /// route that chose it (`None` for this script itself).
    pub(crate) fn for_text(&self, text: &str) -> (&Script, Option<&str>) {
        match self.routes.iter().find(|r| text.contains(&r.needle)) {
            Some(route) => {
                let (script, inner) = route.script.for_text(text);
                (script, Some(inner.unwrap_or(&route.needle)))
            }
            None => (self, None),
        }
    }

    /// A one-step script answering `text`.
    pub fn text(text: impl Into<String>) -> Script {
        Script::new([Step::Text(text.into())])
    }

    /// A one-step script answering the structured `answer` (see [`Step::Answer`]).
    pub fn answer(answer: Value) -> Script {
        Script::new([Step::Answer(answer)])
    }

    /// Writes `path` with `content` through a tool, then answers `answer`.
    pub fn write_then_answer(
        path: impl Into<String>,
        content: impl Into<String>,
        answer: Value,
    ) -> Script {
        Script::new([Step::write_file(path, content), Step::Answer(answer)])
    }

    /// Replaces the answer to requests that offer no tools.
    pub fn with_side_text(mut self, text: impl Into<String>) -> Script {
        self.side_text = text.into();
        self
    }

    /// Appends a step.
    pub fn then(mut self, step: Step) -> Script {
        self.steps.push(step);
        self
    }
}

/// A provider-output answer (`handoff.provider-output.v1`, status `completed`, empty evidence,
/// findings and usage) with this `response`.
pub fn provider_output(response: &str) -> Value {
    json!({
        "schemaVersion": "handoff.provider-output.v1",
        "status": "completed",
        "response": response,
        "evidence": [],
        "findings": [],
        "usage": {},
    })
}

/// One model turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// A final assistant text message.
    Text(String),
    /// A call of the first offered tool named by `tool`, with `args` as its input. For a
    /// freeform (`type: "custom"`) Responses tool the input is `args` itself when it is a
    /// string, `args.input` when that is a string, else the JSON text of `args`.
    ToolCall {
        /// Which tool.
        tool: ToolChoice,
        /// Its input.
        args: Value,
    },
    /// A call of the first offered tool among these names, each with its own input.
    FirstToolOf(Vec<(String, Value)>),
    /// Creates `path` holding `content` with the first offered of [`WRITE_FILE_TOOLS`]:
    /// `Write {file_path, content}` (Claude), `write {filePath, content}` (OpenCode),
    /// `create_file {path, content}` (Grok), `create {path, file_text}` (Copilot),
    /// `write_file {file_path, content}` (Gemini, Qwen), `apply_patch` with an `*** Add File:`
    /// patch (Codex; freeform or `{input}`), `exec_command {cmd: "printf %s '…' > '…'"}` or
    /// `shell {command: ["bash", "-lc", …]}` (Codex).
    ///
    /// An `apply_patch` Add File always ends the file with a newline.
    WriteFile {
        /// Where (as the tool receives it; absolute paths are safest).
        path: String,
        /// What.
        content: String,
    },
    /// Runs `command` with the first offered of [`SHELL_TOOLS`]: `Bash`/`bash`
    /// `{command, description}`, `run_shell_command {command, description}` (Gemini, Qwen),
    /// `exec_command {cmd}`, `shell {command: ["bash", "-lc", …]}`.
    Shell {
        /// The shell command line.
        command: String,
    },
    /// The structured final answer: a call of Claude's [`STRUCTURED_OUTPUT_TOOL`] with this
    /// input when it is offered (and was not the conversation's last call), else a text
    /// message holding its JSON.
    Answer(Value),
    /// Asks for nested advice with the command the prompt names: finds the prompt line
    /// holding [`NESTED_PLACEHOLDER`] (` advice --harness AGENT `) and ending with
    /// `--instructions -`, puts `target` in place of `AGENT`, and runs
    /// `printf %s '<question>' | <that command>` like [`Step::Shell`] (Codex's `exec_command`
    /// also gets `yield_time_ms` [`NESTED_YIELD_MS`], so it waits for the adviser as long as
    /// Codex allows). Without such a line it answers the text [`NO_NESTED_COMMAND`].
    NestedAdvice {
        /// The adviser's agent id (`claude`, `codex`, …).
        target: String,
        /// The question, on the command's standard input.
        question: String,
    },
    /// Accepts the request and never answers (the connection stays open until the server
    /// shuts down).
    Hang,
    /// Answers every model request with this HTTP status and a protocol-shaped error body.
    Status(u16),
    /// Answers every model request with this API error, as the wire's real service words it
    /// (status, `retry-after`, error body).
    Fail(ApiError),
}

impl Step {
    /// [`Step::WriteFile`].
    pub fn write_file(path: impl Into<String>, content: impl Into<String>) -> Step {
        Step::WriteFile {
            path: path.into(),
            content: content.into(),
        }
    }

    /// [`Step::Shell`].
    pub fn shell(command: impl Into<String>) -> Step {
        Step::Shell {
            command: command.into(),
        }
    }

    /// [`Step::NestedAdvice`].
    pub fn nested_advice(target: impl Into<String>, question: impl Into<String>) -> Step {
        Step::NestedAdvice {
            target: target.into(),
            question: question.into(),
        }
    }

    /// [`Step::Text`].
    pub fn text(text: impl Into<String>) -> Step {
        Step::Text(text.into())
    }

    /// [`Step::ToolCall`] of the tool named `name`.
    pub fn tool_call(name: impl Into<String>, args: Value) -> Step {
        Step::ToolCall {
            tool: ToolChoice::named(name),
            args,
        }
    }

    /// [`Step::Answer`] with [`provider_output`]`(response)`.
    pub fn provider_answer(response: &str) -> Step {
        Step::Answer(provider_output(response))
    }
}

/// Which offered tool a [`Step::ToolCall`] calls: the first of these names the client offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolChoice {
    /// Candidate names, in order of preference (exact, case-sensitive).
    pub names: Vec<String>,
}

impl ToolChoice {
    /// Exactly this tool.
    pub fn named(name: impl Into<String>) -> ToolChoice {
        ToolChoice {
            names: vec![name.into()],
        }
    }

    /// The first of these that is offered.
    pub fn first_of<S: Into<String>>(names: impl IntoIterator<Item = S>) -> ToolChoice {
        ToolChoice {
            names: names.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<&str> for ToolChoice {
    fn from(name: &str) -> ToolChoice {
        ToolChoice::named(name)
    }
}

/// A tool the client offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OfferedTool {
    pub name: String,
    /// A Responses freeform tool (`type: "custom"`): called with text, not JSON.
    pub freeform: bool,
}

/// The input of a tool call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CallInput {
    Json(Value),
    Freeform(String),
}

impl CallInput {
    /// The input as logged: the JSON value, or the freeform text as a JSON string.
    pub fn to_value(&self) -> Value {
        match self {
            CallInput::Json(v) => v.clone(),
            CallInput::Freeform(s) => Value::String(s.clone()),
        }
    }

    /// The input as a JSON text (function-call `arguments`).
    pub fn json_text(&self) -> String {
        match self {
            CallInput::Json(v) => v.to_string(),
            CallInput::Freeform(s) => Value::String(s.clone()).to_string(),
        }
    }
}

/// A tool call to send.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    pub name: String,
    pub call_id: String,
    pub input: CallInput,
}

/// What to send back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan {
    Text(String),
    Call(Call),
    Hang,
    Status(u16),
    Fail(ApiError),
}

/// What the protocol layer found in a request.
pub(crate) struct Conversation<'a> {
    pub offered: &'a [OfferedTool],
    pub tool_results: usize,
    /// The name of the last tool the assistant called in the conversation, if any.
    pub last_call: Option<String>,
    /// The prompt text: system, developer and user text, one part a line (tool results left
    /// out).
    pub text: String,
}

/// The decision for one request, and the route that made it.
pub(crate) struct Decision {
    pub plan: Plan,
    pub reply: Reply,
    /// The needle of the route whose script decided, if any.
    pub route: Option<String>,
}

/// Decides the reply to one model request.
pub(crate) fn decide(
    script: &Script,
    conv: &Conversation<'_>,
    new_call_id: &mut dyn FnMut() -> String,
) -> Decision {
    let (script, route) = script.for_text(&conv.text);
    let (plan, reply) = decide_steps(script, conv, new_call_id);
    Decision {
        plan,
        reply,
        route: route.map(str::to_owned),
    }
}

fn decide_steps(
    script: &Script,
    conv: &Conversation<'_>,
    new_call_id: &mut dyn FnMut() -> String,
) -> (Plan, Reply) {
    let side = |text: &str| {
        (
            Plan::Text(text.to_owned()),
            Reply::SideText {
                text: text.to_owned(),
            },
        )
    };
    let Some(last) = script.steps.len().checked_sub(1) else {
        return side(&script.side_text);
    };
    let index = conv.tool_results.min(last);
    let step = &script.steps[index];
    match step {
        Step::Hang => return (Plan::Hang, Reply::Hang { step: index }),
        Step::Status(status) => {
            return (
                Plan::Status(*status),
                Reply::Status {
                    step: index,
                    status: *status,
                },
            );
        }
        Step::Fail(error) => {
            return (
                Plan::Fail(*error),
                Reply::Status {
                    step: index,
                    status: error.status(),
                },
            );
        }
        _ => {}
    }
    if conv.offered.is_empty() {
        return side(&script.side_text);
    }
    let text = |text: String| {
        (
            Plan::Text(text.clone()),
            Reply::Text {
                step: index,
                text: text.clone(),
            },
        )
    };
    let candidates: Vec<(String, Value)> = match step {
        Step::Text(t) => return text(t.clone()),
        Step::Answer(value) => {
            let structured = find(conv.offered, STRUCTURED_OUTPUT_TOOL).is_some()
                && conv.last_call.as_deref() != Some(STRUCTURED_OUTPUT_TOOL);
            if !structured {
                return text(value.to_string());
            }
            vec![(STRUCTURED_OUTPUT_TOOL.to_owned(), value.clone())]
        }
        Step::ToolCall { tool, args } => tool
            .names
            .iter()
            .map(|n| (n.clone(), args.clone()))
            .collect(),
        Step::FirstToolOf(list) => list.clone(),
        Step::WriteFile { path, content } => write_file_candidates(path, content),
        Step::Shell { command } => shell_candidates(command),
        Step::NestedAdvice { target, question } => {
            let Some(command) = nested_command(&conv.text, target) else {
                return text(NO_NESTED_COMMAND.to_owned());
            };
            let command = format!("printf %s {} | {command}", shell_word(question));
            let mut candidates = shell_candidates(&command);
            for (name, args) in &mut candidates {
                if name == "exec_command" {
                    args["yield_time_ms"] = json!(NESTED_YIELD_MS);
                }
            }
            candidates
        }
        Step::Hang | Step::Status(_) | Step::Fail(_) => Vec::new(),
    };
    for (name, args) in &candidates {
        if let Some(tool) = find(conv.offered, name) {
            let input = if tool.freeform {
                CallInput::Freeform(freeform_text(args))
            } else if name == "apply_patch" && args.is_string() {
                // The older JSON-function apply_patch takes `{input: <patch>}`.
                CallInput::Json(json!({ "input": args }))
            } else {
                CallInput::Json(args.clone())
            };
            let call = Call {
                name: name.clone(),
                call_id: new_call_id(),
                input,
            };
            let reply = Reply::ToolCall {
                step: index,
                tool: call.name.clone(),
                call_id: call.call_id.clone(),
                input: call.input.to_value(),
            };
            return (Plan::Call(call), reply);
        }
    }
    (
        Plan::Text(NO_SUITABLE_TOOL.to_owned()),
        Reply::NoSuitableTool {
            step: index,
            wanted: candidates.into_iter().map(|(n, _)| n).collect(),
            offered: conv.offered.iter().map(|t| t.name.clone()).collect(),
        },
    )
}

fn find<'a>(offered: &'a [OfferedTool], name: &str) -> Option<&'a OfferedTool> {
    offered.iter().find(|t| t.name == name)
}

fn freeform_text(args: &Value) -> String {
    match args {
        Value::String(s) => s.clone(),
        Value::Object(o) => match o.get("input") {
            Some(Value::String(s)) => s.clone(),
            _ => args.to_string(),
        },
        _ => args.to_string(),
    }
}

/// The nested-advice command named in `text` with `target` in place of `AGENT`: the first line
/// holding [`NESTED_PLACEHOLDER`] and ending with `--instructions -`, trimmed.
pub(crate) fn nested_command(text: &str, target: &str) -> Option<String> {
    text.lines()
        .map(str::trim)
        .find(|l| l.contains(NESTED_PLACEHOLDER) && l.ends_with("--instructions -"))
        .map(|l| {
            l.replacen(
                NESTED_PLACEHOLDER,
                &format!(" advice --harness {target} "),
                1,
            )
        })
}

/// `s` as one word for `sh`: bare when every byte is safe, else quoted.
///
/// # Panics
///
/// When `s` holds a NUL byte, which no shell word can carry (a script's text or path never
/// should).
pub(crate) fn shell_word(s: &str) -> String {
    shlex::try_quote(s)
        .unwrap_or_else(|e| panic!("{s:?} cannot be one shell word: {e}"))
        .into_owned()
}

/// An apply_patch `*** Add File:` patch creating `path` with `content`.
pub(crate) fn add_file_patch(path: &str, content: &str) -> String {
    let mut patch = format!("*** Begin Patch\n*** Add File: {path}\n");
    for line in content.lines() {
        patch.push('+');
        patch.push_str(line);
        patch.push('\n');
    }
    patch.push_str("*** End Patch");
    patch
}

fn write_file_candidates(path: &str, content: &str) -> Vec<(String, Value)> {
    let printf = format!("printf %s {} > {}", shell_word(content), shell_word(path));
    vec![
        (
            "Write".into(),
            json!({ "file_path": path, "content": content }),
        ),
        (
            "write".into(),
            json!({ "filePath": path, "content": content }),
        ),
        (
            "create_file".into(),
            json!({ "path": path, "content": content }),
        ),
        (
            "create".into(),
            json!({ "path": path, "file_text": content }),
        ),
        (
            "write_file".into(),
            json!({ "file_path": path, "content": content }),
        ),
        (
            "apply_patch".into(),
            Value::String(add_file_patch(path, content)),
        ),
        ("exec_command".into(), json!({ "cmd": printf })),
        (
            "shell".into(),
            json!({ "command": ["bash", "-lc", printf] }),
        ),
    ]
}

fn shell_candidates(command: &str) -> Vec<(String, Value)> {
    let description = "Run a shell command";
    vec![
        (
            "Bash".into(),
            json!({ "command": command, "description": description }),
        ),
        (
            "bash".into(),
            json!({ "command": command, "description": description }),
        ),
        (
            "run_shell_command".into(),
            json!({ "command": command, "description": description }),
        ),
        ("exec_command".into(), json!({ "cmd": command })),
        (
            "shell".into(),
            json!({ "command": ["bash", "-lc", command] }),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_patch() {
        for s in [
            "it's",
            "a b",
            "$HOME `x` \\ \"q\"",
            "~/x",
            "",
            "plain/path.rs",
        ] {
            let out = std::process::Command::new("/bin/sh")
                .args(["-c", &format!("printf %s {}", shell_word(s))])
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8(out.stdout).unwrap(),
                s,
                "{}",
                shell_word(s)
            );
        }
        assert_eq!(shell_word("plain/path.rs"), "plain/path.rs");
        assert_eq!(
            add_file_patch("a.txt", "x\ny\n"),
            "*** Begin Patch\n*** Add File: a.txt\n+x\n+y\n*** End Patch"
        );
    }

    #[test]
    fn nested_command_is_the_prompt_line_with_the_agent_filled_in() {
        let text = "Run this shell command:\n    '/opt/h AGENT/handoff' advice --harness AGENT \
                    --cwd '/w' --instructions -\nIt prints one line.";
        assert_eq!(
            nested_command(text, "codex").as_deref(),
            Some("'/opt/h AGENT/handoff' advice --harness codex --cwd '/w' --instructions -")
        );
        // The placeholder must be followed by the rest of the command on the same line.
        assert_eq!(
            nested_command("x advice --harness AGENT --cwd /w", "codex"),
            None
        );
        assert_eq!(nested_command("no command here", "codex"), None);
    }

    #[test]
    fn routes_pick_the_first_matching_needle_recursively() {
        let adviser = Script::text("adviser");
        let inner = Script::route([("deep", Script::text("deep"))], Script::text("mid"));
        let script = Script::route(
            [("Operation: advice", adviser.clone()), ("mid", inner)],
            Script::text("worker"),
        );
        let (s, r) = script.for_text("Operation: advice\nmid");
        assert_eq!((s, r), (&adviser, Some("Operation: advice")));
        let (s, r) = script.for_text("mid deep");
        assert_eq!((s, r), (&Script::text("deep"), Some("deep")));
        let (s, r) = script.for_text("mid");
        assert_eq!((s.steps.clone(), r), (vec![Step::text("mid")], Some("mid")));
        let (s, r) = script.for_text("Operation: handoff");
        assert_eq!((s.steps.clone(), r), (vec![Step::text("worker")], None));
    }

    #[test]
    fn candidate_lists_match_the_constants() {
        let names: Vec<String> = write_file_candidates("p", "c")
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, WRITE_FILE_TOOLS);
        let names: Vec<String> = shell_candidates("c").into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, SHELL_TOOLS);
    }
}
