//! Capability tokens: what lets a worker ask its root's supervisor for nested advice.
//!
//! A token is 32 random bytes (`hcap_` + 64 hex digits), kept only in the supervisor's
//! [`TokenBook`] together with the [`Capability`] it stands for. Tokens are bound to the root
//! (each root has its own book), use-limited and replay-protected by a per-request nonce.
//!
//! Redemption is two-phase so that a token is spent only by a request that turns out valid:
//! [`TokenBook::check`] verifies the token and nonce without consuming anything and returns a
//! [`Ticket`]; once the DAG has accepted the node, [`TokenBook::commit`] spends one use and
//! records the nonce. A ticket that is dropped spends nothing. [`TokenBook::redeem`] wraps the
//! two around a validation closure. Every refusal is recorded in [`TokenBook::audit`].

use std::collections::HashSet;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::AgentId;
use crate::request::GrantsResolved;
use crate::timestamp::now_iso;

/// Prefix of every capability token's text.
pub const TOKEN_PREFIX: &str = "hcap_";
/// Longest nonce accepted, in bytes.
pub const MAX_NONCE_BYTES: usize = 128;
/// Most refusals kept in the audit list; later ones are only counted.
pub const AUDIT_LIMIT: usize = 256;

const SECRET_BYTES: usize = 32;

/// What a token lets its holder do: ask for advice as `caller_harness`, under the node
/// `parent_run_id`, with at most the parent's grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capability {
    /// The node whose worker holds the token; nested nodes become its children.
    pub parent_run_id: String,
    /// The parent node's target: the only caller the supervisor will record.
    pub caller_harness: AgentId,
    /// The parent's grants, the ceiling of a child's ([`super::attenuate`]).
    pub parent_grants: GrantsResolved,
    /// The parent's MCP server names, the ceiling of a child's.
    pub parent_mcp_servers: Vec<String>,
}

/// A capability token's text. Its `Debug` never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// The text to hand to the worker (its supervisor context). A secret: add it to the
    /// run's redaction list.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Why a token was refused. Serialized (snake_case) in the audit list.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema, thiserror::Error,
)]
#[serde(rename_all = "snake_case")]
pub enum TokenError {
    /// Not a token of this root (unknown, malformed or forged).
    #[error("the capability token is not valid for this run")]
    Forged,
    /// The token was revoked (its node finished, or the DAG closed).
    #[error("the capability token was revoked")]
    Revoked,
    /// The nonce is empty, longer than 128 bytes or not printable ASCII.
    #[error("the request nonce must be 1 to 128 printable ASCII characters")]
    BadNonce,
    /// The nonce was already used with this token.
    #[error("the request nonce was already used (replay)")]
    Replayed,
    /// The token has no use left.
    #[error("the capability token has no use left")]
    Exhausted,
    /// The ticket was issued by another book.
    #[error("the ticket was not issued by this supervisor")]
    ForeignTicket,
    /// The token is genuine but arrived in another node's mailbox.
    #[error("the capability token belongs to another node's mailbox")]
    WrongMailbox,
    /// The request could not be read as one: not a regular file of this user's, a symbolic
    /// link, a FIFO, too large, not a nested request, or under a name that is not
    /// `<nonce>.json`. No token was looked at.
    #[error("the mailbox entry is not a readable nested request")]
    Malformed,
}

/// One refused attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenAudit {
    /// When, ISO-8601 UTC with milliseconds.
    pub at: String,
    /// Why.
    pub rejection: TokenError,
    /// The node the token was minted for, when the token was genuine; for a malformed request,
    /// the node whose mailbox it arrived in.
    pub parent_run_id: Option<String>,
    /// The nonce, when it was well-formed.
    pub nonce: Option<String>,
}

/// Proof that a token and nonce were valid when checked; spend it with [`TokenBook::commit`].
/// Not `Clone`: a ticket is committed at most once.
#[derive(Debug, PartialEq, Eq)]
pub struct Ticket {
    book: [u8; 16],
    entry: usize,
    nonce: String,
    capability: Capability,
}

