//! `handoff doctor`: the installation as handoff sees it.

use crate::support::Sandbox;

#[test]
fn doctor_reports_agents_config_and_store() {
    let sb = Sandbox::new();
    sb.agents.uninstall("grok");
    let run = sb.run(&["doctor", "--json"]);
    assert_eq!(run.code, 0, "{run:#?}");
    let r = &run.json;
    assert_eq!(r["schemaVersion"], "handoff.doctor.v1");
    assert_eq!(r["ok"], true);
    assert_eq!(r["config"]["ok"], true);
    assert!(r["config"]["file"].is_null());
    assert_eq!(r["taskStore"]["created"], false);
    let agent = |id: &str| {
        r["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(agent("codex")["ok"], true, "{r:#}");
    assert_eq!(agent("grok")["installed"], false);
    assert_eq!(agent("grok")["continuation"]["receive"], false);
    assert_eq!(agent("claude")["continuation"]["receive"], true);
    let hosts: Vec<&str> = r["plugin"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["claude-code", "codex"]);

    let text = sb.run(&["doctor"]);
    assert_eq!(text.code, 0, "{text:#?}");
    assert!(
        text.stdout
            .contains("grok      not installed (grok not on PATH)"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("task store"));
}

#[test]
fn a_broken_configuration_makes_doctor_fail() {
    let sb = Sandbox::new();
    let config = sb.root.join("config.toml");
    std::fs::write(&config, "[agents.claude]\nmodle = \"x\"\n").unwrap();
    let run = sb.exec(
        sb.command()
            .env("HANDOFF_CONFIG", &config)
            .args(["doctor", "--json"]),
    );
    assert_eq!(run.code, 1, "{run:#?}");
    assert_eq!(run.json["ok"], false);
    assert!(
        run.json["config"]["error"]
            .as_str()
            .unwrap()
            .contains("modle"),
        "{run:#?}"
    );
}
