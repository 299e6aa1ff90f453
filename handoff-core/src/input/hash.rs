//! The hashes of a request: its intent (what is asked, of whom) and its exact bytes.

use sha2::{Digest, Sha256};

use crate::request::Request;

pub(super) fn sha256_tagged(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// The intent hash: what is asked, of whom, with which controls — independent of lineage,
/// budgets and caller. Canonical JSON (sorted keys, no whitespace) under `handoff.intent.v1`.
pub fn intent_hash(r: &Request) -> String {
    let v = serde_json::json!({
        "schemaVersion": "handoff.intent.v1",
        "operation": r.operation,
        "targetHarness": r.target.harness,
        "mode": r.mode,
        "cwd": r.cwd,
        "instructions": r.instructions,
        "selection": r.selection.resolved,
        "grants": {
            "resolved": r.grants.resolved,
            "mcpDigest": r.grants.mcp.digest,
            "mcpServers": r.grants.mcp.servers,
        },
        "delegation": r.delegation.mode,
    });
    // serde_json's map is ordered by key, so this serialization is canonical.
    sha256_tagged(v.to_string().as_bytes())
}

/// `sha256:<hex>` of a request's serialized bytes (`JSON + "\n"`).
pub fn request_hash(r: &Request) -> String {
    let mut bytes = serde_json::to_vec(r).unwrap_or_default();
    bytes.push(b'\n');
    sha256_tagged(&bytes)
}
