//! Plan: the agent process of a run, worked out before anything starts. The adapter's pure
//! [`Provider::invocation`] gives program, argv, environment and files; the user's
//! configuration is applied on top, and the secrets to mask are collected.

use std::collections::BTreeMap;
use std::sync::Arc;

use camino::{Utf8Path, Utf8PathBuf};

use super::draft::Draft;
use super::verdict::Ended;
use super::{Engine, Launch};
use crate::config::{AgentConfig, config_secrets};
use crate::env::agent_env;
use crate::mcp::McpDescriptor;
use crate::output::ProviderOutput;
use crate::preflight::locate;
use crate::prompt::build_prompt;
use crate::provider::{Invocation, Provider, ProviderSpec, RunDir, give_run_temp};
use crate::redact::credential_values;
use crate::request::Request;
use crate::supervisor::CONTEXT_ENV;

/// The agent process of a run, planned but not started.
pub(super) struct Plan {
    /// The target's adapter.
    pub provider: Arc<dyn Provider>,
    /// The run's private directory; removed when dropped.
    pub run_dir: crate::private_dir::PrivateDir,
    /// Its path.
    pub run_path: Utf8PathBuf,
    /// The CLI, when it is on PATH.
    pub exe: Option<Utf8PathBuf>,
    /// The prompt given on stdin.
    pub prompt: String,
    /// What to run.
    pub invocation: Invocation,
    /// What a worker with advice must reach from inside a sandbox.
    pub nested: Option<crate::provider::NestedAccess>,
}

impl Engine {
    /// Plans the agent process of `request`: a refusal here is `rejected` (the request can't
    /// be expressed) or `not_run` (no private directory).
    pub(super) fn plan(
        &self,
        request: &Request,
        mcp: Option<McpDescriptor>,
        draft: &mut Draft,
        launch: &Launch,
    ) -> Result<Plan, Ended> {
        let provider = self
            .registry
            .get(&request.target.harness)
            .cloned()
            .ok_or_else(|| Ended::Rejected("unknown target".into()))?;
        let spec = provider.spec();
        let run_dir = self
            .scratch_dir()
            .map_err(|e| Ended::NotRun(format!("cannot create a run directory: {e}")))?;
        let run_path = run_dir.path().to_owned();
        let exe = locate(spec, &self.options.env);
        // A failover entry's account: its variables over the agent's own.
        let mut agent_config = self.options.config.agent(&spec.id);
        if let Some(account) = &draft.account {
            agent_config
                .env
                .extend(account.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let schema = provider_output_schema();
        let prompt = build_prompt(request, &schema, launch.nested_text.as_deref());
        let plan = RunDir {
            handoff_sandbox: (launch.confined || provider.asks_for_handoff_sandbox())
                && crate::sandbox::bubblewrap_here().is_some(),
            confined: launch.confined,
            path: run_path.clone(),
            executable: exe
                .clone()
                .unwrap_or_else(|| Utf8PathBuf::from(spec.executable)),
            prompt: prompt.clone(),
            output_schema: schema,
            mcp,
            parent_env: self.options.env.clone(),
            agent_config: agent_config.clone(),
            nested: launch.access.clone(),
        };
        let mut invocation = provider
            .invocation(request, &plan)
            .map_err(|e| Ended::Rejected(e.to_string()))?;
        give_run_temp(&mut invocation, &plan.temp());
        let applied = apply_config_env(&mut invocation, &self.options.env, &agent_config, spec)
            .map_err(Ended::Rejected)?;
        draft.secrets.extend(config_secrets(&agent_config));
        draft.result.policy = invocation.policy.clone();
        if let Some(obj) = draft.result.policy.as_object_mut() {
            obj.insert(
                "configuration".into(),
                configuration_receipt(
                    self.options.config_path.as_deref(),
                    request,
                    &agent_config,
                    applied,
                ),
            );
        }
        draft.secrets.extend(invocation.secrets.iter().cloned());
        draft.secrets.extend(credential_values(&invocation.env));
        if let Some(context) = &launch.context {
            draft.secrets.push(context.token.clone());
            invocation.env.insert(CONTEXT_ENV.into(), context.to_env());
        }
        // Every secret handoff knows is masked in what the run leaves too (the record it keeps
        // masks with them all): one masker serves the check below, the result and the record.
        draft.secrets.extend(self.known_secrets());
        request_masking(&request.instructions, &mut draft.secrets)?;
        Ok(Plan {
            provider,
            run_dir,
            run_path,
            exe,
            prompt,
            invocation,
            nested: launch.access.clone(),
        })
    }
}

/// Completes the secrets a run masks with the values its instructions show as secrets
/// (`DATABASE_PASSWORD=…`), so that they are masked wherever the run prints them, alone too (an
/// answer quoting one); and refuses the run when masking cannot be built, as it would fail
/// open.
fn request_masking(instructions: &str, secrets: &mut Vec<String>) -> Result<(), Ended> {
    secrets.extend(crate::Masker::recognised(instructions));
    crate::redact::try_masker(secrets).map_err(|e| Ended::Rejected(e.to_string()))?;
    Ok(())
}

/// The JSON Schema of the answer every agent must give: self-contained (no `$ref`), enums as
/// plain `enum` lists and no non-standard `format`s, so that every CLI's structured-output
/// feature (including OpenAI's strict mode) accepts it.
pub fn provider_output_schema() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator();
    let mut schema = generator
        .into_root_schema_for::<ProviderOutput>()
        .to_value();
    plain_schema(&mut schema);
    schema
}

fn plain_schema(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            // `oneOf` of string constants (documented enum variants) → one `enum`.
            let consts: Option<Vec<serde_json::Value>> = map
                .get("oneOf")
                .and_then(|o| o.as_array())
                .and_then(|items| items.iter().map(|i| i.get("const").cloned()).collect());
            if let Some(values) = consts
                && values.iter().all(serde_json::Value::is_string)
            {
                map.remove("oneOf");
                map.insert("type".into(), serde_json::json!("string"));
                map.insert("enum".into(), serde_json::Value::Array(values));
            }
            if map
                .get("format")
                .and_then(|f| f.as_str())
                .is_some_and(|f| f.starts_with("uint") || f.starts_with("int"))
            {
                map.remove("format");
            }
            map.values_mut().for_each(plain_schema);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(plain_schema),
        _ => {}
    }
}

