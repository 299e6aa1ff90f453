//! Segments: the diff of each span, its files and their flags.

use super::*;

// Segments: the diff of each span, its files and their flags.
// ---------------------------------------------------------------------------------------------

/// Why a file deserves a second look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Flag {
    Configuration,
    Lockfile,
    Permissions,
    Generated,
    OutsideScope,
}

impl Flag {
    pub(super) const ALL: [Flag; 5] = [
        Flag::Configuration,
        Flag::Lockfile,
        Flag::Permissions,
        Flag::Generated,
        Flag::OutsideScope,
    ];

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Flag::Configuration => "configuration",
            Flag::Lockfile => "lockfile",
            Flag::Permissions => "permissions",
            Flag::Generated => "generated",
            Flag::OutsideScope => "outside-scope",
        }
    }
}

/// One changed file of a segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileChange {
    pub(super) path: String,
    pub(super) old_path: Option<String>,
    pub(super) status: &'static str,
    /// Lines added and removed; `None` for a binary file.
    pub(super) lines: Option<(u64, u64)>,
    pub(super) old_mode: Option<String>,
    pub(super) new_mode: Option<String>,
    /// The new blob, when there is one to read.
    pub(super) new_blob: Option<String>,
    pub(super) flags: Vec<Flag>,
}

impl FileChange {
    pub(super) fn json(&self) -> Value {
        json!({
            "path": self.path,
            "oldPath": self.old_path,
            "status": self.status,
            "added": self.lines.map(|l| l.0),
            "removed": self.lines.map(|l| l.1),
            "binary": self.lines.is_none(),
            "oldMode": self.old_mode,
            "newMode": self.new_mode,
            "flags": self.flags.iter().map(|f| f.as_str()).collect::<Vec<_>>(),
        })
    }
}

/// What the segment's note says is in scope.
pub(super) struct Scope {
    pub(super) note: Option<Utf8PathBuf>,
    /// Repository-relative paths; empty when the scope is unknown.
    pub(super) paths: Vec<String>,
    /// Why the scope is unknown.
    pub(super) unknown: Option<String>,
}

pub(super) struct Segment {
    pub(super) index: usize,
    pub(super) owner: AgentRef,
    pub(super) handoff: Option<String>,
    pub(super) from: String,
    pub(super) to: Option<String>,
    pub(super) scope: Scope,
    pub(super) files: Vec<FileChange>,
}

impl Segment {
    pub(super) fn totals(&self) -> (usize, u64, u64, usize) {
        let added = self.files.iter().filter_map(|f| f.lines).map(|l| l.0).sum();
        let removed = self.files.iter().filter_map(|f| f.lines).map(|l| l.1).sum();
        let binary = self.files.iter().filter(|f| f.lines.is_none()).count();
        (self.files.len(), added, removed, binary)
    }
}

pub(super) fn segment(
    git: &Git,
    index: usize,
    span: &Span<'_>,
    notes: &[Utf8PathBuf],
) -> Result<Segment, String> {
    let mut files = match &span.to {
        Some(to) => {
            let raw = stdout(
                git,
                &["diff-tree", "-r", "-M", "-z", "--raw", &span.from, to],
            )?;
            let numstat = stdout(
                git,
                &["diff-tree", "-r", "-M", "-z", "--numstat", &span.from, to],
            )?;
            join(&raw, &numstat)
        }
        None => {
            let index = git.private_index("attribute").map_err(String::from)?;
            if git.commit_id("HEAD").is_some() {
                stdout(index.git(), &["read-tree", "HEAD"])?;
            }
            stdout(index.git(), &["add", "-A"])?;
            let raw = stdout(
                index.git(),
                &["diff-index", "--cached", "-r", "-M", "-z", &span.from],
            )?;
            let numstat = stdout(
                index.git(),
                &[
                    "diff-index",
                    "--cached",
                    "-r",
                    "-M",
                    "-z",
                    "--numstat",
                    &span.from,
                ],
            )?;
            // Notes written inside the worktree are handoff's, not anybody's work.
            let mut files = join(&raw, &numstat);
            files.retain(|f| !notes.contains(&git.root().join(&f.path)));
            files
        }
    };
    let scope = scope(span.handoff, git.root(), index);
    let headers = headers(
        git,
        files
            .iter()
            .filter_map(|f| f.lines.is_some().then_some(f.new_blob.as_deref()).flatten()),
    )?;
    for f in &mut files {
        let generated = f
            .new_blob
            .as_ref()
            .and_then(|b| headers.get(b))
            .is_some_and(|h| says_generated(h));
        f.flags = flags(f, generated, &scope);
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Segment {
        index,
        owner: span.owner.clone(),
        handoff: span.handoff.map(|h| h.id.to_string()),
        from: span.from.clone(),
        to: span.to.clone(),
        scope,
        files,
    })
}

