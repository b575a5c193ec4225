#pragma once
// Intra-op threads of the CPU device: how many threads one kernel may use (oneDNN's OpenMP
// team, OpenBLAS' pool). Process-wide; set by the runtime from SessionOptions together with the
// inter-op (scheduler) threads, so that the two do not oversubscribe the cores.
namespace troupe {

// n >= 1. Takes effect for OpenBLAS at once and for OpenMP on each thread's next kernel.
void set_intra_op_threads(int n);
int intra_op_threads();
// Called by kernels before an OpenMP-parallel library call: applies the current setting to
// the calling thread (OpenMP's thread count is per thread).
void apply_intra_op_threads_here();

}  // namespace troupe
