//! Masking through the binary, as an agent that has read the README would try it: a secret in
//! a file name, secrets broken up on the agent's output (base64 wrapped at 76 columns, shell
//! quoting, colour codes inside), a value shown as a secret in one place of a request and
//! repeated alone in another. Every output, the result file and every file under the state
//! directory (the task store with its write-ahead log) are read as raw bytes.

use std::path::Path;
use std::process::Command;

use handoff_testkit::keys::{FINDINGS, MODE, SHELL};

use crate::carry::{files_under, home, note_file, repo_path, sandbox, seed_claude};
use crate::support::{Run, Sandbox};

/// Passed to the agent as `GATEWAY_TOKEN`.
const TOKEN: &str = "plainGatewayValue7731qq";
/// Passed to the agent as `DB_PASSWORD`: shell-special characters make `printf %q` and single
/// quoting change it.
const PASSWORD: &str = "S3cr3t!Stag'ing-42$x";

fn config(sb: &Sandbox) {
    sb.write_config("[agents.codex]\npass_env = [\"GATEWAY_TOKEN\", \"DB_PASSWORD\"]\n");
}

fn command(sb: &Sandbox) -> Command {
    let mut cmd = sb.command();
    cmd.env("GATEWAY_TOKEN", TOKEN).env("DB_PASSWORD", PASSWORD);
    cmd
}

fn holds(bytes: &[u8], secret: &str) -> bool {
    bytes.windows(secret.len()).any(|w| w == secret.as_bytes())
}

/// None of `secrets` in `bytes`.
fn assert_clean(what: &str, bytes: &[u8], secrets: &[&str]) {
    for s in secrets {
        assert!(!holds(bytes, s), "{what} holds {s:?}");
    }
}

/// Stdout, stderr and every file under the state directory, clean of `secrets`.
fn assert_all_clean(sb: &Sandbox, runs: &[&Run], secrets: &[&str]) {
    for (i, run) in runs.iter().enumerate() {
        assert_clean(&format!("stdout {i}"), run.stdout.as_bytes(), secrets);
        assert_clean(&format!("stderr {i}"), run.stderr.as_bytes(), secrets);
    }
    let state = home(sb).join(".local/state/handoff");
    let files = files_under(&state);
    assert!(!files.is_empty(), "no state under {}", state.display());
    for file in files {
        assert_clean(
            &file.display().to_string(),
            &std::fs::read(&file).unwrap(),
            secrets,
        );
    }
}

fn run(sb: &Sandbox, mode: &str, instructions: &str, result: &Path) -> Run {
    let ins = sb.instructions(instructions);
    let cwd = repo_path(sb);
    sb.exec(
        command(sb)
            .args(["run", "--caller-harness", "claude", "--harness", "codex"])
            .args(["--mode", mode, "--cwd", &cwd, "--instructions", &ins])
            .arg("--result")
            .arg(result),
    )
}

