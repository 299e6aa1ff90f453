//! The mailbox: the one channel between a worker and its root's supervisor.
//!
//! Every node that may ask for advice (the root's worker, and each adviser that may ask
//! further) has a mailbox of its own in the supervisor's private directory: `in/`, which the
//! worker's sandbox lets it write, and `out/`, which it may only read. There is no socket and
//! no network: the worker's sandbox opens one directory for writing, nothing else.
//!
//! A worker's `handoff advice` writes its [`NestedRequest`](super::NestedRequest) under a
//! scratch name in `in/` (`.<nonce>.tmp`), renames it to `<nonce>.json` and waits, with
//! inotify, for `out/<nonce>.json`. Interrupted (SIGINT, SIGTERM) or out of time, it withdraws
//! the request by writing `in/<nonce>.cancel`; the supervisor then cancels that adviser.
//!
//! The supervisor watches `in/` with inotify. It opens each entry relative to the directory
//! (`openat` with `O_NOFOLLOW | O_NONBLOCK`: a symbolic link is refused, a FIFO cannot hold it
//! up), checks it with `fstat` (a regular file of this user's, with one link, at most
//! [`MAX_REQUEST_BYTES`]), reads it and removes it. Its answer is written under a scratch name
//! in `out/` and linked to `out/<nonce>.json`, never over an existing file. Names are checked
//! before anything is built from them: a nonce is 1 to [`MAX_NONCE_BYTES`] characters of
//! `[A-Za-z0-9_-]`; whatever else appears in `in/` is removed and refused, but hidden names
//! (`.…`), which are never opened: a writer's scratch files, and the mount points a sandbox
//! may put in a writable directory (Codex protects `.git`, `.agents`… in each).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};

use camino::{Utf8Path, Utf8PathBuf};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{Mode, SFlag, fstatat};
use nix::unistd::{UnlinkatFlags, linkat, unlinkat};

use super::token::MAX_NONCE_BYTES;
use super::wire::{MAX_REPLY_BYTES, MAX_REQUEST_BYTES};
use crate::redact::quote;

/// The directory of a mailbox the worker writes its requests (and withdrawals) to.
pub const INBOX: &str = "in";
/// The directory of a mailbox the supervisor writes its answers to; read-only to the worker.
pub const OUTBOX: &str = "out";

const REQUEST_SUFFIX: &str = ".json";
const CANCEL_SUFFIX: &str = ".cancel";
const SCRATCH_SUFFIX: &str = ".tmp";

/// Whether `nonce` may name a mailbox entry: 1 to [`MAX_NONCE_BYTES`] characters of
/// `[A-Za-z0-9_-]` (no `/`, no `.`, so no `..`).
pub fn nonce_ok(nonce: &str) -> bool {
    !nonce.is_empty()
        && nonce.len() <= MAX_NONCE_BYTES
        && nonce
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// What a name in `in/` stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EntryName {
    /// `<nonce>.json`: a request.
    Request(String),
    /// `<nonce>.cancel`: the request `<nonce>` is withdrawn.
    Cancel(String),
    /// `.…`: hidden — a writer's scratch file (`.<nonce>.tmp`), not taken until renamed, or
    /// what a sandbox puts there (Codex mounts over `.git`, `.agents`… in every writable
    /// directory). Never opened, never removed: it goes with the mailbox.
    Hidden,
    /// Anything else.
    Invalid,
}

pub(crate) fn classify(name: &OsStr) -> EntryName {
    let Some(name) = name.to_str() else {
        return EntryName::Invalid;
    };
    if name.starts_with('.') {
        return EntryName::Hidden;
    }
    if let Some(nonce) = name.strip_suffix(REQUEST_SUFFIX).filter(|n| nonce_ok(n)) {
        return EntryName::Request(nonce.to_owned());
    }
    if let Some(nonce) = name.strip_suffix(CANCEL_SUFFIX).filter(|n| nonce_ok(n)) {
        return EntryName::Cancel(nonce.to_owned());
    }
    EntryName::Invalid
}

