//! `handoff completions SHELL` and `handoff man`: shell completions and the man page, both
//! generated from the command-line definitions, so they never drift from `--help`.

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

/// Prints the completion script for `shell` on stdout.
pub fn completions<C: CommandFactory>(shell: Shell) -> u8 {
    let mut command = C::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut command, "handoff", &mut out);
    let _ = out.flush();
    0
}

/// Prints the `handoff(1)` man page (roff) on stdout: the top-level page followed by one
/// section per subcommand.
pub fn man<C: CommandFactory>() -> u8 {
    let command = C::command();
    let mut page = Vec::new();
    if let Err(e) = clap_mangen::Man::new(command.clone()).render(&mut page) {
        let _ = writeln!(
            std::io::stderr(),
            "handoff: cannot render the man page: {e}"
        );
        return 1;
    }
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("handoff-{}", sub.get_name());
        let man = clap_mangen::Man::new(sub.clone());
        page.extend_from_slice(format!(".SH \"{}\"\n", name.to_uppercase()).as_bytes());
        let mut section = Vec::new();
        for render in [
            clap_mangen::Man::render_description_section,
            clap_mangen::Man::render_synopsis_section,
            clap_mangen::Man::render_options_section,
        ] {
            if let Err(e) = render(&man, &mut section) {
                let _ = writeln!(
                    std::io::stderr(),
                    "handoff: cannot render the man page: {e}"
                );
                return 1;
            }
        }
        // A subcommand's parts are subsections of its section.
        let text = String::from_utf8_lossy(&section).replace("\n.SH ", "\n.SS ");
        let text = text
            .strip_prefix(".SH ")
            .map_or(text.clone(), |t| format!(".SS {t}"));
        page.extend_from_slice(text.as_bytes());
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(&page);
    let _ = out.flush();
    0
}
