//! The run's inputs from the command line: `run`, `advice` and `run-with-advice` as
//! [`RunInput`], and what can be read from a command line clap refused.

use handoff_core::{AgentId, Instructions, RunInput, Verb};

use crate::args::DelegateArgs;
use crate::read_stdin;

pub(crate) fn input_of(verb: Verb, a: DelegateArgs) -> Result<RunInput, Box<(RunInput, String)>> {
    let nested = std::env::var_os("HANDOFF_SUPERVISOR_CONTEXT").is_some_and(|v| !v.is_empty());
    let mut input = RunInput::new(verb);
    input.caller_harness = a.caller_harness;
    input.harness = a.harness;
    input.mode = a.mode;
    input.cwd = a.cwd;
    input.result = a.result;
    input.model = a.model;
    input.effort = a.effort;
    input.max_turns = a.max_turns;
    input.bash = a.bash;
    input.web_search = a.web_search;
    input.mcp_config = a.mcp_config;
    input.max_depth = a.max_depth;
    input.max_nodes = a.max_nodes;
    input.max_advice_nodes = a.max_advice_nodes;
    input.max_handoff_nodes = a.max_handoff_nodes;
    input.max_concurrency = a.max_concurrency;
    input.root_timeout_ms = a.root_timeout_ms;
    input.timeout_ms = a.timeout_ms;
    input.dependencies = a.dependency;
    input.wait = a.wait;
    input.allow_git_config = a.allow_git_config;
    input.ignored = a.ignored;
    input.failover = a.failover;
    input.nested = nested;
    input.instructions = match a.instructions.as_deref() {
        None => None,
        Some("-") => match read_stdin() {
            Ok(bytes) => Some(Instructions::Stdin(bytes)),
            Err(e) => return Err(Box::new((input, e))),
        },
        Some(p) => Some(Instructions::File(p.to_owned())),
    };
    Ok(input)
}

/// When clap refuses the command line, keep what can still be read from it (the verb and any
/// well-formed agent names and mode) so the rejected result echoes them instead of guessing.
pub(crate) fn salvage(args: &[String]) -> Option<RunInput> {
    let verb = match args.get(1).map(String::as_str) {
        Some("run") => Verb::Run,
        Some("run-with-advice") => Verb::RunWithAdvice,
        Some("advice") => Verb::Advice,
        _ => return None,
    };
    let mut input = RunInput::new(verb);
    let value = |flag: &str| handoff_core::flag_value(args, flag);
    input.caller_harness = value("--caller-harness").filter(|v| AgentId::parse(v).is_some());
    input.harness = value("--harness").filter(|v| AgentId::parse(v).is_some());
    input.mode = value("--mode");
    Some(input)
}
