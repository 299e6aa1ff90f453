//! How the process's allocator gives memory back.
//!
//! A run's large buffers (the index read twice, the per-path states of two fingerprints, the
//! stat records) live for one phase each. glibc's allocator raises its mmap threshold each time
//! such a buffer is freed, so that the next ones come from the heap, where what is freed stays
//! resident: a whole advice run on a 100,000-file repository peaked at about 71 MiB resident
//! with the dynamic threshold and about 64 MiB with a fixed 64 KiB threshold (`cargo xtask
//! bench --only run`), at no cost in wall time.
//!
//! glibc also gives each thread that allocates while another holds the lock an arena of its
//! own, up to eight per core, and what is freed in one arena stays there: the scan's threads
//! left between 54 and 59 MiB resident from one run to the next. Two arenas are enough for the
//! few threads that allocate at once, and the peak stays at the low end.

/// The fixed threshold: a block at least this large is its own mapping, returned to the system
/// when freed.
pub const MMAP_THRESHOLD: usize = 64 * 1024;

/// How many arenas the allocator keeps at most.
pub const ARENAS: usize = 2;

/// Fixes the allocator's mmap threshold at [`MMAP_THRESHOLD`] and its arenas at [`ARENAS`]
/// (glibc on Linux; elsewhere nothing). For a program's `main`, before it allocates much: an embedding program decides
/// for its own process.
pub fn return_large_blocks() {
    crate::platform::tune_allocator(MMAP_THRESHOLD, ARENAS);
}

/// Gives the memory the allocator holds free back to the system (glibc on Linux; elsewhere
/// nothing): what a phase freed in small blocks (a fingerprint's per-path states come in runs
/// of about 50 KB) stays resident otherwise, next to what the next phase allocates. It only
/// returns free pages, so it is harmless anywhere, and costs about a millisecond.
pub fn give_back_free_memory() {
    crate::platform::trim_allocator();
}
