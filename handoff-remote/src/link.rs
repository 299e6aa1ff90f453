//! Calls to a host: `handoff __host` over ssh, one request and one reply per connection.

use std::collections::BTreeMap;
use std::time::Duration;

use handoff_continue::ssh::Ssh;
use handoff_core::{Host, shell_word};

use crate::protocol::{HostReply, HostRequest, PROTOCOL};

/// How long a short request (hello, repo, start, cancel, cleanup) may take.
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

    /// Sends `request` to `handoff __host` there.
    pub(crate) async fn call(
        &self,
        request: &HostRequest,
        timeout: Duration,
    ) -> Result<HostReply, CallError> {
        let body = serde_json::to_vec(request).unwrap_or_default();
        let out = self
            .ssh
            .run("exec handoff __host", &body, timeout)
            .await
            .map_err(CallError::Unreachable)?;
        if out.code == 255 {
            return Err(CallError::Unreachable(format!(
                "cannot reach {} over ssh: {}",
                self.label(),
                out.stderr_tail()
            )));
        }
        if out.code == 127 {
            return Err(CallError::Refused(format!(
                "handoff is not installed on {} (not found on its PATH)",
                self.label()
            )));
        }
        let line = out.stdout.lines().rev().find(|l| !l.trim().is_empty());
        match line.and_then(|l| serde_json::from_str::<HostReply>(l).ok()) {
            Some(reply) => Ok(reply),
            None => Err(CallError::Refused(format!(
                "the handoff on {} did not answer (exit {}): {}",
                self.label(),
                out.code,
                out.stderr_tail()
            ))),
        }
    }

    /// Checks that the host runs this very version and protocol, before anything changes
    /// there.
    pub(crate) async fn hello(&self) -> Result<(), CallError> {
        let ours = format!("handoff {}", handoff_core::DRIVER_VERSION);
        let out = self
            .ssh
            .run(
                "command -v handoff >/dev/null 2>&1 || exit 127; handoff --version",
                b"",
                SHORT,
            )
            .await
            .map_err(CallError::Unreachable)?;
        match out.code {
            0 => {}
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
            code => {
                return Err(CallError::Refused(format!(
                    "handoff --version failed on {} (exit {code}): {}",
                    self.label(),
                    out.stderr_tail()
                )));
            }
        }
        let theirs = out.stdout.lines().next().unwrap_or("").trim().to_owned();
        if theirs != ours {
            return Err(CallError::Refused(format!(
                "{} runs {}, this machine {ours}: install the same version there",
                self.label(),
                if theirs.is_empty() {
                    "a handoff without a version".to_owned()
                } else {
                    handoff_core::printable(&theirs, true).into_owned()
                }
            )));
        }
        let reply = self
            .call(
                &HostRequest::Hello {
                    version: handoff_core::DRIVER_VERSION.to_owned(),
                    protocol: PROTOCOL,
                },
                SHORT,
            )
            .await?;
        if reply.protocol != Some(PROTOCOL) {
            return Err(CallError::Refused(format!(
                "{} speaks protocol {}, this machine {PROTOCOL}",
                self.label(),
                reply.protocol.map_or("none".to_owned(), |p| p.to_string())
            )));
        }
        Ok(())
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
/// version and protocol check a run makes.
pub async fn host_capabilities(
    on: &str,
    hosts: &BTreeMap<String, handoff_core::HostConfig>,
    env: &BTreeMap<String, String>,
) -> Result<handoff_core::Capabilities, String> {
    let host = handoff_core::resolve_host(on, hosts)?;
    let link = Link::new(host, env)?;
    link.hello().await.map_err(|e| match e {
        CallError::Unreachable(m) | CallError::Refused(m) => format!("--on: {m}"),
    })?;
    let out = link
        .ssh
        .step(
            "reading its capabilities",
            "exec handoff capabilities --json",
            b"",
            SHORT,
        )
        .await
        .map_err(|e| format!("--on: {e}"))?;
    serde_json::from_str(out.stdout.trim()).map_err(|e| {
        format!(
            "--on: {} answered capabilities that do not read: {e}",
            link.host.label()
        )
    })
}
