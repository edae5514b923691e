/*
 * libhp — common definitions shared by every public header.
 *
 * Threading model (once for the whole library): every hp_* function may be
 * called from any thread at any time, concurrently, without external locking.
 * Initialisation (environment parsing, plugin loading, probing) happens once,
 * on the first call that needs it, and is itself thread-safe. Exceptions are
 * documented at the function. The thread-local error detail belongs to the
 * calling thread.
 */
#ifndef HP_COMMON_H
#define HP_COMMON_H

#include <stddef.h>
#include <stdint.h>

#if defined(HP_BUILDING) && defined(__GNUC__)
#define HP_EXTERN(type) __attribute__((visibility("default"))) type
#else
#define HP_EXTERN(type) type
#endif

#ifdef __cplusplus
#define HP_BEGIN_DECLS extern "C" {
#define HP_END_DECLS }
#else
#define HP_BEGIN_DECLS
#define HP_END_DECLS
#endif

#endif /* HP_COMMON_H */
