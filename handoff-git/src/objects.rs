//! The object store, judged by ids and contents rather than by files.
//!
//! A commit means the content its objects hold: rewriting a loose object file (or a pack) that
//! the refs reach changes what `HEAD:main.rs` is without moving a ref, and the next checkout
//! writes it. Git's housekeeping, on the other hand, moves the same objects from loose files
//! into packs and from packs into new ones, which is no one's change.
//!
//! So a fingerprint records the stat data of the object store's files ([`object_files`]), and
//! a fingerprint taken after it re-verifies only what differs ([`verify`]): a loose object file
//! that is new or changed must hold the object its name says; a pack that is new or changed must
//! hold, for every id in its index, content that hashes to that id; and when a pack is gone, or
//! a loose object that is not found anywhere now, every object the refs reached before must
//! still be there. What fails is an
//! entry of the fingerprint (`.git/objects/…`), so the two fingerprints differ.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use gix::ObjectId;
use gix::bstr::ByteSlice;
use handoff_core::{Baseline, WorkspaceError};

/// The state of a loose object file that does not hold the object its name says.
const MISMATCH: &str = "object content does not match its id";
/// The state of a pack holding content that does not match an id of its index.
const BAD_PACK: &str = "pack content does not match its index";
/// The state of an object the refs reached before that is gone.
const MISSING: &str = "object reachable before is missing";

/// The stat data of the object store's files, keyed by their path below `objects`: loose
/// objects (`ab/cdef…`) and packs with their indexes (`pack/pack-….pack`, `….idx`).
pub(crate) fn object_files(objects: &Path) -> Result<BTreeMap<String, String>, WorkspaceError> {
    let io = |path: &Path| {
        let path = camino::Utf8PathBuf::from(path.to_string_lossy().into_owned());
        move |source| WorkspaceError::Io { path, source }
    };
    let mut out = BTreeMap::new();
    let top = match std::fs::read_dir(objects) {
        Ok(top) => top,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(err) => return Err(io(objects)(err)),
    };
    for item in top {
        let item = item.map_err(io(objects))?;
        let name = item.file_name();
        let Some(name) = name.to_str() else { continue };
        let loose = name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit());
        if !loose && name != "pack" {
            continue;
        }
        let dir = item.path();
        let files = match std::fs::read_dir(&dir) {
            Ok(files) => files,
            Err(err) if is_gone(&err) => continue,
            Err(err) => return Err(io(&dir)(err)),
        };
        for file in files {
            let file = file.map_err(io(&dir))?;
            let file_name = file.file_name();
            let Some(file_name) = file_name.to_str() else {
                continue;
            };
            let wanted = if loose {
                file_name.bytes().all(|b| b.is_ascii_hexdigit())
            } else {
                file_name.ends_with(".pack") || file_name.ends_with(".idx")
            };
            if !wanted {
                continue;
            }
            let meta = match file.metadata() {
                Ok(meta) => meta,
                Err(err) if is_gone(&err) => continue,
                Err(err) => return Err(io(&file.path())(err)),
            };
            out.insert(format!("{name}/{file_name}"), stamp(&meta));
        }
    }
    Ok(out)
}

/// The object ids `entries` (a fingerprint's `.git/…` entries) name as HEAD or refs, sorted.
pub(crate) fn tips(entries: &[(String, String)]) -> Vec<String> {
    let mut tips: BTreeSet<String> = BTreeSet::new();
    for (key, state) in entries {
        if !key.starts_with(".git/") {
            continue;
        }
        let id = state
            .strip_prefix("ref ")
            .or_else(|| state.strip_prefix("detached "));
        if let Some(id) = id.filter(|id| ObjectId::from_hex(id.as_bytes()).is_ok()) {
            tips.insert(id.to_owned());
        }
    }
    tips.into_iter().collect()
}

