/*
 * Backend selection: a pure function of the request, the capability records
 * and the overrides. No I/O, no globals, so tests drive it with fabricated
 * records. The policy is written down in README.md ("Selection").
 */
#ifndef HP_LIB_SELECT_H
#define HP_LIB_SELECT_H

#include "hp/backend.h"
#include "nodes.h"
#include "options.h"

#define HP_SELECT_MAX 16

/* One backend as selection sees it. */
struct hp_select_backend {
    const char *name;
    uint32_t kind;                        /* enum hp_backend_kind */
    const struct hp_backend_caps *caps;   /* NULL or !available: skipped */
    int unproven;                         /* claims HP_KIND_HUGETLB or THP without having
                                             shown it (hp_backend_unproven): ranked
                                             just below the kind's other backends */
};

struct hp_select_request {
    uint64_t len;                 /* bytes asked for, > 0 */
    uint64_t flags;               /* HP_F_* */
    uint64_t base_page_size;
    const char *backend;          /* NULL, or the only backend allowed */
    unsigned n_exclude;
    const char (*exclude)[HP_OPT_NAME_LEN];   /* the caller's names never to use */
    unsigned n_only;              /* HP_BACKENDS: use only these, in this order */
    const char (*only)[HP_OPT_NAME_LEN];
    unsigned n_never;             /* HP_BACKENDS "-name": never use these either */
    const char (*never)[HP_OPT_NAME_LEN];
    uint32_t excluded;            /* bit i: never backend i of the backends array (the
                                   * exclusions a resized block keeps, hp_select_excluded) */
};

/* A (backend, page size) pair to try, best first. */
struct hp_candidate {
    unsigned backend;             /* index into the backends array */
    uint64_t page_size;
};

/* Fill out[] with the candidates to try in order; returns their count
 * (0: nothing can serve this request). */
unsigned hp_select(const struct hp_select_request *req, const struct hp_select_backend *bk,
                   unsigned n_backends, struct hp_candidate *out, unsigned max);

/* Why selection took or passed over a backend or one of its page sizes. */
enum hp_select_why {
    HP_WHY_CANDIDATE,       /* taken: in the candidate list at note.rank */
    HP_WHY_UNAVAILABLE,     /* the backend's probe says unavailable (caps->reason) */
    HP_WHY_NOT_NAMED,       /* the caller named another backend */
    HP_WHY_EXCLUDED,        /* in the caller's exclude list */
    HP_WHY_EXCLUDED_ENV,    /* HP_BACKENDS says "-name" */
    HP_WHY_NOT_LISTED,      /* HP_BACKENDS lists only other backends */
    HP_WHY_THIRD_PARTY,     /* HP_KIND_OTHER: used only when named */
    HP_WHY_BASE_PAGE,       /* HP_F_REQUIRE_HUGE drops base-page sizes */
    HP_WHY_POOL_SHORT,      /* the pool is short by note.short_pages */
    HP_WHY_OTHER_SIZE,      /* the flags ask for another page size */
    HP_WHY_LARGER,          /* a page larger than the block, not asked for */
    HP_WHY_BEATEN,          /* an unpooled backend offers its best size only */
    HP_WHY_NO_ROOM,         /* more than HP_SELECT_MAX candidates */
    HP_WHY_POOLED,          /* HP_F_NOPOOL drops pooled page sizes */
    HP_WHY_COUNT
};

/* One decision of hp_select_explain. page_size 0: about the whole backend. */
struct hp_select_note {
    unsigned backend;             /* index into the backends array */
    uint64_t page_size;
    uint32_t why;                 /* enum hp_select_why */
    uint64_t short_pages;         /* HP_WHY_POOL_SHORT: pages missing */
    int rank;                     /* HP_WHY_CANDIDATE: position in out[]; else -1 */
    int named_smallest;           /* HP_WHY_CANDIDATE: a named backend that fits nothing
                                   * serves with its smallest size */
};

/* hp_select, and every decision it made along the way into notes[] (at
 * most max_notes; *n_notes gets the count). Same code path as hp_select:
 * the candidates are identical. */
