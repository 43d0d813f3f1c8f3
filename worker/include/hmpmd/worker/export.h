// HMPMD_WORKER_EXPORT marks the symbols of the worker library's public API.
//
// The library builds with -fvisibility=hidden, so only what carries this
// macro is visible outside a shared build of it.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define HMPMD_WORKER_EXPORT __attribute__((visibility("default")))
#else
#define HMPMD_WORKER_EXPORT
#endif