impl Ticket {
    /// What the token allows.
    pub fn capability(&self) -> &Capability {
        &self.capability
    }

    /// The request's nonce.
    pub fn nonce(&self) -> &str {
        &self.nonce
    }
}

/// Why [`TokenBook::redeem`] refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum RedeemError<E> {
    /// The token or nonce was refused; nothing was spent.
    #[error("{0}")]
    Token(TokenError),
    /// The request was refused by the validation; nothing was spent.
    #[error("{0}")]
    Refused(E),
}

#[derive(Clone)]
struct Entry {
    secret: [u8; SECRET_BYTES],
    capability: Capability,
    uses_left: u32,
    nonces: HashSet<String>,
    revoked: bool,
}

/// The tokens of one root run.
#[derive(Clone)]
pub struct TokenBook {
    root_run_id: String,
    id: [u8; 16],
    entries: Vec<Entry>,
    audit: Vec<TokenAudit>,
    audit_dropped: u64,
}

impl fmt::Debug for TokenBook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenBook")
            .field("root_run_id", &self.root_run_id)
            .field("tokens", &self.entries.len())
            .field("audit", &self.audit.len())
            .field("audit_dropped", &self.audit_dropped)
            .finish_non_exhaustive()
    }
}

impl TokenBook {
    /// An empty book for the root run `root_run_id`.
    pub fn new(root_run_id: &str) -> TokenBook {
        TokenBook {
            root_run_id: root_run_id.to_owned(),
            id: *uuid::Uuid::new_v4().as_bytes(),
            entries: Vec::new(),
            audit: Vec::new(),
            audit_dropped: 0,
        }
    }

    /// The root run the book belongs to.
    pub fn root_run_id(&self) -> &str {
        &self.root_run_id
    }

    /// Mints a fresh token for `capability`, good for `max_uses` committed requests (0 makes a
    /// token that is always [`TokenError::Exhausted`]). Fails only when the operating system's
    /// random generator does; nothing is recorded then.
    pub fn mint(
        &mut self,
        capability: Capability,
        max_uses: u32,
    ) -> Result<Token, getrandom::Error> {
        let mut secret = [0; SECRET_BYTES];
        getrandom::fill(&mut secret)?;
        self.entries.push(Entry {
            secret,
            capability,
            uses_left: max_uses,
            nonces: HashSet::new(),
            revoked: false,
        });
        Ok(Token(format!("{TOKEN_PREFIX}{}", hex::encode(secret))))
    }

    /// Verifies `token` and `nonce` without spending anything. Checked in this order: the token
    /// is one of this book's ([`TokenError::Forged`]; compared in constant time against every
    /// token), not revoked, the nonce is well-formed, not used before with this token
    /// ([`TokenError::Replayed`]), and a use is left ([`TokenError::Exhausted`]). A refusal is
    /// recorded in the audit list.
    pub fn check(&mut self, token: &str, nonce: &str) -> Result<Ticket, TokenError> {
        let Some(i) = self.find(token) else {
            return Err(self.refuse(TokenError::Forged, None, nonce));
        };
        match self.entries.get(i).map(|e| e.refusal(nonce)) {
            Some(None) => {}
            Some(Some(why)) => return Err(self.refuse(why, Some(i), nonce)),
            None => return Err(self.refuse(TokenError::Forged, None, nonce)),
        }
        let capability = self
            .entries
            .get(i)
            .map(|e| e.capability.clone())
            .ok_or(TokenError::Forged)?;
        Ok(Ticket {
            book: self.id,
            entry: i,
            nonce: nonce.to_owned(),
            capability,
        })
    }

    /// [`check`](Self::check), and that the token was minted for `node`: the node whose
    /// mailbox the request arrived in ([`TokenError::WrongMailbox`] otherwise, audited).
    pub fn check_from(
        &mut self,
        token: &str,
        nonce: &str,
        node: &str,
    ) -> Result<Ticket, TokenError> {
        let ticket = self.check(token, nonce)?;
        if ticket.capability.parent_run_id != node {
            return Err(self.refuse(TokenError::WrongMailbox, Some(ticket.entry), nonce));
        }
        Ok(ticket)
    }

