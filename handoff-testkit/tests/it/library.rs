//! The test-support library itself.

use std::path::PathBuf;

use handoff_testkit::{EXECUTABLES, FakeAgents, ScratchRepo, fake_agent_bin};

#[test]
fn fake_agent_bin_is_the_built_binary() {
    assert_eq!(
        fake_agent_bin().canonicalize().unwrap(),
        PathBuf::from(env!("CARGO_BIN_EXE_fake-agent"))
            .canonicalize()
            .unwrap()
    );
}

#[test]
fn install_creates_symlinks_and_path() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = FakeAgents::install(tmp.path());
    assert_eq!(agents.bin_dir, tmp.path().join("bin"));
    for exe in EXECUTABLES {
        let link = agents.bin(exe);
        assert_eq!(std::fs::read_link(&link).unwrap(), fake_agent_bin());
    }
    assert!(!agents.bin_dir.join("bwrap").exists());
    let path = agents.path_env();
    assert_eq!(
        path.to_string_lossy(),
        format!("{}:/usr/local/bin:/usr/bin:/bin", agents.bin_dir.display())
    );
    // Installing twice is fine.
    let agents = FakeAgents::install(tmp.path()).with_sandbox_tools();
    assert!(agents.bin_dir.join("socat").is_file());
    agents.uninstall("grok");
    assert!(!agents.bin("grok").exists());
    assert!(agents.invocations().is_empty());
}

#[test]
fn scratch_repo_has_one_clean_commit_on_main() {
    let repo = ScratchRepo::new();
    assert!(repo.path().is_absolute());
    assert_eq!(repo.path(), repo.path().canonicalize().unwrap());
    assert_eq!(repo.git(&["rev-list", "--count", "HEAD"]).trim(), "1");
    assert_eq!(repo.git(&["branch", "--show-current"]).trim(), "main");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(repo.path().join(".gitignore")).unwrap(),
        "target/\n"
    );
    assert!(repo.path().join("README.md").is_file());
    let path = repo.path().to_path_buf();
    drop(repo);
    assert!(!path.exists());
}

#[test]
fn installed_copies_survive_canonicalize() {
    let tmp = tempfile::tempdir().unwrap();
    let agents = FakeAgents::install_copies(tmp.path());
    agents.set("HANDOFF_FAKE_VERSION", "1.2.3");
    let claude = agents.bin("claude").canonicalize().unwrap();
    assert_eq!(claude.file_name().unwrap(), "claude");
    let out = std::process::Command::new(&claude)
        .arg("--version")
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "1.2.3 (Claude Code)\n"
    );
}
