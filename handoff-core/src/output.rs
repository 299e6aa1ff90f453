//! The provider-output contract: the one JSON object the model must answer with.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Schema version of [`ProviderOutput`].
pub const PROVIDER_OUTPUT_SCHEMA: &str = "handoff.provider-output.v1";

/// Largest accepted answer, in bytes.
pub const MAX_PROVIDER_OUTPUT_BYTES: usize = 256_000;
/// Largest accepted `response`, in bytes.
pub const MAX_RESPONSE_BYTES: usize = 65_536;
const MAX_ITEMS: usize = 1000;
const MAX_SUMMARY_BYTES: usize = 8192;
const MAX_TITLE_BYTES: usize = 256;
const MAX_CATEGORY_BYTES: usize = 64;

/// What the model answers with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProviderOutput {
    /// Always `handoff.provider-output.v1`.
    #[schemars(schema_with = "provider_output_version")]
    pub schema_version: String,
    /// How the task ended, in the model's words.
    pub status: ProviderStatus,
    /// A concise answer or completion summary.
    #[schemars(length(min = 1, max = 65536))]
    pub response: String,
    /// What supports the answer.
    #[schemars(length(max = 1000))]
    pub evidence: Vec<Evidence>,
    /// Problems found (reviews).
    #[schemars(length(max = 1000))]
    pub findings: Vec<Finding>,
    /// The overall judgement of the work under review, when the task asks for one: `approve`
    /// (good as it is), `changes-requested` (needs changes first) or `unsure` (cannot tell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<ReviewVerdict>,
    /// Token counts the model reports about itself.
    pub usage: SelfReportedUsage,
}

/// The overall judgement of the work under review.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ReviewVerdict {
    /// Good as it is.
    Approve,
    /// Needs changes before it is good.
    ChangesRequested,
    /// Cannot tell.
    Unsure,
}

impl ReviewVerdict {
    /// Its name in the contract: `approve`, `changes-requested`, `unsure`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewVerdict::Approve => "approve",
            ReviewVerdict::ChangesRequested => "changes-requested",
            ReviewVerdict::Unsure => "unsure",
        }
    }
}

fn provider_output_version(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "const": PROVIDER_OUTPUT_SCHEMA})
}

/// How the task ended, in the model's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProviderStatus {
    /// Done.
    Completed,
    /// Could not proceed.
    Blocked,
    /// Tried and failed.
    Failed,
}

/// One piece of supporting evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Evidence {
    /// What kind of evidence (`file`, `test`, `command`, …).
    #[schemars(length(min = 1, max = 64))]
    pub kind: String,
    /// Repository-relative path, if about a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub path: Option<String>,
    /// What it shows.
    #[schemars(length(min = 1, max = 8192))]
    pub summary: String,
}

/// One review finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Finding {
    /// Repository-relative file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 4096))]
    pub file: Option<String>,
    /// 1-based line (the first, when the finding spans several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub line: Option<u64>,
    /// The last line, when the finding spans several (at least `line`; only with `line`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub end_line: Option<u64>,
    /// What kind of problem, in one lowercase word or two (`correctness`, `security`,
    /// `performance`, `tests`, `style`, `docs`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub category: Option<String>,
    /// How bad.
    pub severity: Severity,
    /// The problem in one short line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub title: Option<String>,
    /// What is wrong (the explanation, when a title is given).
    #[schemars(length(min = 1, max = 8192))]
    pub summary: String,
}

/// Severity of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Must be fixed before anything else.
    Blocker,
    /// Serious.
    High,
    /// Worth fixing.
    Medium,
    /// Minor.
    Low,
    /// Cosmetic.
    Nit,
}

/// Token counts reported by the model itself (may be empty).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelfReportedUsage {
    /// Input tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Total tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
}

/// Why an answer does not meet the contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// No answer was found where the agent puts it.
    #[error("the agent produced no answer")]
    Missing,
    /// Not valid UTF-8.
    #[error("the agent's answer is not valid UTF-8")]
    NotUtf8,
    /// Larger than [`MAX_PROVIDER_OUTPUT_BYTES`].
    #[error("the agent's answer is {size} bytes; the limit is {MAX_PROVIDER_OUTPUT_BYTES}")]
    TooLarge {
        /// Its size.
        size: usize,
    },
    /// Not exactly one JSON object.
    #[error("the agent's answer must be exactly one JSON object with no prose or noise")]
    NotOneObject,
    /// A different schema version.
    #[error(
        "schema drift: the agent answered with schemaVersion {found:?}, expected {PROVIDER_OUTPUT_SCHEMA:?}"
    )]
    SchemaDrift {
        /// What it said.
        found: Option<String>,
    },
    /// Fields do not match the contract.
    #[error("the agent's answer does not match the provider-output contract: {reason}")]
    Contract {
        /// What is wrong.
        reason: String,
    },
    /// The CLI's own envelope or event stream is malformed.
    #[error("the agent CLI's output is malformed: {reason}")]
    Envelope {
        /// What is wrong.
        reason: String,
    },
}

