//! OpenCode sessions, through its `export` and `import` commands.
