#pragma once
// Clang's thread-safety attributes (-Wthread-safety), as TensorFlow's and Abseil's
// thread_annotations.h spell them: a field says which mutex guards it, a function which mutex it
// must be called with or without. Other compilers see nothing; the lines still say the contract.
#if defined(__clang__)
#define TROUPE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TROUPE_THREAD_ANNOTATION(x)
#endif

// The field is read and written only with `mu` held.
#define TROUPE_GUARDED_BY(mu) TROUPE_THREAD_ANNOTATION(guarded_by(mu))
// The function is called with `mu` held.
#define TROUPE_REQUIRES(mu) TROUPE_THREAD_ANNOTATION(requires_capability(mu))
// The function takes `mu` itself: it is called without it.
#define TROUPE_EXCLUDES(mu) TROUPE_THREAD_ANNOTATION(locks_excluded(mu))
// Lock order: this mutex is taken before (after) `other` when both are held.
#define TROUPE_ACQUIRED_BEFORE(other) TROUPE_THREAD_ANNOTATION(acquired_before(other))
#define TROUPE_ACQUIRED_AFTER(other) TROUPE_THREAD_ANNOTATION(acquired_after(other))
