//! Example programs live beside this file; see `embed_default.rs`, `custom_provider.rs` and
//! `continue_task.rs`. What they share, and what tests call, is here.

/// Runs `git args…` in `dir` for a scratch repository, with an identity of its own for its
/// commits; fails when git is missing or fails.
pub fn git(dir: &std::path::Path, args: &[&str]) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let status = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=example",
            "-c",
            "user.email=example@example.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .status()
        .context("git is needed to make the scratch repository")?;
    if !status.success() {
        anyhow::bail!("git {} failed", args.join(" "));
    }
    Ok(())
}

pub mod continue_task {
    //! Continuing a task through the library alone, as `handoff continue` does.

    use std::collections::BTreeMap;
    use std::sync::Arc;

    use anyhow::{Context, Result, bail};
    use camino::{Utf8Path, Utf8PathBuf};
    use handoff_continue::{ContinueContext, ContinueRequest};
    use handoff_core::{Config, ContinueResult, Engine, EngineOptions};

    /// The default engine (all ten agents, git evidence from gix, the user's configuration)
    /// for the environment `env`, as the `handoff` binary builds it.
    pub fn engine(env: &BTreeMap<String, String>) -> Result<Engine> {
        engine_with(env, |_| {})
    }

    /// [`engine`], with its options adjusted by `adjust` before the engine is built (e.g. a
    /// runtime directory of its own).
    pub fn engine_with(
        env: &BTreeMap<String, String>,
        adjust: impl FnOnce(&mut EngineOptions),
    ) -> Result<Engine> {
        let registry = handoff_adapters::default_registry();
        let loaded = Config::load(env).context("configuration")?;
        if let Err(e) = loaded.config.check_against(&registry) {
            bail!("configuration: {e}");
        }
        let mut options = EngineOptions::from_process();
        options.env = env.clone();
        options.preflight_cache = env
            .get("HOME")
            .filter(|h| h.starts_with('/'))
            .map(|h| Utf8PathBuf::from(h).join(".cache/handoff/preflight"));
        // Private directories take their default place, the private work directory, as the
        // binary's do: not `$TMPDIR`, which a sandboxed agent may write.
        options.config = loaded.config;
        options.config_path = loaded.path;
        adjust(&mut options);
        Ok(Engine::new(
            registry,
            Arc::new(handoff_git::GitWorkspace::new()),
            options,
        ))
    }

    /// Continues the task as `request` says, with the default engine and task store of the
    /// environment `env`; returns the same `handoff.continue.v1` result the CLI prints.
    pub async fn continue_with(
        env: BTreeMap<String, String>,
        request: &ContinueRequest,
    ) -> Result<ContinueResult> {
        continue_on(&engine(&env)?, env, request).await
    }

    /// [`continue_with`] on a given engine.
    pub async fn continue_on(
        engine: &Engine,
        env: BTreeMap<String, String>,
        request: &ContinueRequest,
    ) -> Result<ContinueResult> {
        let store = handoff_store::SqliteStore::open_default(&env)?;
        let state_dir = handoff_store::default_path(&env)?
            .parent()
            .map_or_else(|| Utf8PathBuf::from("."), Utf8Path::to_owned);
        let ctx = ContinueContext {
            engine,
            store: &store,
            state_dir,
            env,
        };
        let (_keep, cancel) = tokio::sync::watch::channel(false);
        Ok(handoff_continue::continue_task(request, &ctx, cancel).await)
    }
}