pub(super) fn flags(f: &FileChange, generated: bool, scope: &Scope) -> Vec<Flag> {
    let mut flags = Vec::new();
    if is_configuration(&f.path) || f.old_path.as_deref().is_some_and(is_configuration) {
        flags.push(Flag::Configuration);
    }
    if is_lockfile(&f.path) {
        flags.push(Flag::Lockfile);
    }
    if mode_changed(f.old_mode.as_deref(), f.new_mode.as_deref()) {
        flags.push(Flag::Permissions);
    }
    if generated || is_generated_path(&f.path) {
        flags.push(Flag::Generated);
    }
    if scope.unknown.is_none() && !in_scope(&f.path, &scope.paths) {
        flags.push(Flag::OutsideScope);
    }
    flags
}

/// A mode change of an existing file, or a new file that is executable.
pub(super) fn mode_changed(old: Option<&str>, new: Option<&str>) -> bool {
    match (old, new) {
        (Some(old), Some(new)) => old != new,
        (None, Some(new)) => new == "100755",
        _ => false,
    }
}

pub(super) fn is_configuration(path: &str) -> bool {
    const DIRS: [&str; 10] = [
        ".claude",
        ".codex",
        ".cursor",
        ".opencode",
        ".kiro",
        ".gemini",
        ".circleci",
        ".buildkite",
        ".husky",
        ".woodpecker",
    ];
    const FILES: [&str; 22] = [
        "AGENTS.md",
        "CLAUDE.md",
        "CLAUDE.local.md",
        "GEMINI.md",
        ".mcp.json",
        "opencode.json",
        "opencode.jsonc",
        ".cursorrules",
        ".windsurfrules",
        ".gitlab-ci.yml",
        ".travis.yml",
        "azure-pipelines.yml",
        "bitbucket-pipelines.yml",
        "appveyor.yml",
        ".appveyor.yml",
        ".drone.yml",
        ".woodpecker.yml",
        "Jenkinsfile",
        "cloudbuild.yaml",
        ".pre-commit-config.yaml",
        "lefthook.yml",
        "codecov.yml",
    ];
    let parts: Vec<&str> = path.split('/').collect();
    let (name, dirs) = match parts.split_last() {
        Some((name, dirs)) => (*name, dirs),
        None => return false,
    };
    dirs.iter().any(|d| DIRS.contains(d))
        || FILES.contains(&name)
        || path.starts_with(".github/workflows/")
        || path.starts_with(".github/actions/")
        || path == ".github/copilot-instructions.md"
        || path.starts_with(".gitlab/ci/")
}

pub(super) fn is_lockfile(path: &str) -> bool {
    const NAMES: [&str; 27] = [
        "Cargo.lock",
        "package-lock.json",
        "npm-shrinkwrap.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "bun.lockb",
        "bun.lock",
        "deno.lock",
        "poetry.lock",
        "uv.lock",
        "Pipfile.lock",
        "pdm.lock",
        "pixi.lock",
        "conda-lock.yml",
        "Gemfile.lock",
        "go.sum",
        "go.work.sum",
        "composer.lock",
        "flake.lock",
        "mix.lock",
        "pubspec.lock",
        "Podfile.lock",
        "Package.resolved",
        "packages.lock.json",
        "gradle.lockfile",
        "stack.yaml.lock",
        ".terraform.lock.hcl",
    ];
    let name = path.rsplit('/').next().unwrap_or(path);
    NAMES.contains(&name)
}

