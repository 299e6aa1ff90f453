//! The hosts' rules (and ours) that the files in `plugin/` must keep, checked on what is on disk.

use std::path::Path;

use handoff_core::Verdict;
use serde_json::{Value, json};

use super::files::list_files;
use super::yaml::{front_matter, parse_yaml};
use super::{CONTINUE_SKILL, MARKETPLACE, PANEL_SKILL, PLUGIN, VERSION, targets};

/// Hosts' limits on a skill (the Agent Skills rules both Claude Code and Codex apply).
const MAX_NAME: usize = 64;
const MAX_DESCRIPTION: usize = 1024;
/// Codex's limits on `agents/openai.yaml` and the plugin manifest.
const SHORT_DESCRIPTION: std::ops::RangeInclusive<usize> = 25..=64;
const MAX_DEFAULT_PROMPTS: usize = 3;
const MAX_DEFAULT_PROMPT: usize = 128;
/// Keys Codex accepts in a SKILL.md front matter.
const SKILL_KEYS: &[&str] = &[
    "name",
    "description",
    "license",
    "allowed-tools",
    "metadata",
];
/// Keys a Claude Code command's front matter may have.
const COMMAND_KEYS: &[&str] = &[
    "description",
    "argument-hint",
    "allowed-tools",
    "disable-model-invocation",
    "model",
];
/// Manifest keys the bundle must never use: the only code it ships is its launcher, which the
/// MCP server (`mcpServers`, checked by [`super::launcher::problems`]) and the hooks start.
const FORBIDDEN_MANIFEST_KEYS: &[&str] =
    &["bin", "executables", "path", "hooks", "apps", "lspServers"];

/// Every rule of the hosts (and of ours) that the bundle in `dir` breaks, one line each.
pub fn validate(dir: &Path) -> Vec<String> {
    let mut p = Problems::default();
    let files = list_files(dir);
    let skill_dirs: Vec<String> = files
        .iter()
        .filter_map(|f| f.strip_prefix("skills/"))
        .filter_map(|f| f.split('/').next())
        .map(str::to_owned)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    for name in &skill_dirs {
        validate_skill(dir, name, &mut p);
    }
    let command_files: Vec<&String> = files
        .iter()
        .filter(|f| f.starts_with("commands/"))
        .collect();
    for f in &command_files {
        match JOB_COMMANDS
            .iter()
            .find(|(name, _)| **f == format!("commands/{name}.md"))
        {
            Some((_, verb)) => validate_job_command(dir, f, verb, &mut p),
            None => validate_command(dir, f, &mut p),
        }
    }
    for f in files.iter().filter(|f| f.starts_with(".codex-plugin/")) {
        if f != ".codex-plugin/plugin.json" {
            p.add(f, "only plugin.json may be in .codex-plugin/");
        }
    }
    validate_manifests(dir, &skill_dirs, &mut p);
    match std::fs::read(dir.join("hooks/hooks.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    {
        Some(hooks) => {
            for problem in super::hooks::problems(&hooks) {
                p.add("hooks/hooks.json", problem);
            }
        }
        None => p.add("hooks/hooks.json", "missing or not JSON"),
    }
    for (path, problem) in super::launcher::problems(dir) {
        p.add(&path, problem);
    }
    validate_surface(&skill_dirs, &command_files, &mut p);
    p.0
}

#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn add(&mut self, path: &str, problem: impl std::fmt::Display) {
        self.0.push(format!("plugin/{path}: {problem}"));
    }
}

