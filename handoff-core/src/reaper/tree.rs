//! The reaper's view of its process tree, read from `/proc`.

use std::collections::{BTreeMap, BTreeSet};

/// One process: its id, its state letter (`R`, `S`, `T` stopped, `Z` zombie, …), its parent's
/// id and its start time (clock ticks since boot, which tells a process from a later one that
/// reused its id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Proc {
    pub pid: u32,
    pub state: char,
    pub ppid: u32,
    pub start_time: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) sits in parentheses and may hold
/// spaces and parentheses itself, so fields are counted from the last `)`.
pub(crate) fn parse_stat(pid: u32, text: &str) -> Option<Proc> {
    let rest = text.get(text.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Proc {
        pid,
        state: fields.first()?.chars().next()?,
        ppid: fields.get(4 - 3)?.parse().ok()?,
        start_time: fields.get(22 - 3)?.parse().ok()?,
    })
}

/// What `/proc/<pid>/stat` says of `pid` (`self` for this process), if it exists.
pub(crate) fn read(pid: &str) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let id = match pid {
        "self" => std::process::id(),
        n => n.parse().ok()?,
    };
    parse_stat(id, &text)
}

/// Every process `/proc` lists now (those that vanish while it is read are left out).
pub(crate) fn scan() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| {
            let name = e.ok()?.file_name();
            let name = name.to_str()?;
            name.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| read(name))?
        })
        .collect()
}

/// The processes below `root` in `procs` (children, their children, …), `root` excluded,
/// parents before their children. A cycle in the listing (a pid reused mid-scan) ends there.
pub(crate) fn descendants(procs: &[Proc], root: u32) -> Vec<Proc> {
    let mut children: BTreeMap<u32, Vec<Proc>> = BTreeMap::new();
    for p in procs {
        if p.pid != p.ppid {
            children.entry(p.ppid).or_default().push(*p);
        }
    }
    let mut seen = BTreeSet::from([root]);
    let mut out = Vec::new();
    let mut queue = std::collections::VecDeque::from([root]);
    while let Some(parent) = queue.pop_front() {
        for child in children.get(&parent).into_iter().flatten() {
            if seen.insert(child.pid) {
                out.push(*child);
                queue.push_back(child.pid);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, ppid: u32) -> Proc {
        Proc {
            pid,
            state: 'S',
            ppid,
            start_time: u64::from(pid) * 10,
        }
    }

    #[test]
    fn a_stat_line_is_read_from_the_last_parenthesis() {
        let line = "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 \
                    1000 10 18446744073709551615";
        assert_eq!(
            parse_stat(4242, line),
            Some(Proc {
                pid: 4242,
                state: 'S',
                ppid: 17,
                start_time: 987_654
            })
        );
        assert_eq!(parse_stat(1, "1 (x"), None);
        assert_eq!(parse_stat(1, "1 (x) S"), None);
    }

    #[test]
    fn descendants_are_the_whole_subtree_and_nothing_else() {
        // 10 is the reaper; 11 the agent; 12 a grandchild; 20 an unrelated tree; 13 was
        // orphaned and adopted by the reaper.
        let procs = [
            p(1, 0),
            p(10, 1),
            p(11, 10),
            p(12, 11),
            p(13, 10),
            p(14, 13),
            p(20, 1),
            p(21, 20),
        ];
        let got: Vec<u32> = descendants(&procs, 10).iter().map(|p| p.pid).collect();
        assert_eq!(got, vec![11, 13, 12, 14]);
        assert!(descendants(&procs, 12).is_empty());
    }

    #[test]
    fn a_cycle_in_a_torn_listing_ends_the_walk() {
        let procs = [p(11, 10), p(12, 11), p(11, 12)];
        let got: Vec<u32> = descendants(&procs, 10).iter().map(|p| p.pid).collect();
        assert_eq!(got, vec![11, 12]);
    }

    #[test]
    fn this_process_is_in_the_scan() {
        if !crate::platform::PROC_FS {
            return;
        }
        let me = std::process::id();
        let procs = scan();
        let mine = procs.iter().find(|p| p.pid == me).expect("own entry");
        assert_eq!(mine.ppid, nix::unistd::getppid().as_raw() as u32);
    }
}