    /// Records a request refused before any token was looked at ([`TokenError::Malformed`]),
    /// under the node whose mailbox it arrived in and its nonce when its name gave one.
    pub fn record_malformed(&mut self, node: &str, nonce: Option<&str>) {
        if self.audit.len() >= AUDIT_LIMIT {
            self.audit_dropped += 1;
            return;
        }
        self.audit.push(TokenAudit {
            at: now_iso(),
            rejection: TokenError::Malformed,
            parent_run_id: Some(node.to_owned()),
            nonce: nonce.filter(|n| nonce_ok(n)).map(str::to_owned),
        });
    }

    /// Spends one use of the ticket's token and records its nonce. Call it only once the
    /// request is known valid (the DAG registered the node). Re-checks revocation, replay and
    /// uses, since another request may have been committed since the check; a refusal spends
    /// nothing and is audited.
    pub fn commit(&mut self, ticket: Ticket) -> Result<(), TokenError> {
        if ticket.book != self.id {
            return Err(self.refuse(TokenError::ForeignTicket, None, &ticket.nonce));
        }
        let i = ticket.entry;
        match self.entries.get(i).map(|e| e.refusal(&ticket.nonce)) {
            Some(None) => {}
            Some(Some(why)) => return Err(self.refuse(why, Some(i), &ticket.nonce)),
            None => return Err(self.refuse(TokenError::ForeignTicket, None, &ticket.nonce)),
        }
        if let Some(e) = self.entries.get_mut(i) {
            e.uses_left -= 1;
            e.nonces.insert(ticket.nonce);
        }
        Ok(())
    }

    /// [`check`](Self::check), then `validate` with the capability, then
    /// [`commit`](Self::commit) only if `validate` succeeded. The token is spent exactly when
    /// the result is `Ok`.
    pub fn redeem<T, E>(
        &mut self,
        token: &str,
        nonce: &str,
        validate: impl FnOnce(&Capability) -> Result<T, E>,
    ) -> Result<T, RedeemError<E>> {
        let ticket = self.check(token, nonce).map_err(RedeemError::Token)?;
        let value = validate(ticket.capability()).map_err(RedeemError::Refused)?;
        self.commit(ticket).map_err(RedeemError::Token)?;
        Ok(value)
    }

    /// Revokes every token minted for `parent_run_id` (call it when that node finishes).
    /// Returns how many were revoked now.
    pub fn revoke(&mut self, parent_run_id: &str) -> usize {
        let mut n = 0;
        for e in &mut self.entries {
            if !e.revoked && e.capability.parent_run_id == parent_run_id {
                e.revoked = true;
                n += 1;
            }
        }
        n
    }

    /// Revokes every token (call it when the DAG closes). Returns how many were revoked now.
    pub fn revoke_all(&mut self) -> usize {
        let mut n = 0;
        for e in self.entries.iter_mut().filter(|e| !e.revoked) {
            e.revoked = true;
            n += 1;
        }
        n
    }

    /// The refused attempts, oldest first (at most [`AUDIT_LIMIT`]).
    pub fn audit(&self) -> &[TokenAudit] {
        &self.audit
    }

    /// How many refusals were not kept because the audit list was full.
    pub fn audit_dropped(&self) -> u64 {
        self.audit_dropped
    }

    /// The entry whose secret equals the token's, comparing every entry in constant time.
    fn find(&self, token: &str) -> Option<usize> {
        let presented = parse(token)?;
        let mut found = None;
        for (i, e) in self.entries.iter().enumerate() {
            if ct_eq(&e.secret, &presented) {
                found = Some(i);
            }
        }
        found
    }

    fn refuse(&mut self, why: TokenError, entry: Option<usize>, nonce: &str) -> TokenError {
        if self.audit.len() >= AUDIT_LIMIT {
            self.audit_dropped += 1;
            return why;
        }
        self.audit.push(TokenAudit {
            at: now_iso(),
            rejection: why,
            parent_run_id: entry
                .and_then(|i| self.entries.get(i))
                .map(|e| e.capability.parent_run_id.clone()),
            nonce: nonce_ok(nonce).then(|| nonce.to_owned()),
        });
        why
    }
}