unsigned hp_select_explain(const struct hp_select_request *req,
                           const struct hp_select_backend *bk, unsigned n_backends,
                           struct hp_candidate *out, unsigned max,
                           struct hp_select_note *notes, unsigned max_notes, unsigned *n_notes);

/* Stable short name of a why ("pool-short"), for hpctl explain --json. */
const char *hp_select_why_name(uint32_t why);

/* For the named backend of req (req->backend): HP_WHY_EXCLUDED,
 * HP_WHY_EXCLUDED_ENV or HP_WHY_NOT_LISTED when the request's exclude list
 * or HP_BACKENDS leaves it out, else HP_WHY_CANDIDATE (also without one). */
uint32_t hp_select_named_out(const struct hp_select_request *req);

/* Which list left a backend out, in words ("excluded by HP_BACKENDS"), for
 * HP_WHY_EXCLUDED, _EXCLUDED_ENV and _NOT_LISTED; NULL for any other why. */
const char *hp_select_list_text(uint32_t why);

/* Requested page size encoded in flags, 0 if none. */
uint64_t hp_flags_page_size(uint64_t flags);

/*
 * The policy of hp_alloc and hp_realloc around hp_select. Pure functions of
 * their arguments; lib/alloc.c gathers the figures, calls these and does
 * what they say (map, cache, registry, copy). README.md "Selection" states
 * the same rules for users.
 */

/* Which kinds the selection may choose without being told: HP_KIND_HUGETLB,
 * _THP, _MTHP and _BASE (the tiers, in that order). HP_KIND_OTHER serves
 * only a request that names it (hp_alloc_opts.backend) or an HP_BACKENDS
 * list that lists it. */
int hp_select_automatic(uint32_t kind);

/* Build the request selection sees: the caller's len, flags, backend and
 * exclude list merged with HP_BACKENDS (env->only / env->never, which
 * restrict every request). The request points into exclude and env. */
void hp_select_request_init(struct hp_select_request *sr, uint64_t len, uint64_t flags,
                            uint64_t base_page_size, const char *backend,
                            const char (*exclude)[HP_OPT_NAME_LEN], unsigned n_exclude,
                            const struct hp_options *env);

/* The exclusions of sr as a mask over bk (bit i: backend i, the first 32):
 * sr->excluded plus every backend the caller's exclude list names. A block
 * keeps it, and every later resize of the block selects with it, so a
 * backend the allocation excluded never serves the block. Pure. */
uint32_t hp_select_excluded(const struct hp_select_request *sr, const struct hp_select_backend *bk,
                            unsigned n_backends);

/* Whether a block allocated under sr is pinned to its backend, which
 * hp_realloc then never leaves (hp_realloc_plan). */
enum hp_pin {
    HP_PIN_NONE = HP_BLOCK_PIN_NONE,    /* the selection may move it among the
                                         * allowed backends */
    HP_PIN_NAMED = HP_BLOCK_PIN_NAMED,  /* hp_alloc_opts.backend named the backend */
    HP_PIN_ENV = HP_BLOCK_PIN_ENV       /* HP_BACKENDS listed exactly one backend
                                         * (and the caller named none) */
};
uint32_t hp_select_pin(const struct hp_select_request *sr);

/* ---- NUMA: whose hugetlb pools can serve a new mapping ----
 *
 * The kernel's rules (mm/hugetlb.c, mm/mempolicy.c): a private hugetlb
 * mapping reserves its pages at mmap, counting only the free pages of the
 * nodes the task's cpuset allows and, under a task MPOL_BIND, of the bound
 * nodes (hugetlb_acct_memory -> allowed_mems_nr, policy_mbind_nodemask);
 * the pages themselves come at fault from the nodes of the policy in force
 * there (alloc_hugetlb_folio -> dequeue_hugetlb_folio_vma). Under MPOL_BIND
 * only the bound nodes may serve; MPOL_PREFERRED, MPOL_PREFERRED_MANY,
 * MPOL_INTERLEAVE, MPOL_WEIGHTED_INTERLEAVE, MPOL_LOCAL and the default
 * fall back to any node the cpuset allows. */

