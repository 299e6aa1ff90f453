//! The host's side: `handoff __host` answers one [`HostRequest`] with one [`HostReply`].
//!
//! Everything lives under the host's directory (`dir`, `~/handoff` by default):
//! `repos/<project>.git`, a bare repository per project that runs are pushed to, and
//! `runs/<run>/wt`, each run's own clone of it (its objects borrowed), where a background job
//! (`handoff <verb> --cwd …`) does the work with the host's own agent CLIs, credentials,
//! fingerprints, sandbox and reaper. Git runs through [`handoff_git::Git`]: no hook, no program
//! a repository's configuration names.

use std::os::unix::fs::DirBuilderExt as _;
use std::time::Duration;

use camino::{Utf8Path, Utf8PathBuf};
use handoff_core::{Cancel, HandoffResult, JobId, JobState, Masker, TaskStore};
use handoff_git::Git;

use crate::protocol::{
    HostReply, HostRequest, MAX_REQUEST, PROTOCOL, StartRun, is_object_id, is_project, is_run_id,
};

/// What the host side needs of the process that serves.
pub struct HostSide<'a> {
    /// The host's task store (its jobs).
    pub store: &'a dyn TaskStore,
    /// This `handoff` binary (a job's supervisor runs it).
    pub exe: Utf8PathBuf,
    /// Where detached jobs keep their files.
    pub jobs_dir: Utf8PathBuf,
    /// `HOME` here, for `~/…`.
    pub home: Utf8PathBuf,
    /// The secrets this host knows, masked in the job's recorded command line.
    pub known_secrets: Vec<String>,
}

/// How often a waiting request reads the store.
const POLL: Duration = Duration::from_millis(250);

/// How long a cleanup waits for a cancelled job to end.
const CANCEL_GRACE: Duration = Duration::from_secs(60);

/// Answers one request (its JSON bytes).
pub async fn serve(side: &HostSide<'_>, request: &[u8]) -> HostReply {
    if request.len() > MAX_REQUEST {
        return HostReply::error(format!("the request is larger than {MAX_REQUEST} bytes"));
    }
    let request: HostRequest = match serde_json::from_slice(request) {
        Ok(r) => r,
        Err(e) => return HostReply::error(format!("not a request of protocol {PROTOCOL}: {e}")),
    };
    let answered = match request {
        HostRequest::Repo { dir, project } => base(side, &dir)
            .and_then(|base| repo(&base, &project))
            .map(|path| HostReply {
                repo: Some(path.into_string()),
                ..HostReply::ok()
            }),
        HostRequest::Start(start) => self::start(side, &start),
        HostRequest::Finish {
            dir,
            project,
            run,
            job,
            collect,
        } => finish(side, &dir, &project, &run, &job, collect).await,
        HostRequest::Cancel { job } => cancel(side, &job),
        HostRequest::Cleanup {
            dir,
            project,
            run,
            job,
        } => cleanup(side, &dir, &project, &run, job.as_deref()).await,
    };
    answered.unwrap_or_else(HostReply::error)
}

/// The host's directory, `~/` expanded, made (0700) when missing, symbolic links resolved.
fn base(side: &HostSide<'_>, dir: &str) -> Result<Utf8PathBuf, String> {
    let path = match dir.strip_prefix("~/") {
        Some(rest) => side.home.join(rest),
        None if dir.starts_with('/') => Utf8PathBuf::from(dir),
        None => return Err(format!("the directory '{dir}' is not absolute")),
    };
    if dir.split('/').any(|p| p == "..") || dir.chars().any(char::is_control) {
        return Err(format!(
            "the directory {dir:?} has '..' or a control character"
        ));
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&path)
        .map_err(|e| format!("cannot create {path}: {e}"))?;
    let real = std::fs::canonicalize(&path).map_err(|e| format!("cannot resolve {path}: {e}"))?;
    Utf8PathBuf::from_path_buf(real).map_err(|p| format!("{} is not UTF-8", p.display()))
}

fn checked_project(project: &str) -> Result<(), String> {
    if is_project(project) {
        Ok(())
    } else {
        Err(format!("{project:?} is not a project key"))
    }
}

fn checked_run(run: &str) -> Result<(), String> {
    if is_run_id(run) {
        Ok(())
    } else {
        Err(format!("{run:?} is not a run id"))
    }
}

/// The project's bare repository under `base`, made when missing.
fn repo(base: &Utf8Path, project: &str) -> Result<Utf8PathBuf, String> {
    checked_project(project)?;
    let repos = base.join("repos");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&repos)
        .map_err(|e| format!("cannot create {repos}: {e}"))?;
    let path = repos.join(format!("{project}.git"));
    if !path.join("HEAD").is_file() {
        Git::new(repos.clone())
            .run(&["init", "-q", "--bare", path.as_str()])
            .map_err(|e| format!("cannot create the repository {path}: {e}"))?;
    }
    Ok(path)
}

