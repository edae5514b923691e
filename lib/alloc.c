/* hp_alloc, hp_realloc, hp_free, hp_info: validation, dispatch to the backends. */
#include "abi_sizes.h"
#include "hp/alloc.h"
#include "hp/errors.h"
#include "cache.h"
#include "error.h"
#include "fork.h"
#include "explain.h"
#include "loader.h"
#include "measure.h"
#include "numa.h"
#include "os.h"
#include "registry.h"
#include "select.h"
#include "stack.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Largest block: 2^46 bytes (64 TiB), well below the 47-bit user address
 * space, so rounding to any page size can never overflow. */
#define HP_MAX_LEN (UINT64_C(1) << 46)

/* Linux's MAX_NUMNODES at its largest (NODES_SHIFT 10). */
#define HP_MAX_NUMA_NODES 1024

#define KNOWN_FLAGS (HP_F_REQUIRE_HUGE | HP_F_POPULATE | HP_F_COLLAPSE | HP_F_NOZERO | \
                     HP_F_NOPOOL | HP_F_PAGE_SHIFT_MASK)

HP_EXTERN(uint64_t) hp_page_size_flag(uint64_t page_size)
{
    if (page_size < 4096 || (page_size & (page_size - 1)))
        return 0;
    uint64_t shift = (uint64_t)__builtin_ctzll(page_size);
    return shift << HP_F_PAGE_SHIFT_POS;
}

static int32_t check_flags(uint64_t flags)
{
    if (flags & ~KNOWN_FLAGS)
        return hp_fail(HP_EFLAGS, "unknown flag bits 0x%llx",
                       (unsigned long long)(flags & ~KNOWN_FLAGS));
    uint64_t ps = hp_flags_page_size(flags);
    if (ps && (ps < hp_os_page_size() || ps > (UINT64_C(1) << 40)))
        return hp_fail(HP_EFLAGS, "page size %llu bytes in flags is out of range",
                       (unsigned long long)ps);
    return HP_OK;
}

static int32_t check_size(size_t size)
{
    if (size == 0)
        return hp_fail(HP_ESIZE, "size 0: a block must hold at least one byte");
    if ((uint64_t)size > HP_MAX_LEN)
        return hp_fail(HP_ESIZE, "size %zu exceeds the limit of %llu bytes", size,
                       (unsigned long long)HP_MAX_LEN);
    return HP_OK;
}

static struct hp_core *ready_core(void)
{
    struct hp_core *c = hp_core();
    if (c->init_error != HP_OK) {
        hp_fail(c->init_error, "%s", c->init_detail);
        return NULL;
    }
    return c;
}

/* Which rule of hp/backend.h a backend's mapping for a request of len
 * bytes at page_size (align, guard as asked) breaks; NULL if none. */
static const char *mapping_fault(const struct hp_mapping *m, uint64_t len, uint64_t page_size,
                                 uint64_t align, uint64_t guard)
{
    uint64_t base = hp_os_page_size();
    uintptr_t a = (uintptr_t)m->addr, ma = (uintptr_t)m->map_addr;
    uint64_t start = align > page_size ? align : page_size;
    if (!m->addr || !m->map_addr)
        return "no address";
    if (m->page_size != page_size)
        return "page_size is not the one requested";
    if ((a & (start - 1)) || (ma & (base - 1)))
        return "addr not aligned to the page size (and align) requested";
    if (m->len < len)
        return "len shorter than requested";
    if (m->map_len < m->len || a < ma || a - ma > m->map_len - m->len)
        return "addr and len not inside map_addr and map_len";
    if (m->map_len > UINTPTR_MAX - ma)
        return "map_addr + map_len wraps past the end of the address space";
    if (a - ma < guard)
        return "guard not inside the mapping";
    uint64_t committed = m->committed ? m->committed : m->len;
    if (committed < m->len || committed > m->map_len - (a - ma))
        return "committed below len or past the mapping";
    return NULL;
}

int32_t hp_backend_status(const struct hp_backend *b, const char *op, int rc)
{
    if (rc == HP_OK)
        return HP_OK;
    if (rc < 0 && strcmp(hp_error_name(rc), "HP_UNKNOWN") != 0)
        return rc;  /* the plugin's detail stays */
    return hp_fail(HP_EBACKEND, "backend %s: %s returned unknown status %d (not an hp_error "
                   "code)", b->name, op, rc);
}

/* 1 if [p, p + len) overlaps memory libhp knows to be another block's, a
 * stack's or the cache's (resizing: the block whose remap went wrong;
 * skip_busy: hp_registry_overlaps). */
static int others_memory(const void *p, uint64_t len, const void *resizing, int skip_busy)
{
    return hp_registry_overlaps(p, len, resizing, skip_busy) || hp_cache_overlaps(p, len) ||
           hp_stack_table_overlaps(p, len);
}

/* The backend whose map this thread is in: a map that asks libhp for a
 * block of its own backend would call itself until the stack ran out. */
static _Thread_local const struct hp_backend *mapping_here;

int32_t hp_backend_map(struct hp_backend *b, uint64_t len, uint64_t flags, uint64_t page_size,
                       uint64_t align, uint64_t guard, struct hp_mapping *m)
{
    struct hp_map_request req = {sizeof(req), 0, flags, len, page_size, align, guard};
    memset(m, 0, sizeof(*m));
    m->size = sizeof(*m);
    if (mapping_here == b)
        return hp_fail(HP_EBACKEND, "backend %s: its map asked libhp for a block of its own "
                       "backend (from inside map: refused, it would call itself)", b->name);
    hp_set_detail("");
    const struct hp_backend *outer = mapping_here;
    mapping_here = b;
    int32_t rc = hp_backend_status(b, "map", b->ops->map(b->self, &req, m));
    mapping_here = outer;
    if (rc != HP_OK)
        return rc;
    const char *fault = mapping_fault(m, len, page_size, align, guard);
    if (fault) {
        /* Unmap only what looks like a real mapping; a wild pointer from a
         * broken plugin must never reach munmap, nor must memory that is
         * another block's, a stack's or a cached range's (left alone, as
         * for a valid result: it is its owner's). */
        if (m->map_addr && !((uintptr_t)m->map_addr & (hp_os_page_size() - 1)) && m->map_len &&
            m->map_len < HP_MAX_LEN * 2 && hp_os_check_mapped(m->map_addr, m->map_len) == 0 &&
            (b->own || !others_memory(m->map_addr, m->map_len, NULL, 1)))
            hp_backend_unmap(b, m);
        return hp_fail(HP_EBACKEND, "backend %s returned an invalid mapping (%s: addr %p len %llu, "
                       "page size %llu for a request of %llu bytes at page size %llu)", b->name,
                       fault, m->addr, (unsigned long long)m->len,
                       (unsigned long long)m->page_size, (unsigned long long)len,
                       (unsigned long long)page_size);
    }
    if (hp_os_check_mapped(m->addr, m->len) != 0)
        return hp_fail(HP_EBACKEND, "backend %s returned memory that is not mapped (%p, %llu bytes)",
                       b->name, m->addr, (unsigned long long)m->len);
    /* What only a plugin can get wrong (mmap without MAP_FIXED never
     * returns a range in use, nor one the caller cannot write): memory
     * that is another block's, a stack's or a cached range's would alias
     * it, and read-only memory would fault at the caller's first write.
     * The former is left alone (unmapping it would take it from its
     * owner); a block being resized in another thread is not counted, its
     * record may name a range mremap has already vacated. */
    if (!b->own) {
        /* Everything unmap releases must be this mapping's (hp/backend.h,
         * struct hp_mapping): a map_len that runs over holes reaches memory
         * the plugin never mapped, which an unmap would take from its
         * owner, so the result is left alone. */
        if (hp_os_check_mapped(m->map_addr, m->map_len) != 0)
            return hp_fail(HP_EBACKEND, "backend %s returned a mapping with unmapped address "
                           "space in it (map_addr %p, map_len %llu), which is left alone",
                           b->name, m->map_addr, (unsigned long long)m->map_len);
        if (others_memory(m->map_addr, m->map_len, NULL, 1))
            return hp_fail(HP_EBACKEND, "backend %s returned memory of another block, stack or "
                           "cached range (%p, %llu bytes), which is left alone", b->name,
                           m->map_addr, (unsigned long long)m->map_len);
        /* Past the guard and the committed bytes a mapping is PROT_NONE
         * address space (hp/backend.h, struct hp_mapping): accessible
         * memory there is no reserve of the plugin's but, as like as not,
         * the program's (a map_len too long), which an unmap would take,
         * so such a result is left alone. The block itself must be
         * readable and writable, or it is given back. */
        uint64_t committed = m->committed ? m->committed : m->len;
        char *keep = (char *)m->addr - guard;
        int layout = hp_os_check_layout(m->map_addr, m->map_len, keep, guard + committed,
                                        m->addr, m->len);
        if (layout == -EEXIST || layout == -ENOMEM)
            return hp_fail(HP_EBACKEND, "backend %s returned a mapping (map_addr %p, map_len %llu) "
                           "with %s outside its guard and committed bytes, where only PROT_NONE "
                           "reserve may be; it is left alone", b->name, m->map_addr,
                           (unsigned long long)m->map_len,
                           layout == -EEXIST ? "accessible memory" : "unmapped address space");
        /* A page larger than a PMD is no THP of anonymous memory (at most
         * PMD size, mm/huge_memory.c) but a hugetlb or device-dax page,
         * whose size smaps states (KernelPageSize: vm_ops->pagesize,
         * Documentation/filesystems/proc.rst). Smaller claims are left
         * alone: THP and mTHP show as base pages there. */
        if (m->page_size > hp_os_pmd_page_size()) {
            int64_t kps = hp_os_kernel_page_size(m->addr);
            if (kps > 0 && (uint64_t)kps != m->page_size) {
                hp_backend_unmap(b, m);
                return hp_fail(HP_EBACKEND, "backend %s returned memory that is not of the page "
                               "size it claims (%llu bytes): the kernel maps it with %lld-byte "
                               "pages (smaps KernelPageSize)", b->name,
                               (unsigned long long)m->page_size, (long long)kps);
            }
        }
        if (layout == -EACCES) {
            hp_backend_unmap(b, m);
            return hp_fail(HP_EBACKEND, "backend %s returned memory that is not readable and "
                           "writable (%p, %llu bytes): its protection is not PROT_READ | "
                           "PROT_WRITE", b->name, m->addr, (unsigned long long)m->len);
        }
    }
    /* The guard is what stops a stack overflow (hp/stack.h): the backend
     * should have made it inaccessible (hp/backend.h), and the core makes
     * sure, whatever the backend did. For one that did, the mprotect
     * changes nothing. */
    if (guard) {
        int err = hp_os_guard((char *)m->addr - guard, guard);
        if (err) {
            hp_backend_unmap(b, m);
            return hp_fail(HP_EBACKEND, "backend %s: the %llu-byte guard below %p cannot be made "
                           "inaccessible: %s", b->name, (unsigned long long)guard, m->addr,
                           strerror(-err));
        }
    }
    return HP_OK;
}