/// The name of the request `nonce` in `in/`, and of its answer in `out/`.
pub(crate) fn request_name(nonce: &str) -> String {
    format!("{nonce}{REQUEST_SUFFIX}")
}

/// The name that withdraws the request `nonce`.
pub(crate) fn cancel_name(nonce: &str) -> String {
    format!("{nonce}{CANCEL_SUFFIX}")
}

/// What the supervisor made of one entry of `in/`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Nothing to do: already taken, a writer's scratch file, or a file still being written.
    Nothing,
    /// A request, read and removed.
    Request { nonce: String, body: Vec<u8> },
    /// The request `nonce` is withdrawn.
    Cancel { nonce: String },
    /// Removed unread or unusable: why, and the nonce to answer under when its name gave one.
    Refused { nonce: Option<String>, why: String },
}

/// One node's mailbox, as the supervisor holds it: its directories open, so that every name is
/// resolved relative to them.
#[derive(Debug)]
pub(crate) struct Mailbox {
    path: Utf8PathBuf,
    inbox: OwnedFd,
    outbox: OwnedFd,
}

fn open_dir(path: &Utf8Path) -> io::Result<OwnedFd> {
    Ok(std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW).bits())
        .open(path)?
        .into())
}

impl Mailbox {
    /// Makes a new mailbox (`<parent>/mb-<random>/{in,out}`, each 0700) in `parent`, a private
    /// directory of the supervisor's.
    pub(crate) fn create(parent: &Utf8Path) -> io::Result<Mailbox> {
        let path = parent.join(format!("mb-{}", uuid::Uuid::new_v4().simple()));
        for dir in [path.clone(), path.join(INBOX), path.join(OUTBOX)] {
            std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(Mailbox {
            inbox: open_dir(&path.join(INBOX))?,
            outbox: open_dir(&path.join(OUTBOX))?,
            path,
        })
    }

    /// The mailbox directory.
    pub(crate) fn path(&self) -> &Utf8Path {
        &self.path
    }

    /// Its `in/`.
    pub(crate) fn inbox_path(&self) -> Utf8PathBuf {
        self.path.join(INBOX)
    }

    /// The names now in `in/` (to catch up after the watch lost events).
    pub(crate) fn names(&self) -> Vec<OsString> {
        std::fs::read_dir(self.inbox_path())
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default()
    }

    /// Removes the entry `name` of `in/`, whatever it is, never following a link; whether
    /// there was one.
    fn discard(&self, name: &OsStr) -> bool {
        match unlinkat(&self.inbox, name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) => true,
            Err(Errno::ENOENT) => false,
            Err(Errno::EISDIR | Errno::EPERM) => {
                // A directory: it goes with what it holds (links are removed, not followed).
                let _ = std::fs::remove_dir_all(
                    self.inbox_path()
                        .join(Utf8Path::new(name.to_str().unwrap_or_default())),
                );
                true
            }
            Err(_) => true,
        }
    }

