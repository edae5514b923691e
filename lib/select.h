/*
 * Backend selection: a pure function of the request, the capability records
 * and the overrides. No I/O, no globals, so tests drive it with fabricated
 * records. The policy is written down in README.md ("Selection").
 */
#ifndef HP_LIB_SELECT_H
#define HP_LIB_SELECT_H

#include "hp/backend.h"
#include "options.h"

#define HP_SELECT_MAX 16

/* One backend as selection sees it. */
struct hp_select_backend {
    const char *name;
    uint32_t kind;                        /* enum hp_backend_kind */
    const struct hp_backend_caps *caps;   /* NULL or !available: skipped */
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

/* Credit a hugetlb backend's pool figures with the pages the cache holds
 * (cached_bytes[k] for page size k): the cache gives them back to the pool
 * when a map needs them, so they count as free. Pure; no-op for other kinds. */
void hp_select_credit_cached(struct hp_backend_caps *caps, uint32_t kind,
                             const uint64_t cached_bytes[HP_MAX_PAGE_SIZES]);

/* Requested page size encoded in flags, 0 if none. */
uint64_t hp_flags_page_size(uint64_t flags);

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
