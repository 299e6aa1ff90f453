//! Secrets stay masked on every path: a continuation whose configuration and environment hold
//! credentials, whose message holds a password and whose carried session holds a secret only
//! this machine knows. Every output, the task store with its write-ahead log, the note, the
//! receiver's store and the fake agents' recorded argv are read as raw bytes.

use std::path::{Path, PathBuf};

use crate::carry::{files_under, home, log_json, note_file, repo_path, sandbox, seed_claude};
use crate::support::Sandbox;

/// Every secret of the scenario; none may appear anywhere.
const HEADER_CREDENTIAL: &str = "gwcred-Hk29xQ7pLm";
const URL_PASSWORD: &str = "urlPassw0rd-u1Zq";
const ENV_TOKEN: &str = "plainGatewayValue7731qq";
const MESSAGE_PASSWORD: &str = "S3cr3t!Staging-42";

fn leaked_in(bytes: &[u8]) -> Vec<&'static str> {
    [HEADER_CREDENTIAL, URL_PASSWORD, ENV_TOKEN, MESSAGE_PASSWORD]
        .into_iter()
        .filter(|s| bytes.windows(s.len()).any(|w| w == s.as_bytes()))
        .collect()
}

fn assert_clean(what: &str, bytes: &[u8]) {
    let leaked = leaked_in(bytes);
    assert!(leaked.is_empty(), "{what} holds {leaked:?}");
}

/// Clean but for the message's own text, which the receiver is sent on purpose.
fn assert_clean_but_the_message(what: &str, bytes: &[u8]) {
    let leaked: Vec<_> = leaked_in(bytes)
        .into_iter()
        .filter(|s| *s != MESSAGE_PASSWORD)
        .collect();
    assert!(leaked.is_empty(), "{what} holds {leaked:?}");
}

