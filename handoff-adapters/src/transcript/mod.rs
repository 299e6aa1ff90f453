pub(crate) mod claude;
pub(crate) mod claude_store;
pub(crate) mod codex;
pub(crate) mod codex_store;
pub(crate) mod cursor;
pub(crate) mod opencode;
