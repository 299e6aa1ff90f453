//! Sessions written by handoff that the real CLIs resume.