/* Under HP_NUMA_BIND: refuse a mapping whose resident pages lie on other
 * nodes (a backend that ignored the thread's policy: its pages were
 * faulted in while mapping, before the mbind). HP_OK or HP_EBACKEND. */
static int32_t check_placed(struct hp_backend *b, const struct hp_mapping *m,
                            const struct hp_placement *pl)
{
    struct hp_nodes seen;
    if (pl->mode != HP_NUMA_BIND ||
        hp_numa_measure(m->addr, hp_committed(m), m->page_size, &seen, NULL, 0) <= 0)
        return HP_OK;
    for (unsigned n = 0; n < HP_NODES_MAX; n++)
        if (hp_nodes_has(&seen, n) && !hp_nodes_has(&pl->nodes, n))
            return hp_fail(HP_EBACKEND, "backend %s put pages of the block on node %u, outside "
                           "the nodes it is bound to (HP_NUMA_BIND)", b->name, n);
    return HP_OK;
}

int32_t hp_backend_map_placed(struct hp_backend *b, uint64_t len, uint64_t flags,
                              uint64_t page_size, uint64_t align, uint64_t guard,
                              const struct hp_placement *pl, struct hp_mapping *m)
{
    if (!pl || pl->mode == HP_NUMA_DEFAULT)
        return hp_backend_map(b, len, flags, page_size, align, guard, m);
    /* The thread's policy rules the reservation a hugetlb mmap makes
     * (mm/hugetlb.c allowed_mems_nr) and every page the backend faults in
     * while mapping; a VMA policy could only come after the mmap. */
    struct hp_os_policy saved;
    int err = hp_numa_thread_swap(pl, &saved);
    if (err)
        return hp_fail(HP_EOS, "cannot give the thread the block's NUMA policy "
                       "(set_mempolicy: %s)", strerror(-err));
    int32_t rc = hp_backend_map(b, len, flags, page_size, align, guard, m);
    err = hp_os_policy_restore(&saved);
    if (err)
        hp_log("could not restore the thread's memory policy (set_mempolicy: %s)",
               strerror(-err));
    if (rc != HP_OK)
        return rc;
    err = hp_numa_bind_range(m->map_addr, m->map_len, pl);
    if (err)
        rc = hp_fail(HP_EOS, "mbind of the block's %llu bytes failed: %s",
                     (unsigned long long)m->map_len, strerror(-err));
    else
        rc = check_placed(b, m, pl);
    if (rc != HP_OK)
        hp_backend_unmap(b, m);
    return rc;
}

/* Ask one backend for a block mapping (no alignment beyond the page, no
 * guard) under a placement; HP_OK fills *m. */
static int32_t map_with(struct hp_backend *b, uint64_t len, uint64_t flags, uint64_t page_size,
                        const struct hp_placement *pl, struct hp_mapping *m)
{
    return hp_backend_map_placed(b, len, flags, page_size, 0, 0, pl, m);
}

struct request {
    uint64_t len, flags;
    const char *backend;
    uint32_t pin;           /* enum hp_pin the new block keeps; 0: hp_select_pin decides */
    uint32_t excluded;      /* backends never to use, by index (a resized block's) */
    char exclude[HP_OPT_MAX_NAMES][HP_OPT_NAME_LEN];
    unsigned n_exclude;
    struct hp_placement placement;  /* the caller's NUMA placement (mode 0: none) */
    int numa;               /* 1: only pool_nodes' pools can serve the block (the
                             * placement, else the thread's policy and cpuset; numa_view) */
    struct hp_nodes pool_nodes;
};

static uint64_t new_origin(void)
{
    static _Atomic uint64_t next;
    return atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) + 1;
}

/* What the cache holds of each pooled page size of b, for
 * hp_select_credit_cached (unpooled sizes get no credit: skip the lock). */
static void count_cached(struct hp_backend *b, struct hp_backend_caps *caps)
{
    uint64_t cached[HP_MAX_PAGE_SIZES] = {0};
    for (unsigned k = 0; k < caps->n_page_sizes && k < HP_MAX_PAGE_SIZES; k++)
        if (caps->page_sizes[k] && caps->pool_free[k] != UINT64_MAX)
            cached[k] = hp_cache_bytes(b, caps->page_sizes[k]);
    hp_select_credit_cached(caps, cached);
}

/* Which nodes' pools can serve the calling thread's faults, for r. */
static void numa_view(struct request *r)
{
    r->numa = r->placement.mode ? hp_numa_placed_pool_nodes(&r->placement, &r->pool_nodes)
                                : hp_numa_pool_nodes(&r->pool_nodes);
}

/* Cached memory may lie on any node: a placed block, or one for a thread
 * held to some nodes, is mapped fresh. */
static int fresh_only(const struct request *r)
{
    return r->numa || r->placement.mode != HP_NUMA_DEFAULT;
}

/* The request selection sees for r (HP_BACKENDS merged in). */
static void select_request(const struct request *r, struct hp_select_request *sr)
{
    hp_select_request_init(sr, r->len, r->flags, hp_os_page_size(), r->backend, r->exclude,
                           r->n_exclude, hp_options());
    sr->excluded = r->excluded;
}

/* The backends r excludes, as the mask the block keeps (by index in c). */
static uint32_t excluded_mask(const struct hp_core *c, const struct hp_select_request *sr)
{
    struct hp_select_backend names[HP_MAX_BACKENDS];
    for (unsigned i = 0; i < c->n; i++)
        names[i] = (struct hp_select_backend){c->backends[i].ops ? c->backends[i].name : NULL,
                                              c->backends[i].kind, NULL, 0};
    return hp_select_excluded(sr, names, c->n);
}

/* The (backend, page size) pairs that may serve r, best first; 0 when there
 * is none (with the error set unless quiet). With ex, the caps selection saw
 * and its notes are kept there too (hpctl explain). */
