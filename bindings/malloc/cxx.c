/* C++ operator new (operator delete: malloc.c, as aliases of free), defined here so that a C++ allocation is one
 * call into mimalloc instead of libstdc++'s operator new calling malloc
 * calling mimalloc (on an unordered_map of 10M nodes that layer is about
 * 20 instructions per node, measured with callgrind). Only the fast path is
 * ours: when it fails, the request goes to the next definition in the
 * lookup order (libstdc++'s), which calls malloc (ours, with arena growth
 * and libhp blocks) and keeps the C++ semantics: the new_handler loop, then
 * std::bad_alloc, or NULL for the nothrow forms. The mangled names are the
 * Itanium C++ ABI's, as libstdc++ exports them.
 *
 * mimalloc's own operator new (mi_new) cannot stand in for these: Debian's
 * libmimalloc.so.2 is built as C, where mi_try_new (src/alloc.c, 2.0.9)
 * asks a weak, locally bound _ZSt15get_new_handlerv stub that returns NULL
 * and then calls abort() instead of throwing std::bad_alloc; the stub is
 * bound inside the library, so no definition of ours can replace it. */
#include "hpm.h"

#include <dlfcn.h>
#include <malloc.h>
#include <mimalloc.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)

typedef void *(*new_fn)(size_t);
typedef void *(*new_nt_fn)(size_t, const void *);
typedef void *(*new_al_fn)(size_t, size_t);
typedef void *(*new_al_nt_fn)(size_t, size_t, const void *);

/* The next definition of a mangled operator new, looked up on first need. */
static void *next(const char *name, _Atomic(void *) *cache)
{
    void *f = atomic_load_explicit(cache, memory_order_acquire);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        atomic_store_explicit(cache, f, memory_order_release);
    }
    return f;
}

#define FAST(n) (LIKELY((n) < atomic_load_explicit(&hpm_fast_max, memory_order_relaxed)))

/* Without a next definition (no libstdc++ in the process, which cannot
 * happen for a caller of these), malloc's contract is the best left. */
#define SLOW(name, type, ...)                                     \
    do {                                                          \
        static _Atomic(void *) cache;                             \
        void *sym = next(name, &cache);                           \
        type f;                                                   \
        memcpy(&f, &sym, sizeof(f));                              \
        return f ? f(__VA_ARGS__) : NULL;                         \
    } while (0)

EXPORT void *_Znwm(size_t n);
EXPORT void *_Znam(size_t n);
EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt);
EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const void *nt);
EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t al);
EXPORT void *_ZnamSt11align_val_t(size_t n, size_t al);
EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *nt);
EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *nt);

EXPORT void *_Znwm(size_t n)
{
    if (FAST(n)) {
        void *p = mi_malloc(n);
        if (LIKELY(p != NULL))
            return p;
    }
    SLOW("_Znwm", new_fn, n);
}

EXPORT void *_Znam(size_t n)
{
    if (FAST(n)) {
        void *p = mi_malloc(n);
        if (LIKELY(p != NULL))
            return p;
    }
    SLOW("_Znam", new_fn, n);
}

EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, const void *nt)
{
    if (FAST(n)) {
        void *p = mi_malloc(n);
        if (LIKELY(p != NULL))
            return p;
    }
    SLOW("_ZnwmRKSt9nothrow_t", new_nt_fn, n, nt);
}

EXPORT void *_ZnamRKSt9nothrow_t(size_t n, const void *nt)
{
    if (FAST(n)) {
        void *p = mi_malloc(n);
        if (LIKELY(p != NULL))
            return p;
    }
    SLOW("_ZnamRKSt9nothrow_t", new_nt_fn, n, nt);
}

EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t al)
{
    if (FAST(n)) {
        void *p = mi_malloc_aligned(n, al);
        if (LIKELY(p != NULL))
            return p;
    }
    SLOW("_ZnwmSt11align_val_t", new_al_fn, n, al);
}

EXPORT void *_ZnamSt11align_val_t(size_t n, size_t al)
{
    if (FAST(n)) {
        void *p = mi_malloc_aligned(n, al);
        if (LIKELY(p != NULL))
            return p;
    }
    SLOW("_ZnamSt11align_val_t", new_al_fn, n, al);
}

EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *nt)
{
    if (FAST(n)) {
        void *p = mi_malloc_aligned(n, al);
        if (LIKELY(p != NULL))
            return p;
    }
    SLOW("_ZnwmSt11align_val_tRKSt9nothrow_t", new_al_nt_fn, n, al, nt);
}

EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void *nt)
{
    if (FAST(n)) {
        void *p = mi_malloc_aligned(n, al);
        if (LIKELY(p != NULL))
            return p;
    }
    SLOW("_ZnamSt11align_val_tRKSt9nothrow_t", new_al_nt_fn, n, al, nt);
}