/* The nodes whose pools may serve the faults of a new mapping made under
 * policy (mode HP_MPOL_*, its node set) by a task whose cpuset allows mems,
 * on a machine whose nodes with memory are with_memory: *out. Returns 1
 * when that is not every node with memory (the pool figures of those nodes
 * apply, not the global ones), else 0. Pure. */
int hp_select_pool_nodes(int mode, const struct hp_nodes *policy, const struct hp_nodes *mems,
                         const struct hp_nodes *with_memory, struct hp_nodes *out);

/* Cap the pool figure of each pooled page size k of caps at node_free[k]
 * (the free pages of the allowed nodes' pools, UINT64_MAX: no per-node
 * figure, left alone). A backend whose every page size is pooled and now
 * has none free becomes unavailable; the reason says so, naming who allows
 * the nodes, with the verb ("the block's placement allows") and the nodes
 * (nodes_text, "1" or "0,2-3"). Pure. */
void hp_select_limit_pool(struct hp_backend_caps *caps, const uint64_t node_free[HP_MAX_PAGE_SIZES],
                          const char *who, const char *nodes_text);

/* Credit a backend's pool figures with the pages the cache holds
 * (cached_bytes[k] for page size k): the cache gives them back to the pool
 * when a map needs them (lib/alloc.c serve), so they count as free. Every
 * pooled page size (pool_free != UINT64_MAX) is credited, whatever the
 * backend's kind; unpooled sizes are left alone. A backend that was
 * unavailable because its pool was empty becomes available when the cache
 * holds pages of it. */
void hp_select_credit_cached(struct hp_backend_caps *caps,
                             const uint64_t cached_bytes[HP_MAX_PAGE_SIZES]);

/* A live block as hp_realloc's rules see it. */
struct hp_realloc_block {
    uint64_t page_size;           /* of its mapping */
    uint64_t len;                 /* usable bytes now */
    uint32_t map_flags;           /* HP_MAP_* of its mapping */
    uint32_t pin;                 /* enum hp_pin */
    int forked;                   /* a fork() happened since its pages were mapped */
};

/* What hp_realloc does next with a block. */
enum hp_realloc_step {
    HP_STEP_RESIZE,       /* in its backend: the cached range after it, else the
                           * backend's remap (in place or moving page tables) */
    HP_STEP_COPY_WITHIN,  /* copy into a new block of the same backend */
    HP_STEP_MOVE,         /* copy into a new block chosen by the selection
                           * (any allowed backend; logged under HP_DEBUG) */
    HP_STEP_FAIL          /* fail; the block stays as it is */
};

/* Why. */
enum hp_realloc_why {
    HP_RWHY_FITS,          /* nothing stands in the way of resizing in place */
    HP_RWHY_PAGE_SIZE,     /* the flags ask for another page size */
    HP_RWHY_REQUIRE_HUGE,  /* HP_F_REQUIRE_HUGE for a base-page block */
    HP_RWHY_PROMOTE,       /* a small base-page block grows to a size the
                            * selection serves with huge pages */
    HP_RWHY_SHARED_FORK,   /* HP_MAP_SHARED memory mapped before a fork: remap
                            * could take pages from the other process */
    HP_RWHY_POOL_FORK,     /* pool pages that existed at a fork grow by copy
                            * (hp/alloc.h, fork and hugetlb blocks) */
    HP_RWHY_POOL_DRY,      /* the backend could not grow a huge-page block */
    HP_RWHY_RESIZE_FAILED, /* the backend's remap is missing or failed */
    HP_RWHY_NOPOOL,        /* HP_F_NOPOOL for a block of pool pages */
    HP_RWHY_COUNT
};

struct hp_realloc_plan {
    uint32_t step;                /* enum hp_realloc_step */
    uint32_t why;                 /* enum hp_realloc_why */
};