/// A run's directory and the worktree in it.
fn run_paths(base: &Utf8Path, run: &str) -> (Utf8PathBuf, Utf8PathBuf) {
    let dir = base.join("runs").join(run);
    let wt = dir.join("wt");
    (dir, wt)
}

/// Runs of this directory that are running now.
fn running(side: &HostSide<'_>, base: &Utf8Path) -> Result<usize, String> {
    let runs = format!("{}/", base.join("runs"));
    let jobs = handoff_core::list_jobs(side.store).map_err(|e| e.to_string())?;
    Ok(jobs
        .iter()
        .filter(|j| j.state == JobState::Running)
        .filter(|j| j.cwd.as_deref().is_some_and(|c| c.starts_with(&runs)))
        .count())
}

fn start(side: &HostSide<'_>, s: &StartRun) -> Result<HostReply, String> {
    checked_run(&s.run)?;
    if !is_object_id(&s.commit) {
        return Err(format!("{:?} is not a commit id", s.commit));
    }
    if !["run", "advice", "run-with-advice"].contains(&s.verb.as_str()) {
        return Err(format!("{:?} is not a verb a host runs", s.verb));
    }
    if s.args.iter().any(|a| {
        let flag = a.split('=').next().unwrap_or(a);
        [
            "--cwd",
            "--instructions",
            "--detach",
            "--result",
            "--on",
            "--mcp-config",
        ]
        .contains(&flag)
    }) {
        return Err(
            "the command line names what the host decides itself, or a file of the asking machine"
                .to_owned(),
        );
    }
    let base = base(side, &s.dir)?;
    let repo = repo(&base, &s.project)?;
    // One start at a time: counting the runs and starting one is one step.
    let lock = std::fs::File::create(base.join(".start.lock"))
        .map_err(|e| format!("cannot open the start lock: {e}"))?;
    let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| format!("cannot take the start lock: {e}"))?;
    let now = running(side, &base)?;
    if now >= s.max_runs as usize {
        return Ok(HostReply {
            busy: true,
            ..HostReply::error(format!(
                "it runs {now} run(s) already, as many as it may (max_runs = {})",
                s.max_runs
            ))
        });
    }
    let (dir, wt) = run_paths(&base, &s.run);
    if dir.exists() {
        return Err(format!("the run {} exists already", s.run));
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot create {dir}: {e}"))?;
    let made = (|| {
        // A repository of the run's own, borrowing the project's objects: what other runs
        // push there meanwhile never shows in this one's evidence, and it has no remote.
        Git::new(dir.clone())
            .run(&["init", "-q", wt.as_str()])
            .map_err(|e| format!("cannot make the run's repository: {e}"))?;
        std::fs::write(
            wt.join(".git/objects/info/alternates"),
            format!("{}\n", repo.join("objects")),
        )
        .map_err(|e| format!("cannot make the run's repository: {e}"))?;
        Git::new(wt.clone())
            .run(&["checkout", "-q", "--detach", &s.commit])
            .map_err(|e| format!("cannot check out {}: {e}", s.commit))?;
        Ok::<_, String>(())
    })();
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    let mut args = vec![
        "--cwd".to_owned(),
        wt.to_string(),
        "--instructions".to_owned(),
        "-".to_owned(),
    ];
    args.extend(s.args.iter().cloned());
    let masker = Masker::new(side.known_secrets.clone());
    let masked = args
        .iter()
        .map(|a| masker.mask(a).text.into_owned())
        .collect();
    let started = handoff_core::detach_job(
        side.store,
        &side.exe,
        &side.jobs_dir,
        &s.verb,
        args,
        masked,
        Some(s.instructions.clone().into_bytes()),
    );
    match started {
        Ok(started) => Ok(HostReply {
            job: Some(started.job.id.as_str().to_owned()),
            worktree: Some(wt.into_string()),
            ..HostReply::ok()
        }),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(format!("cannot start the run: {e}"))
        }
    }
}

fn job_id(job: &str) -> Result<JobId, String> {
    JobId::parse(job).ok_or_else(|| format!("{job:?} is not a job id"))
}

