pub(crate) mod claude;
pub(crate) mod codex;