#[test]
fn a_secret_in_a_file_name_is_masked_wherever_paths_are_shown_or_kept() {
    let sb = sandbox();
    config(&sb);
    let leak = format!("leak-{TOKEN}.txt");
    sb.agents.set(SHELL, "touch \"leak-$GATEWAY_TOKEN.txt\"");
    let result = sb.root.join("build.json");
    let build = run(&sb, "build", "Add the notes file.", &result);
    assert_eq!(build.json["status"], "succeeded", "{build:#?}");
    // The file is there under its real name, and the evidence counted it.
    assert!(sb.repo.path().join(&leak).exists());
    let git = &build.json["git"];
    let files: Vec<&str> = git["changedFiles"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert!(files.contains(&"leak-[REDACTED].txt"), "{git:#}");
    assert_eq!(git["maskedPaths"], 1, "{git:#}");
    let file = std::fs::read(&result).unwrap();
    assert_clean("the result file", &file, &[TOKEN]);

    // The person commits it by its real name; the checkpoint reports it masked.
    let cwd = repo_path(&sb);
    let checkpoint = sb.exec(
        command(&sb)
            .args(["checkpoint", "--cwd", &cwd, "--agent", "codex", "--json"])
            .arg(sb.repo.path().join(&leak)),
    );
    assert_eq!(checkpoint.code, 0, "{checkpoint:#?}");
    assert_eq!(
        checkpoint.json["committed"],
        serde_json::json!(["leak-[REDACTED].txt"]),
        "{checkpoint:#?}"
    );
    let human = sb.exec(
        command(&sb)
            .args(["checkpoint", "--cwd", &cwd, "--agent", "codex", "--tracked"])
            .args(["-m", "again"]),
    );
    // Nothing left to commit: refused, and the refusal names nothing secret either.
    assert_eq!(human.code, 5, "{human:#?}");

    // A review now: the file is tracked (and old enough for its stat data to be trusted), so
    // the record kept for the next run would hold its name; it is left out, and the file is
    // hashed every time instead.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    sb.agents.set(SHELL, "true");
    let review = run(&sb, "review", "Review it.", &sb.root.join("review.json"));
    assert_eq!(review.json["status"], "succeeded", "{review:#?}");
    assert_all_clean(&sb, &[&review], &[TOKEN]);
    // A review that rewrites that file is caught (it is not trusted from a record).
    sb.agents.set(
        SHELL,
        "printf 'changed\\n' > \"leak-$GATEWAY_TOKEN.txt\"; touch -d '2001-01-01' \"leak-$GATEWAY_TOKEN.txt\"",
    );
    let caught = run(&sb, "review", "Review it.", &sb.root.join("caught.json"));
    assert_eq!(caught.json["status"], "blocked", "{caught:#?}");
    assert_eq!(
        caught.json["git"]["changedFiles"],
        serde_json::json!(["leak-[REDACTED].txt"])
    );
    assert_eq!(caught.json["git"]["maskedPaths"], 1, "{caught:#?}");

    let attribute = sb.exec(command(&sb).args(["attribute", "--cwd", &cwd]));
    assert_eq!(attribute.code, 0, "{attribute:#?}");
    let attribute_json = sb.exec(command(&sb).args(["attribute", "--cwd", &cwd, "--json"]));
    assert_eq!(attribute_json.code, 0, "{attribute_json:#?}");
    assert!(
        attribute_json.stdout.contains("leak-[REDACTED].txt"),
        "{}",
        attribute_json.stdout
    );
    assert_all_clean(
        &sb,
        &[
            &build,
            &checkpoint,
            &human,
            &review,
            &caught,
            &attribute,
            &attribute_json,
        ],
        &[TOKEN],
    );
}

#[test]
fn secrets_broken_up_on_the_agent_output_do_not_get_out() {
    let sb = sandbox();
    config(&sb);
    sb.agents.set(MODE, "failed");
    // What a prompt-injected agent prints to get them past a pattern: base64 of a longer text
    // wrapped at 76 columns (the secret straddles a line break), `printf %q`, the shell's
    // single quoting, and a colour code in the middle.
    sb.agents.set(
        SHELL,
        concat!(
            "printf 'padding-to-move-the-secret-across-the-line-%s-and-more' \"$GATEWAY_TOKEN\" | base64; ",
            "printf '%q\\n' \"$DB_PASSWORD\"; ",
            "printf \"'%s'\\n\" \"$(printf %s \"$DB_PASSWORD\" | sed \"s/'/'\\\\\\\\''/g\")\"; ",
            "printf 'k=%s\\033[31m%s\\033[0m\\n' \"$(printf %s \"$GATEWAY_TOKEN\" | cut -c1-9)\" \"$(printf %s \"$GATEWAY_TOKEN\" | cut -c10-)\"; ",
        ),
    );
    let result = sb.root.join("result.json");
    let failed = run(&sb, "review", "Review it.", &result);
    assert_eq!(failed.json["status"], "failed", "{failed:#?}");
    let stderr = failed.json["diagnostics"]["providerStderr"]
        .as_str()
        .unwrap();
    // The shell ran: its output reached handoff, masked.
    assert!(stderr.contains("k="), "{stderr}");
    assert!(stderr.contains("[REDACTED]"), "{stderr}");
    let file = std::fs::read(&result).unwrap();
    // As a person or a decoder would read it back: quotes, backslashes, colour codes and line
    // breaks taken out, base64 decoded.
    let shown = String::from_utf8_lossy(&file)
        .replace("\\u001b[31m", "")
        .replace("\\u001b[0m", "")
        .replace("\\n", "")
        .replace(['\\', '\'', '"'], "");
    for secret in [TOKEN, &PASSWORD.replace('\'', "")] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    let wrapped = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "printf 'padding-to-move-the-secret-across-the-line-%s-and-more' '{TOKEN}' | base64"
        ))
        .output()
        .unwrap();
    let wrapped = String::from_utf8(wrapped.stdout).unwrap();
    assert!(wrapped.lines().count() > 1, "{wrapped}");
    for line in wrapped.lines() {
        // Lines of the encoding that carry the secret are gone, the first one stays.
        if line.len() == 76 && !line.starts_with("cGFkZGluZy") {
            assert!(!holds(&file, line), "{line} in the result");
        }
    }
    assert_all_clean(&sb, &[&failed], &[TOKEN, PASSWORD]);
}

#[test]
fn a_value_shown_as_a_secret_in_one_place_is_masked_in_every_other() {
    let sb = sandbox();
    // A run: the instructions show it as a password, the agent's answer repeats it alone.
    let value = "Zq8wXk2Lm9Pv4Rt7";
    sb.agents.set(
        FINDINGS,
        format!(
            "[{{\"file\": \"src/lib.rs\", \"line\": 1, \"severity\": \"low\", \"summary\": \"connects with {value} in clear\"}}]"
        ),
    );
    let result = sb.root.join("result.json");
    let review = run(
        &sb,
        "review",
        &format!("Review the login. Staging uses DATABASE_PASSWORD={value} today."),
        &result,
    );
    assert_eq!(review.code, 0, "{review:#?}");
    let summary = review.json["output"]["findings"][0]["summary"]
        .as_str()
        .unwrap();
    assert_eq!(summary, "connects with [REDACTED] in clear");
    assert_clean(
        "the result file",
        &std::fs::read(&result).unwrap(),
        &[value],
    );

    // A continuation: the note shows it as a password, the message repeats it alone.
    seed_claude(&sb);
    let note = note_file(&sb);
    let mut text = std::fs::read_to_string(&note).unwrap();
    text = text.replace(
        "The notes file exists;",
        &format!("The notes file exists; DATABASE_PASSWORD={value} is set;"),
    );
    std::fs::write(&note, text).unwrap();
    let cwd = repo_path(&sb);
    let message = format!("Finish it; the db takes {value} for now.");
    let cont = sb.exec(
        sb.command()
            .args(["continue", "--cwd", &cwd, "--note-file", &note])
            .args(["--from", "claude", "--to", "codex", "--message", &message]),
    );
    assert_eq!(cont.code, 0, "{cont:#?}");
    assert_eq!(
        cont.json["message"]["text"], "Finish it; the db takes [REDACTED] for now.",
        "{cont:#?}"
    );
    let log = sb.exec(sb.command().args(["log", "--cwd", &cwd, "--json"]));
    assert_eq!(log.code, 0, "{log:#?}");
    assert_all_clean(&sb, &[&review, &cont, &log], &[value]);
}
