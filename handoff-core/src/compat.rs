//! Which versions of an agent CLI handoff was proven on, and how an installed one compares.
//!
//! Versions are read as their CLIs print them (`2.1.332 (Claude Code)`, `codex-cli 0.171.0`):
//! the first dotted run of numbers is the version, compared number by number
//! ([`Version`]). A [`VersionRange`] bounds a behaviour (a sandbox's leftovers) or a known
//! break; a [`TestedRange`] is what the real-CLI lanes last passed on, generated into a TOML
//! file that [`tested_ranges`] reads.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A CLI version: the numbers of its first dotted run (`2.1.332`), compared in order, a
/// missing number counting as 0 (`1.2` = `1.2.0`).
#[derive(Debug, Clone)]
pub struct Version(Vec<u64>);

impl PartialEq for Version {
    fn eq(&self, other: &Version) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Version {}

impl Version {
    /// The first run of digits and dots in `text` that starts with a digit (`2.1.332 (Claude
    /// Code)` → `2.1.332`, `codex-cli 0.171.0` → `0.171.0`); `None` when it has none.
    pub fn find(text: &str) -> Option<Version> {
        let bytes = text.as_bytes();
        let start = bytes.iter().position(u8::is_ascii_digit)?;
        let run: &str = text[start..]
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .next()?;
        let numbers: Option<Vec<u64>> = run
            .split('.')
            .filter(|p| !p.is_empty())
            .map(|p| p.parse().ok())
            .collect();
        numbers.filter(|n| !n.is_empty()).map(Version)
    }

    /// `text` read whole as a version (`2.1.332`); `None` for anything else.
    pub fn parse(text: &str) -> Option<Version> {
        let ok = !text.is_empty()
            && text
                .split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if ok { Version::find(text) } else { None }
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Version) -> Ordering {
        let len = self.0.len().max(other.0.len());
        (0..len)
            .map(|i| {
                let a = self.0.get(i).copied().unwrap_or(0);
                let b = other.0.get(i).copied().unwrap_or(0);
                a.cmp(&b)
            })
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Version) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(u64::to_string).collect();
        f.write_str(&parts.join("."))
    }
}

/// Versions from `min` to `max`, both included; an open end is unbounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRange {
    /// The lowest version in the range.
    pub min: Option<&'static str>,
    /// The highest version in the range.
    pub max: Option<&'static str>,
}

impl VersionRange {
    /// Every version.
    pub const ANY: VersionRange = VersionRange {
        min: None,
        max: None,
    };

    /// `min` and every later version.
    pub const fn from(min: &'static str) -> VersionRange {
        VersionRange {
            min: Some(min),
            max: None,
        }
    }

    /// Whether `version` is in the range. A bound that is not a version excludes everything.
    pub fn contains(&self, version: &Version) -> bool {
        let above = self
            .min
            .is_none_or(|m| Version::parse(m).is_some_and(|m| *version >= m));
        let below = self
            .max
            .is_none_or(|m| Version::parse(m).is_some_and(|m| *version <= m));
        above && below
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min, self.max) {
            (None, None) => f.write_str("any"),
            (Some(min), None) => write!(f, ">= {min}"),
            (None, Some(max)) => write!(f, "<= {max}"),
            (Some(min), Some(max)) => write!(f, "{min} – {max}"),
        }
    }
}

/// The versions of a CLI the real-CLI lanes passed on: from the oldest pin still trusted to
/// the newest release tested.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TestedRange {
    /// The oldest version tested (as `--version` prints its number).
    pub min: String,
    /// The newest version tested.
    pub max: String,
}

/// How an installed CLI's version compares with the tested range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum VersionStatus {
    /// Within the tested range.
    Tested,
    /// Newer than the newest tested: it runs, with a warning.
    Newer,
    /// Older than the oldest tested.
    Older,
    /// Not installed, no version printed, or no tested range for this agent.
    Unknown,
}

impl TestedRange {
    /// Where `installed` (a `--version` line) stands against this range.
    pub fn status(&self, installed: Option<&str>) -> VersionStatus {
        let (Some(v), Some(min), Some(max)) = (
            installed.and_then(Version::find),
            Version::parse(&self.min),
            Version::parse(&self.max),
        ) else {
            return VersionStatus::Unknown;
        };
        if v < min {
            VersionStatus::Older
        } else if v > max {
            VersionStatus::Newer
        } else {
            VersionStatus::Tested
        }
    }
}

/// An agent CLI's version as capabilities report it: installed, tested, and how they compare.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VersionReport {
    /// First line of the installed CLI's `--version`, when preflight ran.
    pub installed: Option<String>,
    /// The versions the real-CLI suite last passed on; null when it does not run this CLI.
    pub tested: Option<TestedRange>,
    /// Where the installed version stands.
    pub status: VersionStatus,
    /// One line for a person when the installed CLI is newer or older than tested: it still
    /// runs, never refused.
    pub warning: Option<String>,
}

impl VersionReport {
    /// The report of agent `agent` whose CLI printed `installed`.
    pub fn new(agent: &str, installed: Option<String>, tested: Option<TestedRange>) -> Self {
        let status = tested
            .as_ref()
            .map_or(VersionStatus::Unknown, |t| t.status(installed.as_deref()));
        let number = installed
            .as_deref()
            .and_then(Version::find)
            .map(|v| v.to_string())
            .unwrap_or_default();
        let warning = tested.as_ref().and_then(|t| {
            let range = format!("{} – {}", t.min, t.max);
            match status {
                VersionStatus::Newer => Some(format!(
                    "{agent} {number} is newer than the versions handoff was tested on \
                     ({range}): it runs, but a change in its flags or output may break it"
                )),
                VersionStatus::Older => Some(format!(
                    "{agent} {number} is older than the versions handoff was tested on \
                     ({range}): update it if a run fails"
                )),
                _ => None,
            }
        });
        VersionReport {
            installed,
            tested,
            status,
            warning,
        }
    }
}

