#pragma once
// How the C library keeps freed memory, set by a daemon once it knows its model. With glibc's
// defaults a buffer the size of a model of millions of parameters is a fresh mapping each time it
// is allocated (above the mmap threshold), and freed memory beyond the trim threshold goes back to
// the kernel: every round then touches fresh pages (a page fault each, 4 KiB at a time).
// docs/performance.md ("A round against the wire") has the measurements.
#include <cstddef>

namespace tern::daemon {

// Keeps buffers up to `largest_buffer_bytes` (a model's floats, an encoded message) on the heap
// and freed memory for reuse up to a few of them, so that a steady round reuses pages. Once per
// process; the first call wins, later ones do nothing. Does nothing for small sizes (glibc's own
// defaults already fit) or outside glibc.
void keepBuffersOf(size_t largest_buffer_bytes);

}  // namespace tern::daemon
