/*
 * bench/malloc: the jemalloc prototype measured against the mimalloc one
 * before choosing (docs/malloc.md). Preloaded together with
 * libjemalloc.so.2 (MALLOC_CONF=oversize_threshold:0, so no arena is
 * created later with default hooks): a constructor replaces the extent
 * hooks of every arena with hooks that carve extents out of hp_alloc
 * chunks (64 MiB, doubling to 1 GiB). Extents are never returned (dalloc,
 * decommit and purge opt out), which is what hugetlb memory needs anyway.
 * A hook re-entered from inside hp_alloc (libhp allocates) carves from
 * plain mmap instead.
 */
#include <hp.h>
#include <jemalloc/jemalloc.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t cur, lim;
static size_t next_chunk = (size_t)64 << 20;
static __thread int busy __attribute__((tls_model("initial-exec")));

static void *carve(size_t size, size_t align)
{
    uintptr_t at = (cur + align - 1) & ~(uintptr_t)(align - 1);
    if (!cur || at + size > lim)
        return NULL;
    cur = at + size;
    return (void *)at;
}

static void *hook_alloc(extent_hooks_t *h, void *new_addr, size_t size, size_t align,
                        bool *zero, bool *commit, unsigned ind)
{
    if (new_addr)
        return NULL;
    if (busy) {
        void *p = mmap(NULL, size + align, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        *zero = *commit = true;
        return (void *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    }
    pthread_mutex_lock(&lock);
    void *p = carve(size, align);
    if (!p) {
        size_t len = next_chunk;
        while (len < size + align)
            len *= 2;
        busy = 1;
        char *c = hp_alloc(len, 0);
        busy = 0;
        if (c) {
            cur = (uintptr_t)c;
            lim = cur + len;
            if (next_chunk < ((size_t)1 << 30))
                next_chunk *= 2;
            p = carve(size, align);
        }
    }
    pthread_mutex_unlock(&lock);
    if (p)
        *zero = *commit = true;  /* never-used hp_alloc memory is zero */
    return p;
}

static bool opt_out(extent_hooks_t *h, void *a, size_t s, bool c, unsigned i) { return true; }
static void destroy(extent_hooks_t *h, void *a, size_t s, bool c, unsigned i) {}
static bool ok_range(extent_hooks_t *h, void *a, size_t s, size_t o, size_t l, unsigned i)
{
    return false;
}
static bool no_range(extent_hooks_t *h, void *a, size_t s, size_t o, size_t l, unsigned i)
{
    return true;
}
static bool split(extent_hooks_t *h, void *a, size_t s, size_t sa, size_t sb, bool c, unsigned i)
{
    return false;
}
static bool merge(extent_hooks_t *h, void *a, size_t sa, void *b, size_t sb, bool c, unsigned i)
{
    return false;
}

static extent_hooks_t hooks = {hook_alloc, opt_out, destroy, ok_range, no_range,
                               no_range, no_range, split, merge};

__attribute__((constructor)) static void install(void)
{
    unsigned n = 0;
    size_t sz = sizeof(n);
    if (mallctl("arenas.narenas", &n, &sz, NULL, 0))
        return;
    extent_hooks_t *hp = &hooks;
    for (unsigned i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof(name), "arena.%u.extent_hooks", i);
        if (mallctl(name, NULL, NULL, &hp, sizeof(hp)))
            fprintf(stderr, "proto_jemalloc: %s refused\n", name);
    }
}