    /// Takes the entry `name` of `in/` (see the module documentation). `created`: the event
    /// was its creation, so a regular file may still be being written (it is taken when it is
    /// closed or renamed in).
    pub(crate) fn take(&self, name: &OsStr, created: bool) -> Taken {
        let nonce = match classify(name) {
            EntryName::Hidden => return Taken::Nothing,
            EntryName::Invalid => {
                if !self.discard(name) {
                    return Taken::Nothing;
                }
                return Taken::Refused {
                    nonce: None,
                    why: format!(
                        "the mailbox entry {:?} is neither <nonce>.json nor <nonce>.cancel \
                         (a nonce is 1 to {MAX_NONCE_BYTES} characters of A-Z, a-z, 0-9, - and _)",
                        quote(&name.to_string_lossy())
                    ),
                };
            }
            EntryName::Cancel(nonce) => {
                return if self.discard(name) {
                    Taken::Cancel { nonce }
                } else {
                    Taken::Nothing
                };
            }
            EntryName::Request(nonce) => nonce,
        };
        if created {
            match fstatat(&self.inbox, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st)
                    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG =>
                {
                    return Taken::Nothing;
                }
                Err(_) => return Taken::Nothing,
                Ok(_) => {}
            }
        }
        let refuse = |why: String| {
            self.discard(name);
            Taken::Refused {
                nonce: Some(nonce.clone()),
                why,
            }
        };
        let flags = OFlag::O_RDONLY
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_CLOEXEC
            | OFlag::O_NOCTTY;
        let fd = match openat(&self.inbox, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::ENOENT) => return Taken::Nothing,
            Err(Errno::ELOOP) => return refuse("the request is a symbolic link".into()),
            Err(e) => return refuse(format!("the request cannot be opened: {e}")),
        };
        let file = File::from(fd);
        let meta = match file.metadata() {
            Ok(m) => m,
            Err(e) => return refuse(format!("the request cannot be examined: {e}")),
        };
        if !meta.file_type().is_file() {
            return refuse(format!(
                "the request is not a regular file but {}",
                kind(&meta)
            ));
        }
        if meta.nlink() != 1 {
            return refuse("the request file has other links".into());
        }
        if meta.uid() != nix::unistd::geteuid().as_raw() {
            return refuse("the request file belongs to another user".into());
        }
        let too_big = || format!("the request exceeds {MAX_REQUEST_BYTES} bytes");
        if meta.len() > MAX_REQUEST_BYTES as u64 {
            return refuse(too_big());
        }
        let mut body = Vec::new();
        if let Err(e) = file
            .take(MAX_REQUEST_BYTES as u64 + 1)
            .read_to_end(&mut body)
        {
            return refuse(format!("the request cannot be read: {e}"));
        }
        if body.len() > MAX_REQUEST_BYTES {
            return refuse(too_big());
        }
        self.discard(name);
        Taken::Request { nonce, body }
    }

    /// Writes `body` as `out/<nonce>.json`: complete under a scratch name first, then linked
    /// to its name, never over an existing file.
    pub(crate) fn answer(&self, nonce: &str, body: &[u8]) -> io::Result<()> {
        if !nonce_ok(nonce) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a mailbox nonce",
            ));
        }
        let scratch = format!(".{nonce}.{}{SCRATCH_SUFFIX}", uuid::Uuid::new_v4().simple());
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(
            &self.outbox,
            scratch.as_str(),
            flags,
            Mode::from_bits_truncate(0o600),
        )?;
        let linked = File::from(fd).write_all(body).and_then(|()| {
            linkat(
                &self.outbox,
                scratch.as_str(),
                &self.outbox,
                request_name(nonce).as_str(),
                AtFlags::empty(),
            )
            .map_err(io::Error::from)
        });
        let _ = unlinkat(&self.outbox, scratch.as_str(), UnlinkatFlags::NoRemoveDir);
        linked
    }

    /// Removes the mailbox and everything in it. A watch on its directories reports them gone
    /// once this value is dropped too (it holds them open).
    pub(crate) fn remove(&self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "something else"
    }
}

// ------------------------------------------------------------------------------------------
// The client's side.
// ------------------------------------------------------------------------------------------

/// Checks that `mailbox` is a mailbox of this user's: a directory (not a link) owned by the
/// current user and closed to others, holding the directories `in/` and `out/`, both the
/// user's too.
pub(crate) fn check(mailbox: &Utf8Path) -> Result<(), String> {
    let uid = nix::unistd::geteuid().as_raw();
    let usable = |p: &Utf8Path, private: bool| {
        std::fs::symlink_metadata(p)
            .is_ok_and(|m| m.is_dir() && m.uid() == uid && (!private || m.mode() & 0o077 == 0))
    };
    if !usable(mailbox, true)
        || !usable(&mailbox.join(INBOX), false)
        || !usable(&mailbox.join(OUTBOX), false)
    {
        return Err(format!(
            "{mailbox} is not a supervisor mailbox of this user (a private directory holding in/ and out/)"
        ));
    }
    Ok(())
}

