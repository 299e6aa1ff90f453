//! What the store checks and masks in a background job before it keeps it: its command line and
//! the other text it names are masked as every free text the store writes, then checked (a
//! known verb, a real timestamp, bounded names); its result line is masked as JSON.

use handoff_core::{Masker, NewJob, StoreError, check_name, check_timestamp};

/// The verbs a job runs.
const VERBS: [&str; 4] = ["run", "advice", "run-with-advice", "continue"];

/// Longest argument accepted, in bytes: the longest a Linux command line may hold
/// (`MAX_ARG_STRLEN`), so a job's own command line always fits.
const MAX_ARG_BYTES: usize = 128 * 1024;

/// Longest command line accepted, all arguments together, in bytes (Linux's usual `ARG_MAX`).
const MAX_ARGS_BYTES: usize = 2 * 1024 * 1024;

/// Longest `--cwd` accepted, in bytes (`PATH_MAX`).
const MAX_PATH_BYTES: usize = 4096;

fn invalid(field: &'static str, reason: impl Into<String>) -> StoreError {
    StoreError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// `job` with its command line, `--cwd`, target and mode masked.
pub(crate) fn masked(masker: &Masker, job: &NewJob) -> NewJob {
    let mask = |s: &str| masker.mask(s).text.into_owned();
    let mask_opt = |s: &Option<String>| s.as_deref().map(mask);
    NewJob {
        args: job.args.iter().map(|a| mask(a)).collect(),
        cwd: mask_opt(&job.cwd),
        target: mask_opt(&job.target),
        mode: mask_opt(&job.mode),
        ..job.clone()
    }
}

/// Checks a job to record. Its id is a [`handoff_core::JobId`], well-formed by its type.
pub(crate) fn validate(job: &NewJob) -> Result<(), StoreError> {
    if !VERBS.contains(&job.verb.as_str()) {
        return Err(invalid(
            "verb",
            format!("'{}' is not one of {}", job.verb, VERBS.join(", ")),
        ));
    }
    check_timestamp("startedAt", &job.started_at)?;
    check_name("target", job.target.as_deref())?;
    check_name("mode", job.mode.as_deref())?;
    if let Some(cwd) = &job.cwd {
        if cwd.is_empty() || cwd.len() > MAX_PATH_BYTES {
            return Err(invalid(
                "cwd",
                format!("must be 1 to {MAX_PATH_BYTES} bytes, not {}", cwd.len()),
            ));
        }
        if cwd.contains('\0') {
            return Err(invalid("cwd", "contains a NUL byte"));
        }
    }
    let mut total = 0usize;
    for arg in &job.args {
        if arg.len() > MAX_ARG_BYTES {
            return Err(invalid(
                "args",
                format!(
                    "an argument is {} bytes; the limit is {MAX_ARG_BYTES}",
                    arg.len()
                ),
            ));
        }
        if arg.contains('\0') {
            return Err(invalid("args", "an argument contains a NUL byte"));
        }
        total += arg.len();
    }
    if total > MAX_ARGS_BYTES {
        return Err(invalid(
            "args",
            format!("the command line is {total} bytes; the limit is {MAX_ARGS_BYTES}"),
        ));
    }
    Ok(())
}

/// A job's result line with every string in it masked, as a handoff's details are: the line as
/// given when nothing was masked, else the masked value on one line. Not JSON is refused.
pub(crate) fn masked_result(masker: &Masker, result: &str) -> Result<String, StoreError> {
    let mut value: serde_json::Value =
        serde_json::from_str(result).map_err(|e| invalid("result", format!("not JSON: {e}")))?;
    Ok(if masker.mask_json(&mut value) > 0 {
        value.to_string()
    } else {
        result.to_owned()
    })
}
