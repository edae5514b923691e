/* A live block: what the registry keeps for each pointer libhp handed out. */
#ifndef HP_LIB_BLOCK_H
#define HP_LIB_BLOCK_H

#include "hp/backend.h"
#include "numa.h"

struct hp_backend;

struct hp_block {
    struct hp_block *next;        /* registry hash chain */
    struct hp_backend *backend;
    struct hp_mapping m;
    uint64_t flags;               /* HP_F_* in force (hp_realloc_flags) */
    uint64_t requested_page_size; /* from flags, 0 if none */
    /* Which kernel VMA lineage the memory belongs to: set when a backend
     * maps or moves it, inherited by ranges carved from it (lib/cache.h).
     * Anonymous ranges of one lineage merge back into one VMA. */
    uint64_t origin;
    uint64_t gen;                 /* hp_fork_gen() when its pages were mapped (lib/fork.h) */
    uint32_t busy;                /* an hp_realloc works on it (lib/registry.h) */
    uint32_t pinned;              /* enum hp_pin (lib/select.h): hp_realloc keeps it in its backend */
    uint32_t excluded;            /* backends it may never move to (hp_select_excluded) */
    struct hp_placement placement;  /* NUMA placement it was allocated with; every resize
                                     * keeps it, and it is never cached */
};

/* Ask backend b for a mapping of len bytes at page_size (align and guard as
 * in struct hp_map_request; 0 for none) and check it against the block
 * rules of hp/backend.h: a mapping that breaks one is unmapped and the call
 * fails with HP_EBACKEND (one that overlaps libhp's own blocks, stacks or
 * cached ranges is left alone). HP_OK fills *m; else the backend's error,
 * its detail kept (alloc.c). */
int32_t hp_backend_map(struct hp_backend *b, uint64_t len, uint64_t flags, uint64_t page_size,
                       uint64_t align, uint64_t guard, struct hp_mapping *m);

/* rc as returned by an op of backend b (op names it): HP_OK, a code of
 * hp/errors.h as it is, or any other value as HP_EBACKEND with a detail
 * naming the backend, the op and the value. */
int32_t hp_backend_status(const struct hp_backend *b, const char *op, int rc);

/* hp_backend_map under a placement (pl NULL or mode 0: none): the calling
 * thread has the placement's memory policy while the backend maps, the
 * mapping gets it with mbind(2) before anyone touches it again, and under
 * HP_NUMA_BIND a mapping with resident pages on other nodes (a backend
 * that ignored the policy) is unmapped and refused with HP_EBACKEND. */
int32_t hp_backend_map_placed(struct hp_backend *b, uint64_t len, uint64_t flags,
                              uint64_t page_size, uint64_t align, uint64_t guard,
                              const struct hp_placement *pl, struct hp_mapping *m);

/* Usable bytes from m->addr (hp/backend.h: committed, 0 meaning len). */
static inline uint64_t hp_committed(const struct hp_mapping *m)
{
    return m->committed ? m->committed : m->len;
}

#endif
