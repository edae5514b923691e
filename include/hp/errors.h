/*
 * libhp — error codes.
 *
 * Every failing call returns a negative code from this table (or NULL for
 * functions returning pointers) and sets a thread-local detail message that
 * hp_last_error_detail() returns. Values are part of the ABI: they are never
 * renumbered, only appended.
 *
 * libhp starts up at its first call, and that start-up allocates. A libhp
 * call made from inside it on the same thread (by an allocator interposed
 * on malloc that calls libhp back) fails with HP_ENOTSUP instead of waiting
 * for itself; calls work again once the start-up has returned (the same
 * holds for a plugin's init and first probe, which run inside it).
 *
 * errno: libhp reports through these codes, never errno, and does not
 * keep errno across a call: like most library calls, a libhp call may
 * change errno whether it succeeds or fails.
 */
#ifndef HP_ERRORS_H
#define HP_ERRORS_H

#include "common.h"

HP_BEGIN_DECLS

/* X(NAME, value, description) — the single source of every code. */
#define HP_ERROR_TABLE(X)                                                          \
    X(HP_OK, 0, "success")                                                         \
    X(HP_EINVAL, -1, "invalid argument")                                           \
    X(HP_ENOMEM, -2, "out of memory")                                              \
    X(HP_ESIZE, -3, "size is zero or too large")                                   \
    X(HP_EFLAGS, -4, "unknown or conflicting flags")                               \
    X(HP_EFOREIGN, -5, "pointer was not allocated by libhp")                       \
    X(HP_EINTERIOR, -6, "pointer points inside a libhp block, not at its start")   \
    X(HP_EDOUBLEFREE, -7, "block was already freed")                               \
    X(HP_ENOHUGE, -8, "huge pages were required but cannot be provided")           \
    X(HP_ENOBACKEND, -9, "no such backend, or it is unavailable")                  \
    X(HP_EBACKEND, -10, "backend failed or returned an invalid result")            \
    X(HP_EENV, -11, "invalid HP_* environment value")                              \
    X(HP_ENOTSUP, -12, "operation not supported")                                  \
    X(HP_ERANGE, -13, "index or value out of range")                               \
    X(HP_EOS, -14, "operating system call failed")

enum hp_error {
#define HP_ERROR_ENUM_(name, value, text) name = value,
    HP_ERROR_TABLE(HP_ERROR_ENUM_)
#undef HP_ERROR_ENUM_
};

/* Static description of an error code; unknown codes give "unknown error".
 * Never NULL. Thread-safe and async-signal-safe. */
HP_EXTERN(const char *) hp_strerror(int32_t code);

/* Symbolic name of an error code ("HP_ENOMEM"), or "HP_UNKNOWN". Thread-safe and
 * async-signal-safe. */
HP_EXTERN(const char *) hp_error_name(int32_t code);

/* Detail message of the last failing libhp call on this thread: names the
 * argument, the value and the reason. "" if no call failed yet. Valid until
 * the next libhp call on this thread. Thread-safe (thread-local). */
HP_EXTERN(const char *) hp_last_error_detail(void);

/* Code of the last failing libhp call on this thread (HP_OK if none).
 * Successful calls do not reset it, except hp_realloc(p, 0, f), which
 * frees p and sets HP_OK (NULL then means success). Thread-safe
 * (thread-local). */
HP_EXTERN(int32_t) hp_last_error(void);

HP_END_DECLS

#endif /* HP_ERRORS_H */
