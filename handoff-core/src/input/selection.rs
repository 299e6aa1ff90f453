//! The selection of a request: model, effort and turn limit, each with where it came from
//! (flag, configuration, operation default, provider default).

use super::{InputRejection, RunInput, parse_int};
use crate::config::AgentConfig;
use crate::names::{Operation, check_model};
use crate::provider::ProviderSpec;
use crate::request::*;

impl RunInput {
    pub(super) fn selection(
        &self,
        spec: &ProviderSpec,
        op: Operation,
        config: &AgentConfig,
    ) -> Result<Selection, InputRejection> {
        let id = &spec.id;
        if let Some(m) = &self.model {
            check_model(m).map_err(InputRejection::at("--model"))?;
        }
        // `field` is the flag, or `config` for the user's configuration (`origin` says which
        // value of it).
        let check_effort = |e: &str, field: &'static str, origin: &str| {
            if spec.effort.is_empty() {
                return Err(InputRejection::new(
                    field,
                    format!("{origin} is unsupported for {id}"),
                ));
            }
            if !spec.effort.contains(&e) {
                return Err(InputRejection::new(
                    field,
                    format!(
                        "{origin} {e:?} is unsupported for {id}; expected one of: {}",
                        spec.effort.join(", ")
                    ),
                ));
            }
            Ok(())
        };
        if let Some(e) = &self.effort {
            check_effort(e, "--effort", "--effort")?;
        }
        if let Some(e) = &config.effort {
            check_effort(e, "config", &format!("config agents.{id}.effort"))?;
        }
        if spec.max_turns.is_none() && config.max_turns.is_some() {
            return Err(InputRejection::new(
                "config",
                format!("config agents.{id}.max_turns: turn limits are unsupported for {id}"),
            ));
        }
        let max_turns = match &self.max_turns {
            Some(_) if spec.max_turns.is_none() => {
                return Err(InputRejection::new(
                    "--max-turns",
                    format!("--max-turns is unsupported for {id}"),
                ));
            }
            Some(_) => Some(parse_int("--max-turns", &self.max_turns, 1u32, 100, 1)?),
            None => None,
        };
        let (model, model_src) = match (&self.model, &config.model) {
            (Some(m), _) => (m.clone(), SelectionSource::Explicit),
            (None, Some(m)) => (m.clone(), SelectionSource::Config),
            (None, None) => (
                PROVIDER_DEFAULT.to_owned(),
                SelectionSource::ProviderDefault,
            ),
        };
        let (effort, effort_src) = match (&self.effort, &config.effort, op, spec.advice_effort) {
            (Some(e), _, _, _) => (e.clone(), SelectionSource::Explicit),
            (None, Some(e), _, _) => (e.clone(), SelectionSource::Config),
            (None, None, Operation::Advice, Some(d)) => {
                (d.to_owned(), SelectionSource::OperationDefault)
            }
            (None, None, _, _) => (
                PROVIDER_DEFAULT.to_owned(),
                SelectionSource::ProviderDefault,
            ),
        };
        let (turns, turns_src) = match (max_turns, config.max_turns, spec.max_turns) {
            (Some(n), _, _) => (Some(n), SelectionSource::Explicit),
            (None, Some(n), Some(_)) => (Some(n), SelectionSource::Config),
            (None, _, Some(d)) => (
                Some(if op == Operation::Advice {
                    d.advice
                } else {
                    d.handoff
                }),
                SelectionSource::OperationDefault,
            ),
            (None, _, None) => (None, SelectionSource::ProviderDefault),
        };
        Ok(Selection {
            requested: SelectionRequested {
                model: self.model.clone(),
                effort: self.effort.clone(),
                max_turns,
            },
            resolved: SelectionResolved {
                model,
                effort,
                max_turns: turns,
            },
            provenance: SelectionProvenance {
                model: model_src,
                effort: effort_src,
                max_turns: turns_src,
            },
        })
    }
}