/// The exact set of skills and commands the bundle must have.
fn validate_surface(skill_dirs: &[String], command_files: &[&String], p: &mut Problems) {
    let mut skills = vec![
        "get-advice".to_owned(),
        PANEL_SKILL.to_owned(),
        "handoff-run".to_owned(),
        "handoff-run-with-advice".to_owned(),
        CONTINUE_SKILL.to_owned(),
    ];
    let mut commands = Vec::new();
    for t in targets() {
        skills.push(format!("handoff-{}", t.id()));
        skills.push(format!("handoff-{}-with-advice", t.id()));
        for m in ["build", "review"] {
            commands.push(format!("commands/{}-{m}.md", t.id()));
            commands.push(format!("commands/{}-{m}-with-advice.md", t.id()));
        }
    }
    commands.extend(
        JOB_COMMANDS
            .iter()
            .map(|(name, _)| format!("commands/{name}.md")),
    );
    for s in &skills {
        if !skill_dirs.contains(s) {
            p.add(&format!("skills/{s}"), "missing skill");
        }
    }
    for s in skill_dirs {
        if !skills.contains(s) {
            p.add(&format!("skills/{s}"), "unexpected skill");
        }
    }
    for c in &commands {
        if !command_files.contains(&c) {
            p.add(c, "missing command");
        }
    }
    for c in command_files {
        if !commands.contains(c) {
            p.add(c, "unexpected command");
        }
    }
}

/// The commands for background jobs, and the handoff verb each one runs.
const JOB_COMMANDS: [(&str, &str); 3] = [
    ("jobs", "jobs"),
    ("job-result", "result"),
    ("job-cancel", "cancel"),
];

/// A job command finds handoff as every command does and runs its one verb; one that takes a
/// job id has an `argument-hint` and uses `$ARGUMENTS`; only `job-cancel`, which stops work,
/// is the person's alone to start.
fn validate_job_command(dir: &Path, path: &str, verb: &str, p: &mut Problems) {
    let Some((front, body)) = read_command(dir, path, p) else {
        return;
    };
    let takes_id = verb != "jobs";
    if takes_id && (non_empty(&front["argument-hint"]).is_none() || !body.contains("$ARGUMENTS")) {
        p.add(
            path,
            "a command for one job must take its id (`argument-hint`, `$ARGUMENTS`)",
        );
    }
    match (&front["disable-model-invocation"], verb == "cancel") {
        (Value::Bool(true), true) | (Value::Null, false) => {}
        (_, true) => p.add(
            path,
            "stopping a job must set `disable-model-invocation: true`",
        ),
        (_, false) => p.add(path, "only stopping a job disables model invocation"),
    }
    for needle in [
        "bin/handoff' --which-handoff",
        &format!("'<handoff>' {verb}"),
    ] {
        if !body.contains(needle) {
            p.add(path, format!("does not say `{needle}`"));
        }
    }
}

fn read(dir: &Path, path: &str, p: &mut Problems) -> Option<String> {
    match std::fs::read_to_string(dir.join(path)) {
        Ok(t) => Some(t),
        Err(e) => {
            p.add(path, format!("cannot be read: {e}"));
            None
        }
    }
}