/// The tested ranges of a generated TOML file: one table per agent id with `min` and `max`
/// (`[claude]` / `min = "2.1.197"` / `max = "2.1.332"`). A malformed file or entry is an
/// error naming it.
pub fn tested_ranges(text: &str) -> Result<BTreeMap<String, TestedRange>, String> {
    let ranges: BTreeMap<String, TestedRange> =
        toml::from_str(text).map_err(|e| format!("the tested versions are malformed: {e}"))?;
    for (agent, range) in &ranges {
        match (Version::parse(&range.min), Version::parse(&range.max)) {
            (Some(min), Some(max)) if min <= max => {}
            _ => {
                return Err(format!(
                    "the tested versions of {agent} are not a range: {} – {}",
                    range.min, range.max
                ));
            }
        }
    }
    Ok(ranges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(text: &str) -> Version {
        Version::find(text).unwrap()
    }

    #[test]
    fn versions_are_found_as_each_cli_prints_them() {
        for (line, want) in [
            ("2.1.332 (Claude Code)", "2.1.332"),
            ("codex-cli 0.171.0", "0.171.0"),
            ("1.18.33", "1.18.33"),
            ("grok 1.0.1\n", "1.0.1"),
            ("v2.19.2-beta", "2.19.2"),
            ("2025.11.25-abc", "2025.11.25"),
        ] {
            assert_eq!(v(line).to_string(), want, "{line}");
        }
        assert_eq!(Version::find("no digits"), None);
        assert_eq!(Version::parse("2.1.x"), None);
        assert_eq!(Version::parse(""), None);
        assert_eq!(Version::parse("1..2"), None);
    }

    #[test]
    fn versions_compare_number_by_number() {
        assert!(v("2.1.332") > v("2.1.197"));
        assert!(v("0.171.0") < v("0.1710.0"));
        assert_eq!(v("1.2"), v("1.2.0"));
        assert!(v("10.0") > v("9.99.99"));
    }

    #[test]
    fn ranges_include_both_ends() {
        let r = VersionRange {
            min: Some("2.1.198"),
            max: Some("2.1.332"),
        };
        assert!(!r.contains(&v("2.1.197")));
        assert!(r.contains(&v("2.1.198")));
        assert!(r.contains(&v("2.1.332")));
        assert!(!r.contains(&v("2.1.333")));
        assert!(VersionRange::from("2.1.198").contains(&v("3.0")));
        assert!(VersionRange::ANY.contains(&v("0")));
        let broken = VersionRange {
            min: Some("two"),
            max: None,
        };
        assert!(!broken.contains(&v("2.0")));
    }

    #[test]
    fn tested_status_places_the_installed_version() {
        let r = TestedRange {
            min: "2.1.197".into(),
            max: "2.1.332".into(),
        };
        for (installed, want) in [
            (Some("2.1.197 (Claude Code)"), VersionStatus::Tested),
            (Some("2.1.332 (Claude Code)"), VersionStatus::Tested),
            (Some("2.1.400 (Claude Code)"), VersionStatus::Newer),
            (Some("2.0.1 (Claude Code)"), VersionStatus::Older),
            (Some("unknown"), VersionStatus::Unknown),
            (None, VersionStatus::Unknown),
        ] {
            assert_eq!(r.status(installed), want, "{installed:?}");
        }
    }

    #[test]
    fn a_newer_or_older_cli_gets_one_warning_line_and_a_tested_one_none() {
        let tested = Some(TestedRange {
            min: "0.171.0".into(),
            max: "0.171.0".into(),
        });
        let newer = VersionReport::new("codex", Some("codex-cli 0.180.2".into()), tested.clone());
        assert_eq!(newer.status, VersionStatus::Newer);
        assert_eq!(
            newer.warning.as_deref(),
            Some(
                "codex 0.180.2 is newer than the versions handoff was tested on (0.171.0 – \
                 0.171.0): it runs, but a change in its flags or output may break it"
            )
        );
        let same = VersionReport::new("codex", Some("codex-cli 0.171.0".into()), tested.clone());
        assert_eq!((same.status, same.warning), (VersionStatus::Tested, None));
        let older = VersionReport::new("codex", Some("codex-cli 0.100.0".into()), tested);
        assert_eq!(older.status, VersionStatus::Older);
        assert!(older.warning.unwrap().contains("older"));
        let untested = VersionReport::new("kiro", Some("kiro-cli 1.2.3".into()), None);
        assert_eq!(
            (untested.status, untested.warning),
            (VersionStatus::Unknown, None)
        );
    }

    #[test]
    fn the_tested_file_is_read_or_refused_by_name() {
        let ok = tested_ranges("[claude]\nmin = \"2.1.197\"\nmax = \"2.1.332\"\n").unwrap();
        assert_eq!(ok["claude"].max, "2.1.332");
        for bad in [
            "[claude]\nmin = \"2.1.332\"\nmax = \"2.1.197\"\n",
            "[claude]\nmin = \"x\"\nmax = \"2.1.197\"\n",
            "[claude]\nmin = \"2.1.197\"\n",
            "[claude]\nmin = \"1\"\nmax = \"2\"\nextra = 1\n",
        ] {
            assert!(tested_ranges(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn finding_never_panics_and_orders_totally(a in ".{0,40}", b in ".{0,40}") {
            if let (Some(x), Some(y)) = (Version::find(&a), Version::find(&b)) {
                prop_assert_eq!(x.cmp(&y), y.cmp(&x).reverse());
                prop_assert_eq!(Version::parse(&x.to_string()), Some(x.clone()));
            }
        }
    }
}