static unsigned candidates_ex(struct hp_core *c, const struct request *r,
                              struct hp_candidate *cand, int quiet, struct hp_explain *ex)
{
    struct hp_backend_caps caps[HP_MAX_BACKENDS];
    struct hp_select_backend view[HP_MAX_BACKENDS];
    for (unsigned i = 0; i < c->n; i++) {
        struct hp_backend *b = &c->backends[i];
        view[i].name = b->ops ? b->name : NULL;
        view[i].kind = b->kind;
        view[i].unproven = hp_backend_unproven(b);
        view[i].caps = NULL;
        if (b->ops) {
            /* A request that names another backend never re-probes this
             * one (a re-probe runs in the thread that finds it due): the
             * last figures do. */
            int other = r->backend && strcmp(r->backend, b->name) != 0;
            hp_backend_caps_now(b, other ? 0 : r->len, other ? 0 : hp_flags_page_size(r->flags),
                                &caps[i]);
            if (r->numa)
                hp_numa_limit_caps(b, &r->pool_nodes, r->placement.mode != 0, &caps[i]);
            /* A thread held to some nodes gets fresh pages, never cached
             * ones, which may lie on any node (serve). */
            if (!fresh_only(r))
                count_cached(b, &caps[i]);
            view[i].caps = &caps[i];
        }
    }
    struct hp_select_request sr;
    select_request(r, &sr);
    unsigned n;
    if (ex) {
        n = hp_select_explain(&sr, view, c->n, cand, HP_SELECT_MAX, ex->notes,
                              HP_EXPLAIN_MAX_NOTES, &ex->n_notes);
        ex->n_backends = c->n;
        for (unsigned i = 0; i < c->n; i++) {
            struct hp_explain_backend *e = &ex->backends[i];
            snprintf(e->name, sizeof(e->name), "%s", c->backends[i].name);
            e->kind = c->backends[i].kind;
            e->loaded = 1;  /* refused files are never in the table (lib/loader.h) */
            e->reason[0] = '\0';
            e->caps = caps[i];
        }
    } else {
        n = hp_select(&sr, view, c->n, cand, HP_SELECT_MAX);
    }
    if (n == 0 && !quiet) {
        const char *nopool = (r->flags & HP_F_NOPOOL) ? " outside a pool (HP_F_NOPOOL)" : "";
        /* A named backend that a list leaves out: say which list. */
        const char *listed = hp_select_list_text(hp_select_named_out(&sr));
        char why[200] = "";
        if (listed) {
            snprintf(why, sizeof(why), " (%s)", listed);
        } else if (r->numa) {
            char nodes[64];
            hp_nodes_format(&r->pool_nodes, nodes, sizeof(nodes));
            snprintf(why, sizeof(why), " (%s the hugetlb pools of node%s %s only)",
                     hp_numa_who(r->placement.mode != 0),
                     hp_nodes_count(&r->pool_nodes) > 1 ? "s" : "", nodes);
        }
        if (r->flags & HP_F_REQUIRE_HUGE) {
            hp_fail(HP_ENOHUGE, "no backend can serve %llu bytes with huge pages%s%s%s%s",
                    (unsigned long long)r->len, nopool, r->backend ? " from backend " : "",
                    r->backend ? r->backend : "", why);
        } else {
            hp_fail(HP_ENOBACKEND, "no available backend can serve %llu bytes%s%s%s%s",
                    (unsigned long long)r->len, nopool, r->backend ? " from backend " : "",
                    r->backend ? r->backend : "", why);
        }
    }
    return n;
}

static unsigned candidates(struct hp_core *c, const struct request *r, struct hp_candidate *cand,
                           int quiet)
{
    return candidates_ex(c, r, cand, quiet, NULL);
}

/* HP_F_POPULATE / HP_F_COLLAPSE through the backend's advise (after map,
 * growth, or a carve from the cache). */
static int32_t advise(struct hp_block *blk, uint64_t flags)
{
    if (!HP_OP(blk->backend->ops, advise) || !(flags & (HP_F_POPULATE | HP_F_COLLAPSE)))
        return HP_OK;
    int32_t rc = hp_backend_status(blk->backend, "advise",
                                   hp_backend_advise(blk->backend, &blk->m,
                                                     flags & (HP_F_POPULATE | HP_F_COLLAPSE)));
    /* A plugin's advise checked like its map: the block must still be
     * readable and writable (given back where the pages are still there). */
    int rw = rc == HP_OK && !blk->backend->own ? hp_os_check_rw(blk->m.addr, blk->m.len) : 0;
    if (rw == -EACCES || rw == -ENOMEM) {
        hp_os_protect(blk->m.addr, blk->m.len, PROT_READ | PROT_WRITE);
        rc = hp_fail(HP_EBACKEND, "backend %s: advise left %p (%llu bytes) not readable and "
                     "writable", blk->backend->name, blk->m.addr, (unsigned long long)blk->m.len);
    }
    return rc;
}

/* A block carved from the cache for candidate (b, page_size), or NULL. */
static struct hp_block *from_cache(struct hp_backend *b, uint64_t page_size,
                                   const struct request *r)
{
    if (page_size <= hp_os_page_size())
        return NULL;  /* base-page mappings are never cached (hp_cache_accepts) */
    /* Most calls miss: take into a local first, allocate the record only
     * on a hit. */
    struct hp_block got = {0};
    uint64_t dirty;
    if (hp_cache_take(b, page_size, r->len, &got, &dirty) != HP_OK)
        return NULL;
    struct hp_block *blk = malloc(sizeof(*blk));
    if (!blk) {
        hp_backend_unmap(b, &got.m);
        if (got.m.flags & HP_MAP_POOL)
            hp_backend_mark_stale(b);
        return NULL;
    }
    *blk = got;
    blk->backend = b;
    if (!(r->flags & HP_F_NOZERO))
        hp_zero_reused(blk->m.addr, dirty < blk->m.len ? dirty : blk->m.len,
                       (blk->m.flags & HP_MAP_POOL) != 0);
    if (advise(blk, r->flags) != HP_OK) {
        if (!hp_cache_put(blk)) {
            hp_backend_unmap(b, &blk->m);
            free(blk);
        }
        return NULL;
    }
    return blk;
}

static void release(struct hp_block *b);

/* HP_F_NOPOOL, and b mapped pool pages all the same (a backend whose probe
 * called the page size unpooled): b is released, with the error set. */
static int refused_pool(const struct request *r, struct hp_block *blk)
{
    if (!(r->flags & HP_F_NOPOOL) || !(blk->m.flags & HP_MAP_POOL))
        return 0;
    hp_fail(HP_EBACKEND, "backend %s mapped pool pages of %llu KiB, which its probe "
            "reports as unpooled; HP_F_NOPOOL refuses them", blk->backend->name,
            (unsigned long long)(blk->m.page_size >> 10));
    release(blk);
    return 1;
}

/* Serve r from the first candidate that can: its cached ranges first (warm
 * pages), then a fresh mapping. */
