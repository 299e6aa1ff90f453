use super::*;

fn layout(root: &Utf8Path, writable: bool) -> Layout {
    Layout {
        worktree: root.join("wt"),
        writable,
        protected: vec![root.join("wt/.git")],
        run_dir: root.join("run"),
        home: Some(root.join("home")),
        read_only: vec![],
        writable_extra: vec![],
        relay: None,
    }
}

#[test]
fn the_worktree_is_writable_only_for_writing_runs_and_git_stays_read_only() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(tmp.path()).unwrap();
    std::fs::create_dir_all(root.join("wt/.git")).unwrap();
    let spec = SandboxSpec::default();
    let env = BTreeMap::new();
    for writable in [true, false] {
        let m = mounts(&layout(root, writable), &spec, Utf8Path::new("/x/y"), &env);
        let wt = root.join("wt");
        let at = m
            .iter()
            .position(|m| matches!(m, Mount::ReadWrite(_, d) | Mount::ReadOnly(_, d) if *d == wt))
            .unwrap();
        assert_eq!(matches!(m[at], Mount::ReadWrite(..)), writable);
        let git = m
            .iter()
            .position(|m| *m == Mount::ReadOnly(wt.join(".git"), wt.join(".git")))
            .unwrap();
        assert!(git > at, "the .git mount must come after the worktree's");
        // The private /tmp comes before anything that may live under /tmp.
        let tmpfs = m
            .iter()
            .position(|m| *m == Mount::Tmpfs("/tmp".into()))
            .unwrap();
        assert!(tmpfs < at);
    }
}

#[test]
fn the_directories_above_a_protected_path_in_the_worktree_are_pinned() {
    // A hooks directory at `scripts/hooks`: renaming `scripts` away and making a new
    // `scripts/hooks` would plant hooks past its read-only mount.
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(tmp.path()).unwrap();
    std::fs::create_dir_all(root.join("wt/.git")).unwrap();
    std::fs::create_dir_all(root.join("wt/scripts/git/hooks")).unwrap();
    let mut layout = layout(root, true);
    let hooks = root.join("wt/scripts/git/hooks");
    layout.protected.push(hooks.clone());
    let spec = SandboxSpec::default();
    let env = BTreeMap::new();
    let m = mounts(&layout, &spec, Utf8Path::new("/x/y"), &env);
    let at = |mount: &Mount| m.iter().position(|x| x == mount);
    let ro = at(&Mount::ReadOnly(hooks.clone(), hooks.clone())).unwrap();
    for dir in ["wt/scripts", "wt/scripts/git"] {
        let dir = root.join(dir);
        let pinned = at(&Mount::ReadWrite(dir.clone(), dir.clone()))
            .unwrap_or_else(|| panic!("{dir} is not pinned: {m:?}"));
        assert!(pinned < ro);
    }
    // Nothing is pinned in a read-only worktree, nor above `.git`.
    let m = mounts(
        &self::layout(root, false),
        &spec,
        Utf8Path::new("/x/y"),
        &env,
    );
    assert!(
        !m.iter()
            .any(|m| matches!(m, Mount::ReadWrite(_, d) if d.starts_with(root.join("wt"))))
    );
}

#[test]
fn the_toolchains_are_read_only_and_their_credentials_empty() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(tmp.path()).unwrap();
    std::fs::create_dir_all(root.join("wt")).unwrap();
    std::fs::create_dir_all(root.join("home/.cargo")).unwrap();
    std::fs::write(root.join("home/.cargo/credentials.toml"), "token").unwrap();
    let m = mounts(
        &layout(root, true),
        &SandboxSpec::default(),
        Utf8Path::new("/x/y"),
        &BTreeMap::new(),
    );
    let cargo = root.join("home/.cargo");
    let at = m
        .iter()
        .position(|m| *m == Mount::ReadOnly(cargo.clone(), cargo.clone()))
        .unwrap();
    let masked = m
        .iter()
        .position(|m| *m == Mount::ReadOnly("/dev/null".into(), cargo.join("credentials.toml")))
        .unwrap();
    assert!(masked > at);
    assert!(
        !m.iter()
            .any(|m| matches!(m, Mount::ReadWrite(_, d) if d.starts_with(&cargo)))
    );
}

#[test]
fn a_prefix_on_path_brings_its_lib_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(tmp.path()).unwrap();
    std::fs::create_dir_all(root.join("wt")).unwrap();
    for d in ["nvm/bin", "nvm/lib/node_modules", "tools"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let mut env = BTreeMap::new();
    env.insert(
        "PATH".to_owned(),
        format!(
            "{}:{}:relative/bin",
            root.join("nvm/bin"),
            root.join("tools")
        ),
    );
    let m = mounts(
        &layout(root, false),
        &SandboxSpec::default(),
        Utf8Path::new("/x/y"),
        &env,
    );
    let ro = |p: Utf8PathBuf| Mount::ReadOnly(p.clone(), p);
    assert!(m.contains(&ro(root.join("nvm/bin"))));
    assert!(m.contains(&ro(root.join("nvm/lib"))));
    assert!(m.contains(&ro(root.join("tools"))));
    // No `lib` next to a directory that is not a `bin/`; nothing relative.
    assert!(
        !m.iter()
            .any(|m| matches!(m, Mount::ReadOnly(_, d) if d.as_str().contains("relative")))
    );
    assert!(!m.contains(&ro(root.join("lib"))));
}

#[test]
fn adapter_binds_come_last_and_missing_sources_are_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Utf8Path::from_path(tmp.path()).unwrap();
    std::fs::create_dir_all(root.join("wt")).unwrap();
    std::fs::write(root.join("auth.json"), "{}").unwrap();
    let spec = SandboxSpec {
        binds: vec![
            Bind {
                source: root.join("auth.json"),
                dest: root.join("run/data/auth.json"),
                writable: false,
                secret: true,
            },
            Bind {
                source: root.join("missing"),
                dest: root.join("run/missing"),
                writable: false,
                secret: false,
            },
        ],
        state: String::new(),
        offline_shell: false,
        network: None,
        packages: None,
    };
    let m = mounts(
        &layout(root, true),
        &spec,
        Utf8Path::new("/x/y"),
        &BTreeMap::new(),
    );
    assert_eq!(
        m.last(),
        Some(&Mount::ReadOnly(
            root.join("auth.json"),
            root.join("run/data/auth.json")
        ))
    );
    assert!(
        !m.iter()
            .any(|m| matches!(m, Mount::ReadOnly(s, _) if s.ends_with("missing")))
    );
}