/// Writes `body` to `in/<name>` the way a reader never sees it half-written: under a scratch
/// name first, then renamed.
pub(crate) fn post(mailbox: &Utf8Path, nonce: &str, name: &str, body: &[u8]) -> io::Result<()> {
    let inbox = mailbox.join(INBOX);
    let scratch = inbox.join(format!(
        ".{nonce}.{}{SCRATCH_SUFFIX}",
        name.replace('.', "_")
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&scratch)
        .and_then(|mut f| f.write_all(body));
    let moved = written.and_then(|()| std::fs::rename(&scratch, inbox.join(name)));
    if moved.is_err() {
        let _ = std::fs::remove_file(&scratch);
    }
    moved
}

/// The answer `out/<nonce>.json`, once it is there: a regular file of at most
/// [`MAX_REPLY_BYTES`] (plus its newline).
pub(crate) fn read_answer(mailbox: &Utf8Path, nonce: &str) -> Result<Option<Vec<u8>>, String> {
    let path = mailbox.join(OUTBOX).join(request_name(nonce));
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(&path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open the supervisor's answer {path}: {e}")),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot examine the supervisor's answer {path}: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "the supervisor's answer {path} is not a regular file"
        ));
    }
    let mut body = Vec::new();
    file.take(MAX_REPLY_BYTES as u64 + 2)
        .read_to_end(&mut body)
        .map_err(|e| format!("cannot read the supervisor's answer {path}: {e}"))?;
    Ok(Some(body))
}

// ------------------------------------------------------------------------------------------
// Watching directories.
// ------------------------------------------------------------------------------------------

pub(crate) use crate::platform::watch::{Watcher, Wd};

#[cfg(test)]
mod tests {
    use super::*;

    fn mailbox() -> (tempfile::TempDir, Mailbox) {
        let dir = tempfile::tempdir().unwrap();
        let parent = Utf8Path::from_path(dir.path()).unwrap().to_owned();
        let mb = Mailbox::create(&parent).unwrap();
        (dir, mb)
    }

    #[test]
    fn names_are_classified_before_anything_is_built_from_them() {
        let c = |s: &str| classify(OsStr::new(s));
        assert_eq!(c("ab-1_Z.json"), EntryName::Request("ab-1_Z".into()));
        assert_eq!(c("n1.cancel"), EntryName::Cancel("n1".into()));
        for hidden in [
            ".n1.tmp",
            ".n1.n1_json.tmp",
            ".git",
            "..json",
            ".json",
            "..",
        ] {
            assert_eq!(c(hidden), EntryName::Hidden, "{hidden}");
        }
        for bad in [
            "a..b.json",
            "x.txt",
            "x",
            "a b.json",
            "n1.json.cancel",
            "é.json",
            "n1/..json",
        ] {
            assert_eq!(c(bad), EntryName::Invalid, "{bad}");
        }
        assert_eq!(
            c(&format!("{}.json", "a".repeat(128))),
            EntryName::Request("a".repeat(128))
        );
        assert_eq!(c(&format!("{}.json", "a".repeat(129))), EntryName::Invalid);
    }

    #[test]
    fn a_mailbox_is_private_and_goes_when_removed() {
        let (_dir, mb) = mailbox();
        for d in [
            mb.path().to_owned(),
            mb.path().join(INBOX),
            mb.path().join(OUTBOX),
        ] {
            let meta = std::fs::symlink_metadata(&d).unwrap();
            assert!(meta.is_dir());
            assert_eq!(meta.mode() & 0o777, 0o700, "{d}");
            assert_eq!(meta.uid(), nix::unistd::geteuid().as_raw());
        }
        check(mb.path()).unwrap();
        mb.remove();
        assert!(!mb.path().exists());
        assert!(check(mb.path()).is_err());
    }

    #[test]
    fn a_posted_request_is_taken_once_and_answered_once() {
        let (_dir, mb) = mailbox();
        post(mb.path(), "n1", "n1.json", b"{}").unwrap();
        // Only the request is left in in/: the scratch name was renamed.
        assert_eq!(mb.names(), vec![OsString::from("n1.json")]);
        assert_eq!(
            mb.take(OsStr::new("n1.json"), false),
            Taken::Request {
                nonce: "n1".into(),
                body: b"{}".to_vec()
            }
        );
        assert!(mb.names().is_empty());
        assert_eq!(mb.take(OsStr::new("n1.json"), false), Taken::Nothing);
        assert_eq!(read_answer(mb.path(), "n1").unwrap(), None);
        mb.answer("n1", b"first\n").unwrap();
        // Never over an answer already there.
        assert!(mb.answer("n1", b"second\n").is_err());
        assert_eq!(read_answer(mb.path(), "n1").unwrap().unwrap(), b"first\n");
        // No scratch file is left behind.
        let out: Vec<_> = std::fs::read_dir(mb.path().join(OUTBOX)).unwrap().collect();
        assert_eq!(out.len(), 1);
        assert!(mb.answer("../x", b"").is_err());
    }

