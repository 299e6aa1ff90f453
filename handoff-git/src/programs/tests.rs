use super::*;

fn settings(text: &str) -> Vec<Setting> {
    program_settings(text.as_bytes()).unwrap()
}

fn neutralised(text: &str, globals: &str) -> Neutralised {
    let programs = RepoPrograms {
        hooks_path: None,
        files: vec![ConfigFile {
            path: "/r/.git/config".into(),
            label: ".git/config".into(),
            digest: String::new(),
            settings: settings(text),
        }],
    };
    let globals = gix::config::File::from_bytes_no_includes(
        globals.as_bytes(),
        gix::config::file::Metadata::api(),
        gix::config::file::init::Options::default(),
    )
    .unwrap();
    programs.neutralised(&globals)
}

#[test]
fn only_program_settings_are_read_with_their_names() {
    let s = settings(
        "[core]\n\tbare = false\n\tsshCommand = evil\n[branch \"main\"]\n\tremote = origin\n\
         [filter \"lfs\"]\n\tclean = x\n[alias]\n\tst = status\n\tsh = !sh\n",
    );
    let names: Vec<String> = s.iter().map(Setting::name).collect();
    assert_eq!(names, ["core.sshcommand", "filter.lfs.clean", "alias.sh"]);
}

#[test]
fn settings_take_the_global_value_or_a_harmless_default() {
    let n = neutralised(
        "[core]\n\tsshCommand = evil\n\teditor = evil\n[gpg]\n\tprogram = evil\n\
         [gpg \"ssh\"]\n\tprogram = evil\n[diff \"x\"]\n\ttextconv = evil\n\
         [remote \"origin\"]\n\tuploadpack = evil\n[protocol \"ext\"]\n\tallow = always\n\
         [pager]\n\tlog = evil\n",
        "[core]\n\tsshCommand = ssh -i key\n",
    );
    let get = |k: &str| {
        n.overrides
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(get("core.sshcommand"), Some("ssh -i key"));
    assert_eq!(get("core.editor"), Some("false"));
    assert_eq!(get("gpg.program"), Some("gpg"));
    assert_eq!(get("gpg.ssh.program"), Some("ssh-keygen"));
    assert_eq!(get("diff.x.textconv"), Some(""));
    assert_eq!(get("remote.origin.uploadpack"), Some("git-upload-pack"));
    assert_eq!(get("protocol.ext.allow"), Some("never"));
    assert_eq!(get("pager.log"), Some("false"));
    assert!(n.content.is_empty() && n.remote.is_empty(), "{n:?}");
}

#[test]
fn a_repository_filter_is_refused_unless_the_global_configuration_defines_it() {
    let n = neutralised(
        "[filter \"evil\"]\n\tclean = sh x\n\trequired = true\n[filter \"lfs\"]\n\
         \tclean = sh y\n",
        "[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n",
    );
    assert_eq!(n.content, ["filter.evil.clean in .git/config"]);
    assert!(
        n.overrides
            .contains(&("filter.evil.clean".into(), String::new()))
    );
    assert!(
        n.overrides
            .contains(&("filter.evil.required".into(), "false".into()))
    );
    assert!(
        n.overrides
            .contains(&("filter.lfs.clean".into(), "git-lfs clean -- %f".into()))
    );
}

#[test]
fn rewrites_helpers_and_the_worktree_are_refused_by_name() {
    let n = neutralised(
        "[url \"ssh://evil/\"]\n\tinsteadOf = https://github.com/\n[credential]\n\
         \thelper = !sh x\n[core]\n\tworktree = /tmp\n[remote \"o\"]\n\tvcs = evil\n",
        "",
    );
    assert_eq!(
        n.remote,
        [
            "url.ssh://evil/.insteadof in .git/config",
            "credential.helper in .git/config",
            "remote.o.vcs in .git/config"
        ]
    );
    assert_eq!(n.content, ["core.worktree in .git/config"]);
}

#[test]
fn listings_split_into_scope_origin_name_and_value() {
    let listed = parse_listing(
        b"local\0file:.git/config\0filter.evil.clean\nsh x\0local\0file:.git/config\0\
          core.bare\nfalse\0worktree\0file:/r/.git/config.worktree\0a.b.c.d\0",
    );
    assert_eq!(listed.len(), 3);
    let s = listed[0].setting().unwrap();
    assert_eq!(
        (s.section.as_str(), s.sub.as_deref(), s.key.as_str()),
        ("filter", Some("evil"), "clean")
    );
    assert_eq!(listed[0].origin, PathBuf::from(".git/config"));
    // A subsection may hold dots; a key without a value has an empty one.
    let s = listed[2].setting().unwrap();
    assert_eq!((s.sub.as_deref(), s.key.as_str()), (Some("b.c"), "d"));
    assert_eq!(s.value, "");
    assert_eq!(listed[2].scope, "worktree");
}
