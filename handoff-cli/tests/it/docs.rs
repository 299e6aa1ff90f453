//! `handoff completions` and `handoff man`: generated from the command-line definitions.

use crate::support::Sandbox;

#[test]
fn completions_know_every_subcommand() {
    let sb = Sandbox::new();
    for shell in ["bash", "zsh", "fish"] {
        let run = sb.run(&["completions", shell]);
        assert_eq!(run.code, 0, "{run:#?}");
        for sub in [
            "run-with-advice",
            "continue",
            "checkpoint",
            "attribute",
            "note",
        ] {
            assert!(run.stdout.contains(sub), "{shell}: {sub} missing");
        }
    }
    let run = sb.run(&["completions", "tcsh"]);
    assert_eq!(run.code, 5, "{run:#?}");
}

#[test]
fn the_man_page_has_a_section_per_subcommand() {
    let sb = Sandbox::new();
    let run = sb.run(&["man"]);
    assert_eq!(run.code, 0, "{run:#?}");
    assert!(
        run.stdout.starts_with(".ie") || run.stdout.starts_with(".TH"),
        "{}",
        &run.stdout[..80]
    );
    assert!(run.stdout.contains(".TH handoff 1"));
    for sub in ["RUN", "ADVICE", "CONTINUE", "CHECKPOINT", "LOG", "NOTE"] {
        assert!(
            run.stdout.contains(&format!(".SH \"HANDOFF-{sub}\"")),
            "{sub}"
        );
    }
    assert!(
        run.stdout.contains("\\-\\-note\\-file"),
        "continue's flags are documented"
    );
}
