/*
 * Stacks (include/hp/stack.h), inside the core:
 *  - stack.c: validation, the plan's use (lib/select.c plans), mapping and
 *    unmapping through the backends' ops;
 *  - stack_cache.c: the handle table and the cache of released stacks, both
 *    under one mutex that is never held across a syscall.
 */
#ifndef HP_LIB_STACK_H
#define HP_LIB_STACK_H

#include "hp/stack.h"
#include "options.h"
#include "select.h"

#include <pthread.h>

struct hp_backend;

/* One mapped stack: what a handle owns and what the cache keeps. The
 * backend that mapped it (its ops unmap and advise it) and its mapping as
 * the backend returned it: usable memory at m.addr, the guard is the
 * PROT_NONE [m.addr - guard, m.addr), and unmap releases all of
 * [m.map_addr, m.map_addr + m.map_len). */
struct hp_stack_map {
    struct hp_backend *backend;
    struct hp_mapping m;
    uint64_t usable;           /* bytes from m.addr handed out (<= m.len) */
    uint64_t guard;
    uint32_t kind;             /* the backend's kind (enum hp_backend_kind) */
    uint32_t kept;             /* cached with its pages (not released) */
    uint64_t gen;              /* hp_fork_gen() when it was mapped (lib/fork.h) */
    uint32_t placed;           /* mapped under a NUMA placement: never cached */
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

/* Unmap a stack's whole range through its backend (stack.c); a refusal is
 * retried once, then logged. */
int32_t hp_stack_unmap(const struct hp_stack_map *m);

/* ---- handle table and cache (stack_cache.c) ---- */

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

/* Take a cached stack mapped with page_size pages, with exactly this
 * usable and guard size, whose mapping flags (HP_MAP_*) include every bit
 * of need and none of refuse, as a new live handle; a kept one first, else
 * the most recently cached. Returns 1 (hit, *out set) or 0 (miss). */
int32_t hp_stack_cache_take(uint64_t page_size, uint32_t need, uint32_t refuse, uint64_t usable,
                            uint64_t guard, uint64_t flags, struct hp_stack **out);

/* Offer a retired stack to the cache, which keeps its pages within the
 * keep budget, else releases them (hp_os_drop_pages: private memory not
 * from a pool only), or unmaps it. A shared (HP_MAP_SHARED) stack is never
 * cached. Whatever is not cached is unmapped: HP_OK, or HP_EOS when the
 * backend could not unmap it (hp_stack_unmap: logged, and lost). */
int32_t hp_stack_cache_put(const struct hp_stack_map *m, uint64_t flags);

/* 1 if the whole range of a stack that is handed out or cached overlaps
 * [addr, addr + len), else 0. Scans the table: for error paths only. */
int hp_stack_table_overlaps(const void *addr, uint64_t len);

/* Tests: live handle records (LIVE, THREAD, JOINING). */
uint64_t hp_stack_table_live(void);

#endif
