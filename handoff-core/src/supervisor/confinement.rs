//! The isolation a nested adviser runs under: its adapter's ranking of the request, confined
//! against the asking node's, with the grants it asked for lowered when that is enough.

use super::dag::DagError;
use crate::isolation::{Attenuation, Confinement, Isolation, RunShape};
use crate::mcp::McpDescriptor;
use crate::names::AgentId;
use crate::provider::Registry;
use crate::request::{GrantSource, GrantsResolved, McpGrant, Request};

/// The isolation the adviser of `request` runs under, or why it may not run: its adapter's
/// ranking of the request, confined against the asking node's ([`crate::isolation::confine`]).
pub(super) fn admit_isolation(
    registry: &Registry,
    caller: &AgentId,
    caller_isolation: &Isolation,
    request: &mut Request,
    mcp: &mut Option<McpDescriptor>,
) -> Result<(Isolation, Option<Attenuation>), DagError> {
    let refused = |weaker| DagError::WeakerIsolation {
        caller: caller.clone(),
        target: request.target.harness.clone(),
        weaker,
    };
    // A target without an adapter ranks as unconfined, and no lowering of grants helps it.
    let Some(provider) = registry.get(&request.target.harness) else {
        return Err(refused(
            Isolation::unconfined().weaker_dimensions(caller_isolation),
        ));
    };
    let confinement =
        crate::isolation::confine(caller_isolation, provider.as_ref(), &RunShape::of(request));
    match confinement {
        Confinement::AsConfigured(isolation) => Ok((isolation, None)),
        Confinement::Attenuated {
            isolation,
            grants,
            attenuation,
        } => {
            withhold(request, mcp, &grants);
            Ok((isolation, Some(attenuation)))
        }
        Confinement::Refused(weaker) => Err(refused(weaker)),
    }
}

/// Lowers `request`'s grants to `grants`: each grant withheld resolves to false, with the
/// provenance `isolation-attenuated`; MCP withheld takes its servers away.
fn withhold(request: &mut Request, mcp: &mut Option<McpDescriptor>, grants: &GrantsResolved) {
    let g = &mut request.grants;
    if g.resolved.bash && !grants.bash {
        g.resolved.bash = false;
        g.provenance.bash = GrantSource::IsolationAttenuated;
    }
    if g.resolved.web_search && !grants.web_search {
        g.resolved.web_search = false;
        g.provenance.web_search = GrantSource::IsolationAttenuated;
    }
    if g.resolved.mcp && !grants.mcp {
        g.resolved.mcp = false;
        g.provenance.mcp = GrantSource::IsolationAttenuated;
        g.mcp = McpGrant {
            digest: None,
            servers: Vec::new(),
        };
        *mcp = None;
    }
}