fn validate_skill(dir: &Path, name: &str, p: &mut Problems) {
    let path = format!("skills/{name}/SKILL.md");
    let Some(text) = read(dir, &path, p) else {
        return;
    };
    let (front, body) = match front_matter(&text) {
        Ok(x) => x,
        Err(e) => return p.add(&path, e),
    };
    check_keys(&front, SKILL_KEYS, &path, p);
    match front.get("name").and_then(Value::as_str) {
        None => p.add(&path, "front matter has no `name`"),
        Some(n) => {
            if n != name {
                p.add(&path, format!("name `{n}` is not its folder's, `{name}`"));
            }
            if !is_hyphen_case(n) {
                p.add(
                    &path,
                    "name must be lowercase letters, digits and single inner hyphens",
                );
            }
            if n.chars().count() > MAX_NAME {
                p.add(&path, format!("name is longer than {MAX_NAME} characters"));
            }
        }
    }
    check_description(&front, &path, p);
    check_body(body, &path, p);
    if name == CONTINUE_SKILL {
        for needle in [
            "note template",
            "note check",
            "--dry-run",
            "receiver.resume.shell",
            "not-started",
        ] {
            if !body.contains(needle) {
                p.add(&path, format!("does not mention `{needle}`"));
            }
        }
    }
    if name == PANEL_SKILL {
        for needle in [
            "handoff.panel.v1",
            "agreedBy",
            "agreement.singleMemberFindings",
            "agreement.dissenting",
            "agreement.failed",
            "--quorum",
        ] {
            if !body.contains(needle) {
                p.add(&path, format!("does not mention `{needle}`"));
            }
        }
    }

    let yaml_path = format!("skills/{name}/agents/openai.yaml");
    let Some(yaml) = read(dir, &yaml_path, p) else {
        return;
    };
    let doc = match parse_yaml(&yaml) {
        Ok(v) => v,
        Err(e) => {
            return p.add(
                &yaml_path,
                format!("not valid YAML of the form we emit: {e}"),
            );
        }
    };
    check_keys(
        &doc,
        &["interface", "policy", "dependencies"],
        &yaml_path,
        p,
    );
    let interface = &doc["interface"];
    check_keys(
        interface,
        &[
            "display_name",
            "short_description",
            "default_prompt",
            "icon_small",
            "icon_large",
            "brand_color",
        ],
        &yaml_path,
        p,
    );
    if non_empty(&interface["display_name"]).is_none() {
        p.add(&yaml_path, "interface.display_name must be set");
    }
    match non_empty(&interface["short_description"]) {
        None => p.add(&yaml_path, "interface.short_description must be set"),
        Some(d) if !SHORT_DESCRIPTION.contains(&d.chars().count()) => p.add(
            &yaml_path,
            format!(
                "interface.short_description must be {}-{} characters (is {})",
                SHORT_DESCRIPTION.start(),
                SHORT_DESCRIPTION.end(),
                d.chars().count()
            ),
        ),
        Some(_) => {}
    }
    match non_empty(&interface["default_prompt"]) {
        None => p.add(&yaml_path, "interface.default_prompt must be set"),
        Some(d) if !d.contains(&format!("${PLUGIN}:{name}")) => p.add(
            &yaml_path,
            format!("interface.default_prompt must name the skill as `${PLUGIN}:{name}`"),
        ),
        Some(_) => {}
    }
}

/// A command's front matter and body, its keys and description checked; `None` (with the
/// problem added) when it cannot be read.
fn read_command(dir: &Path, path: &str, p: &mut Problems) -> Option<(Value, String)> {
    let text = read(dir, path, p)?;
    let (front, body) = match front_matter(&text) {
        Ok((front, body)) => (front, body.to_owned()),
        Err(e) => {
            p.add(path, e);
            return None;
        }
    };
    check_keys(&front, COMMAND_KEYS, path, p);
    check_description(&front, path, p);
    Some((front, body))
}

fn validate_command(dir: &Path, path: &str, p: &mut Problems) {
    let Some((front, body)) = read_command(dir, path, p) else {
        return;
    };
    let body = body.as_str();
    if non_empty(&front["argument-hint"]).is_none() {
        p.add(path, "front matter has no `argument-hint`");
    }
    match &front["allowed-tools"] {
        Value::Array(tools) if tools.iter().all(|t| non_empty(t).is_some()) => {}
        _ => p.add(path, "`allowed-tools` must be a list of tool names"),
    }
    let build = path.contains("-build");
    match (&front["disable-model-invocation"], build) {
        (Value::Bool(true), true) | (Value::Null, false) => {}
        (_, true) => p.add(
            path,
            "a build command must set `disable-model-invocation: true`",
        ),
        (_, false) => p.add(path, "only build commands disable model invocation"),
    }
    if !body.contains("$ARGUMENTS") {
        p.add(path, "the body never uses `$ARGUMENTS`");
    }
    if !body.contains("--caller-harness claude") {
        p.add(
            path,
            "a Claude Code command must pass `--caller-harness claude`",
        );
    }
    check_body(body, path, p);
}

fn check_keys(map: &Value, allowed: &[&str], path: &str, p: &mut Problems) {
    match map.as_object() {
        None => p.add(path, "expected a mapping"),
        Some(m) => {
            for k in m.keys() {
                if !allowed.contains(&k.as_str()) {
                    p.add(path, format!("unexpected key `{k}`"));
                }
            }
        }
    }
}