async fn finish(
    side: &HostSide<'_>,
    dir: &str,
    project: &str,
    run: &str,
    job: &str,
    collect: bool,
) -> Result<HostReply, String> {
    checked_run(run)?;
    let id = job_id(job)?;
    let (_tx, never) = tokio::sync::watch::channel(false);
    let job = handoff_core::wait_job(side.store, &id, POLL, &never)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the wait was interrupted")?;
    if job.state != JobState::Finished {
        return Err(format!(
            "the run's job {} was lost on the host: its supervisor ended without a result",
            job.id
        ));
    }
    let mut reply = HostReply {
        exit: job.exit_code,
        result: job.result.clone(),
        ..HostReply::ok()
    };
    if collect && job.exit_code == Some(handoff_core::exit::OK) {
        let result: HandoffResult = job
            .result
            .as_deref()
            .and_then(|l| serde_json::from_str(l).ok())
            .ok_or("the run succeeded without a result to read")?;
        let base = base(side, dir)?;
        let repo = repo(&base, project)?;
        let (_, wt) = run_paths(&base, run);
        let git = result
            .git
            .as_ref()
            .ok_or("the run's result has no git evidence")?;
        let (inside, files): (Vec<String>, Vec<String>) = git
            .changed_files
            .iter()
            .cloned()
            .partition(|f| f == ".git" || f.starts_with(".git/"));
        if !inside.is_empty() {
            reply.uncollected = Some(format!(
                "a commit cannot carry changes inside .git ({})",
                inside.join(", ")
            ));
        } else if git.masked_paths > 0 {
            reply.uncollected = Some(format!(
                "{} changed path(s) are named after a secret",
                git.masked_paths
            ));
        } else if !files.is_empty() {
            match collect_change(&wt, &repo, run, &files) {
                Ok(commit) => reply.commit = Some(commit),
                Err(e) => reply.uncollected = Some(e),
            }
        }
    }
    Ok(reply)
}

/// The run's change to `files` as one commit on the commit it started from, pushed to
/// `refs/heads/handoff/<run>` of the project's repository.
fn collect_change(
    wt: &Utf8Path,
    repo: &Utf8Path,
    run: &str,
    files: &[String],
) -> Result<String, String> {
    let git = Git::new(wt.to_owned());
    let index = git
        .private_index("collect")
        .map_err(|e| format!("cannot collect the change: {e}"))?;
    let staging = index.git();
    let fail = |e: handoff_git::GitError| format!("cannot collect the change: {e}");
    staging.run(&["read-tree", "HEAD"]).map_err(fail)?;
    let mut add = vec!["--literal-pathspecs", "add", "-A", "-f", "--"];
    add.extend(files.iter().map(String::as_str));
    staging.run(&add).map_err(fail)?;
    let tree = staging.text(&["write-tree"]).map_err(fail)?;
    let message = format!("handoff: the change of run {run}");
    let commit = git
        .text(&[
            "-c",
            "user.name=handoff",
            "-c",
            "user.email=handoff@localhost",
            "commit-tree",
            &tree,
            "-p",
            "HEAD",
            "-m",
            &message,
        ])
        .map_err(fail)?;
    let refspec = format!("{commit}:refs/heads/handoff/{run}");
    git.run(&["push", "-q", "--no-verify", repo.as_str(), &refspec])
        .map_err(fail)?;
    Ok(commit)
}

/// Stops the job (a job that ended already, or was lost, has nothing left to stop).
fn cancel(side: &HostSide<'_>, job: &str) -> Result<HostReply, String> {
    handoff_core::cancel_job(side.store, &job_id(job)?)
        .map(|_| HostReply::ok())
        .map_err(|e| e.to_string())
}

async fn cleanup(
    side: &HostSide<'_>,
    dir: &str,
    project: &str,
    run: &str,
    job: Option<&str>,
) -> Result<HostReply, String> {
    checked_run(run)?;
    checked_project(project)?;
    let base = base(side, dir)?;
    if let Some(job) = job {
        let id = job_id(job)?;
        if let Ok(Cancel::Signalled(_)) = handoff_core::cancel_job(side.store, &id) {
            let (_tx, never) = tokio::sync::watch::channel(false);
            let _ = tokio::time::timeout(
                CANCEL_GRACE,
                handoff_core::wait_job(side.store, &id, POLL, &never),
            )
            .await;
        }
    }
    let (run_dir, _) = run_paths(&base, run);
    if run_dir.exists() {
        std::fs::remove_dir_all(&run_dir).map_err(|e| format!("cannot remove {run_dir}: {e}"))?;
    }
    let repo = base.join("repos").join(format!("{project}.git"));
    if repo.join("HEAD").is_file() {
        let git = Git::new(repo.clone());
        for r in [
            format!("refs/handoff/runs/{run}"),
            format!("refs/heads/handoff/{run}"),
        ] {
            if git.commit_id(&r).is_some() {
                git.run(&["update-ref", "-d", &r])
                    .map_err(|e| format!("cannot delete {r}: {e}"))?;
            }
        }
    }
    Ok(HostReply::ok())
}
