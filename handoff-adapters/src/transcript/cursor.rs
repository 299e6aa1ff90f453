//! Cursor agent transcripts (read only).