static struct hp_block *serve(struct hp_core *c, const struct request *r,
                              const struct hp_candidate *cand, unsigned n)
{
    int32_t last = HP_ENOMEM;
    char tried[448] = "";  /* fits the detail (lib/error.c) with its lead-in */
    for (unsigned i = 0; i < n; i++) {
        struct hp_backend *b = &c->backends[cand[i].backend];
        struct hp_block *blk = fresh_only(r) ? NULL : from_cache(b, cand[i].page_size, r);
        if (blk && refused_pool(r, blk))
            blk = NULL;
        if (blk)
            return blk;
        blk = calloc(1, sizeof(*blk));
        if (!blk) {
            hp_fail(HP_ENOMEM, "out of memory for the block record");
            return NULL;
        }
        /* Read before the map: a fork racing with it makes the block stale
         * (lib/fork.h, hp_fork_gen), never the other way round. */
        blk->gen = hp_fork_gen();
        int32_t rc = map_with(b, r->len, r->flags, cand[i].page_size, &r->placement, &blk->m);
        /* The pool pages the cache holds may be the ones this map misses. */
        if (rc == HP_ENOMEM && hp_cache_flush(b, cand[i].page_size) > 0)
            rc = map_with(b, r->len, r->flags, cand[i].page_size, &r->placement, &blk->m);
        if (rc == HP_OK) {
            blk->backend = b;
            if (refused_pool(r, blk)) {
                rc = HP_EBACKEND;  /* blk was released */
            } else if ((rc = advise(blk, r->flags)) != HP_OK) {
                /* HP_F_POPULATE / HP_F_COLLAPSE the backend could not do:
                 * this candidate failed (hp/backend.h: advise after map). */
                hp_backend_unmap(b, &blk->m);
                free(blk);
            } else {
                blk->origin = new_origin();
                if (hp_cache_accepts(b, &blk->m))
                    hp_cache_count_miss();
                return blk;
            }
        } else {
            free(blk);
        }
        hp_backend_mark_stale(b);
        last = rc;
        /* Whole entries only: one that does not fit becomes " ...". */
        char entry[320];
        size_t used = strlen(tried);
        const char *detail = hp_last_error_detail();
        snprintf(entry, sizeof(entry), "%s%s/%lluK: %s (%s)", used ? "; " : "", b->name,
                 (unsigned long long)(cand[i].page_size >> 10), hp_error_name(rc),
                 detail[0] ? detail : "the backend gave no reason");
        if (used + strlen(entry) < sizeof(tried) - 5)
            memcpy(tried + used, entry, strlen(entry) + 1);
        else if (!strstr(tried, " ..."))
            snprintf(tried + used, sizeof(tried) - used, " ...");
        hp_log("%s could not map %llu bytes, trying the next candidate", b->name,
               (unsigned long long)r->len);
    }
    if (r->flags & HP_F_REQUIRE_HUGE)
        hp_fail(HP_ENOHUGE, "huge pages required for %llu bytes; tried %s",
                (unsigned long long)r->len, tried);
    else
        hp_fail(last == HP_EBACKEND ? HP_EBACKEND : HP_ENOMEM, "every backend failed: %s", tried);
    return NULL;
}

/* Unmap b and drop its record. If the kernel refuses (munmap can fail with
 * ENOMEM when splitting would pass vm.max_map_count), the record is kept
 * and HP_EOS returned, so the caller still owns a valid block. An unmap
 * that fails with the block's memory gone all the same (a broken plugin)
 * leaves nothing to own: the record is dropped too, and HP_EBACKEND says
 * so; a later hp_free of that address must not reach whatever is mapped
 * there next. */
static int32_t try_release(struct hp_block *b)
{
    struct hp_backend *be = b->backend;
    int32_t rc = hp_backend_status(be, "unmap", hp_backend_unmap(be, &b->m));
    char what[256];
    snprintf(what, sizeof(what), "%s", hp_last_error_detail());
    if (rc != HP_OK && hp_os_check_mapped(b->m.addr, b->m.len) == -ENOMEM) {
        /* Part of the mapping may still be there: it is left alone (the
         * addresses the plugin gave back may already be someone else's),
         * and said. */
        int rest = hp_os_any_mapped(b->m.map_addr, b->m.map_len) == 1;
        rc = hp_fail(HP_EBACKEND, "backend %s: unmap of %p failed (%s%s%s) after unmapping %s "
                     "of it; the block is gone%s", be->name, b->m.addr, hp_error_name(rc),
                     what[0] ? ": " : "", what, rest ? "part" : "all",
                     rest ? ", and what is left of its mapping stays mapped, lost" : "");
        free(b);
        return rc;
    }
    if (rc != HP_OK)
        return hp_fail(HP_EOS, "backend %s could not unmap %p (%s%s%s); the block is still valid",
                       be->name, b->m.addr, hp_error_name(rc), what[0] ? ": " : "", what);
    /* A plugin's unmap is believed (the addresses may already be another
     * mapping's, which must not be unmapped again), but one that left the
     * whole block mapped is said (HP_DEBUG). */
    if (!be->own && hp_os_check_mapped(b->m.map_addr, b->m.map_len) == 0)
        hp_log("backend %s: unmap returned HP_OK, but %p (%llu bytes) is still mapped: left "
               "alone (it may be another mapping's by now), lost if it is the plugin's",
               be->name, b->m.map_addr, (unsigned long long)b->m.map_len);
    /* Pool pages came back: the next large request re-reads the figures. */
    if (b->m.flags & HP_MAP_POOL)
        hp_backend_mark_stale(b->backend);
    free(b);
    return HP_OK;
}

/* Release a block nobody can use any more (a realloc source already
 * copied, a failed set-up); a refused unmap can only be logged. */
static void release(struct hp_block *b)
{
    int32_t rc = try_release(b);
    if (rc != HP_OK)
        hp_log("%s", hp_last_error_detail());
    if (rc == HP_EOS)
        free(b);
}

/* A block of a backend that claims a huge kind without having shown it
 * (hp_backend_unproven), freed: are its huge pages real? Measured by the
 * kernel's figures (pagemap, smaps), never the plugin's huge_bytes, and
 * only for a block the plugin was asked to back with huge pages, at most
 * HP_CLAIM_MEASURES times per backend. */
static void check_claim(struct hp_block *b)
{
    struct hp_backend *be = b->backend;
    if (!hp_backend_unproven(be) || b->m.page_size <= hp_os_page_size())
        return;
    unsigned tried = atomic_fetch_add_explicit(&be->measured, 1, memory_order_relaxed);
    if (tried >= HP_CLAIM_MEASURES)
        return;
    int64_t huge = hp_measure_huge_bytes(b->m.addr, b->m.len);
    if (huge > 0) {
        atomic_store_explicit(&be->delivered, 1, memory_order_relaxed);
        hp_log("backend %s: %lld huge bytes measured in a block of its: it now ranks with "
               "its kind", be->name, (long long)huge);
    } else if (tried + 1 == HP_CLAIM_MEASURES) {
        hp_log("backend %s claims kind %s, but %u of its blocks had no huge bytes: it stays "
               "ranked below libhp's backend of that kind", be->name,
               be->kind == HP_KIND_HUGETLB ? "hugetlb" : "thp", HP_CLAIM_MEASURES);
    }
}

/* A freed block goes to the cache if it takes it, else back to the kernel. */
static int32_t retire(struct hp_block *b)
{
    check_claim(b);
    /* A placed block's memory carries its mbind policy, which would follow
     * it to whatever block the cache served next. */
    if (b->placement.mode != HP_NUMA_DEFAULT)
        return try_release(b);
    return hp_cache_put(b) ? HP_OK : try_release(b);
}

static void *allocate(struct hp_core *c, struct request *r)
{
    struct hp_candidate cand[HP_SELECT_MAX];
    numa_view(r);
    unsigned n = candidates(c, r, cand, 0);
    if (n == 0)
        return NULL;
    struct hp_block *blk = serve(c, r, cand, n);
    if (!blk)
        return NULL;
    blk->flags = r->flags;
    blk->requested_page_size = hp_flags_page_size(r->flags);
    blk->placement = r->placement;
    struct hp_select_request sr;
    select_request(r, &sr);
    blk->pinned = r->pin ? r->pin : hp_select_pin(&sr);
    blk->excluded = excluded_mask(c, &sr);
    if (hp_registry_insert(blk) == HP_OK)
        return blk->m.addr;
    release(blk);
    hp_fail(HP_ENOMEM, "out of memory for the block registry");
    return NULL;
}

static int32_t build_request(size_t size, const struct hp_alloc_opts *opts, struct request *r)
{
    static const struct hp_alloc_opts none = HP_ALLOC_OPTS_INIT;
    const size_t min_opts = HP_ALLOC_OPTS_SIZE_V1_0;
    if (!opts)
        opts = &none;
    if (opts->size < min_opts)
        return hp_fail(HP_EINVAL, "opts->size is %u, expected at least %zu", opts->size,
                       min_opts);
    if (opts->reserved)
        return hp_fail(HP_EINVAL, "opts->reserved must be 0");
    int32_t rc = check_size(size);
    if (rc == HP_OK)
        rc = check_flags(opts->flags);
    if (rc != HP_OK)
        return rc;
    memset(r, 0, sizeof(*r));
    r->len = size;
    r->flags = opts->flags;
    r->backend = opts->backend;
    if (opts->backend && !hp_valid_backend_name(opts->backend))
        return hp_fail(HP_EINVAL, "opts->backend \"%.40s\" is not a backend name",
                       opts->backend);
    if (opts->exclude) {
        char why[160];
        int n = hp_parse_name_list(opts->exclude, r->exclude, HP_OPT_MAX_NAMES, why,
                                   sizeof(why));
        if (n < 0)
            return hp_fail(HP_EINVAL, "opts->exclude: %s", why);
        r->n_exclude = (unsigned)n;
    }
    if (opts->size >= offsetof(struct hp_alloc_opts, numa_nodes) + sizeof(opts->numa_nodes))
        return hp_numa_placement(opts->numa_mode, opts->numa_max_node, opts->numa_nodes, "opts",
                                 &r->placement);
    return HP_OK;
}