    #[test]
    fn what_is_not_a_small_regular_file_is_refused_and_removed() {
        let (dir, mb) = mailbox();
        let inbox = mb.inbox_path();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "do not read").unwrap();
        std::os::unix::fs::symlink(&secret, inbox.join("link.json")).unwrap();
        nix::unistd::mkfifo(
            inbox.join("fifo.json").as_std_path(),
            Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        std::fs::create_dir(inbox.join("dir.json")).unwrap();
        std::fs::write(inbox.join("dir.json/inner"), "x").unwrap();
        std::fs::write(inbox.join("big.json"), vec![b' '; MAX_REQUEST_BYTES + 1]).unwrap();
        std::fs::write(inbox.join("hard.json"), "{}").unwrap();
        std::fs::hard_link(inbox.join("hard.json"), dir.path().join("other")).unwrap();
        std::fs::write(inbox.join("a..b.json"), "{}").unwrap();
        for (name, words) in [
            ("link.json", "symbolic link"),
            ("fifo.json", "a FIFO"),
            ("dir.json", "a directory"),
            ("big.json", "exceeds"),
            ("hard.json", "other links"),
        ] {
            match mb.take(OsStr::new(name), false) {
                Taken::Refused { nonce, why } => {
                    assert_eq!(nonce.as_deref(), name.strip_suffix(".json"), "{name}");
                    assert!(why.contains(words), "{name}: {why}");
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        match mb.take(OsStr::new("a..b.json"), false) {
            Taken::Refused { nonce: None, .. } => {}
            other => panic!("{other:?}"),
        }
        assert!(mb.names().is_empty(), "{:?}", mb.names());
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "do not read");
        // A regular file just created is left to be written; once closed it is taken.
        std::fs::write(inbox.join("slow.json"), "{}").unwrap();
        assert_eq!(mb.take(OsStr::new("slow.json"), true), Taken::Nothing);
        assert!(matches!(
            mb.take(OsStr::new("slow.json"), false),
            Taken::Request { .. }
        ));
        // A FIFO created is refused at once: nothing will close it.
        nix::unistd::mkfifo(
            inbox.join("f2.json").as_std_path(),
            Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        assert!(matches!(
            mb.take(OsStr::new("f2.json"), true),
            Taken::Refused { .. }
        ));
        // A withdrawal.
        std::fs::write(inbox.join("n1.cancel"), "").unwrap();
        assert_eq!(
            mb.take(OsStr::new("n1.cancel"), false),
            Taken::Cancel { nonce: "n1".into() }
        );
    }

    #[tokio::test]
    async fn the_watcher_sees_a_request_renamed_in() {
        let (_dir, mb) = mailbox();
        let watcher = Watcher::new().unwrap();
        let wd = watcher.watch(&mb.inbox_path()).unwrap();
        post(mb.path(), "n1", "n1.json", b"{}").unwrap();
        let mut names = Vec::new();
        while !names.iter().any(|n: &OsString| n == "n1.json") {
            let events = tokio::time::timeout(std::time::Duration::from_secs(10), watcher.next())
                .await
                .unwrap()
                .unwrap();
            assert!(events.iter().all(|e| e.wd == wd));
            names.extend(events.into_iter().filter_map(|e| e.name));
        }
        // Gone once removed and closed.
        mb.remove();
        drop(mb);
        let events = tokio::time::timeout(std::time::Duration::from_secs(10), watcher.next())
            .await
            .unwrap()
            .unwrap();
        assert!(events.iter().any(|e| e.gone), "{events:?}");
    }
}