fn check_description(front: &Value, path: &str, p: &mut Problems) {
    match non_empty(&front["description"]) {
        None => p.add(path, "front matter has no `description`"),
        Some(d) => {
            let n = d.chars().count();
            if n > MAX_DESCRIPTION {
                p.add(
                    path,
                    format!("description is {n} characters; the hosts allow {MAX_DESCRIPTION}"),
                );
            }
            if d.contains('<') || d.contains('>') {
                p.add(path, "description must not contain `<` or `>`");
            }
        }
    }
}

/// What every skill and command body must say, and must never do.
fn check_body(body: &str, path: &str, p: &mut Problems) {
    for needle in [
        "bin/handoff' --which-handoff",
        "mktemp -d",
        "--cwd \"$(pwd -P)\"",
    ] {
        if !body.contains(needle) {
            p.add(path, format!("does not say `{needle}`"));
        }
    }
    if body.contains("$(pwd)") {
        p.add(
            path,
            "uses `$(pwd)`; a symlinked path is refused, use `$(pwd -P)`",
        );
    }
    if !path.ends_with(&format!("{CONTINUE_SKILL}/SKILL.md")) {
        if !body.contains("Only exit 0") || !body.contains("`succeeded`") {
            p.add(
                path,
                "does not say that only exit 0 with `succeeded` is success",
            );
        }
        for v in [
            Verdict::SUCCEEDED,
            Verdict::AGENT_FAILED,
            Verdict::NOT_RUN,
            Verdict::REJECTED,
            Verdict::INVALID_OUTPUT,
            Verdict::TIMED_OUT,
            Verdict::CANCELLED,
            Verdict::POLICY_BLOCKED,
        ] {
            if !body.contains(&format!("| {} | `{}` |", v.code(), v.status().as_str())) {
                p.add(path, format!("does not document exit {}", v.code()));
            }
        }
    }
    // An agent CLI is only ever started by handoff.
    for direct in [
        "codex exec",
        "claude -p",
        "claude --print",
        "opencode run",
        "cursor-agent -p",
        "kiro-cli chat",
        "grok -p",
        "copilot -p",
        "gemini -p",
        "qwen -p",
    ] {
        if body.contains(direct) {
            p.add(path, format!("calls an agent CLI directly (`{direct}`)"));
        }
    }
}