/* A backend the caller named must exist and be available now. */
static int32_t check_named(struct hp_core *c, const struct request *r)
{
    if (!r->backend)
        return HP_OK;
    struct hp_backend *b = hp_backend_by_name(c, r->backend);
    if (!b) {
        for (unsigned k = 0; k < c->n_rejected; k++) {
            if (strcmp(c->rejected[k].name, r->backend))
                continue;
            char path[256];  /* a file's name may hold any byte */
            hp_printable(path, sizeof(path), c->rejected[k].path ? c->rejected[k].path : "?");
            return hp_fail(HP_ENOBACKEND, "backend \"%s\" was refused at load (%s): %s",
                           r->backend, path, c->rejected[k].reason);
        }
        return hp_fail(HP_ENOBACKEND, "no loaded backend named \"%s\"", r->backend);
    }
    hp_backend_use_named(c, r->backend);  /* a third-party backend's first probe */
    /* b->caps is a hint (pool figures are re-read at most every 100 ms): a
     * backend the caller named is judged on fresh figures. */
    struct hp_backend_caps caps;
    hp_backend_caps_now(b, r->len, hp_flags_page_size(r->flags), &caps);
    if (!caps.available && (caps.flags & HP_CAPS_REPROBE)) {
        hp_backend_mark_stale(b);
        hp_backend_caps_now(b, UINT64_MAX, 0, &caps);
    }
    if (!caps.available)
        return hp_fail((r->flags & HP_F_REQUIRE_HUGE) && caps.n_page_sizes ? HP_ENOHUGE
                                                                           : HP_ENOBACKEND,
                       "backend %s is unavailable: %s", r->backend, caps.reason);
    return HP_OK;
}

HP_EXTERN(void *) hp_alloc_ex(size_t size, const struct hp_alloc_opts *opts)
{
    struct request r;
    if (build_request(size, opts, &r) != HP_OK)
        return NULL;
    struct hp_core *c = ready_core();
    if (!c)
        return NULL;
    if (check_named(c, &r) != HP_OK)
        return NULL;
    return allocate(c, &r);
}

int32_t hp_alloc_explain(size_t size, const struct hp_alloc_opts *opts, struct hp_explain *out)
{
    struct request r;
    memset(out, 0, sizeof(*out));
    int32_t rc = build_request(size, opts, &r);
    struct hp_core *c = rc == HP_OK ? ready_core() : NULL;
    if (rc == HP_OK && !c)
        rc = hp_last_error();
    if (rc == HP_OK)
        rc = check_named(c, &r);
    if (rc == HP_OK) {
        numa_view(&r);
        out->n_cand = candidates_ex(c, &r, out->cand, 0, out);
        if (out->n_cand == 0)
            rc = hp_last_error();
    }
    out->status = rc;
    if (rc != HP_OK)
        snprintf(out->detail, sizeof(out->detail), "%s", hp_last_error_detail());
    return rc;
}

HP_EXTERN(void *) hp_alloc(size_t size, uint64_t flags)
{
    struct hp_alloc_opts opts = HP_ALLOC_OPTS_INIT;
    opts.flags = flags;
    return hp_alloc_ex(size, &opts);
}

static int32_t pointer_error(int32_t code, const void *p, const char *what)
{
    switch (code) {
    case HP_EDOUBLEFREE:
        return hp_fail(code, "%s(%p): the block was already freed", what, p);
    case HP_EINTERIOR:
        return hp_fail(code, "%s(%p): pointer is inside a block, not at its start", what, p);
    case HP_EINVAL:
        return hp_fail(code, "%s(%p): another thread is resizing this block; it is unchanged",
                       what, p);
    default:
        return hp_fail(code, "%s(%p): not a pointer returned by libhp", what, p);
    }
}

HP_EXTERN(int32_t) hp_free(void *p)
{
    if (!p)
        return HP_OK;
    int32_t code;
    struct hp_block *b = hp_registry_take(p, 1, &code);
    if (!b)
        return pointer_error(code, p, "hp_free");
    int32_t rc = retire(b);
    if (rc == HP_EOS)
        hp_registry_insert(b);  /* still the caller's: a later hp_free may succeed */
    return rc;
}

/* What a resize through the backend's remap left of the block. */
enum remap_left {
    REMAP_KEPT,       /* the block is b->m: the result, checked, or the block as it was */
    REMAP_MOVED,      /* a broken result was followed: b->m is the block, checked, at an
                       * address the plugin chose, with its old length */
    REMAP_LOST,       /* the plugin took the block's memory away: nothing to copy from */
};

/* 1 if [p, p + len) can be a mapping of this process: page-aligned, of a
 * size no block reaches, not wrapping around. */
static int plausible(const void *p, uint64_t len)
{
    uintptr_t a = (uintptr_t)p;
    return a && !(a & (hp_os_page_size() - 1)) && len && len <= 2 * HP_MAX_LEN &&
           a + len > a;
}

static uint64_t round_up(uint64_t v, uint64_t unit)
{
    return (v + unit - 1) / unit * unit;
}

/* A remap returned a mapping that breaks a rule of hp/backend.h (what says
 * which), or failed after moving or unmapping the block: the block's pages
 * are found before anything is done with them, and the block is left
 * where the caller has it, or the call fails.
 *   - The block is still mapped at its address: the result is dropped (a
 *     separate mapping of the plugin's goes back through its unmap; one
 *     that grew the old mapping where it is stays with the block, so that
 *     unmap releases it).
 *   - Else the pages moved: the result's map_addr plus the block's old
 *     offset in its mapping (mremap keeps it) must hold them, mapped and
 *     aligned to the page size. A shrink is then done: b->m is the block
 *     there. Growth moves them back to the caller's address (only onto free
 *     address space, hp_os_move_to), and hp_realloc goes on with a copy
 *     from there; where that space is taken, b->m is the block at the new
 *     place (REMAP_MOVED).
 *   - Else nothing is left to copy from (REMAP_LOST).
 * Returns HP_OK (a shrink followed) or HP_EBACKEND naming the backend and
 * the rule; *left says what became of the block. */
/* The caller's bytes at [addr, addr + len), after a plugin's op, made
 * readable and writable again if the op took that away (they are the
 * block's: the caller writes them, hp_realloc may copy from them). */
static void restore_rw(const struct hp_backend *be, const char *op, void *addr, uint64_t len)
{
    if (hp_os_check_rw(addr, len) != -EACCES)
        return;
    int rc = hp_os_protect(addr, len, PROT_READ | PROT_WRITE);
    hp_log("backend %s: %s left the block's pages at %p (%llu bytes) without read and write "
           "access: %s", be->name, op, addr, (unsigned long long)len,
           rc == 0 ? "restored" : strerror(-rc));
}

/* How far a mapping whose result broke a rule reaches, from known_end
 * (the end of pages known to be its own) towards claimed: over mapped
 * memory up to asked_end (the end of the size the plugin was asked for,
 * where a remap's own pages lie), and on over PROT_NONE reserve only.
 * Accessible memory further on may be the program's (a result that breaks
 * the rules says nothing for sure): unmapping it would take it from its
 * owner, so it is never counted. */
static char *reach(char *known_end, char *claimed, char *asked_end)
{
    if (claimed <= known_end)
        return known_end;
    char *end = claimed < asked_end ? claimed : asked_end;
    if (end <= known_end || hp_os_check_mapped(known_end, (size_t)(end - known_end)) != 0)
        end = known_end;
    if (claimed > end && hp_os_check_layout(end, (size_t)(claimed - end), NULL, 0, NULL, 0) == 0)
        end = claimed;
    return end;
}

