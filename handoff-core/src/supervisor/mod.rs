//! The advice supervisor's pure core: the budgeted DAG of one root run ([`DagStore`]), the
//! capability tokens that let a worker ask for nested advice ([`TokenBook`]) and grant
//! attenuation ([`attenuate`]), and the mailbox through which a worker reaches its supervisor
//! ([`INBOX`], [`OUTBOX`]). The supervisor that serves nested requests is built on top of these.
//!
//! A nested request is handled as: [`TokenBook::check`] the token and nonce → [`attenuate`]
//! the grants against the [`Capability`] → [`crate::confine`] the adviser's isolation against
//! the asking node's (withholding grants when that is enough, else
//! [`DagError::WeakerIsolation`]) → [`DagStore::admit`] (or
//! [`DagStore::register`]) the node → build the request with the admission's lineage, budgets
//! and timeout → [`DagStore::commit`] → [`TokenBook::commit`] the ticket. A refusal anywhere
//! spends nothing and changes nothing.

mod client;
mod clock;
mod confinement;
mod dag;
mod grants;
mod mailbox;
mod prompt;
mod server;
mod token;
mod view;
mod wire;

pub use client::ask_supervisor;
pub use mailbox::{INBOX, OUTBOX};
pub(crate) use server::{Finished, Supervisor, SupervisorSetup};
pub use wire::{
    CLIENT_GRACE_MS, CONTEXT_ENV, CONTEXT_SCHEMA, MAX_CONTEXT_BYTES, MAX_REPLY_BYTES,
    MAX_REQUEST_BYTES, NESTED_REPLY_SCHEMA, NESTED_REQUEST_SCHEMA, NestedReply, NestedRequest,
    SupervisorContext, result_hash,
};

pub use clock::Clock;
pub use dag::{Admission, DagError, DagStore, NodeRequest, RegisteredNode, check_dag_invariants};
pub use grants::{GrantRequest, attenuate};
pub use token::{
    AUDIT_LIMIT, Capability, MAX_NONCE_BYTES, RedeemError, TOKEN_PREFIX, Ticket, Token, TokenAudit,
    TokenBook, TokenError,
};
