//! `fake-agent`: imitates the agent CLIs handoff drives. Install it under a CLI's name
//! (`claude`, `codex`, `grok`, `kiro-cli`, `opencode`, `cursor-agent`, `copilot`, `gemini`, `qwen`); see `handoff_testkit`.

fn main() -> std::process::ExitCode {
    handoff_testkit::fake::main()
}