static int32_t recover(struct hp_block *b, const struct hp_mapping *got, uint64_t new_len,
                       const char *what, enum remap_left *left)
{
    const struct hp_backend *be = b->backend;
    const struct hp_mapping old = b->m;
    uint64_t base = hp_os_page_size(), ps = old.page_size;
    uint64_t off = (uint64_t)((char *)old.addr - (char *)old.map_addr);
    uint64_t keep = round_up(old.len < new_len ? old.len : new_len, base);
    char *gm = got->map_addr;
    int real = plausible(gm, got->map_len) && hp_os_check_mapped(gm, got->map_len) == 0;
    *left = REMAP_KEPT;
    if (hp_os_check_mapped(old.addr, old.len) == 0) {
        char *om = old.map_addr;
        restore_rw(be, "remap", old.addr, old.len);
        if (real && (gm + got->map_len <= om || gm >= om + old.map_len)) {
            struct hp_mapping extra = *got;
            if (others_memory(gm, got->map_len, old.addr, 0))
                hp_log("backend %s: its broken remap named memory of another block (%p, %llu "
                       "bytes); left alone", be->name, (void *)gm,
                       (unsigned long long)got->map_len);
            else if (hp_backend_unmap(be, &extra) != HP_OK)
                hp_log("backend %s: the mapping its broken remap made (%p, %llu bytes) could "
                       "not be unmapped", be->name, (void *)gm,
                       (unsigned long long)got->map_len);
        } else if (gm == om && got->map_len > old.map_len) {
            /* Grown in place: unmap releases it all, as far as it is the
             * plugin's (reach: whatever map_len says past that). */
            char *asked = (char *)old.addr + round_up(new_len, ps);
            char *end = reach(om + old.map_len,
                              got->map_len <= 2 * HP_MAX_LEN ? gm + got->map_len : asked, asked);
            if (!others_memory(om + old.map_len, (uint64_t)(end - om - old.map_len), old.addr, 0))
                b->m.map_len = (uint64_t)(end - om);
        }
        return hp_fail(HP_EBACKEND, "backend %s: remap %s; the block stays where it was",
                       be->name, what);
    }
    char *d = plausible(gm, got->map_len) ? gm + off : NULL;
    if (!d || ((uintptr_t)d & (ps - 1)) || hp_os_check_mapped(d, keep) != 0) {
        *left = REMAP_LOST;
        return hp_fail(HP_EBACKEND, "backend %s: remap %s, and the block's pages are neither "
                       "where they were nor where the result says: the block is lost",
                       be->name, what);
    }
    /* The plugin's mapping: the block's pages, PROT_NONE reserve between
     * map_addr and them, and as far on as reach allows towards the
     * furthest end the result names. */
    char *start = d, *claimed = d + keep;
    if (gm < d && hp_os_check_layout(gm, (size_t)(d - gm), NULL, 0, NULL, 0) == 0)
        start = gm;
    const char *ends[3] = {gm + got->map_len, (char *)got->addr + got->len,
                           (char *)got->addr + hp_committed(got)};
    for (int i = 0; i < 3; i++) {
        char *e = (char *)round_up((uintptr_t)ends[i], base);
        if (e > claimed && (uint64_t)(e - d) <= 2 * HP_MAX_LEN)
            claimed = e;
    }
    char *end = reach(d + keep, claimed, d + round_up(new_len, ps));
    if (others_memory(start, (uint64_t)(end - start), old.addr, 0)) {
        *left = REMAP_LOST;
        return hp_fail(HP_EBACKEND, "backend %s: remap %s, and the block is gone from its "
                       "address; the result names memory of another block (%p), which is left "
                       "alone: the block is lost", be->name, what, (void *)gm);
    }
    restore_rw(be, "remap", d, keep);
    struct hp_mapping m = old;
    m.addr = d;
    m.len = m.committed = keep;
    m.map_addr = start;
    m.map_len = (uint64_t)(end - start);
    m.cookie = got->cookie;
    if (new_len <= old.len) {
        b->m = m;
        hp_log("backend %s: remap %s; the shrunk block is used where its pages are (%p)",
               be->name, what, (void *)d);
        return HP_OK;
    }
    if (hp_os_move_to(d, keep, old.addr) == 0) {
        /* The rest of the plugin's mapping is address space nobody uses. */
        if (d > start)
            hp_os_unmap(start, (size_t)(d - start));
        if (end > d + keep)
            hp_os_unmap(d + keep, (size_t)(end - d - keep));
        m.addr = m.map_addr = old.addr;
        m.map_len = keep;
        b->m = m;
        return hp_fail(HP_EBACKEND, "backend %s: remap %s; its pages were moved back, the block "
                       "stays where it was", be->name, what);
    }
    b->m = m;
    *left = REMAP_MOVED;
    return hp_fail(HP_EBACKEND, "backend %s: remap %s; the block's pages are at %p now and "
                   "cannot move back", be->name, what, (void *)d);
}

/* What a remap call left for recover: the plugin's result and which rule
 * it broke ("" when nothing is to be recovered). */
struct remap_broken {
    struct hp_mapping got;
    char what[200];
};

/* Resize through the backend's remap; HP_OK updates b->m (and the lineage,
 * when the memory moved). A result is checked before anything is done with
 * it (the block rules of hp/backend.h and that it is mapped); one that
 * breaks a rule, and a failure that took the block away, fill *broken for
 * recover. */
static int32_t remap_with(struct hp_block *b, uint64_t new_len, uint64_t flags,
                          struct remap_broken *broken)
{
    int (*remap)(void *, struct hp_mapping *, uint64_t, uint64_t) = HP_OP(b->backend->ops, remap);
    if (!remap)
        return HP_ENOTSUP;
    struct hp_mapping *m = &broken->got;
    *m = b->m;
    hp_set_detail("");
    /* A placed block grows under its placement, as it was mapped
     * (hp_backend_map_placed): new pages the backend faults in follow the
     * thread's policy, and a new VMA gets the block's with mbind. */
    const struct hp_placement *pl = &b->placement;
    int placed = pl->mode != HP_NUMA_DEFAULT && new_len > b->m.len;
    struct hp_os_policy saved = {0};
    if (placed) {
        int err = hp_numa_thread_swap(pl, &saved);
        if (err)
            return hp_fail(HP_EOS, "cannot give the thread the block's NUMA policy "
                           "(set_mempolicy: %s)", strerror(-err));
    }
    int32_t rc = hp_backend_status(b->backend, "remap",
                                   remap(b->backend->self, m, new_len, flags));
    int err = hp_os_policy_restore(&saved);
    if (err)
        hp_log("could not restore the thread's memory policy (set_mempolicy: %s)",
               strerror(-err));
    if (rc == HP_OK) {
        const char *fault = mapping_fault(m, new_len, b->m.page_size, 0, 0);
        if (!fault && hp_os_check_mapped(m->addr, m->len) != 0)
            fault = "memory that is not mapped";
        /* Only a plugin can get the layout wrong (hp_backend_map says
         * why libhp's own results are not read again): pages the caller
         * cannot write, a map_len over holes or over accessible memory
         * past the committed bytes (the program's, as like as not, which
         * the block's unmap would take), or another block's memory. */
        if (!fault && !b->backend->own) {
            int layout = hp_os_check_layout(m->map_addr, m->map_len, m->addr, hp_committed(m),
                                            m->addr, m->len);
            if (layout == -ENOMEM)
                fault = "unmapped address space in its mapping";
            else if (layout == -EEXIST)
                fault = "accessible memory outside its committed bytes";
            else if (layout == -EACCES)
                fault = "memory that is not readable and writable";
            else if (others_memory(m->map_addr, m->map_len, b->m.addr, 1))
                fault = "memory of another block, stack or cached range";
        }
        if (!fault) {
            if (placed && (err = hp_numa_bind_range(m->map_addr, m->map_len, pl)) != 0)
                hp_log("hp_realloc: mbind of the grown block failed (%s); later faults follow "
                       "the thread's policy", strerror(-err));
            if (m->map_addr != b->m.map_addr)
                b->origin = new_origin();
            /* What the memory is (shared, pooled, carvable) does not change
             * with its size: the block keeps its flags, whatever the plugin
             * wrote there. */
            m->flags = b->m.flags;
            b->m = *m;
            return HP_OK;
        }
        snprintf(broken->what, sizeof(broken->what), "returned an invalid mapping (%s: addr %p "
                 "len %llu for %llu bytes)", fault, m->addr, (unsigned long long)m->len,
                 (unsigned long long)new_len);
        return HP_EBACKEND;
    }
    /* A failure leaves the block as it was (hp/backend.h). */
    if (hp_os_check_mapped(b->m.addr, b->m.len) != 0)
        snprintf(broken->what, sizeof(broken->what), "failed (%s: %.100s), and the block is no "
                 "longer where it was", hp_error_name(rc), hp_last_error_detail());
    else if (!b->backend->own && hp_os_check_rw(b->m.addr, b->m.len) == -EACCES)
        snprintf(broken->what, sizeof(broken->what), "failed (%s: %.100s), and the block is no "
                 "longer readable and writable", hp_error_name(rc), hp_last_error_detail());
    return rc;
}

