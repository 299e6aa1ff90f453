//! Calls to a host: `handoff __host` over ssh, one request and one reply per connection.

use std::collections::BTreeMap;
use std::time::Duration;

use handoff_continue::ssh::Ssh;
use handoff_core::{Host, shell_word};

use crate::protocol::{HostReply, HostRequest, PROTOCOL};

/// How long a short request (repo, start, cancel, cleanup) may take.
pub(crate) const SHORT: Duration = Duration::from_secs(120);

/// Why a call got no reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallError {
    /// ssh could not reach the host, or the connection dropped.
    Unreachable(String),
    /// The host answered, but not as handoff's protocol does.
    Refused(String),
}

/// A host and the ssh client that reaches it.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub ssh: Ssh,
    pub host: Host,
}

impl Link {
    pub(crate) fn new(host: Host, env: &BTreeMap<String, String>) -> Result<Link, String> {
        let ssh = Ssh::new(&host.ssh, env).map_err(|e| format!("--on: {e}"))?;
        Ok(Link { ssh, host })
    }

    fn label(&self) -> &str {
        self.host.label()
    }

    /// Runs `command` there after `handoff --version`, `input` on its standard input: the
    /// version there is checked against this one's before anything `command` does counts.
    /// Returns the rest of standard output.
    async fn versioned(
        &self,
        command: &str,
        input: &[u8],
        timeout: Duration,
    ) -> Result<String, CallError> {
        let script = format!(
            "command -v handoff >/dev/null 2>&1 || exit 127; handoff --version || exit 126; exec {command}"
        );
        let out = self
            .ssh
            .run(&script, input, timeout)
            .await
            .map_err(CallError::Unreachable)?;
        match out.code {
            255 => {
                return Err(CallError::Unreachable(format!(
                    "cannot reach {} over ssh: {}",
                    self.label(),
                    out.stderr_tail()
                )));
            }
            127 => {
                return Err(CallError::Refused(format!(
                    "handoff is not installed on {} (not found on its PATH)",
                    self.label()
                )));
            }
            _ => {}
        }
        let (first, rest) = out.stdout.split_once('\n').unwrap_or((&out.stdout, ""));
        let ours = format!("handoff {}", handoff_core::DRIVER_VERSION);
        let theirs = first.trim();
        if theirs != ours {
            return Err(CallError::Refused(format!(
                "{} runs {}, this machine {ours}: install the same version there",
                self.label(),
                if theirs.is_empty() {
                    "a handoff without a version".to_owned()
                } else {
                    handoff_core::printable(theirs, true).into_owned()
                }
            )));
        }
        if rest.trim().is_empty() {
            return Err(CallError::Refused(format!(
                "the handoff on {} did not answer (exit {}): {}",
                self.label(),
                out.code,
                out.stderr_tail()
            )));
        }
        Ok(rest.to_owned())
    }

    /// Sends `request` to `handoff __host` there. A reply of another protocol is refused.
    pub(crate) async fn call(
        &self,
        request: &HostRequest,
        timeout: Duration,
    ) -> Result<HostReply, CallError> {
        let body = serde_json::to_vec(request).unwrap_or_default();
        let stdout = self.versioned("handoff __host", &body, timeout).await?;
        let line = stdout.lines().rev().find(|l| !l.trim().is_empty());
        let reply = line
            .and_then(|l| serde_json::from_str::<HostReply>(l).ok())
            .ok_or_else(|| {
                CallError::Refused(format!(
                    "the handoff on {} answered something that is not a reply",
                    self.label()
                ))
            })?;
        if reply.protocol != PROTOCOL {
            return Err(CallError::Refused(format!(
                "{} speaks protocol {}, this machine {PROTOCOL}",
                self.label(),
                reply.protocol
            )));
        }
        Ok(reply)
    }

    /// A git URL of `path` on the host.
    pub(crate) fn git_url(&self, path: &str) -> String {
        match self.host.ssh.strip_prefix("ssh://") {
            Some(rest) => format!("ssh://{rest}{path}"),
            None => format!("{}:{path}", self.host.ssh),
        }
    }

    /// The `-c` settings that make git reach the host as this link does.
    pub(crate) fn git_ssh_settings(&self) -> [String; 4] {
        [
            "-c".to_owned(),
            format!("core.sshCommand={}", self.ssh.command_line()),
            "-c".to_owned(),
            "ssh.variant=ssh".to_owned(),
        ]
    }

    /// `ssh … <host> handoff log …`: how a person looks at the host's side.
    pub(crate) fn log_command(&self, job: &str) -> String {
        self.ssh
            .interactive(&format!("handoff result {}", shell_word(job)))
    }
}

/// What the host `on` names can run: its `handoff capabilities --json`, after the same
/// version check a run makes.
pub async fn host_capabilities(
    on: &str,
    hosts: &BTreeMap<String, handoff_core::HostConfig>,
    env: &BTreeMap<String, String>,
) -> Result<handoff_core::Capabilities, String> {
    let host = handoff_core::resolve_host(on, hosts)?;
    let link = Link::new(host, env)?;
    let stdout = link
        .versioned("handoff capabilities --json", b"", SHORT)
        .await
        .map_err(|e| match e {
            CallError::Unreachable(m) | CallError::Refused(m) => format!("--on: {m}"),
        })?;
    serde_json::from_str(stdout.trim()).map_err(|e| {
        format!(
            "--on: {} answered capabilities that do not read: {e}",
            link.host.label()
        )
    })
}
