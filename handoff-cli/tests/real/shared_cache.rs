//! Real OpenCode under handoff's sandbox with a provider package it does not carry: handoff
//! fetches it once into its own cache, outside the sandbox, and shows it read-only to every
//! run. A hostile model's shell cannot change it (nor OpenCode's configuration directories), and
//! a file planted in the cache between runs makes handoff fetch the package anew instead of
//! using it.

use camino::Utf8PathBuf;
use handoff_testkit::model_server::{Reply, Script, Step, provider_output};

use super::{Rig, shared_cache};

/// A small package OpenCode does not carry, named by a provider the runs never use.
const PACKAGE: &str = "is-number";

fn rig() -> Rig {
    let rig = Rig::new("opencode", Script::text("unused"));
    let config = rig.root.join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        r#"
[agents.opencode.provider.spare]
npm = "{PACKAGE}"
name = "Spare"
options = {{ baseURL = "http://127.0.0.1:9/v1" }}
models = {{ "m" = {{ name = "M" }} }}
"#
    ));
    std::fs::write(&config, text).unwrap();
    rig
}

fn cached() -> Utf8PathBuf {
    Utf8PathBuf::from_path_buf(shared_cache())
        .unwrap()
        .join("handoff/packages/npm")
        .join(PACKAGE)
}

fn outcome(json: &serde_json::Value) -> String {
    json["policy"]["sandbox"]["packages"][0]["outcome"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
#[ignore = "real CLIs: run `cargo xtask e2e-real`"]
fn a_hostile_run_cannot_change_the_shared_package_cache() {
    let rig = rig();
    rig.server
        .set_script(Script::new([Step::Answer(provider_output("fine"))]));
    let warm = rig.run("review", &[]);
    assert_eq!(warm.code, 0, "{}", warm.json);
    assert!(
        ["fetched", "reused"].contains(&outcome(&warm.json).as_str()),
        "{}",
        warm.json["policy"]["sandbox"]
    );
    let dir = cached();
    let before = handoff_core::sandbox::packages::manifest(&dir).unwrap();
    assert_eq!(handoff_core::sandbox::packages::ready(&dir), Ok(()));

    let target = format!("$XDG_CACHE_HOME/opencode/packages/{PACKAGE}");
    rig.server.set_script(Script::new([
        Step::shell(format!(
            "echo 'evil()' >> {target}/node_modules/{PACKAGE}/index.js; \
             echo x > {target}/planted.js; \
             echo '{{}}' > $OPENCODE_CONFIG_DIR/opencode.json; \
             echo attempted"
        )),
        Step::Answer(provider_output("looked")),
    ]));
    let run = rig.run("review", &[]);
    assert_eq!(run.code, 0, "{}", run.json);
    assert_eq!(outcome(&run.json), "reused");
    let call_id = rig
        .server
        .requests()
        .into_iter()
        .find_map(|r| match r.reply {
            Reply::ToolCall { call_id, .. } => Some(call_id),
            _ => None,
        })
        .expect("the model called its shell");
    let output = rig.server.tool_output(&call_id).unwrap_or_default();
    assert!(output.contains("attempted"), "{output}");
    assert!(output.contains("Read-only file system"), "{output}");
    assert_eq!(
        handoff_core::sandbox::packages::manifest(&dir).unwrap(),
        before
    );
    assert_eq!(handoff_core::sandbox::packages::ready(&dir), Ok(()));

    // A file planted in the cache between runs: not used, the package is fetched anew.
    std::fs::write(dir.join("planted.js"), "evil()").unwrap();
    rig.server
        .set_script(Script::new([Step::Answer(provider_output("fine"))]));
    let next = rig.run("review", &[]);
    assert_eq!(next.code, 0, "{}", next.json);
    assert_eq!(outcome(&next.json), "fetched");
    assert!(!dir.join("planted.js").exists());
    assert_eq!(handoff_core::sandbox::packages::ready(&dir), Ok(()));
}