/* remap_with, never racing a fork where that matters. hp_realloc_plan
 * copies instead of resizing when a fork came after the block was mapped
 * (pool pages growing, shared memory), but another thread may fork between
 * that decision and the remap: pool pages moved after a fork while the child
 * still shares them cannot be copied on write by their owner once the pool
 * is empty (on Linux 6.18 that write loops in mm/hugetlb.c hugetlb_wp, see
 * tests/realloc/test_huge.c), and a shared mapping would change under the
 * child. So the generation is read again with fork held back, until the
 * remap is done. A broken remap is recovered after the fence: recover takes
 * the registry's and the caches' locks, which a fork may hold while it
 * waits for the fence (pthread_atfork runs prepare handlers in reverse
 * order of registration, and each module registers on first use), and it
 * only reads the pages it finds and moves them back (the copy path writes
 * a new block, never them). */
static int32_t remap_fenced(struct hp_block *b, uint64_t new_size, uint64_t flags,
                            enum remap_left *left)
{
    int moves_pool = (b->m.flags & HP_MAP_POOL) && new_size > b->m.len;
    struct remap_broken broken = {.what = ""};
    int32_t rc;
    *left = REMAP_KEPT;
    if (!moves_pool && !(b->m.flags & HP_MAP_SHARED)) {
        rc = remap_with(b, new_size, flags, &broken);
    } else {
        int forked = hp_fork_fence_enter() != b->gen;
        rc = forked ? HP_ENOTSUP : remap_with(b, new_size, flags, &broken);
        hp_fork_fence_leave();
        if (forked)
            hp_set_detail("a fork came before the remap");
    }
    if (!broken.what[0])
        return rc;
    void *was = b->m.map_addr;
    rc = recover(b, &broken.got, new_size, broken.what, left);
    if (b->m.map_addr != was)
        b->origin = new_origin();
    return rc;
}

/* Resize b on its own backend (hp_realloc_plan said HP_STEP_RESIZE: no
 * fork rule stands in the way). Shrink releases the tail in place. Growth:
 * the backend commits headroom reserved after the block if it has some;
 * else the cached range right after the block (same lineage) is taken over,
 * no syscall at all; else the backend grows the mapping in place or moves
 * it (page tables, not bytes). The new tail reads as zero unless
 * HP_F_NOZERO: only bytes that may hold old contents are cleared. */
static int32_t resize(struct hp_block *b, uint64_t new_size, uint64_t flags,
                      enum remap_left *left)
{
    uint64_t old_len = b->m.len;
    /* Past the committed end, remap hands out only zeroed bytes (the block
     * rules of hp/backend.h); below it, old contents may remain. */
    uint64_t dirty = hp_committed(&b->m);
    int pool = (b->m.flags & HP_MAP_POOL) != 0;
    *left = REMAP_KEPT;
    if (new_size <= old_len) {
        int32_t rc = remap_fenced(b, new_size, flags, left);
        if (rc == HP_OK && pool)
            hp_backend_mark_stale(b->backend);
        return rc;
    }
    uint64_t span = b->m.map_len - (uint64_t)((char *)b->m.addr - (char *)b->m.map_addr);
    int32_t rc = HP_ENOTSUP;
    if (new_size > span && b->placement.mode == HP_NUMA_DEFAULT) {
        uint64_t end = b->m.map_len, got = hp_cache_adopt(b, new_size);
        if (got) {
            dirty = end + got;
            if (new_size <= hp_committed(&b->m)) {
                uint64_t unit = pool ? b->m.page_size : hp_os_page_size();
                b->m.len = (new_size + unit - 1) / unit * unit;
                rc = HP_OK;
            }
        }
    }
    if (rc != HP_OK)
        rc = remap_fenced(b, new_size, flags, left);
    /* A dry pool may be dry because the cache holds its pages. */
    if (rc == HP_ENOMEM && hp_cache_flush(b->backend, b->m.page_size) > 0)
        rc = remap_fenced(b, new_size, flags, left);
    if (rc != HP_OK)
        return rc;
    uint64_t zero_end = dirty < b->m.len ? dirty : b->m.len;
    if (!(flags & HP_F_NOZERO) && zero_end > old_len)
        hp_zero_reused((char *)b->m.addr + old_len, zero_end - old_len, pool);
    if (advise(b, flags) != HP_OK)
        hp_log("%s: populate/collapse after growth failed; pages come from faults",
               b->backend->name);
    return HP_OK;
}

/* The block as hp_realloc's rules (lib/select.h) see it. */
static struct hp_realloc_block realloc_view(const struct hp_block *b)
{
    return (struct hp_realloc_block){b->m.page_size, b->m.len, b->m.flags, b->pinned,
                                     b->gen != hp_fork_gen()};
}

/* hp_realloc_plan, with the selection's best candidate for new_size when
 * the promotion rule needs it. */
static struct hp_realloc_plan first_step(struct hp_core *c, const struct hp_realloc_block *rb,
                                         uint64_t new_size, uint64_t flags, uint32_t excluded,
                                         const struct hp_placement *pl)
{
    struct hp_candidate cand[HP_SELECT_MAX];
    const struct hp_candidate *best = NULL;
    if (hp_realloc_may_promote(rb, new_size, hp_os_page_size())) {
        struct request r = {.len = new_size, .flags = flags, .excluded = excluded,
                            .placement = *pl};
        numa_view(&r);
        if (candidates(c, &r, cand, 1) > 0)
            best = &cand[0];
    }
    return hp_realloc_plan(rb, new_size, flags, hp_os_page_size(), best);
}

/* How a pinned block came to be pinned, for error details. */
static const char *pin_reason(uint32_t pin)
{
    return pin == HP_PIN_ENV ? "listed alone in HP_BACKENDS when the block was allocated"
                             : "named in hp_alloc_opts.backend when the block was allocated";
}

/* A resize that failed: b takes what work holds now (same address; the
 * mapping may have grown by an adopted range) and stays the caller's. */
static void keep_registered(struct hp_block *b, const struct hp_block *work)
{
    if (hp_registry_end(b, work) != HP_OK)
        hp_log("hp_realloc: the block at %p lost its registry record", work->m.addr);
}

