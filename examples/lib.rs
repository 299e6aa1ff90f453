//! Example programs live beside this file; see `embed_default.rs` and `custom_provider.rs`.