/// The entries (key, state) for what in `repo`'s object store is not as `baseline` had it;
/// `now` is the store's files as [`object_files`] reads them now.
pub(crate) fn verify(
    repo: &gix::Repository,
    baseline: &Baseline,
    now: &BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, WorkspaceError> {
    let kind = repo.object_hash();
    let objects = repo.common_dir().join("objects");
    let before = &baseline.object_files;
    let changed = |key: &String, stamp: &String| before.get(key) != Some(stamp);
    let mut out = Vec::new();

    // New or changed loose objects hold what their names say.
    let loose = gix::odb::loose::Store::at(&objects, kind);
    let mut buf = Vec::new();
    for (key, _) in now
        .iter()
        .filter(|(key, stamp)| !key.starts_with("pack/") && changed(key, stamp))
    {
        let Ok(id) = ObjectId::from_hex(key.replace('/', "").as_bytes()) else {
            continue;
        };
        let holds = match loose.try_find(&id, &mut buf) {
            Ok(Some(data)) => gix::objs::compute_hash(kind, data.kind, data.data).ok(),
            // Gone since it was listed.
            Ok(None) => Some(id),
            Err(_) => None,
        };
        if holds != Some(id) {
            out.push((format!(".git/objects/{key}"), MISMATCH.to_owned()));
        }
    }

    // New or changed packs hold what their indexes say.
    let packs: BTreeSet<&str> = now
        .iter()
        .filter(|(key, stamp)| key.starts_with("pack/") && changed(key, stamp))
        .filter_map(|(key, _)| {
            key.strip_suffix(".pack")
                .or_else(|| key.strip_suffix(".idx"))
        })
        .collect();
    for stem in packs {
        if !now.contains_key(&format!("{stem}.pack")) || !now.contains_key(&format!("{stem}.idx")) {
            // A pack being written, or its index: git uses neither alone.
            continue;
        }
        if !pack_is_sound(&objects.join(format!("{stem}.idx")), kind) {
            out.push((format!(".git/objects/{stem}.pack"), BAD_PACK.to_owned()));
        }
    }

    // When files went away, what the refs reached is still there. Loose objects that are still
    // found (packed by housekeeping) need no walk; a pack that went away, or a loose object
    // that is nowhere now, does: whether the refs reached what it held is only known by
    // walking from them.
    let mut gone = before.keys().filter(|key| !now.contains_key(*key));
    let lost = gone.any(|key| {
        key.starts_with("pack/")
            || !ObjectId::from_hex(key.replace('/', "").as_bytes())
                .is_ok_and(|id| repo.has_object(id))
    });
    if lost && !partial_clone(repo) {
        for id in missing_reachable(repo, &baseline.tips)? {
            let hex = id.to_hex().to_string();
            out.push((
                format!(".git/objects/{}/{}", &hex[..2], &hex[2..]),
                MISSING.to_owned(),
            ));
        }
    }
    Ok(out)
}

/// Whether every object of the pack with index `idx` hashes to the id its index gives it.
fn pack_is_sound(idx: &Path, kind: gix::hash::Kind) -> bool {
    let Ok(bundle) = gix::odb::pack::Bundle::at(idx, kind) else {
        return false;
    };
    let mut inflate = gix::zlib::Inflate::default();
    let mut buf = Vec::new();
    let mut cache = DeltaBases::default();
    for i in 0..bundle.index.num_objects() {
        let id = bundle.index.oid_at_index(i).to_owned();
        let sound = bundle
            .get_object_by_index(i, &mut buf, &mut inflate, &mut cache)
            .ok()
            .and_then(|(data, _)| gix::objs::compute_hash(kind, data.kind, data.data).ok())
            == Some(id);
        if !sound {
            return false;
        }
    }
    true
}

/// The decoded bases of a pack's delta chains, kept while a pack is verified so that each base
/// is decoded once rather than once per object built on it; at most [`DeltaBases::LIMIT`]
/// bytes (all dropped when full).
#[derive(Default)]
struct DeltaBases {
    bases: std::collections::HashMap<u64, (gix::objs::Kind, Vec<u8>)>,
    bytes: usize,
}

impl DeltaBases {
    const LIMIT: usize = 64 << 20;
}

impl gix::odb::pack::cache::DecodeEntry for DeltaBases {
    fn put(&mut self, _pack: u32, offset: u64, data: &[u8], kind: gix::objs::Kind, _: usize) {
        if data.len() > Self::LIMIT / 4 {
            return;
        }
        if self.bytes + data.len() > Self::LIMIT {
            self.bases.clear();
            self.bytes = 0;
        }
        self.bytes += data.len();
        if let Some((_, old)) = self.bases.insert(offset, (kind, data.to_vec())) {
            self.bytes -= old.len();
        }
    }

    fn get(
        &mut self,
        _pack: u32,
        offset: u64,
        out: &mut Vec<u8>,
    ) -> Option<(gix::objs::Kind, usize)> {
        let (kind, data) = self.bases.get(&offset)?;
        out.clear();
        out.extend_from_slice(data);
        Some((*kind, data.len()))
    }
}

/// A partial clone lacks objects by design: whether `repo` is one.
fn partial_clone(repo: &gix::Repository) -> bool {
    let config = repo.config_snapshot();
    config.string("extensions.partialClone").is_some()
        || config
            .plumbing()
            .sections_by_name("remote")
            .into_iter()
            .flatten()
            .any(|section| section.value("promisor").is_some())
}

/// The objects reachable from `tips` (hex ids) that `repo` no longer has, sorted. History
/// below a shallow boundary is not followed, and a submodule's commit is not looked for.
fn missing_reachable(
    repo: &gix::Repository,
    tips: &[String],
) -> Result<Vec<ObjectId>, WorkspaceError> {
    let kind = repo.object_hash();
    let shallow: HashSet<ObjectId> = std::fs::read(repo.common_dir().join("shallow"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| ObjectId::from_hex(line.trim()).ok())
        .collect();
    let mut missing = BTreeSet::new();
    let mut seen: HashSet<ObjectId> = HashSet::new();
    let mut todo: Vec<ObjectId> = tips
        .iter()
        .filter_map(|tip| ObjectId::from_hex(tip.as_bytes()).ok())
        .collect();
    while let Some(id) = todo.pop() {
        if !seen.insert(id) {
            continue;
        }
        let object = match repo.try_find_object(id) {
            Ok(Some(object)) => object,
            Ok(None) | Err(_) => {
                missing.insert(id);
                continue;
            }
        };
        let data = &object.data;
        match object.kind {
            gix::object::Kind::Commit => {
                if let Ok(commit) = gix::objs::CommitRef::from_bytes(data, kind) {
                    todo.push(commit.tree());
                    if !shallow.contains(&id) {
                        todo.extend(commit.parents());
                    }
                }
            }
            gix::object::Kind::Tree => {
                if let Ok(tree) = gix::objs::TreeRef::from_bytes(data, kind) {
                    for entry in tree.entries {
                        if entry.mode.is_commit() {
                            continue;
                        }
                        if entry.mode.is_blob() || entry.mode.is_link() {
                            let blob = entry.oid.to_owned();
                            if seen.insert(blob) && !repo.has_object(blob) {
                                missing.insert(blob);
                            }
                        } else {
                            todo.push(entry.oid.to_owned());
                        }
                    }
                }
            }
            gix::object::Kind::Tag => {
                if let Ok(tag) = gix::objs::TagRef::from_bytes(data, kind) {
                    todo.push(tag.target());
                }
            }
            gix::object::Kind::Blob => {}
        }
    }
    Ok(missing.into_iter().collect())
}

fn stamp(meta: &std::fs::Metadata) -> String {
    format!(
        "{:o} {} {} {}.{} {}.{}",
        meta.mode(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    )
}

fn is_gone(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}
