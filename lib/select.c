#include "select.h"

#include <string.h>

uint64_t hp_flags_page_size(uint64_t flags)
{
    unsigned shift = (unsigned)((flags & HP_F_PAGE_SHIFT_MASK) >> HP_F_PAGE_SHIFT_POS);
    return shift ? UINT64_C(1) << shift : 0;
}

static uint64_t round_up(uint64_t len, uint64_t align)
{
    return (len + align - 1) / align * align;
}

static int name_in(const char *name, const char (*list)[HP_OPT_NAME_LEN], unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (!strcmp(name, list[i]))
            return (int)i;
    return -1;
}

/* Candidate ranking: lower tier first; within a tier, less waste, then the
 * larger page (fewer TLB entries for the same bytes). */
struct ranked {
    struct hp_candidate c;
    unsigned tier;
    uint64_t waste;
};

static unsigned tier_of(uint32_t kind)
{
    switch (kind) {
    case HP_KIND_HUGETLB: return 0;  /* reserved, pre-zeroed, 10x faster to populate */
    case HP_KIND_THP: return 1;
    case HP_KIND_MTHP: return 2;
    case HP_KIND_BASE: return 3;
    default: return 4;               /* third-party: only when named */
    }
}

static int better(const struct ranked *a, const struct ranked *b)
{
    if (a->tier != b->tier)
        return a->tier < b->tier;
    if (a->waste != b->waste)
        return a->waste < b->waste;
    return a->c.page_size > b->c.page_size;
}

/* Does page size i of this backend suit the request? A page larger than
 * the block would waste most of itself, so it fits only when asked for. */
static int page_fits(const struct hp_select_request *req, const struct hp_backend_caps *caps,
                     unsigned i, uint64_t wanted)
{
    uint64_t ps = caps->page_sizes[i];
    if (caps->pool_free[i] != UINT64_MAX && caps->pool_free[i] < round_up(req->len, ps) / ps)
        return 0;
    if (wanted)
        return ps == wanted;
    return ps <= req->len || ps <= req->base_page_size;
}

/* Waste of serving len with page size ps: THP and mTHP map the tail with
 * base pages, pooled pages round the whole block up. */
static uint64_t waste_of(const struct hp_select_request *req, uint32_t kind, uint64_t ps)
{
    uint64_t unit = (kind == HP_KIND_MTHP || kind == HP_KIND_THP) ? req->base_page_size : ps;
    return round_up(req->len, unit) - req->len;
}

/* Add this backend's candidates to r[]. Pooled backends offer every page
 * size that fits (if the 1 GiB pool is drained at map time the 2 MiB one is
 * next); the others offer their best size only. A backend named by the
 * caller that fits nothing still serves with its smallest size. */
static unsigned add_candidates(const struct hp_select_request *req,
                               const struct hp_select_backend *b, unsigned index, int named,
                               unsigned tier, struct ranked *r, unsigned room)
{
    const struct hp_backend_caps *caps = b->caps;
    uint64_t wanted = hp_flags_page_size(req->flags);
    unsigned n = caps->n_page_sizes < HP_MAX_PAGE_SIZES ? caps->n_page_sizes : HP_MAX_PAGE_SIZES;
    int every = b->kind == HP_KIND_HUGETLB;
    unsigned added = 0;
    for (int pass = 0; pass < 2 && added == 0; pass++) {
        if (pass == 1 && (!named || wanted))
            break;
        for (unsigned i = 0; i < n && added < room; i++) {
            uint64_t ps = caps->page_sizes[i];
            if (!ps || (req->flags & HP_F_REQUIRE_HUGE && ps <= req->base_page_size))
                continue;
            if (pass == 0 && !page_fits(req, caps, i, wanted))
                continue;
            struct ranked c = {{index, ps}, tier, waste_of(req, b->kind, ps)};
            if (pass == 1) {  /* named fallback: the smallest size only */
                r[added++] = c;
                break;
            }
            if (every || added == 0) {
                r[added++] = c;
            } else if (better(&c, &r[0])) {
                r[0] = c;
            }
        }
    }
    return added;
}

unsigned hp_select(const struct hp_select_request *req, const struct hp_select_backend *bk,
                   unsigned n_backends, struct hp_candidate *out, unsigned max)
{
    struct ranked r[HP_SELECT_MAX];
    unsigned n = 0;
    for (unsigned i = 0; i < n_backends && n < HP_SELECT_MAX; i++) {
        const struct hp_select_backend *b = &bk[i];
        if (!b->caps || !b->caps->available || !b->name)
            continue;
        if (req->backend && strcmp(req->backend, b->name))
            continue;
        if (name_in(b->name, req->exclude, req->n_exclude) >= 0)
            continue;
        int pos = name_in(b->name, req->only, req->n_only);
        if (req->n_only && pos < 0)
            continue;
        int named = req->backend != NULL;
        if (b->kind == HP_KIND_OTHER && !named && pos < 0)
            continue;
        /* An HP_BACKENDS list replaces the policy's tiers with its order. */
        unsigned tier = req->n_only ? (unsigned)pos : tier_of(b->kind);
        n += add_candidates(req, b, i, named, tier, r + n, HP_SELECT_MAX - n);
    }
    /* Insertion sort: a handful of entries, and it is stable. */
    for (unsigned i = 1; i < n; i++) {
        struct ranked x = r[i];
        unsigned j = i;
        while (j > 0 && better(&x, &r[j - 1])) {
            r[j] = r[j - 1];
            j--;
        }
        r[j] = x;
    }
    unsigned count = n < max ? n : max;
    for (unsigned i = 0; i < count; i++)
        out[i] = r[i].c;
    return count;
}