HP_EXTERN(void *) hp_realloc(void *p, size_t new_size, uint64_t flags)
{
    if (!p)
        return hp_alloc(new_size, flags);
    if (new_size == 0) {
        if (hp_free(p) != HP_OK)
            return NULL;
        hp_clear_error();
        return NULL;
    }
    if (check_size(new_size) != HP_OK || check_flags(flags) != HP_OK)
        return NULL;
    struct hp_core *c = ready_core();
    if (!c)
        return NULL;
    int32_t code;
    /* The record stays registered while the block is resized, so hp_info(p)
     * from another thread keeps describing it; the resize works on a copy
     * and publishes it at the end (hp_registry_end). */
    struct hp_block work;
    struct hp_block *b = hp_registry_begin(p, &code, &work);
    if (!b) {
        pointer_error(code, p, "hp_realloc");
        return NULL;
    }
    hp_set_detail("");
    /* The options the block was allocated with govern this resize too. */
    flags = hp_realloc_flags(work.flags, flags);
    struct hp_realloc_block rb = realloc_view(&work);
    struct hp_realloc_plan plan = first_step(c, &rb, new_size, flags, work.excluded,
                                             &work.placement);
    int32_t rc = HP_OK;  /* of the resize, if the plan tried one */
    enum remap_left left = REMAP_KEPT;
    if (plan.step == HP_STEP_RESIZE) {
        rc = resize(&work, new_size, flags, &left);
        if (rc == HP_OK) {
            work.flags = flags;
            work.requested_page_size = hp_flags_page_size(flags);
            if (hp_registry_end(b, &work) == HP_OK)
                return work.m.addr;  /* b may be another thread's to free already */
            /* Only possible if the registry never got its first bucket
             * array; the caller's p is gone, so the memory must not leak
             * either. */
            release(b);
            hp_fail(HP_ENOMEM, "hp_realloc: the block registry is out of memory");
            return NULL;
        }
        if (left == REMAP_LOST) {
            /* The backend took the memory away (recover said so): there is
             * nothing to copy, and no block at p any more. */
            hp_registry_drop(b);
            free(b);
            return NULL;
        }
        plan = hp_realloc_after(&rb, rc, flags, hp_os_page_size());
    }
    /* A failed resize may still have changed the mapping (cached range
     * adopted): the record takes it either way. */
    if (plan.step == HP_STEP_FAIL) {
        char why[200];
        snprintf(why, sizeof(why), "%s", hp_last_error_detail());
        keep_registered(b, &work);
        hp_fail(HP_ENOHUGE, "hp_realloc(%p, %zu): backend %s cannot grow the block (%s) and "
                "HP_F_REQUIRE_HUGE forbids moving it elsewhere; the block is unchanged",
                p, new_size, work.backend->name, why);
        return NULL;
    }
    int dry = plan.why == HP_RWHY_POOL_DRY;
    if (dry)
        hp_backend_mark_stale(work.backend);
    /* Copy path: a new block, the contents, then the old block goes. */
    char resize_why[200] = "";
    if (rc != HP_OK && hp_last_error_detail()[0])
        snprintf(resize_why, sizeof(resize_why), "%s", hp_last_error_detail());
    struct request r = {.len = new_size, .flags = flags, .excluded = work.excluded,
                        .placement = work.placement};
    if (plan.step == HP_STEP_COPY_WITHIN) {
        r.backend = work.backend->name;
        r.pin = work.pinned;
    }
    void *q = allocate(c, &r);
    if (!q && left == REMAP_MOVED && plan.step == HP_STEP_COPY_WITHIN) {
        /* The block is no longer at p (recover): a copy in any backend
         * beats keeping the pin and losing the block. */
        hp_log("hp_realloc(%p, %zu): backend %s moved the block away and cannot map a copy "
               "(%s); the copy goes to any backend", p, new_size, work.backend->name,
               hp_last_error_detail());
        r.backend = NULL;
        r.pin = 0;
        q = allocate(c, &r);
    }
    if (!q) {
        int32_t err = hp_last_error();
        char why[300];
        snprintf(why, sizeof(why), "%s", hp_last_error_detail());
        keep_registered(b, &work);  /* p stays valid, as realloc promises */
        if (left == REMAP_MOVED)
            hp_fail(HP_EBACKEND, "hp_realloc(%p, %zu): %s; no backend can map a copy (%s): "
                    "the block is a block of libhp's at %p now, not at %p", p, new_size,
                    resize_why, why, work.m.addr, p);
        else if (plan.step == HP_STEP_COPY_WITHIN)
            hp_fail(err, "hp_realloc(%p, %zu): the block stays in backend %s, %s, which could "
                    "neither resize it (%s) nor map a new block for a copy (%s); the block is "
                    "unchanged", p, new_size, work.backend->name, pin_reason(work.pinned),
                    resize_why[0] ? resize_why : hp_realloc_why_name(plan.why), why);
        else
            hp_fail(err, "%s", why);
        return NULL;
    }
    struct hp_block moved;
    int32_t peek = hp_registry_peek(q, &moved);
    if (peek == HP_OK && moved.backend != work.backend)
        hp_log("hp_realloc(%p, %zu): block moved from backend %s to %s (%s%s%s)", p, new_size,
               work.backend->name, moved.backend->name, hp_realloc_why_name(plan.why),
               resize_why[0] ? ": " : "", resize_why);
    memcpy(q, work.m.addr, work.m.len < new_size ? work.m.len : new_size);
    hp_registry_drop(b);
    *b = work;
    if (dry || retire(b) == HP_EOS)
        release(b);  /* dry: its pool pages are wanted elsewhere, not cached */
    return q;
}

HP_EXTERN(int32_t) hp_info(const void *p, struct hp_block_info *info)
{
    const size_t min_info = HP_BLOCK_INFO_SIZE_V1_0;
    if (!info)
        return hp_fail(HP_EINVAL, "hp_info: info is NULL");
    if (info->size < min_info)
        return hp_fail(HP_EINVAL, "hp_info: info->size is %u, expected at least %zu",
                       info->size, min_info);
    if (!p)
        return hp_fail(HP_EFOREIGN, "hp_info(NULL): not a pointer returned by libhp");
    struct hp_block b;
    int32_t code = hp_registry_peek(p, &b);
    if (code != HP_OK)
        return pointer_error(code, p, "hp_info");
    int64_t (*measure)(void *, const struct hp_mapping *) = HP_OP(b.backend->ops, huge_bytes);
    /* A plugin's huge_bytes and query must leave the block as it was
     * (hp/backend.h): where it was readable and writable, it is again. */
    int was_rw = !b.backend->own && (measure || HP_OP(b.backend->ops, query)) &&
                 hp_os_check_rw(b.m.addr, b.m.len) == 0;
    /* The kernel's figures first (verified, not claimed); the backend's
     * own measure only where they cannot be read, and never more huge
     * bytes than the mapping has. */
    int64_t huge = hp_core()->host.measure_huge_bytes(b.m.addr, b.m.len);
    if (huge < 0 && measure) {
        huge = measure(b.backend->self, &b.m);
        if (was_rw)
            restore_rw(b.backend, "huge_bytes", b.m.addr, b.m.len);
        if (huge > 0 && (uint64_t)huge > b.m.map_len) {
            hp_log("backend %s: huge_bytes returned %lld for a %llu-byte mapping; not used",
                   b.backend->name, (long long)huge, (unsigned long long)b.m.map_len);
            huge = 0;
        }
    }
    uint32_t size = info->size;
    struct hp_block_info full = {.size = size};
    snprintf(full.backend, sizeof(full.backend), "%s", b.backend->name);
    full.requested_page_size = b.requested_page_size;
    full.page_size = b.m.page_size;
    full.usable_size = b.m.len;
    full.mapped_size = b.m.map_len;
    full.huge_bytes = huge > 0 ? (uint64_t)huge : 0;
    full.flags = b.flags;
    full.pin = b.pinned;
    full.numa_node = -1;
    full.fd = -1;
    int (*query)(void *, const struct hp_mapping *, struct hp_block_query *) =
        HP_OP(b.backend->ops, query);
    if (query && size > offsetof(struct hp_block_info, flags) + sizeof(full.flags)) {
        struct hp_block_query q = {sizeof(q), 0, -1, -1, 0};
        int32_t qrc = query(b.backend->self, &b.m, &q);
        if (was_rw)
            restore_rw(b.backend, "query", b.m.addr, b.m.len);
        if (qrc == HP_OK) {
            /* A node past MAX_NUMNODES (include/linux/numa.h: at most
             * 1 << 10) or a descriptor that is not open is unknown. */
            full.numa_node = q.numa_node < 0 || q.numa_node >= HP_MAX_NUMA_NODES ? -1 : q.numa_node;
            full.fd = q.fd < 0 || hp_os_fd_is_open(q.fd) != 0 ? -1 : q.fd;
            full.fd_offset = full.fd >= 0 ? q.fd_offset : 0;
        }
    }
    if (size >= offsetof(struct hp_block_info, numa_mask) + sizeof(full.numa_mask)) {
        struct hp_nodes seen;
        full.numa_mode = b.placement.mode;
        int n = hp_numa_measure(b.m.addr, b.m.len, b.m.page_size, &seen, NULL, 0);
        full.numa_count = n > 0 ? (uint32_t)n : 0;
        full.numa_mask = n > 0 ? seen.w[0] : 0;
    }
    memcpy(info, &full, size < sizeof(full) ? size : sizeof(full));
    return HP_OK;
}

HP_EXTERN(int32_t) hp_block_nodes(const void *p, uint64_t *bytes, uint32_t n_nodes)
{
    if (!bytes && n_nodes)
        return hp_fail(HP_EINVAL, "hp_block_nodes: bytes is NULL for %u nodes", n_nodes);
    if (!p)
        return hp_fail(HP_EFOREIGN, "hp_block_nodes(NULL): not a pointer returned by libhp");
    struct hp_block b;
    int32_t code = hp_registry_peek(p, &b);
    if (code != HP_OK)
        return pointer_error(code, p, "hp_block_nodes");
    struct hp_nodes seen;
    int n = hp_numa_measure(b.m.addr, b.m.len, b.m.page_size, &seen, bytes, n_nodes);
    if (n < 0) {
        if (bytes)
            memset(bytes, 0, sizeof(*bytes) * n_nodes);
        return 0;  /* no NUMA support: nothing is known to lie anywhere */
    }
    return n;
}
