//! OpenCode sessions carried through its export and import.