fn is_hyphen_case(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

fn non_empty(v: &Value) -> Option<&str> {
    v.as_str().filter(|s| !s.trim().is_empty())
}

fn validate_manifests(dir: &Path, skill_dirs: &[String], p: &mut Problems) {
    let json = |path: &str, p: &mut Problems| -> Option<Value> {
        let text = read(dir, path, p)?;
        match serde_json::from_str::<Value>(&text) {
            Ok(v) if v.is_object() => Some(v),
            Ok(_) => {
                p.add(path, "must be a JSON object");
                None
            }
            Err(e) => {
                p.add(path, format!("invalid JSON: {e}"));
                None
            }
        }
    };
    let common = |path: &str, v: &Value, p: &mut Problems| {
        if v["name"] != PLUGIN {
            p.add(path, format!("name must be `{PLUGIN}`"));
        }
        if v["version"] != VERSION {
            p.add(
                path,
                format!("version must be the workspace version, {VERSION}"),
            );
        }
        if non_empty(&v["description"]).is_none() {
            p.add(path, "description must be set");
        }
        if non_empty(&v["author"]["name"]).is_none() {
            p.add(path, "author.name must be set");
        }
        for k in FORBIDDEN_MANIFEST_KEYS {
            if v.get(*k).is_some() {
                p.add(
                    path,
                    format!("must not declare `{k}`: the plugin's only code is its launcher"),
                );
            }
        }
    };
    let relative_dir = |path: &str, v: &Value, key: &str, p: &mut Problems| match v[key].as_str() {
        None => p.add(path, format!("`{key}` must be set")),
        Some(rel) => {
            if !rel.starts_with("./") || rel.contains("..") {
                p.add(
                    path,
                    format!("`{key}` must be a `./` path inside the plugin"),
                );
            } else if !dir.join(rel).is_dir() {
                p.add(path, format!("`{key}` names no directory ({rel})"));
            }
        }
    };

    let claude = ".claude-plugin/plugin.json";
    if let Some(v) = json(claude, p) {
        common(claude, &v, p);
        relative_dir(claude, &v, "skills", p);
        relative_dir(claude, &v, "commands", p);
    }

    let codex = ".codex-plugin/plugin.json";
    if let Some(v) = json(codex, p) {
        common(codex, &v, p);
        relative_dir(codex, &v, "skills", p);
        let i = &v["interface"];
        for k in [
            "displayName",
            "shortDescription",
            "longDescription",
            "developerName",
            "category",
        ] {
            if non_empty(&i[k]).is_none() {
                p.add(codex, format!("interface.{k} must be set"));
            }
        }
        match i["capabilities"].as_array() {
            Some(c) if !c.is_empty() && c.iter().all(|x| non_empty(x).is_some()) => {}
            _ => p.add(codex, "interface.capabilities must be a non-empty list"),
        }
        match i["defaultPrompt"].as_array() {
            Some(d) if !d.is_empty() && d.len() <= MAX_DEFAULT_PROMPTS => {
                for (n, prompt) in d.iter().enumerate() {
                    match non_empty(prompt) {
                        Some(s) if s.chars().count() <= MAX_DEFAULT_PROMPT => {}
                        _ => p.add(
                            codex,
                            format!(
                                "interface.defaultPrompt[{n}] must be 1-{MAX_DEFAULT_PROMPT} characters"
                            ),
                        ),
                    }
                }
            }
            _ => p.add(
                codex,
                format!("interface.defaultPrompt must list 1-{MAX_DEFAULT_PROMPTS} prompts"),
            ),
        }
    }

    let claude_market = ".claude-plugin/marketplace.json";
    if let Some(v) = json(claude_market, p) {
        if v["name"] != MARKETPLACE {
            p.add(claude_market, format!("name must be `{MARKETPLACE}`"));
        }
        if non_empty(&v["owner"]["name"]).is_none() {
            p.add(claude_market, "owner.name must be set");
        }
        match plugin_entry(&v) {
            None => p.add(claude_market, format!("lists no plugin `{PLUGIN}`")),
            Some(e) => {
                if e["source"] != "./" {
                    p.add(claude_market, "the plugin's source must be `./`");
                }
                if e["version"] != VERSION {
                    p.add(
                        claude_market,
                        format!("the plugin's version must be {VERSION}"),
                    );
                }
            }
        }
    }

    let codex_market = ".agents/plugins/marketplace.json";
    if let Some(v) = json(codex_market, p) {
        if v["name"] != MARKETPLACE {
            p.add(codex_market, format!("name must be `{MARKETPLACE}`"));
        }
        if non_empty(&v["interface"]["displayName"]).is_none() {
            p.add(codex_market, "interface.displayName must be set");
        }
        match plugin_entry(&v) {
            None => p.add(codex_market, format!("lists no plugin `{PLUGIN}`")),
            Some(e) => {
                if e["source"] != json!({ "source": "local", "path": "./" }) {
                    p.add(
                        codex_market,
                        "the plugin's source must be {\"source\": \"local\", \"path\": \"./\"}",
                    );
                }
                if !["AVAILABLE", "INSTALLED_BY_DEFAULT"]
                    .contains(&e["policy"]["installation"].as_str().unwrap_or(""))
                {
                    p.add(codex_market, "policy.installation must let it be installed");
                }
                if !["ON_INSTALL", "ON_USE"]
                    .contains(&e["policy"]["authentication"].as_str().unwrap_or(""))
                {
                    p.add(
                        codex_market,
                        "policy.authentication must be ON_INSTALL or ON_USE",
                    );
                }
                if non_empty(&e["category"]).is_none() {
                    p.add(codex_market, "the plugin's category must be set");
                }
            }
        }
    }
    if skill_dirs.is_empty() {
        p.add("skills", "has no skills");
    }
}

fn plugin_entry(market: &Value) -> Option<&Value> {
    market["plugins"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == PLUGIN)
}

#[cfg(test)]
mod tests {
    use super::super::files::write;
    use super::*;

    /// Renders the bundle into a scratch directory, lets `edit` break it, and validates.
    fn problems_after(edit: impl FnOnce(&Path)) -> Vec<String> {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path()).unwrap();
        assert_eq!(validate(tmp.path()), Vec::<String>::new());
        edit(tmp.path());
        validate(tmp.path())
    }

    fn replace(path: &Path, from: &str, to: &str) {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(text.contains(from), "{} has no {from:?}", path.display());
        std::fs::write(path, text.replacen(from, to, 1)).unwrap();
    }

    fn assert_flags(problems: &[String], needle: &str) {
        assert!(
            problems.iter().any(|p| p.contains(needle)),
            "expected a problem mentioning {needle:?}, got {problems:#?}"
        );
    }

    #[test]
    fn a_skill_whose_name_is_not_its_folders_is_refused() {
        let p = problems_after(|d| {
            replace(
                &d.join("skills/handoff-codex/SKILL.md"),
                "name: handoff-codex",
                "name: handoff-codex2",
            )
        });
        assert_flags(&p, "is not its folder's");
    }

    #[test]
    fn a_description_over_the_hosts_limit_is_refused() {
        let long = "x".repeat(MAX_DESCRIPTION + 1);
        let p = problems_after(|d| {
            let path = d.join("skills/get-advice/SKILL.md");
            let text = std::fs::read_to_string(&path).unwrap();
            let line = text
                .lines()
                .find(|l| l.starts_with("description:"))
                .unwrap();
            std::fs::write(
                &path,
                text.replace(line, &format!("description: \"{long}\"")),
            )
            .unwrap();
        });
        assert_flags(&p, "the hosts allow 1024");
    }

    #[test]
    fn front_matter_that_is_not_our_yaml_is_refused() {
        let p = problems_after(|d| {
            replace(
                &d.join("commands/codex-review.md"),
                "argument-hint: ",
                "argument-hint: : ",
            )
        });
        assert_flags(&p, "front matter");
        let p = problems_after(|d| {
            replace(
                &d.join("skills/get-advice/agents/openai.yaml"),
                "  short_description: ",
                "    short_description: ",
            )
        });
        assert_flags(&p, "not valid YAML");
    }

    #[test]
    fn a_short_description_outside_codex_limits_is_refused() {
        let p = problems_after(|d| {
            replace(
                &d.join("skills/handoff-kiro/agents/openai.yaml"),
                "\"Delegate a bounded task to Kiro\"",
                "\"Kiro\"",
            )
        });
        assert_flags(&p, "short_description must be 25-64");
    }

    #[test]
    fn a_manifest_with_another_version_or_broken_json_is_refused() {
        let p = problems_after(|d| {
            replace(
                &d.join(".codex-plugin/plugin.json"),
                &format!("\"version\": \"{VERSION}\""),
                "\"version\": \"9.9.9\"",
            )
        });
        assert_flags(&p, "version must be the workspace version");
        let p = problems_after(|d| {
            std::fs::write(d.join(".claude-plugin/marketplace.json"), "{\"name\":").unwrap()
        });
        assert_flags(&p, "invalid JSON");
    }

    #[test]
    fn a_build_command_the_model_may_start_is_refused() {
        let p = problems_after(|d| {
            replace(
                &d.join("commands/grok-build.md"),
                "disable-model-invocation: true\n",
                "",
            )
        });
        assert_flags(&p, "disable-model-invocation");
    }

    #[test]
    fn a_body_that_calls_an_agent_or_uses_a_symlinked_cwd_is_refused() {
        let p = problems_after(|d| {
            let path = d.join("skills/handoff-run/SKILL.md");
            let mut text = std::fs::read_to_string(&path).unwrap();
            text.push_str("\nOr just run `codex exec` in `$(pwd)`.\n");
            std::fs::write(&path, text).unwrap();
        });
        assert_flags(&p, "calls an agent CLI directly");
        assert_flags(&p, "uses `$(pwd)`");
    }
}
