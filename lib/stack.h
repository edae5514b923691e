/*
 * Stacks (include/hp/stack.h), inside the core:
 *  - stack.c: validation, the mode plan, mapping and unmapping layouts;
 *  - stack_cache.c: the handle table and the cache of released stacks, both
 *    under one mutex that is never held across a syscall.
 */
#ifndef HP_LIB_STACK_H
#define HP_LIB_STACK_H

#include "hp/stack.h"
#include "options.h"
#include "select.h"

#include <pthread.h>

/* One mapped stack: what a handle owns and what the cache keeps. */
struct hp_stack_map {
    void *map_addr;            /* guard_addr: start of the whole range */
    uint64_t map_len;          /* guard + usable */
    void *base;                /* usable start */
    uint64_t usable;
    uint64_t guard;
    uint64_t page_size;        /* base page (lean) or the huge page */
    uint32_t kind;             /* HP_KIND_BASE, HP_KIND_THP, HP_KIND_HUGETLB */
    uint32_t kept;             /* cached with its pages (not released) */
    char source[32];
    uint64_t gen;              /* hp_fork_gen() when it was mapped (lib/cache.h) */
};

/* Handle record states. */
enum hp_stack_state {
    HP_STACK_FREE = 0,         /* destroyed, waiting in the quarantine */
    HP_STACK_LIVE,             /* handed out */
    HP_STACK_THREAD,           /* handed out, hosts a thread not yet joined */
    HP_STACK_JOINING,          /* hp_stack_thread_join in progress */
    HP_STACK_CACHED            /* holds a cached mapping, no handle refers to it */
};

/* The record behind an opaque handle (a slot of the handle table). */
struct hp_stack {
    uint32_t state;            /* enum hp_stack_state */
    uint32_t from_cache;
    uint32_t index;            /* this record's own index + 1 */
    uint32_t next, prev;       /* free queue / cache list links: index + 1 */
    uint64_t flags;            /* HP_STACK_* at creation */
    struct hp_stack_map m;
    pthread_t thread;          /* HP_STACK_THREAD / JOINING */
};

/* ---- plan (stack.c): a pure function, unit-tested with fabricated caps ---- */

struct hp_stack_request {
    uint64_t flags;            /* HP_STACK_*, validated */
    uint64_t usable;           /* bytes, rounded to the huge page for huge mode */
    uint64_t huge_page_size;   /* PMD size */
    uint64_t base_page_size;
    unsigned n_only;           /* HP_BACKENDS: only these backends ... */
    const char (*only)[HP_OPT_NAME_LEN];
    unsigned n_never;          /* ... and never these */
    const char (*never)[HP_OPT_NAME_LEN];
};

struct hp_stack_plan {
    uint32_t kind;             /* HP_KIND_HUGETLB, HP_KIND_THP or HP_KIND_BASE */
    int backend;               /* index into the backends array, -1 for lean */
};

#define HP_STACK_PLAN_MAX 8

/* Ways to make the stack, best first: hugetlb backends whose pool can
 * reserve every page, then available THP backends with the PMD size, then
 * lean (lean mode, or HP_STACK_ALLOW_LEAN). HP_STACK_HUGETLB / HP_STACK_THP
 * keep only that kind. Returns the count; 0 means huge mode cannot be served
 * (why_cap bytes of why say why, per backend). */
unsigned hp_stack_plan(const struct hp_stack_request *req, const struct hp_select_backend *bk,
                       unsigned n_backends, struct hp_stack_plan *out, unsigned max, char *why,
                       size_t why_cap);

/* Unmap a stack's whole range (stack.c). */
void hp_stack_unmap(const struct hp_stack_map *m);

/* ---- handle table and cache (stack_cache.c) ---- */

/* Kinds a cached stack may have to serve a request (bit 1 << kind). */
#define HP_STACK_KIND_BIT(kind) (1u << (kind))

/* A new handle record for m. Returns HP_OK or HP_ENOMEM (table full). */
int32_t hp_stack_table_add(const struct hp_stack_map *m, uint64_t flags, uint32_t from_cache,
                           struct hp_stack **out);

/* Validate s and copy its record. fn names the caller in the detail.
 * Returns HP_OK, HP_EINVAL (NULL), HP_EFOREIGN, HP_EDOUBLEFREE. */
int32_t hp_stack_table_get(const struct hp_stack *s, const char *fn, struct hp_stack *copy);

/* Validate s, check it is in state want, and retire it (its record enters
 * the quarantine); *copy receives the record as it was. Also HP_EINVAL for a
 * state other than want. */
int32_t hp_stack_table_retire(struct hp_stack *s, uint32_t want, const char *fn,
                              struct hp_stack *copy);

/* Thread states. set_thread: LIVE -> THREAD, remembering the thread.
 * begin_join: THREAD -> JOINING, giving the thread back (HP_EINVAL in any
 * other state). end_join(s, 0): JOINING -> THREAD after a failed join; after
 * a successful one the caller retires s from JOINING instead. */
int32_t hp_stack_table_set_thread(struct hp_stack *s, pthread_t thread);
int32_t hp_stack_table_begin_join(struct hp_stack *s, const char *fn, pthread_t *thread);
void hp_stack_table_end_join(struct hp_stack *s);

/* Take a cached stack of one of kinds (HP_STACK_KIND_BIT mask) with exactly
 * this usable and guard size, as a new live handle; a kept one first, else
 * the most recently cached. Returns 1 (hit, *out set) or 0 (miss). */
int32_t hp_stack_cache_take(uint32_t kinds, uint64_t usable, uint64_t guard, uint64_t flags,
                            struct hp_stack **out);

/* Offer a retired stack to the cache, which keeps its pages within the
 * keep budget, else releases them (MADV_DONTNEED), or unmaps it. Never
 * fails: whatever is not cached is unmapped. */
void hp_stack_cache_put(const struct hp_stack_map *m, uint64_t flags);

/* Tests: live handle records (LIVE, THREAD, JOINING). */
uint64_t hp_stack_table_live(void);

#endif