impl Entry {
    fn refusal(&self, nonce: &str) -> Option<TokenError> {
        if self.revoked {
            Some(TokenError::Revoked)
        } else if !nonce_ok(nonce) {
            Some(TokenError::BadNonce)
        } else if self.nonces.contains(nonce) {
            Some(TokenError::Replayed)
        } else if self.uses_left == 0 {
            Some(TokenError::Exhausted)
        } else {
            None
        }
    }
}

fn nonce_ok(nonce: &str) -> bool {
    !nonce.is_empty()
        && nonce.len() <= MAX_NONCE_BYTES
        && nonce.bytes().all(|b| b.is_ascii_graphic())
}

fn parse(token: &str) -> Option<[u8; SECRET_BYTES]> {
    let hex_text = token.strip_prefix(TOKEN_PREFIX)?;
    if hex_text.len() != 2 * SECRET_BYTES || hex_text.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    let mut out = [0u8; SECRET_BYTES];
    hex::decode_to_slice(hex_text, &mut out).ok()?;
    Some(out)
}

/// Equality whose time does not depend on where the inputs differ.
fn ct_eq(a: &[u8; SECRET_BYTES], b: &[u8; SECRET_BYTES]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b.iter()) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(parent: &str) -> Capability {
        Capability {
            parent_run_id: parent.to_owned(),
            caller_harness: AgentId::CODEX,
            parent_grants: GrantsResolved {
                bash: true,
                web_search: false,
                mcp: false,
                write: false,
            },
            parent_mcp_servers: Vec::new(),
        }
    }

    fn book_with(uses: u32) -> (TokenBook, Token) {
        let mut book = TokenBook::new("run-root");
        let token = book.mint(cap("run-root"), uses).unwrap();
        (book, token)
    }

    #[test]
    fn tokens_are_prefixed_hex_random_and_never_debug_printed() {
        let (mut book, a) = book_with(1);
        let b = book.mint(cap("run-root"), 1).unwrap();
        for t in [&a, &b] {
            let hex_part = t.expose().strip_prefix(TOKEN_PREFIX).unwrap();
            assert_eq!(hex_part.len(), 64);
            assert!(hex_part.bytes().all(|c| c.is_ascii_hexdigit()));
        }
        assert_ne!(a, b);
        assert!(!format!("{a:?}").contains(a.expose()));
        let book_dbg = format!("{book:?}");
        assert!(!book_dbg.contains(&a.expose()[TOKEN_PREFIX.len()..]));
        assert_eq!(book.root_run_id(), "run-root");
    }

    #[test]
    fn a_token_is_accepted_only_from_its_nodes_mailbox() {
        let (mut book, token) = book_with(5);
        assert!(book.check_from(token.expose(), "n1", "run-root").is_ok());
        assert_eq!(
            book.check_from(token.expose(), "n2", "run-other")
                .unwrap_err(),
            TokenError::WrongMailbox
        );
        book.record_malformed("run-root", Some("../x"));
        book.record_malformed("run-root", Some("n3"));
        let audit = book.audit();
        assert_eq!(audit.len(), 3);
        assert_eq!(audit[0].rejection, TokenError::WrongMailbox);
        assert_eq!(audit[0].parent_run_id.as_deref(), Some("run-root"));
        assert_eq!(audit[1].rejection, TokenError::Malformed);
        assert_eq!(audit[1].nonce.as_deref(), Some("../x"));
        assert_eq!(audit[2].nonce.as_deref(), Some("n3"));
        assert_eq!(
            serde_json::to_value(TokenError::WrongMailbox).unwrap(),
            "wrong_mailbox"
        );
    }

    #[test]
    fn a_forged_or_malformed_or_foreign_token_is_rejected_and_recorded() {
        let (mut book, token) = book_with(5);
        let mut other = TokenBook::new("run-other");
        let foreign = other.mint(cap("run-other"), 5).unwrap();
        let mut flipped = token.expose().to_owned();
        let last = if flipped.ends_with('0') { "1" } else { "0" };
        flipped.replace_range(flipped.len() - 1.., last);
        let cases = [
            format!("{TOKEN_PREFIX}{}", "0".repeat(64)),
            flipped,
            token.expose().to_uppercase(),
            token.expose()[TOKEN_PREFIX.len()..].to_owned(),
            String::new(),
            "hcap_zz".into(),
            foreign.expose().to_owned(),
        ];
        for (n, forged) in cases.iter().enumerate() {
            assert_eq!(
                book.check(forged, &format!("nonce-{n}")).unwrap_err(),
                TokenError::Forged,
                "{forged}"
            );
        }
        assert_eq!(book.audit().len(), cases.len());
        let first = &book.audit()[0];
        assert_eq!(first.rejection, TokenError::Forged);
        assert_eq!(first.parent_run_id, None);
        assert_eq!(first.nonce.as_deref(), Some("nonce-0"));
        // The genuine token still works and nothing was spent.
        assert!(book.check(token.expose(), "fresh").is_ok());
    }

    #[test]
    fn a_replayed_nonce_is_rejected_and_recorded() {
        let (mut book, token) = book_with(5);
        let ticket = book.check(token.expose(), "n1").unwrap();
        assert_eq!(ticket.nonce(), "n1");
        assert_eq!(ticket.capability().parent_run_id, "run-root");
        book.commit(ticket).unwrap();
        assert_eq!(
            book.check(token.expose(), "n1").unwrap_err(),
            TokenError::Replayed
        );
        let audit = book.audit().last().unwrap();
        assert_eq!(audit.rejection, TokenError::Replayed);
        assert_eq!(audit.parent_run_id.as_deref(), Some("run-root"));
        assert_eq!(audit.nonce.as_deref(), Some("n1"));
        // The same nonce with another token of the same book is a different request.
        let other = book.mint(cap("run-root"), 1).unwrap();
        assert!(book.check(other.expose(), "n1").is_ok());
    }

    #[test]
    fn two_checks_of_one_nonce_commit_once() {
        let (mut book, token) = book_with(5);
        let a = book.check(token.expose(), "same").unwrap();
        let b = book.check(token.expose(), "same").unwrap();
        book.commit(a).unwrap();
        assert_eq!(book.commit(b).unwrap_err(), TokenError::Replayed);
        assert_eq!(book.audit().len(), 1);
    }

    #[test]
    fn uses_are_spent_only_on_commit() {
        let (mut book, token) = book_with(1);
        // Checked but never committed (the request turned out invalid): nothing spent.
        for n in 0..5 {
            let ticket = book.check(token.expose(), &format!("try-{n}")).unwrap();
            drop(ticket);
        }
        let ticket = book.check(token.expose(), "real").unwrap();
        book.commit(ticket).unwrap();
        assert_eq!(
            book.check(token.expose(), "after").unwrap_err(),
            TokenError::Exhausted
        );
        // A nonce that was only checked before is not burnt either: the failure is exhaustion.
        assert_eq!(
            book.check(token.expose(), "try-0").unwrap_err(),
            TokenError::Exhausted
        );
    }

    #[test]
    fn the_last_use_goes_to_the_first_commit() {
        let (mut book, token) = book_with(1);
        let a = book.check(token.expose(), "a").unwrap();
        let b = book.check(token.expose(), "b").unwrap();
        book.commit(b).unwrap();
        assert_eq!(book.commit(a).unwrap_err(), TokenError::Exhausted);
        assert_eq!(
            book.audit().last().unwrap().rejection,
            TokenError::Exhausted
        );
    }

    #[test]
    fn zero_uses_is_always_exhausted() {
        let (mut book, token) = book_with(0);
        assert_eq!(
            book.check(token.expose(), "n").unwrap_err(),
            TokenError::Exhausted
        );
    }

    #[test]
    fn revoked_tokens_are_refused_even_with_a_ticket_in_hand() {
        let (mut book, token) = book_with(3);
        let child = book.mint(cap("run-child"), 3).unwrap();
        let ticket = book.check(token.expose(), "n").unwrap();
        assert_eq!(book.revoke("run-root"), 1);
        assert_eq!(book.revoke("run-root"), 0);
        assert_eq!(book.commit(ticket).unwrap_err(), TokenError::Revoked);
        assert_eq!(
            book.check(token.expose(), "m").unwrap_err(),
            TokenError::Revoked
        );
        assert!(book.check(child.expose(), "m").is_ok());
        assert_eq!(book.revoke_all(), 1);
        assert_eq!(
            book.check(child.expose(), "m").unwrap_err(),
            TokenError::Revoked
        );
    }

    #[test]
    fn malformed_nonces_are_refused_and_not_echoed() {
        let (mut book, token) = book_with(3);
        let long = "x".repeat(MAX_NONCE_BYTES + 1);
        for bad in ["", "has space", "new\nline", "é", long.as_str()] {
            assert_eq!(
                book.check(token.expose(), bad).unwrap_err(),
                TokenError::BadNonce
            );
        }
        assert!(book.audit().iter().all(|a| a.nonce.is_none()));
        let max = "y".repeat(MAX_NONCE_BYTES);
        assert!(book.check(token.expose(), &max).is_ok());
    }

    #[test]
    fn a_ticket_from_another_book_is_refused() {
        let (mut book, _) = book_with(3);
        let mut other = TokenBook::new("run-root");
        let t = other.mint(cap("run-root"), 3).unwrap();
        let ticket = other.check(t.expose(), "n").unwrap();
        assert_eq!(book.commit(ticket).unwrap_err(), TokenError::ForeignTicket);
    }

    #[test]
    fn redeem_spends_only_when_validation_succeeds() {
        let (mut book, token) = book_with(1);
        let refused: Result<(), RedeemError<&str>> =
            book.redeem(token.expose(), "a", |_| Err("dag refused"));
        assert_eq!(refused, Err(RedeemError::Refused("dag refused")));
        let got = book.redeem(token.expose(), "b", |c| {
            Ok::<_, &str>(c.parent_run_id.clone())
        });
        assert_eq!(got, Ok("run-root".to_owned()));
        let spent = book.redeem(token.expose(), "c", |_| Ok::<_, &str>(()));
        assert_eq!(spent, Err(RedeemError::Token(TokenError::Exhausted)));
        assert_eq!(
            RedeemError::<&str>::Token(TokenError::Replayed).to_string(),
            TokenError::Replayed.to_string()
        );
    }

    #[test]
    fn the_audit_list_is_bounded() {
        let (mut book, _) = book_with(1);
        for n in 0..AUDIT_LIMIT + 10 {
            let _ = book.check("forged", &format!("n{n}"));
        }
        assert_eq!(book.audit().len(), AUDIT_LIMIT);
        assert_eq!(book.audit_dropped(), 10);
    }

    #[test]
    fn audit_entries_serialize_in_camel_and_snake_case() {
        let (mut book, _) = book_with(1);
        let _ = book.check("forged", "n");
        let v = serde_json::to_value(&book.audit()[0]).unwrap();
        assert_eq!(v["rejection"], "forged");
        assert!(v.get("parentRunId").is_some());
        let back: TokenAudit = serde_json::from_value(v).unwrap();
        assert_eq!(back, book.audit()[0]);
    }

    #[test]
    fn constant_time_equality_is_equality() {
        let a = [7u8; SECRET_BYTES];
        let mut b = a;
        assert!(ct_eq(&a, &b));
        b[31] ^= 1;
        assert!(!ct_eq(&a, &b));
        b = a;
        b[0] ^= 0x80;
        assert!(!ct_eq(&a, &b));
    }

    #[test]
    fn error_messages_are_one_line() {
        for e in [
            TokenError::Forged,
            TokenError::Revoked,
            TokenError::BadNonce,
            TokenError::Replayed,
            TokenError::Exhausted,
            TokenError::ForeignTicket,
        ] {
            let s = e.to_string();
            assert!(!s.is_empty() && !s.contains('\n'));
        }
    }

    // ---- property: the book behaves like a simple model ------------------------------------

    #[derive(Debug, Clone)]
    enum Op {
        Check { token: usize, nonce: u8 },
        Commit { ticket: usize },
        Drop { ticket: usize },
        Revoke { token: usize },
        Forge { nonce: u8 },
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (0usize..4, 0u8..6).prop_map(|(token, nonce)| Op::Check { token, nonce }),
            4 => (0usize..8).prop_map(|ticket| Op::Commit { ticket }),
            1 => (0usize..8).prop_map(|ticket| Op::Drop { ticket }),
            1 => (0usize..4).prop_map(|token| Op::Revoke { token }),
            1 => (0u8..6).prop_map(|nonce| Op::Forge { nonce }),
        ]
    }

    proptest::proptest! {
        #[test]
        fn the_book_spends_exactly_the_committed_uses(
            uses in proptest::collection::vec(0u32..4, 1..4),
            ops in proptest::collection::vec(op(), 0..60),
        ) {
            let mut book = TokenBook::new("run-root");
            let n = uses.len();
            let tokens: Vec<Token> = (0..n)
                .map(|i| book.mint(cap(&format!("run-{i}")), uses[i]).unwrap())
                .collect();
            let mut left = uses.clone();
            let mut used: Vec<HashSet<String>> = vec![HashSet::new(); n];
            let mut revoked = vec![false; n];
            let mut tickets: Vec<(usize, Ticket)> = Vec::new();
            let mut refusals = 0usize;
            let expect = |t: usize, nonce: &str, left: &[u32], used: &[HashSet<String>], revoked: &[bool]| {
                if revoked[t] {
                    Err(TokenError::Revoked)
                } else if used[t].contains(nonce) {
                    Err(TokenError::Replayed)
                } else if left[t] == 0 {
                    Err(TokenError::Exhausted)
                } else {
                    Ok(())
                }
            };
            for op in ops {
                match op {
                    Op::Check { token, nonce } => {
                        let t = token % n;
                        let nonce = format!("n{nonce}");
                        let want = expect(t, &nonce, &left, &used, &revoked);
                        let got = book.check(tokens[t].expose(), &nonce);
                        proptest::prop_assert_eq!(got.as_ref().map(|_| ()).map_err(|e| *e), want);
                        match got {
                            Ok(ticket) => tickets.push((t, ticket)),
                            Err(_) => refusals += 1,
                        }
                    }
                    Op::Commit { ticket } if !tickets.is_empty() => {
                        let (t, ticket) = tickets.remove(ticket % tickets.len());
                        let nonce = ticket.nonce().to_owned();
                        let want = expect(t, &nonce, &left, &used, &revoked);
                        let got = book.commit(ticket);
                        proptest::prop_assert_eq!(got, want);
                        if got.is_ok() {
                            left[t] -= 1;
                            used[t].insert(nonce);
                        } else {
                            refusals += 1;
                        }
                    }
                    Op::Drop { ticket } if !tickets.is_empty() => {
                        tickets.remove(ticket % tickets.len());
                    }
                    Op::Commit { .. } | Op::Drop { .. } => {}
                    Op::Revoke { token } => {
                        let t = token % n;
                        let now = book.revoke(&format!("run-{t}"));
                        proptest::prop_assert_eq!(now, usize::from(!revoked[t]));
                        revoked[t] = true;
                    }
                    Op::Forge { nonce } => {
                        let forged = format!("{TOKEN_PREFIX}{}", "ab".repeat(SECRET_BYTES));
                        let got = book.check(&forged, &format!("n{nonce}"));
                        proptest::prop_assert_eq!(got.err(), Some(TokenError::Forged));
                        refusals += 1;
                    }
                }
                proptest::prop_assert_eq!(book.audit().len(), refusals.min(AUDIT_LIMIT));
            }
            // What is left is exactly what the model says is left.
            for (t, token) in tokens.iter().enumerate() {
                let got = book.check(token.expose(), "final").map(|_| ());
                proptest::prop_assert_eq!(got, expect(t, "final", &left, &used, &revoked));
            }
        }
    }
}