/* The flags hp_realloc(p, n, call_flags) runs with, for a block whose flags
 * in force are block_flags (hp/alloc.h): HP_F_NOPOOL and HP_F_REQUIRE_HUGE
 * are sticky (once given, at allocation or at a resize, every later resize
 * keeps them); the requested page size is the block's unless call_flags
 * names another; HP_F_NOZERO, HP_F_POPULATE and HP_F_COLLAPSE are the
 * call's only. The result is also what the block's flags are afterwards.
 * Pure. */
uint64_t hp_realloc_flags(uint64_t block_flags, uint64_t call_flags);

/* Does hp_realloc_plan need the selection's best candidate for new_size
 * (the promotion rule)? Only a growing base-page block that is not pinned
 * can be promoted; the caller skips the selection otherwise. */
int hp_realloc_may_promote(const struct hp_realloc_block *b, uint64_t new_size,
                           uint64_t base_page_size);

/* The first step for resizing b to new_size with flags. best is the
 * selection's first candidate for a fresh block of new_size with flags, or
 * NULL when there is none or hp_realloc_may_promote said it is not needed.
 * A pinned block is never given HP_STEP_MOVE. */
struct hp_realloc_plan hp_realloc_plan(const struct hp_realloc_block *b, uint64_t new_size,
                                       uint64_t flags, uint64_t base_page_size,
                                       const struct hp_candidate *best);

/* The step after HP_STEP_RESIZE failed with resize_rc (a negative hp
 * error): a huge-page block whose backend ran dry (HP_ENOMEM) moves unless
 * HP_F_REQUIRE_HUGE forbids it (then HP_STEP_FAIL); any other failure
 * copies: within the backend if b is pinned, else where the selection
 * says. */
struct hp_realloc_plan hp_realloc_after(const struct hp_realloc_block *b, int32_t resize_rc,
                                        uint64_t flags, uint64_t base_page_size);

/* Stable short name of a why ("pool-dry"), for the HP_DEBUG log. */
const char *hp_realloc_why_name(uint32_t why);

/* ---- stack planning (hp_stack_create) ----
 *
 * The same eligibility rules and tiers as hp_select (availability,
 * HP_BACKENDS order and exclusions, HP_KIND_OTHER only when HP_BACKENDS
 * names it); what a stack needs from a backend is one page size. */

struct hp_stack_request {
    uint64_t flags;            /* HP_STACK_*, validated */
    uint64_t usable;           /* bytes, rounded to the huge page for huge mode */
    uint64_t huge_page_size;   /* PMD size */
    uint64_t base_page_size;
    unsigned n_only;           /* HP_BACKENDS: only these backends, in this order ... */
    const char (*only)[HP_OPT_NAME_LEN];
    unsigned n_never;          /* ... and never these */
    const char (*never)[HP_OPT_NAME_LEN];
};

/* One way to make the stack: map it through backend (an index into the
 * backends array) with page_size pages. */
struct hp_stack_plan {
    unsigned backend;
    uint64_t page_size;        /* huge_page_size (huge) or base_page_size (lean) */
    uint32_t guaranteed;       /* the page size is HP_PAGE_GUARANTEED (a reserved pool) */
};

#define HP_STACK_PLAN_MAX 8

/* Ways to make the stack, best first. Huge mode: the backends that offer
 * the huge page size, pooled ones only when the pool can reserve every
 * page, ranked by hp_select's tiers (hugetlb, THP, mTHP) or HP_BACKENDS
 * order; HP_STACK_HUGETLB keeps only guaranteed (reserved pool) page sizes,
 * HP_STACK_THP only the others. Lean mode, and after the huge ways with
 * HP_STACK_ALLOW_LEAN: the backends that offer the base page size, ranked
 * the same way. Returns the count; 0 means the mode cannot be served
 * (why_cap bytes of why say why, per backend). Pure. */
unsigned hp_stack_plan(const struct hp_stack_request *req, const struct hp_select_backend *bk,
                       unsigned n_backends, struct hp_stack_plan *out, unsigned max, char *why,
                       size_t why_cap);

#endif
