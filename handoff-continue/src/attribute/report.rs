//! The report, as JSON and for a person.

use super::*;

// The report.
// ---------------------------------------------------------------------------------------------

pub(super) struct Report<'a> {
    pub(super) task: &'a Task,
    pub(super) base: &'a Base,
    pub(super) segments: &'a [Segment],
}

/// A provider's share over all its segments.
pub(super) struct Share {
    pub(super) provider: String,
    pub(super) segments: Vec<usize>,
    pub(super) paths: BTreeSet<String>,
    pub(super) added: u64,
    pub(super) removed: u64,
    pub(super) binary: usize,
    pub(super) flags: BTreeMap<Flag, usize>,
}

impl Report<'_> {
    pub(super) fn shares(&self) -> Vec<Share> {
        let mut shares: Vec<Share> = Vec::new();
        for s in self.segments {
            let provider = s.owner.provider.to_string();
            let i = match shares.iter().position(|sh| sh.provider == provider) {
                Some(i) => i,
                None => {
                    shares.push(Share {
                        provider,
                        segments: Vec::new(),
                        paths: BTreeSet::new(),
                        added: 0,
                        removed: 0,
                        binary: 0,
                        flags: BTreeMap::new(),
                    });
                    shares.len() - 1
                }
            };
            let share = &mut shares[i];
            share.segments.push(s.index);
            let (_, added, removed, binary) = s.totals();
            share.added += added;
            share.removed += removed;
            share.binary += binary;
            for f in &s.files {
                share.paths.insert(f.path.clone());
                for flag in &f.flags {
                    *share.flags.entry(*flag).or_default() += 1;
                }
            }
        }
        shares
    }

    pub(super) fn json(&self, checks: Option<Vec<Value>>) -> Value {
        let segments: Vec<Value> = self
            .segments
            .iter()
            .map(|s| {
                let (files, added, removed, binary) = s.totals();
                json!({
                    "index": s.index,
                    "provider": s.owner.provider,
                    "model": s.owner.model,
                    "handoffId": s.handoff,
                    "from": s.from,
                    "to": s.to,
                    "scope": {
                        "known": s.scope.unknown.is_none(),
                        "note": s.scope.note,
                        "paths": s.scope.paths,
                        "reason": s.scope.unknown,
                    },
                    "files": s.files.iter().map(FileChange::json).collect::<Vec<_>>(),
                    "totals": {
                        "files": files,
                        "added": added,
                        "removed": removed,
                        "binary": binary,
                    },
                })
            })
            .collect();
        let providers: Vec<Value> = self
            .shares()
            .iter()
            .map(|sh| {
                let flags: serde_json::Map<String, Value> = sh
                    .flags
                    .iter()
                    .map(|(f, n)| (f.as_str().to_owned(), json!(n)))
                    .collect();
                json!({
                    "provider": sh.provider,
                    "segments": sh.segments,
                    "files": sh.paths.len(),
                    "added": sh.added,
                    "removed": sh.removed,
                    "binary": sh.binary,
                    "flags": flags,
                })
            })
            .collect();
        json!({
            "schemaVersion": ATTRIBUTION_SCHEMA,
            "taskId": self.task.id,
            "parent": self.task.parent,
            "worktree": self.task.worktree,
            "branch": self.task.branch,
            "owner": {
                "provider": self.task.agent.provider,
                "model": self.task.agent.model,
            },
            "base": {
                "commit": self.base.commit,
                "rule": if self.base.root { "root-checkpoint" } else { "parent-of-first-checkpoint" },
                "firstCheckpoint": self.base.first_checkpoint,
            },
            "segments": segments,
            "providers": providers,
            "checks": checks,
        })
    }

    pub(super) fn human(&self) -> String {
        let mut out = String::new();
        let t = self.task;
        let owner = agent(&AgentRef {
            provider: t.agent.provider.clone(),
            model: t.agent.model.clone(),
        });
        out.push_str(&format!(
            "task {} on {} in {} (now {owner})\n",
            t.id,
            t.branch.as_deref().unwrap_or("(detached)"),
            t.worktree
        ));
        let base = &self.base;
        if base.root {
            out.push_str(&format!(
                "base {}: the first checkpoint itself (a root commit)\n",
                short(&base.commit)
            ));
        } else {
            out.push_str(&format!(
                "base {}: the parent of the first checkpoint {}\n",
                short(&base.commit),
                short(&base.first_checkpoint)
            ));
        }
        for s in self.segments {
            let to = s.to.as_deref().map_or("worktree", short);
            let scope = match &s.scope.unknown {
                Some(reason) => format!("scope unknown: {reason}"),
                None => format!(
                    "scope: {} path(s) named by {}",
                    s.scope.paths.len(),
                    s.scope.note.as_ref().map_or("", |p| p.as_str())
                ),
            };
            out.push_str(&format!(
                "\nsegment {} by {}: {}..{to} ({scope})\n",
                s.index,
                agent(&s.owner),
                short(&s.from)
            ));
            for f in &s.files {
                let counts = match f.lines {
                    Some((a, r)) => format!("+{a} -{r}"),
                    None => "binary".to_owned(),
                };
                let name = match &f.old_path {
                    Some(old) => format!("{old} → {}", f.path),
                    None => f.path.clone(),
                };
                let flags = if f.flags.is_empty() {
                    String::new()
                } else {
                    let names: Vec<&str> = f.flags.iter().map(|f| f.as_str()).collect();
                    format!("  [{}]", names.join(", "))
                };
                out.push_str(&format!("  {counts:<12} {name} ({}){flags}\n", f.status));
            }
            let (files, added, removed, binary) = s.totals();
            out.push_str(&format!(
                "  {files} file(s), +{added} -{removed}{}\n",
                if binary > 0 {
                    format!(", {binary} binary")
                } else {
                    String::new()
                }
            ));
        }
        out.push_str("\nby provider:\n");
        for sh in self.shares() {
            let segments: Vec<String> = sh.segments.iter().map(ToString::to_string).collect();
            let flags: Vec<String> = Flag::ALL
                .iter()
                .filter_map(|f| sh.flags.get(f).map(|n| format!("{n} {}", f.as_str())))
                .collect();
            out.push_str(&format!(
                "  {} (segment {}): {} file(s), +{} -{}{}{}\n",
                sh.provider,
                segments.join(", "),
                sh.paths.len(),
                sh.added,
                sh.removed,
                if sh.binary > 0 {
                    format!(", {} binary", sh.binary)
                } else {
                    String::new()
                },
                if flags.is_empty() {
                    String::new()
                } else {
                    format!("; flagged: {}", flags.join(", "))
                }
            ));
        }
        out
    }
}

pub(super) use crate::timeline::{agent, short};