/// Applies `pass_env` and `env` of the agent's configuration to the planned environment.
/// A variable the adapter sets itself (for isolation) can't be overridden: another value is
/// refused; the same value (`DISABLE_AUTOUPDATER = "1"` for Claude Code, say) is accepted.
pub(super) fn apply_config_env(
    invocation: &mut Invocation,
    parent: &BTreeMap<String, String>,
    config: &AgentConfig,
    spec: &ProviderSpec,
) -> Result<Vec<String>, String> {
    let passed = agent_env(spec, parent);
    let adapter_owned = |env: &BTreeMap<String, String>, k: &str| {
        env.get(k).is_some_and(|v| passed.get(k) != Some(v))
    };
    let mut applied = Vec::new();
    if let Some(name) = config
        .pass_env
        .iter()
        .chain(config.env.keys())
        .find(|n| n.as_str() == CONTEXT_ENV)
    {
        return Err(format!(
            "config agents.{}: {name} is set by handoff only, for workers that may ask for advice",
            spec.id
        ));
    }
    for name in &config.pass_env {
        if adapter_owned(&invocation.env, name) && invocation.env.get(name) != parent.get(name) {
            return Err(format!(
                "config agents.{}.pass_env: {name} is set by handoff for {}'s isolation",
                spec.id, spec.id
            ));
        }
        if let Some(v) = parent.get(name) {
            invocation.env.insert(name.clone(), v.clone());
            applied.push(format!("pass_env.{name}"));
        }
    }
    for (k, v) in &config.env {
        if adapter_owned(&invocation.env, k) && invocation.env.get(k) != Some(v) {
            return Err(format!(
                "config agents.{}.env.{k}: {k} is set by handoff for {}'s isolation and cannot be overridden",
                spec.id, spec.id
            ));
        }
        invocation.env.insert(k.clone(), v.clone());
        applied.push(format!("env.{k}"));
    }
    Ok(applied)
}

fn configuration_receipt(
    path: Option<&Utf8Path>,
    request: &Request,
    config: &AgentConfig,
    env_applied: Vec<String>,
) -> serde_json::Value {
    use crate::request::SelectionSource;
    let id = &request.target.harness;
    let p = &request.selection.provenance;
    let mut applied: Vec<String> = [
        ("model", p.model),
        ("effort", p.effort),
        ("max_turns", p.max_turns),
    ]
    .iter()
    .filter(|(_, src)| *src == SelectionSource::Config)
    .map(|(k, _)| (*k).to_owned())
    .collect();
    applied.extend(env_applied);
    applied.extend(
        config
            .config
            .iter()
            .filter_map(|o| o.split_once('='))
            .map(|(k, _)| format!("config.{}", k.trim())),
    );
    if let Some(t) = &config.provider {
        applied.extend(t.keys().map(|k| format!("provider.{k}")));
    }
    let applied: Vec<String> = applied
        .into_iter()
        .map(|a| format!("agents.{id}.{a}"))
        .collect();
    serde_json::json!({
        "file": path.map(|p| p.to_string()),
        "applied": applied,
    })
}

#[cfg(test)]
mod masking_tests {
    use super::*;

    #[test]
    fn instructions_add_what_they_show_as_secrets() {
        let mut secrets = vec!["configured-secret-1".to_owned()];
        request_masking(
            "Use API_TOKEN=Zq8wXk2Lm9Pv4Rt7 for the staging box.",
            &mut secrets,
        )
        .unwrap();
        assert_eq!(secrets, ["configured-secret-1", "Zq8wXk2Lm9Pv4Rt7"]);
    }

    #[test]
    fn a_run_whose_masking_cannot_be_built_is_refused() {
        let mut secrets = vec![crate::mask::FAIL_TO_BUILD.to_owned()];
        let refused = request_masking("review it", &mut secrets).unwrap_err();
        let Ended::Rejected(why) = refused else {
            panic!("{refused:?}")
        };
        assert!(why.starts_with("secrets cannot be masked"), "{why}");
    }
}
