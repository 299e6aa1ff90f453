//! A local npm registry to install from the way a user does: verdaccio ([`VERDACCIO`], the last
//! release that runs on Node.js 20) from the npm registry, kept under `target/npm-e2e/verdaccio`,
//! serving on 127.0.0.1 with no uplinks, so only what was published to it can be installed.
//! Stopped when dropped, on failure too.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// The pinned verdaccio release.
pub const VERDACCIO: &str = "6.8.0";

/// How long verdaccio may take to answer after starting.
const START_LIMIT: Duration = Duration::from_secs(60);

/// Installs verdaccio under `prefix` unless it is there at [`VERDACCIO`]; returns its script.
pub fn install(prefix: &Path) -> Result<PathBuf> {
    crate::npm_prefix::install(prefix, &[("verdaccio", VERDACCIO)], "the npm install test")?;
    let script = prefix.join("node_modules/verdaccio/bin/verdaccio");
    if !script.is_file() {
        bail!("{} is missing after installing verdaccio", script.display());
    }
    Ok(script)
}

/// A running verdaccio, and what publishing to it needs.
pub struct Registry {
    child: Child,
    /// `http://127.0.0.1:<port>/`.
    pub url: String,
    port: u16,
    dir: PathBuf,
    /// The npm user configuration holding the publisher's token.
    npmrc: PathBuf,
}

/// A free port on 127.0.0.1 (free when asked; verdaccio binds it right after).
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot bind 127.0.0.1")?;
    Ok(listener.local_addr()?.port())
}

/// One HTTP/1.1 exchange with the registry; returns the status and the body.
fn http(port: u16, method: &str, path: &str, body: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(20)))?;
    stream.set_write_timeout(Some(Duration::from_secs(20)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Accept: application/json\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    let status = reply
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("{method} {path}: not an HTTP reply"))?;
    let body = reply
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Ok((status, body))
}

impl Registry {
    /// Starts verdaccio (`script`) with its configuration, storage and log in `dir`, waits for
    /// it to answer, and signs up a throwaway publisher.
    pub fn start(script: &Path, dir: &Path) -> Result<Registry> {
        std::fs::create_dir_all(dir)?;
        let port = free_port()?;
        let quoted = |p: &Path| serde_json::to_string(&p.to_string_lossy()).unwrap_or_default();
        // No uplinks: a package that was not published here is not found.
        let config = format!(
            "storage: {}\nauth:\n  htpasswd:\n    file: {}\nuplinks: {{}}\npackages:\n  \
             '**':\n    access: $all\n    publish: $authenticated\nmax_body_size: 1gb\n\
             log: {{ type: stdout, format: pretty, level: warn }}\n",
            quoted(&dir.join("storage")),
            quoted(&dir.join("htpasswd")),
        );
        let config_path = dir.join("config.yaml");
        std::fs::write(&config_path, config)?;
        let log = std::fs::File::create(dir.join("verdaccio.log"))?;
        // In the caller's process group: an interrupted run stops it too.
        let child = Command::new("node")
            .arg(script)
            .arg("--config")
            .arg(&config_path)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .current_dir(dir)
            .env("HOME", dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("cannot start verdaccio with node")?;
        let mut registry = Registry {
            child,
            url: format!("http://127.0.0.1:{port}/"),
            port,
            dir: dir.to_path_buf(),
            npmrc: dir.join("publisher.npmrc"),
        };
        registry.wait_ready()?;
        registry.sign_up()?;
        eprintln!("==> verdaccio {VERDACCIO} on {}", registry.url);
        Ok(registry)
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("verdaccio.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn wait_ready(&mut self) -> Result<()> {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!("verdaccio exited at start ({status}):\n{}", self.log_tail());
            }
            if matches!(http(self.port, "GET", "/-/ping", ""), Ok((200, _))) {
                return Ok(());
            }
            if started.elapsed() > START_LIMIT {
                bail!(
                    "verdaccio did not answer on {} within {}s:\n{}",
                    self.url,
                    START_LIMIT.as_secs(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Signs up a throwaway user (what `npm adduser` does) and keeps its token for publishing.
    fn sign_up(&self) -> Result<()> {
        let user = "handoff-publisher";
        let password: String = format!("pw-{}-{}", std::process::id(), self.port);
        let body = serde_json::json!({
            "name": user,
            "password": password,
            "email": "publisher@example.invalid",
        })
        .to_string();
        let (status, reply) = http(
            self.port,
            "PUT",
            &format!("/-/user/org.couchdb.user:{user}"),
            &body,
        )?;
        let token = reply
            .find('{')
            .zip(reply.rfind('}'))
            .and_then(|(a, b)| serde_json::from_str::<serde_json::Value>(&reply[a..=b]).ok())
            .and_then(|v| v["token"].as_str().map(str::to_owned));
        let Some(token) = token.filter(|_| status == 201) else {
            bail!("verdaccio refused to sign up a publisher ({status}): {reply}");
        };
        std::fs::write(
            &self.npmrc,
            format!("//127.0.0.1:{}/:_authToken={token}\n", self.port),
        )?;
        Ok(())
    }

    /// `npm publish` of one tarball.
    pub fn publish(&self, tarball: &Path) -> Result<()> {
        // An absolute path: npm reads `dir/x.tgz` as a GitHub repository.
        let tarball = std::fs::canonicalize(tarball)?;
        let out = Command::new("npm")
            .arg("publish")
            .arg(&tarball)
            .args([
                "--tag",
                "latest",
                "--ignore-scripts",
                "--registry",
                &self.url,
            ])
            .arg("--userconfig")
            .arg(&self.npmrc)
            .arg("--cache")
            .arg(self.dir.join("npm-cache"))
            .output()
            .context("cannot run npm publish")?;
        if !out.status.success() {
            bail!(
                "npm publish {} failed ({}):\n{}",
                tarball.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        eprintln!(
            "    published {}",
            tarball.file_name().unwrap_or_default().to_string_lossy()
        );
        Ok(())
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