pub(super) fn is_generated_path(path: &str) -> bool {
    const DIRS: [&str; 8] = [
        "dist",
        "build",
        "target",
        "node_modules",
        "__pycache__",
        ".next",
        ".nuxt",
        ".svelte-kit",
    ];
    const SUFFIXES: [&str; 12] = [
        ".min.js",
        ".min.css",
        ".min.mjs",
        ".pb.go",
        ".pb.cc",
        ".pb.h",
        "_pb2.py",
        "_pb2_grpc.py",
        ".g.dart",
        ".freezed.dart",
        ".pyc",
        ".js.map",
    ];
    let parts: Vec<&str> = path.split('/').collect();
    let Some((name, dirs)) = parts.split_last() else {
        return false;
    };
    let stem = name.split('.').next().unwrap_or(name);
    dirs.iter().any(|d| DIRS.contains(d))
        || SUFFIXES.iter().any(|s| name.ends_with(s))
        || (stem.ends_with("_generated") && name.len() > stem.len())
        || name.contains(".generated.")
}

/// Whether the first five lines of a file say it is generated.
pub(super) fn says_generated(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    text.lines()
        .take(5)
        .any(|l| l.contains("@generated") || l.contains("DO NOT EDIT"))
}

/// Joins `--raw -z` and `--numstat -z` output of the same diff by path.
pub(super) fn join(raw: &[u8], numstat: &[u8]) -> Vec<FileChange> {
    let mut lines: BTreeMap<String, Option<(u64, u64)>> = BTreeMap::new();
    let mut tokens = raw_tokens(numstat);
    while let Some(token) = tokens.next() {
        let mut fields = token.splitn(3, '\t');
        let (Some(added), Some(removed), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let path = if path.is_empty() {
            // A rename: the source and the destination follow.
            let _ = tokens.next();
            tokens.next().unwrap_or_default()
        } else {
            path.to_owned()
        };
        let counts = match (added.parse(), removed.parse()) {
            (Ok(a), Ok(r)) => Some((a, r)),
            _ => None,
        };
        lines.insert(path, counts);
    }

    let mut files = Vec::new();
    let mut tokens = raw_tokens(raw);
    while let Some(meta) = tokens.next() {
        let Some(meta) = meta.strip_prefix(':') else {
            continue;
        };
        let fields: Vec<&str> = meta.split(' ').collect();
        let [old_mode, new_mode, _old_blob, new_blob, status] = fields[..] else {
            continue;
        };
        let letter = status.chars().next().unwrap_or('X');
        let (old_path, path) = if matches!(letter, 'R' | 'C') {
            let old = tokens.next().unwrap_or_default();
            (Some(old), tokens.next().unwrap_or_default())
        } else {
            (None, tokens.next().unwrap_or_default())
        };
        let mode = |m: &str| (!m.trim_start_matches('0').is_empty()).then(|| m.to_owned());
        let blob = new_blob.trim_start_matches('0');
        files.push(FileChange {
            lines: lines.get(&path).copied().flatten(),
            old_path,
            status: match letter {
                'A' => "added",
                'M' => "modified",
                'D' => "deleted",
                'R' => "renamed",
                'C' => "copied",
                'T' => "type-changed",
                'U' => "unmerged",
                _ => "unknown",
            },
            old_mode: mode(old_mode),
            new_mode: mode(new_mode),
            new_blob: (!blob.is_empty() && matches!(new_mode, "100644" | "100755"))
                .then(|| new_blob.to_owned()),
            path,
            flags: Vec::new(),
        });
    }
    files
}

pub(super) fn raw_tokens(bytes: &[u8]) -> impl Iterator<Item = String> + '_ {
    bytes
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
}

// ---------------------------------------------------------------------------------------------