impl ProviderOutput {
    /// Strictly parses an answer: UTF-8, size, exactly one object, schema version, field rules.
    pub fn parse_strict(bytes: &[u8]) -> Result<ProviderOutput, OutputError> {
        if bytes.len() > MAX_PROVIDER_OUTPUT_BYTES {
            return Err(OutputError::TooLarge { size: bytes.len() });
        }
        let text = std::str::from_utf8(bytes).map_err(|_| OutputError::NotUtf8)?;
        if text.trim().is_empty() {
            return Err(OutputError::Missing);
        }
        let value: serde_json::Value =
            serde_json::from_str(text.trim()).map_err(|_| OutputError::NotOneObject)?;
        ProviderOutput::from_value(value)
    }

    /// Checks an already-parsed JSON value against the contract.
    pub fn from_value(value: serde_json::Value) -> Result<ProviderOutput, OutputError> {
        let Some(obj) = value.as_object() else {
            return Err(OutputError::NotOneObject);
        };
        match obj.get("schemaVersion") {
            Some(serde_json::Value::String(v)) if v == PROVIDER_OUTPUT_SCHEMA => {}
            other => {
                return Err(OutputError::SchemaDrift {
                    found: other.map(|v| match v {
                        serde_json::Value::String(s) => s.clone(),
                        v => v.to_string(),
                    }),
                });
            }
        }
        let size = value.to_string().len();
        if size > MAX_PROVIDER_OUTPUT_BYTES {
            return Err(OutputError::TooLarge { size });
        }
        let out: ProviderOutput =
            serde_json::from_value(value).map_err(|e| OutputError::Contract {
                reason: e.to_string(),
            })?;
        out.check()?;
        Ok(out)
    }

    fn check(&self) -> Result<(), OutputError> {
        let bad = |reason: String| Err(OutputError::Contract { reason });
        if self.response.trim().is_empty() {
            return bad("response is blank".into());
        }
        if self.response.len() > MAX_RESPONSE_BYTES {
            return bad(format!(
                "response is longer than {MAX_RESPONSE_BYTES} bytes"
            ));
        }
        if self.evidence.len() > MAX_ITEMS || self.findings.len() > MAX_ITEMS {
            return bad(format!("more than {MAX_ITEMS} evidence items or findings"));
        }
        for e in &self.evidence {
            if e.kind.is_empty() || e.kind.len() > 64 {
                return bad("evidence kind must be 1-64 bytes".into());
            }
            check_summary(&e.summary)?;
            if let Some(p) = &e.path {
                check_repo_path(p)?;
            }
        }
        for f in &self.findings {
            check_summary(&f.summary)?;
            if let Some(p) = &f.file {
                check_repo_path(p)?;
            }
            if f.line == Some(0) {
                return bad("finding line must be at least 1".into());
            }
            match (f.line, f.end_line) {
                (None, Some(_)) => return bad("a finding's endLine needs its line".into()),
                (Some(line), Some(end)) if end < line => {
                    return bad(format!(
                        "a finding's endLine {end} comes before its line {line}"
                    ));
                }
                _ => {}
            }
            if let Some(title) = &f.title
                && (title.trim().is_empty()
                    || title.len() > MAX_TITLE_BYTES
                    || title.contains('\n'))
            {
                return bad(format!(
                    "a finding's title must be one line of 1-{MAX_TITLE_BYTES} bytes"
                ));
            }
            if let Some(category) = &f.category
                && (category.trim().is_empty()
                    || category.len() > MAX_CATEGORY_BYTES
                    || category.chars().any(char::is_control))
            {
                return bad(format!(
                    "a finding's category must be 1-{MAX_CATEGORY_BYTES} bytes of text"
                ));
            }
        }
        Ok(())
    }
}

fn check_summary(s: &str) -> Result<(), OutputError> {
    if s.trim().is_empty() || s.len() > MAX_SUMMARY_BYTES {
        return Err(OutputError::Contract {
            reason: format!("summaries must be 1-{MAX_SUMMARY_BYTES} bytes and not blank"),
        });
    }
    Ok(())
}

