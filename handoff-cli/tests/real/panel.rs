//! A panel of real CLIs: Codex, Claude Code and OpenCode answer the same question against the
//! scripted model server, at once, and their findings are merged.

use handoff_testkit::model_server::{Script, provider_output};
use serde_json::{Value, json};

use super::Rig;

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn codex_claude_code_and_opencode_answer_one_question_as_a_panel() {
    let mut answer = provider_output("The retry loop in fetch never gives up.");
    answer["findings"] = json!([{
        "file": "README.md",
        "line": 1,
        "endLine": 2,
        "category": "correctness",
        "severity": "high",
        "title": "Unbounded retry loop in fetch",
        "summary": "fetch retries forever when the server keeps failing.",
    }]);
    answer["verdict"] = json!("changes-requested");
    let rig = Rig::new("codex", Script::answer(answer));
    let ins = rig.root.join("private/question.txt");
    std::fs::write(&ins, "Is the retry loop in fetch safe?").unwrap();
    let out = rig
        .command()
        .args(["advice", "--caller-harness", "claude"])
        .args(["--harness", "codex,claude,opencode"])
        .arg("--cwd")
        .arg(rig.repo.path())
        .arg("--instructions")
        .arg(&ins)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let panel: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON line ({e}): {stdout}\n{stderr}"));
    assert_eq!(out.status.code(), Some(0), "{panel:#}\n{stderr}");
    assert_eq!(panel["schemaVersion"], "handoff.panel.v1");
    assert_eq!(panel["status"], "succeeded", "{panel:#}");
    let members: Vec<(&str, &str)> = panel["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["target"]["harness"].as_str().unwrap(),
                m["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        members,
        [
            ("codex", "succeeded"),
            ("claude", "succeeded"),
            ("opencode", "succeeded")
        ],
        "{panel:#}"
    );
    // One finding, raised by all three, merged.
    let findings = panel["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{panel:#}");
    assert_eq!(
        findings[0]["agreedBy"],
        json!(["claude", "codex", "opencode"]),
        "{panel:#}"
    );
    assert_eq!(panel["agreement"]["singleMemberFindings"], json!([]));
    assert_eq!(
        findings[0]["lines"],
        json!({"start": 1, "end": 2}),
        "{panel:#}"
    );
    assert_eq!(findings[0]["category"], "correctness", "{panel:#}");
    // Every verdict is the one the model stated, through each CLI's structured output.
    for stance in panel["agreement"]["verdicts"].as_array().unwrap() {
        assert_eq!(stance["verdict"], "changes-requested", "{panel:#}");
        assert_eq!(stance["verdictSource"], "stated", "{panel:#}");
    }
    // Each member really asked the model: three CLIs, three wire formats, one server.
    assert!(
        rig.server.model_calls().len() >= 3,
        "{:?}",
        rig.server.model_calls().len()
    );
    rig.assert_no_process_left();
}
