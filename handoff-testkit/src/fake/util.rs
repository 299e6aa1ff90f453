//! Small helpers shared by the fake CLIs.

use std::ffi::OsStr;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch.
pub(crate) fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_millis() -> u64 {
    u64::try_from(now_nanos() / 1_000_000).unwrap_or(u64::MAX)
}

/// An RFC 3339 UTC timestamp with milliseconds, like `2026-11-30T20:44:28.462Z`.
pub(crate) fn iso_now() -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    time::OffsetDateTime::now_utc()
        .format(format)
        .unwrap_or_default()
}

/// A random UUID v4, hyphenated.
pub(crate) fn uuid() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
}

/// `prefix` + 20 random lowercase hex digits (`msg_…`, `toolu_…`, `call_…`).
pub(crate) fn short_id(prefix: &str) -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}{}", &hex[..20])
}

/// Finds an executable regular file named `name` on `$PATH`, like a shell would.
pub(crate) fn which(name: &OsStr) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable_file(candidate))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Writes `bytes` to `path` through a temporary file in the same directory and a rename, so a
/// reader never sees a partial file.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        now_nanos()
    ));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Sleeps until a signal ends the process.
pub(crate) fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Writes `bytes` to stdout and flushes; a closed pipe is ignored (the reader gave up on us).
pub(crate) fn out(bytes: &[u8]) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(bytes);
    let _ = stdout.flush();
}

/// Writes a line to stdout.
pub(crate) fn out_line(line: &str) {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    out(&bytes);
}

/// Writes a line to stderr.
pub(crate) fn err_line(line: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(line.as_bytes());
    let _ = stderr.write_all(b"\n");
    let _ = stderr.flush();
}

/// Removes the block documenting `flag` from a help text: the line that names it plus the more
/// deeply indented continuation lines below it. Used for `HANDOFF_FAKE_HELP=missing`.
pub(crate) fn help_without(help: &str, flag: &str) -> String {
    let mut out = String::with_capacity(help.len());
    let mut skipping_deeper_than: Option<usize> = None;
    for line in help.split_inclusive('\n') {
        let content = line.trim_end_matches(['\n', '\r']);
        let blank = content.trim().is_empty();
        let indent = content.len() - content.trim_start().len();
        if let Some(limit) = skipping_deeper_than {
            if !blank && indent > limit {
                continue;
            }
            skipping_deeper_than = None;
            // Do not leave two blank lines where a block separated by blanks was.
            if blank && (out.is_empty() || out.ends_with("\n\n")) {
                continue;
            }
        }
        if mentions_flag(content, flag) {
            skipping_deeper_than = Some(indent);
            continue;
        }
        out.push_str(line);
    }
    out
}

fn mentions_flag(line: &str, flag: &str) -> bool {
    line.match_indices(flag).any(|(i, _)| {
        let after = line[i + flag.len()..].chars().next();
        !matches!(after, Some(c) if c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_have_milliseconds_and_a_z() {
        let now = iso_now();
        assert_eq!(now.len(), 24, "{now}");
        assert!(now.ends_with('Z') && now.as_bytes()[19] == b'.', "{now}");
    }

    #[test]
    fn help_without_keeps_single_blank_lines() {
        let help = "  --a\n\n  --b\n      about b\n\n  --c\n";
        assert_eq!(help_without(help, "--b"), "  --a\n\n  --c\n");
    }

    #[test]
    fn help_without_removes_block() {
        let help = "  --a <x>   first\n            more a\n  --ab      second\n  --c       third\n";
        assert_eq!(
            help_without(help, "--a"),
            "  --ab      second\n  --c       third\n"
        );
    }
}