/// A repository-relative path: not absolute, no empty, `.` or `..` segments, no control chars.
pub fn check_repo_path(p: &str) -> Result<(), OutputError> {
    let ok = !p.is_empty()
        && p.len() <= 4096
        && !p.starts_with('/')
        && !p.chars().any(char::is_control)
        && p.split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..");
    if ok {
        Ok(())
    } else {
        Err(OutputError::Contract {
            reason: format!("unsafe repository path {p:?}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GOOD: &str = r#"{"schemaVersion":"handoff.provider-output.v1","status":"completed","response":"done","evidence":[{"kind":"file","path":"src/a.rs","summary":"edited"}],"findings":[],"usage":{}}"#;

    #[test]
    fn a_verdict_and_structured_findings_are_part_of_the_contract() {
        let with = |extra: &str, finding: &str| {
            GOOD.replace(
                r#""findings":[]"#,
                &format!(r#""findings":[{finding}]{extra}"#),
            )
        };
        let good = with(
            r#","verdict":"changes-requested""#,
            r#"{"file":"src/a.rs","line":3,"endLine":9,"category":"correctness","severity":"high","title":"Off by one","summary":"The last item is skipped."}"#,
        );
        let out = ProviderOutput::parse_strict(good.as_bytes()).unwrap();
        assert_eq!(out.verdict, Some(ReviewVerdict::ChangesRequested));
        assert_eq!(out.findings[0].end_line, Some(9));
        assert_eq!(out.findings[0].title.as_deref(), Some("Off by one"));
        // Strict schemas make optional fields nullable: null is the same as absent.
        let nulls = with(
            r#","verdict":null"#,
            r#"{"file":null,"line":null,"endLine":null,"category":null,"severity":"low","title":null,"summary":"s"}"#,
        );
        let out = ProviderOutput::parse_strict(nulls.as_bytes()).unwrap();
        assert_eq!(out.verdict, None);
        assert_eq!(out.findings[0].title, None);
        // The old answer, without any of them, still parses.
        assert_eq!(
            ProviderOutput::parse_strict(GOOD.as_bytes())
                .unwrap()
                .verdict,
            None
        );

        let refused = |extra: &str, finding: &str| {
            ProviderOutput::parse_strict(with(extra, finding).as_bytes()).unwrap_err()
        };
        let plain = r#"{"severity":"low","summary":"s"}"#;
        assert!(matches!(
            refused(r#","verdict":"lgtm""#, plain),
            OutputError::Contract { .. }
        ));
        for (finding, reason) in [
            (
                r#"{"endLine":4,"severity":"low","summary":"s"}"#,
                "a finding's endLine needs its line",
            ),
            (
                r#"{"line":5,"endLine":4,"severity":"low","summary":"s"}"#,
                "a finding's endLine 4 comes before its line 5",
            ),
            (
                r#"{"severity":"low","title":"two\nlines","summary":"s"}"#,
                "a finding's title must be one line of 1-256 bytes",
            ),
            (
                r#"{"severity":"low","title":"  ","summary":"s"}"#,
                "a finding's title must be one line of 1-256 bytes",
            ),
            (
                r#"{"severity":"low","category":"","summary":"s"}"#,
                "a finding's category must be 1-64 bytes of text",
            ),
        ] {
            assert_eq!(
                refused("", finding),
                OutputError::Contract {
                    reason: reason.to_owned()
                },
                "{finding}"
            );
        }
    }

    #[test]
    fn accepts_a_good_answer() {
        let out = ProviderOutput::parse_strict(GOOD.as_bytes()).unwrap();
        assert_eq!(out.status, ProviderStatus::Completed);
    }

    #[test]
    fn rejects_prose_fences_and_drift() {
        assert_eq!(
            ProviderOutput::parse_strict(b"Sure! here it is"),
            Err(OutputError::NotOneObject)
        );
        let fenced = format!("```json\n{GOOD}\n```");
        assert_eq!(
            ProviderOutput::parse_strict(fenced.as_bytes()),
            Err(OutputError::NotOneObject)
        );
        let drift = GOOD.replace("v1", "v0.3");
        assert!(matches!(
            ProviderOutput::parse_strict(drift.as_bytes()),
            Err(OutputError::SchemaDrift { .. })
        ));
        let extra = GOOD.replace("\"usage\":{}", "\"usage\":{},\"x\":1");
        assert!(matches!(
            ProviderOutput::parse_strict(extra.as_bytes()),
            Err(OutputError::Contract { .. })
        ));
        let unsafe_path = GOOD.replace("src/a.rs", "../etc/passwd");
        assert!(matches!(
            ProviderOutput::parse_strict(unsafe_path.as_bytes()),
            Err(OutputError::Contract { .. })
        ));
        let blank = GOOD.replace("\"done\"", "\"  \"");
        assert!(ProviderOutput::parse_strict(blank.as_bytes()).is_err());
        assert_eq!(
            ProviderOutput::parse_strict(b"\xff\xfe"),
            Err(OutputError::NotUtf8)
        );
    }

    proptest! {
        #[test]
        fn never_panics_on_garbage(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = ProviderOutput::parse_strict(&bytes);
        }

        #[test]
        fn repo_paths_with_dot_segments_are_refused(a in "[a-z]{1,8}", b in prop::sample::select(vec!["..", ".", ""])) {
            let p = format!("{a}/{b}/x");
            prop_assert!(check_repo_path(&p).is_err());
        }
    }
}
