//! The grants of a request (bash, web search, MCP, write) with their provenance, attenuated
//! from the parent's for a nested request, and its MCP servers.

use super::hash::sha256_tagged;
use super::{InputRejection, NestedParent, RunInput, parse_bool};
use crate::mcp::McpDescriptor;
use crate::paths;
use crate::provider::ProviderSpec;
use crate::redact::quote;
use crate::request::*;

impl RunInput {
    pub(super) fn grants(
        &self,
        spec: &ProviderSpec,
        write: bool,
        nested: Option<NestedParent<'_>>,
    ) -> Result<(Grants, Option<McpDescriptor>), InputRejection> {
        let bash_refused = InputRejection::at("--bash");
        let web_refused = InputRejection::at("--web-search");
        let mcp_refused = InputRejection::at("--mcp-config");
        let bash = parse_bool("--bash", &self.bash)?;
        let web = parse_bool("--web-search", &self.web_search)?;
        // A nested request inherits its parent's bash grant unless it asks for less.
        let bash_default = nested.is_none_or(|p| p.grants.bash);
        let bash_resolved = bash.unwrap_or(bash_default);
        let web_resolved = web.unwrap_or(false);
        if let Some(p) = nested {
            if bash_resolved && !p.grants.bash {
                return Err(bash_refused(format!(
                    "nested request cannot expand the parent's grants: bash is not held by the \
                     parent ({} runs with bash=false)",
                    p.caller
                )));
            }
            if web_resolved && !p.grants.web_search {
                return Err(web_refused(
                    "nested request cannot expand the parent's grants: web search is not held \
                     by the parent"
                        .into(),
                ));
            }
        }
        if !bash_resolved && !spec.grants.bash_disable {
            return Err(bash_refused(format!(
                "bash=false is unsupported for {}",
                spec.id
            )));
        }
        if bash_resolved && !spec.grants.bash {
            return Err(bash_refused(format!(
                "{} has no bash control; pass --bash false",
                spec.id
            )));
        }
        if web_resolved && !spec.grants.web_search {
            return Err(web_refused(format!(
                "webSearch is unsupported for {}",
                spec.id
            )));
        }
        let bytes = match (&self.mcp_config, &self.mcp_inline) {
            (Some(_), Some(_)) => {
                return Err(mcp_refused(
                    "give the MCP descriptor once (file or inline), not both".into(),
                ));
            }
            (Some(_), None) | (None, Some(_)) if !spec.grants.mcp => {
                return Err(mcp_refused(format!(
                    "--mcp-config is unsupported for {}",
                    spec.id
                )));
            }
            (Some(p), None) => Some(
                paths::read_input_file("--mcp-config", p, crate::mcp::MAX_MCP_BYTES)
                    .map_err(&mcp_refused)?,
            ),
            (None, Some(b)) => {
                if b.len() > crate::mcp::MAX_MCP_BYTES {
                    return Err(mcp_refused(format!(
                        "the MCP descriptor exceeds {} bytes",
                        crate::mcp::MAX_MCP_BYTES
                    )));
                }
                Some(b.clone())
            }
            (None, None) => None,
        };
        let mcp = match bytes {
            Some(bytes) => {
                let d = McpDescriptor::parse(&bytes).map_err(&mcp_refused)?;
                Some((sha256_tagged(&bytes), d))
            }
            None => None,
        };
        let has_mcp = mcp.as_ref().is_some_and(|(_, d)| !d.servers.is_empty());
        if let (Some(p), Some((_, d))) = (nested, &mcp) {
            check_mcp_subset(d, p.mcp).map_err(&mcp_refused)?;
        }
        let src = |given: bool| match (given, nested) {
            (true, _) => GrantSource::Explicit,
            (false, Some(_)) => GrantSource::ParentAttenuated,
            (false, None) => GrantSource::OperationDefault,
        };
        let grants = Grants {
            requested: GrantsRequested {
                bash: bash_resolved,
                web_search: web_resolved,
                mcp: has_mcp,
            },
            resolved: GrantsResolved {
                bash: bash_resolved,
                web_search: web_resolved,
                mcp: has_mcp,
                write,
            },
            provenance: GrantsProvenance {
                bash: src(bash.is_some()),
                web_search: src(web.is_some()),
                mcp: src(self.mcp_config.is_some() || self.mcp_inline.is_some()),
                write: GrantSource::ModeDerived,
            },
            mcp: McpGrant {
                digest: mcp.as_ref().filter(|_| has_mcp).map(|(d, _)| d.clone()),
                servers: mcp.as_ref().map(|(_, d)| d.names()).unwrap_or_default(),
            },
        };
        Ok((
            grants,
            mcp.map(|(_, d)| d).filter(|d| !d.servers.is_empty()),
        ))
    }
}

/// A nested request's MCP servers must be a subset of the parent's, each exactly as the parent
/// has it (same command, arguments, URL and secret references).
fn check_mcp_subset(d: &McpDescriptor, parent: Option<&McpDescriptor>) -> Result<(), String> {
    if d.servers.is_empty() {
        return Ok(());
    }
    let Some(parent) = parent else {
        return Err(
            "nested request cannot expand the parent's grants: the parent has no MCP servers"
                .into(),
        );
    };
    for s in &d.servers {
        match parent.servers.iter().find(|p| p.name() == s.name()) {
            None => {
                return Err(format!(
                    "nested request cannot expand the parent's grants: MCP server {:?} is not \
                     one of the parent's",
                    quote(s.name())
                ));
            }
            Some(p) if p != s => {
                return Err(format!(
                    "nested request cannot expand the parent's grants: MCP server {:?} differs \
                     from the parent's definition",
                    quote(s.name())
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}
