//! `HANDOFF_FAKE_RECORD_DIR`: one JSON file per invocation, written atomically as soon as the
//! process starts and rewritten once stdin has been read and after each nested advice call.

use std::ffi::OsString;
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::util;

/// Writes and updates this invocation's record file.
#[derive(Debug)]
pub(crate) struct Recorder {
    path: Option<PathBuf>,
    record: Value,
}

impl Recorder {
    /// Builds the record and writes it at once (with `"stdin": null`) when `dir` is set.
    pub(crate) fn start(dir: Option<String>, exe: &str, args: &[OsString]) -> Recorder {
        let env: Map<String, Value> = std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    Value::String(v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        let cwd = std::env::current_dir()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let argv: Vec<Value> = args
            .iter()
            .map(|a| Value::String(a.to_string_lossy().into_owned()))
            .collect();
        let pid = std::process::id();
        let record = json!({
            "exe": exe,
            "argv": argv,
            "env": env,
            "cwd": cwd,
            "stdin": null,
            "pid": pid,
        });
        let path = dir.map(|d| {
            let dir = PathBuf::from(d);
            let _ = std::fs::create_dir_all(&dir);
            dir.join(format!("invocation-{pid}-{}.json", util::now_nanos()))
        });
        let recorder = Recorder { path, record };
        recorder.write();
        recorder
    }

    /// Stores the text read from stdin and rewrites the record.
    pub(crate) fn set_stdin(&mut self, stdin: &[u8]) {
        if let Some(obj) = self.record.as_object_mut() {
            obj.insert(
                "stdin".to_owned(),
                Value::String(String::from_utf8_lossy(stdin).into_owned()),
            );
        }
        self.write();
    }

    /// Sets a top-level field (`nestedCommand`, `nested`) and rewrites the record.
    pub(crate) fn set(&mut self, key: &str, value: Value) {
        if let Some(obj) = self.record.as_object_mut() {
            obj.insert(key.to_owned(), value);
        }
        self.write();
    }

    fn write(&self) {
        if let Some(path) = &self.path {
            let bytes = serde_json::to_vec_pretty(&self.record).unwrap_or_default();
            if let Err(e) = util::write_atomic(path, &bytes) {
                util::err_line(&format!(
                    "fake-agent: cannot write record {}: {e}",
                    path.display()
                ));
            }
        }
    }
}
