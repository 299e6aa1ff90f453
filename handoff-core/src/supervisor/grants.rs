//! Grant attenuation: a nested adviser never holds more than the node that asked for it.

use std::collections::HashSet;

use super::dag::DagError;
use crate::redact::quote;
use crate::request::{GrantKind, GrantsResolved};

/// The grants a nested request asks for. There is no write: nested nodes are read-only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrantRequest {
    /// Shell access.
    pub bash: bool,
    /// Web search and fetch.
    pub web_search: bool,
    /// Names of the MCP servers wanted (empty: no MCP).
    pub mcp_servers: Vec<String>,
}

/// The grants a nested node gets: exactly what it asked for, provided its parent holds each of
/// them; `write` is always false.
///
/// Checked in this order: bash ([`DagError::GrantNotHeld`]), web search, MCP at all, then each
/// MCP server by name, in request order: named twice ([`DagError::DuplicateMcpServer`]) or not
/// among `parent_mcp_servers` ([`DagError::McpServerNotHeld`]). Asking for less than the parent
/// holds is always allowed.
pub fn attenuate(
    parent: &GrantsResolved,
    parent_mcp_servers: &[String],
    requested: &GrantRequest,
) -> Result<GrantsResolved, DagError> {
    let mcp = !requested.mcp_servers.is_empty();
    for (wanted, held, grant) in [
        (requested.bash, parent.bash, GrantKind::Bash),
        (
            requested.web_search,
            parent.web_search,
            GrantKind::WebSearch,
        ),
        (mcp, parent.mcp, GrantKind::Mcp),
    ] {
        if wanted && !held {
            return Err(DagError::GrantNotHeld { grant });
        }
    }
    let mut seen = HashSet::new();
    for server in &requested.mcp_servers {
        if !seen.insert(server.as_str()) {
            return Err(DagError::DuplicateMcpServer {
                server: quote(server),
            });
        }
        if !parent_mcp_servers.contains(server) {
            return Err(DagError::McpServerNotHeld {
                server: quote(server),
            });
        }
    }
    Ok(GrantsResolved {
        bash: requested.bash,
        web_search: requested.web_search,
        mcp,
        write: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(write: bool) -> GrantsResolved {
        GrantsResolved {
            bash: true,
            web_search: true,
            mcp: true,
            write,
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_child_gets_what_it_asks_within_the_parent_and_never_write() {
        let parent_servers = names(&["docs", "tickets"]);
        let got = attenuate(
            &all(true),
            &parent_servers,
            &GrantRequest {
                bash: true,
                web_search: false,
                mcp_servers: names(&["tickets"]),
            },
        )
        .unwrap();
        assert_eq!(
            got,
            GrantsResolved {
                bash: true,
                web_search: false,
                mcp: true,
                write: false
            }
        );
        let none = attenuate(&all(true), &parent_servers, &GrantRequest::default()).unwrap();
        assert_eq!(
            none,
            GrantsResolved {
                bash: false,
                web_search: false,
                mcp: false,
                write: false
            }
        );
    }

    #[test]
    fn a_child_cannot_gain_a_grant_the_parent_lacks() {
        let servers = names(&["docs"]);
        let cases = [
            (
                GrantsResolved {
                    bash: false,
                    ..all(false)
                },
                GrantRequest {
                    bash: true,
                    ..GrantRequest::default()
                },
                GrantKind::Bash,
            ),
            (
                GrantsResolved {
                    web_search: false,
                    ..all(false)
                },
                GrantRequest {
                    web_search: true,
                    ..GrantRequest::default()
                },
                GrantKind::WebSearch,
            ),
            (
                GrantsResolved {
                    mcp: false,
                    ..all(false)
                },
                GrantRequest {
                    mcp_servers: names(&["docs"]),
                    ..GrantRequest::default()
                },
                GrantKind::Mcp,
            ),
        ];
        for (parent, req, grant) in cases {
            assert_eq!(
                attenuate(&parent, &servers, &req),
                Err(DagError::GrantNotHeld { grant })
            );
        }
    }

    #[test]
    fn mcp_servers_must_be_a_subset_of_the_parents_by_name() {
        let servers = names(&["docs"]);
        let req = |v: &[&str]| GrantRequest {
            mcp_servers: names(v),
            ..GrantRequest::default()
        };
        assert!(matches!(
            attenuate(&all(false), &servers, &req(&["docs", "other"])),
            Err(DagError::McpServerNotHeld { server }) if server == "other"
        ));
        assert!(matches!(
            attenuate(&all(false), &servers, &req(&["docs", "docs"])),
            Err(DagError::DuplicateMcpServer { server }) if server == "docs"
        ));
        // A parent with MCP but no named server grants none.
        assert!(matches!(
            attenuate(&all(false), &[], &req(&["docs"])),
            Err(DagError::McpServerNotHeld { .. })
        ));
        // The refusal quotes the name on one line, whatever the worker sent.
        let err = attenuate(&all(false), &servers, &req(&["a\nb"])).unwrap_err();
        assert!(!err.to_string().contains('\n'));
    }
}