fn write_config(sb: &Sandbox) -> PathBuf {
    let path = sb.root.join("config.toml");
    std::fs::write(
        &path,
        format!(
            "[agents.codex]\n\
             env = {{ ANTHROPIC_CUSTOM_HEADERS = \"X-Gateway-Credential: {HEADER_CREDENTIAL}\", \
             OPENAI_BASE_URL = \"https://gwuser:{URL_PASSWORD}@gateway.example/v1\" }}\n\
             pass_env = [\"GATEWAY_TOKEN\"]\n\
             config = [\"model_providers.gw.base_url=\\\"https://gateway.example/v1\\\"\", \
             \"model_providers.gw.env_key=\\\"GATEWAY_TOKEN\\\"\"]\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    path
}

#[test]
fn no_secret_reaches_any_output_the_store_or_a_command_line() {
    let sb = sandbox();
    sb.record();
    let config = write_config(&sb);
    // The carried session holds a secret this machine knows (through GATEWAY_TOKEN).
    let source = seed_claude(&sb);
    let mut text = std::fs::read_to_string(&source).unwrap();
    assert!(text.contains("Create notes.txt with one line."));
    text = text.replace(
        "Create notes.txt with one line.",
        &format!("Create notes.txt with one line; the key is {ENV_TOKEN}."),
    );
    std::fs::write(&source, text).unwrap();
    sb.repo
        .write("src/lib.rs", "pub fn one() -> u32 {\n    5\n}\n");

    let note = note_file(&sb);
    let cwd = repo_path(&sb);
    let message = format!("Finish it. db password: {MESSAGE_PASSWORD} (rotate later)");
    let run = sb.exec(
        sb.command()
            .env("HANDOFF_CONFIG", &config)
            .env("GATEWAY_TOKEN", ENV_TOKEN)
            .args(["continue", "--cwd", &cwd, "--note-file", &note])
            .args(["--from", "claude", "--to", "codex", "--message", &message]),
    );
    assert_eq!(run.code, 0, "{run:#?}");
    assert_clean("continue's stdout", run.stdout.as_bytes());
    assert_clean("continue's stderr", run.stderr.as_bytes());
    assert!(
        run.json["receiver"]["resume"]["shell"]
            .as_str()
            .unwrap()
            .contains("model_providers.gw.base_url"),
        "the resume command keeps the gateway: {:#}",
        run.json["receiver"]["resume"]
    );

    for args in [
        vec!["config", "show"],
        vec!["config", "show", "--json"],
        vec!["log", "--cwd", &cwd, "--json"],
        vec!["log", "--cwd", &cwd],
    ] {
        let out = sb.exec(
            sb.command()
                .env("HANDOFF_CONFIG", &config)
                .env("GATEWAY_TOKEN", ENV_TOKEN)
                .args(&args),
        );
        assert_eq!(out.code, 0, "{args:?}: {out:#?}");
        assert_clean(&format!("{args:?} stdout"), out.stdout.as_bytes());
        assert_clean(&format!("{args:?} stderr"), out.stderr.as_bytes());
    }
    let _ = log_json(&sb);

    // The task store, its WAL and the notes handoff wrote.
    let state = home(&sb).join(".local/state/handoff");
    for file in files_under(&state) {
        assert_clean(&file.display().to_string(), &std::fs::read(&file).unwrap());
    }
    // The receiver's store: the carried conversation, converted (and the message it was sent,
    // as the person wrote it: that is delivery, not a leak).
    let rollouts = files_under(&home(&sb).join(".codex"));
    assert!(!rollouts.is_empty());
    for file in rollouts {
        assert_clean_but_the_message(&file.display().to_string(), &std::fs::read(&file).unwrap());
    }
    // Every command line the fake agents were started with.
    for call in sb.agents.invocations() {
        assert_clean("an agent's argv", call["argv"].to_string().as_bytes());
    }
    assert!(Path::new(&source).exists());

    // The printed resume command works as printed: through `sh`, it reaches Codex with the
    // gateway of the configuration and the carried session.
    let shell = run.json["receiver"]["resume"]["shell"].as_str().unwrap();
    let session = run.json["carry"]["sessionId"].as_str().unwrap();
    let before = sb.agents.invocations().len();
    let out = std::process::Command::new("sh")
        .args(["-c", shell])
        .env_clear()
        .env("PATH", sb.agents.path_env())
        .env("HOME", home(&sb))
        .env("GATEWAY_TOKEN", ENV_TOKEN)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{shell}: {out:?}");
    let calls = sb.agents.invocations();
    let resumed = calls[before..]
        .iter()
        .find(|c| c["exe"] == "codex")
        .unwrap_or_else(|| panic!("codex was not run by {shell}"));
    let argv: Vec<&str> = resumed["argv"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        argv.contains(&"model_providers.gw.base_url=\"https://gateway.example/v1\"")
            && argv.ends_with(&["resume", session]),
        "{argv:?}"
    );
    assert_clean("the resume command", shell.as_bytes());
}

#[test]
fn an_agent_that_prints_a_secret_it_was_given_does_not_get_it_out() {
    // The agent is given GATEWAY_TOKEN (`pass_env`) and prints it, raw and base64-encoded, on
    // its stderr: neither form reaches handoff's output or its result file.
    let sb = sandbox();
    let config = write_config(&sb);
    sb.agents.set(handoff_testkit::keys::MODE, "failed");
    sb.agents.set(
        handoff_testkit::keys::SHELL,
        "echo \"token=$GATEWAY_TOKEN\"; printf %s \"$GATEWAY_TOKEN\" | base64;",
    );
    let ins = sb.instructions("Review it.");
    let cwd = repo_path(&sb);
    let result = sb.root.join("result.json");
    let run = sb.exec(
        sb.command()
            .env("HANDOFF_CONFIG", &config)
            .env("GATEWAY_TOKEN", ENV_TOKEN)
            .args(["run", "--caller-harness", "claude", "--harness", "codex"])
            .args(["--mode", "review", "--cwd", &cwd, "--instructions", &ins])
            .arg("--result")
            .arg(&result),
    );
    assert_eq!(run.json["status"], "failed", "{run:#?}");
    // The shell ran with the token: its stderr reached handoff (masked).
    let stderr = run.json["diagnostics"]["providerStderr"].as_str().unwrap();
    assert!(stderr.contains("token="), "{stderr}");
    // `printf %s {ENV_TOKEN} | base64`
    let encoded = "cGxhaW5HYXRld2F5VmFsdWU3NzMxcXE=";
    for (what, bytes) in [
        ("stdout", run.stdout.clone().into_bytes()),
        ("stderr", run.stderr.clone().into_bytes()),
        ("the result file", std::fs::read(&result).unwrap()),
    ] {
        assert_clean(what, &bytes);
        assert!(
            !bytes
                .windows(encoded.len())
                .any(|w| w == encoded.as_bytes()),
            "{what} holds the base64 form"
        );
    }
}
