#include "select.h"
#include "hp/stack.h"

#include <stdio.h>
#include <string.h>

uint64_t hp_flags_page_size(uint64_t flags)
{
    unsigned shift = (unsigned)((flags & HP_F_PAGE_SHIFT_MASK) >> HP_F_PAGE_SHIFT_POS);
    return shift ? UINT64_C(1) << shift : 0;
}

/* Where notes go while selecting; NULL sink: hp_select, nothing noted. */
struct sink {
    struct hp_select_note *notes;
    unsigned max, n;
};

static void note(struct sink *s, unsigned backend, uint64_t ps, uint32_t why, uint64_t short_pages)
{
    if (!s || s->n >= s->max)
        return;
    s->notes[s->n++] = (struct hp_select_note){backend, ps, why, short_pages, -1, 0};
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

/* A kind's tier is twice its rank; a plugin that claims the kind without
 * having shown it (unproven) takes the odd tier just below: a claim costs
 * nothing, huge bytes measured in its blocks do (hp_backend_unproven). */
static unsigned tier_of(const struct hp_select_backend *b)
{
    unsigned rank;
    switch (b->kind) {
    case HP_KIND_HUGETLB: rank = 0; break;  /* reserved, pre-zeroed, 10x faster to populate */
    case HP_KIND_THP: rank = 1; break;
    case HP_KIND_MTHP: rank = 2; break;
    case HP_KIND_BASE: rank = 3; break;
    default: rank = 4; break;               /* third-party: only when named */
    }
    return 2 * rank + (b->unproven != 0);
}

static int better(const struct ranked *a, const struct ranked *b)
{
    if (a->tier != b->tier)
        return a->tier < b->tier;
    if (a->waste != b->waste)
        return a->waste < b->waste;
    return a->c.page_size > b->c.page_size;
}

/* Pages of size i that the backend's pool lacks to serve len bytes; 0 when
 * it has them or has no pool for that size. */
static uint64_t pool_short(const struct hp_backend_caps *caps, unsigned i, uint64_t len)
{
    uint64_t ps = caps->page_sizes[i], need = round_up(len, ps) / ps;
    return caps->pool_free[i] != UINT64_MAX && caps->pool_free[i] < need
               ? need - caps->pool_free[i] : 0;
}

/* Does page size i of this backend suit the request? HP_WHY_CANDIDATE if
 * so, else why not (*short_pages for a short pool). A page larger than the
 * block would waste most of itself, so it fits only when asked for. A size
 * other than the one asked for, or larger than the block, is passed over
 * for that first: its pool being short too is not why. */
static uint32_t page_fits(const struct hp_select_request *req, const struct hp_backend_caps *caps,
                          unsigned i, uint64_t wanted, uint64_t *short_pages)
{
    uint64_t ps = caps->page_sizes[i];
    *short_pages = 0;
    if (wanted && ps != wanted)
        return HP_WHY_OTHER_SIZE;
    if (!wanted && ps > req->len && ps > req->base_page_size)
        return HP_WHY_LARGER;
    if ((*short_pages = pool_short(caps, i, req->len)) != 0)
        return HP_WHY_POOL_SHORT;
    return HP_WHY_CANDIDATE;
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
                               unsigned tier, struct ranked *r, unsigned room, struct sink *s,
                               int *named_smallest)
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
            if (!ps)
                continue;
            if ((req->flags & HP_F_NOPOOL) && caps->pool_free[i] != UINT64_MAX) {
                if (pass == 0)
                    note(s, index, ps, HP_WHY_POOLED, 0);
                continue;
            }
            if (req->flags & HP_F_REQUIRE_HUGE && ps <= req->base_page_size) {
                if (pass == 0)
                    note(s, index, ps, HP_WHY_BASE_PAGE, 0);
                continue;
            }
            uint64_t short_pages = 0;
            uint32_t why = pass == 0 ? page_fits(req, caps, i, wanted, &short_pages)
                                     : HP_WHY_CANDIDATE;
            if (why != HP_WHY_CANDIDATE) {
                note(s, index, ps, why, short_pages);
                continue;
            }
            struct ranked c = {{index, ps}, tier, waste_of(req, b->kind, ps)};
            if (pass == 1) {  /* named: the smallest size only */
                r[added++] = c;
                *named_smallest = 1;
                break;
            }
            if (every || added == 0) {
                r[added++] = c;
            } else if (better(&c, &r[0])) {
                note(s, index, r[0].c.page_size, HP_WHY_BEATEN, 0);
                r[0] = c;
            } else {
                note(s, index, ps, HP_WHY_BEATEN, 0);
            }
        }
    }
    return added;
}

/* Whether the request's exclude list or HP_BACKENDS leaves name out
 * (HP_WHY_EXCLUDED, _EXCLUDED_ENV, _NOT_LISTED), else HP_WHY_CANDIDATE;
 * *pos: name's place in HP_BACKENDS' list, -1 if not in it. */
static uint32_t listed_out(const struct hp_select_request *req, const char *name, int *pos)
{
    *pos = -1;
    if (name_in(name, req->exclude, req->n_exclude) >= 0)
        return HP_WHY_EXCLUDED;
    if (name_in(name, req->never, req->n_never) >= 0)
        return HP_WHY_EXCLUDED_ENV;
    *pos = name_in(name, req->only, req->n_only);
    if (req->n_only && *pos < 0)
        return HP_WHY_NOT_LISTED;
    return HP_WHY_CANDIDATE;
}

uint32_t hp_select_named_out(const struct hp_select_request *req)
{
    int pos;
    return req->backend ? listed_out(req, req->backend, &pos) : HP_WHY_CANDIDATE;
}

const char *hp_select_list_text(uint32_t why)
{
    switch (why) {
    case HP_WHY_EXCLUDED:
        return "excluded by the request's exclude list";
    case HP_WHY_EXCLUDED_ENV:
        return "excluded by HP_BACKENDS";
    case HP_WHY_NOT_LISTED:
        return "not listed in HP_BACKENDS";
    default:
        return NULL;
    }
}

/* Whether bit index of a backend mask is set (masks cover the first 32). */
static int in_mask(uint32_t mask, unsigned index)
{
    return index < 32 && ((mask >> index) & 1u);
}

/* Why backend b (at index in the backends array) is not considered at all,
 * or HP_WHY_CANDIDATE. */
static uint32_t backend_out(const struct hp_select_request *req, const struct hp_select_backend *b,
                            unsigned index, int *pos)
{
    *pos = -1;
    if (!b->caps || !b->caps->available)
        return HP_WHY_UNAVAILABLE;
    if (req->backend && strcmp(req->backend, b->name))
        return HP_WHY_NOT_NAMED;
    if (in_mask(req->excluded, index))
        return HP_WHY_EXCLUDED;
    uint32_t out = listed_out(req, b->name, pos);
    if (out != HP_WHY_CANDIDATE)
        return out;
    if (!hp_select_automatic(b->kind) && !req->backend && *pos < 0)
        return HP_WHY_THIRD_PARTY;
    return HP_WHY_CANDIDATE;
}

static unsigned select_noted(const struct hp_select_request *req,
                             const struct hp_select_backend *bk, unsigned n_backends,
                             struct hp_candidate *out, unsigned max, struct sink *s)
{
    struct ranked r[HP_SELECT_MAX];
    int smallest[HP_SELECT_MAX] = {0};
    unsigned n = 0;
    for (unsigned i = 0; i < n_backends; i++) {
        const struct hp_select_backend *b = &bk[i];
        int pos;
        if (!b->name)
            continue;
        uint32_t why = backend_out(req, b, i, &pos);
        if (why == HP_WHY_CANDIDATE && n == HP_SELECT_MAX)
            why = HP_WHY_NO_ROOM;
        if (why != HP_WHY_CANDIDATE) {
            note(s, i, 0, why, 0);
            continue;
        }
        int named = req->backend != NULL, named_smallest = 0;
        /* An HP_BACKENDS list replaces the policy's tiers with its order. */
        unsigned tier = req->n_only ? (unsigned)pos : tier_of(b);
        unsigned added = add_candidates(req, b, i, named, tier, r + n, HP_SELECT_MAX - n, s,
                                        &named_smallest);
        for (unsigned k = 0; k < added; k++)
            smallest[n + k] = named_smallest;
        n += added;
    }
    /* Insertion sort: a handful of entries, and it is stable. */
    for (unsigned i = 1; i < n; i++) {
        struct ranked x = r[i];
        int fx = smallest[i];
        unsigned j = i;
        while (j > 0 && better(&x, &r[j - 1])) {
            r[j] = r[j - 1];
            smallest[j] = smallest[j - 1];
            j--;
        }
        r[j] = x;
        smallest[j] = fx;
    }
    unsigned count = n < max ? n : max;
    for (unsigned i = 0; i < count; i++) {
        out[i] = r[i].c;
        if (s && s->n < s->max) {
            note(s, r[i].c.backend, r[i].c.page_size, HP_WHY_CANDIDATE, 0);
            s->notes[s->n - 1].rank = (int)i;
            s->notes[s->n - 1].named_smallest = smallest[i];
        }
    }
    return count;
}

unsigned hp_select(const struct hp_select_request *req, const struct hp_select_backend *bk,
                   unsigned n_backends, struct hp_candidate *out, unsigned max)
{
    return select_noted(req, bk, n_backends, out, max, NULL);
}

unsigned hp_select_explain(const struct hp_select_request *req,
                           const struct hp_select_backend *bk, unsigned n_backends,
                           struct hp_candidate *out, unsigned max,
                           struct hp_select_note *notes, unsigned max_notes, unsigned *n_notes)
{
    struct sink s = {notes, max_notes, 0};
    unsigned n = select_noted(req, bk, n_backends, out, max, &s);
    *n_notes = s.n;
    return n;
}

const char *hp_select_why_name(uint32_t why)
{
    static const char *const names[HP_WHY_COUNT] = {
        "candidate", "unavailable", "not-named", "excluded", "excluded-by-env", "not-listed",
        "third-party", "base-page", "pool-short", "other-size", "larger-than-block", "beaten",
        "no-room", "pooled"};
    return why < HP_WHY_COUNT ? names[why] : "?";
}

int hp_select_automatic(uint32_t kind)
{
    return kind == HP_KIND_HUGETLB || kind == HP_KIND_THP || kind == HP_KIND_MTHP ||
           kind == HP_KIND_BASE;
}

void hp_select_request_init(struct hp_select_request *sr, uint64_t len, uint64_t flags,
                            uint64_t base_page_size, const char *backend,
                            const char (*exclude)[HP_OPT_NAME_LEN], unsigned n_exclude,
                            const struct hp_options *env)
{
    *sr = (struct hp_select_request){
        .len = len, .flags = flags, .base_page_size = base_page_size, .backend = backend,
        .n_exclude = exclude ? n_exclude : 0, .exclude = exclude,
        .n_only = env->n_only, .only = env->only, .n_never = env->n_never, .never = env->never,
    };
}

uint32_t hp_select_excluded(const struct hp_select_request *sr, const struct hp_select_backend *bk,
                            unsigned n_backends)
{
    uint32_t mask = sr->excluded;
    for (unsigned i = 0; i < n_backends && i < 32; i++)
        if (bk[i].name && name_in(bk[i].name, sr->exclude, sr->n_exclude) >= 0)
            mask |= UINT32_C(1) << i;
    return mask;
}

uint32_t hp_select_pin(const struct hp_select_request *sr)
{
    if (sr->backend)
        return HP_PIN_NAMED;
    return sr->n_only == 1 ? HP_PIN_ENV : HP_PIN_NONE;
}

int hp_select_pool_nodes(int mode, const struct hp_nodes *policy, const struct hp_nodes *mems,
                         const struct hp_nodes *with_memory, struct hp_nodes *out)
{
    struct hp_nodes allowed;
    hp_nodes_and(&allowed, mems, with_memory);
    /* An empty cpuset answer is no answer: every node then. */
    if (!hp_nodes_count(&allowed))
        allowed = *with_memory;
    if (mode == HP_MPOL_BIND) {
        struct hp_nodes bound;
        hp_nodes_and(&bound, policy, &allowed);
        /* A binding outside the cpuset is ignored for hugetlb
         * (policy_mbind_nodemask: cpuset_nodemask_valid_mems_allowed). */
        if (hp_nodes_count(&bound))
            allowed = bound;
    }
    *out = allowed;
    return !hp_nodes_equal(&allowed, with_memory);
}

void hp_select_limit_pool(struct hp_backend_caps *caps, const uint64_t node_free[HP_MAX_PAGE_SIZES],
                          const char *who, const char *nodes_text)
{
    unsigned n = caps->n_page_sizes < HP_MAX_PAGE_SIZES ? caps->n_page_sizes : HP_MAX_PAGE_SIZES;
    int limited = 0, left = 0;
    for (unsigned k = 0; k < n; k++) {
        if (caps->pool_free[k] == UINT64_MAX) {
            left = 1;  /* unpooled: nodes do not change what it can do */
            continue;
        }
        if (node_free[k] != UINT64_MAX && node_free[k] < caps->pool_free[k]) {
            caps->pool_free[k] = node_free[k];
            limited = 1;
        }
        left |= caps->pool_free[k] > 0;
    }
    if (!limited)
        return;
    size_t used = strlen(caps->reason);
    int many = strchr(nodes_text, ',') || strchr(nodes_text, '-');
    snprintf(caps->reason + used, sizeof(caps->reason) - used,
             "%s%s only node%s %s, whose pools have %s", used ? "; " : "", who,
             many ? "s" : "", nodes_text, left ? "fewer free pages" : "none free");
    if (!left)
        caps->available = 0;
}

void hp_select_credit_cached(struct hp_backend_caps *caps,
                             const uint64_t cached_bytes[HP_MAX_PAGE_SIZES])
{
    for (unsigned k = 0; k < caps->n_page_sizes && k < HP_MAX_PAGE_SIZES; k++) {
        uint64_t ps = caps->page_sizes[k];
        if (!ps || caps->pool_free[k] == UINT64_MAX)
            continue;
        uint64_t cached = cached_bytes[k] / ps;
        if (cached) {
            caps->pool_free[k] += cached;
            caps->available = 1;
        }
    }
}

uint64_t hp_realloc_flags(uint64_t block_flags, uint64_t call_flags)
{
    uint64_t sticky = block_flags & (HP_F_NOPOOL | HP_F_REQUIRE_HUGE);
    uint64_t page = call_flags & HP_F_PAGE_SHIFT_MASK ? call_flags & HP_F_PAGE_SHIFT_MASK
                                                      : block_flags & HP_F_PAGE_SHIFT_MASK;
    return (call_flags & ~HP_F_PAGE_SHIFT_MASK) | sticky | page;
}

int hp_realloc_may_promote(const struct hp_realloc_block *b, uint64_t new_size,
                           uint64_t base_page_size)
{
    return b->pin == HP_PIN_NONE && b->page_size <= base_page_size && new_size > b->len;
}

/* A copy goes to the same backend when the block is pinned, else to
 * whatever the selection picks. */
static struct hp_realloc_plan copy(const struct hp_realloc_block *b, uint32_t why)
{
    return (struct hp_realloc_plan){b->pin != HP_PIN_NONE ? HP_STEP_COPY_WITHIN : HP_STEP_MOVE,
                                    why};
}

struct hp_realloc_plan hp_realloc_plan(const struct hp_realloc_block *b, uint64_t new_size,
                                       uint64_t flags, uint64_t base_page_size,
                                       const struct hp_candidate *best)
{
    uint64_t wanted = hp_flags_page_size(flags);
    if (wanted && wanted != b->page_size)
        return copy(b, HP_RWHY_PAGE_SIZE);
    if ((flags & HP_F_REQUIRE_HUGE) && b->page_size <= base_page_size)
        return copy(b, HP_RWHY_REQUIRE_HUGE);
    if ((flags & HP_F_NOPOOL) && (b->map_flags & HP_MAP_POOL))
        return copy(b, HP_RWHY_NOPOOL);
    /* Shared memory mapped before a fork is the other process's too: a
     * remap (a shrinking ftruncate, say) could take pages away under it
     * (hp/backend.h, HP_MAP_SHARED). */
    if ((b->map_flags & HP_MAP_SHARED) && b->forked)
        return copy(b, HP_RWHY_SHARED_FORK);
    /* hugetlb pages that existed at a fork may be shared with the child;
     * growing could move them (mremap), and the owner's later copy-on-write
     * fault with the pool empty then looks for the child's copy at the new
     * address (mm/hugetlb.c hugetlb_wp -> unmap_ref_private unmaps by the
     * faulting address), finds none and retries: on Linux 6.18 a parent
     * writing pages it had moved after a fork hung in the kernel until it
     * was killed. Such a block grows by copy into new memory; shrinking in
     * place moves nothing. */
    if ((b->map_flags & HP_MAP_POOL) && b->forked && new_size > b->len)
        return copy(b, HP_RWHY_POOL_FORK);
    /* Promotion costs one copy of at most one huge page. */
    if (best && hp_realloc_may_promote(b, new_size, base_page_size) &&
        best->page_size > base_page_size && b->len <= best->page_size)
        return (struct hp_realloc_plan){HP_STEP_MOVE, HP_RWHY_PROMOTE};
    return (struct hp_realloc_plan){HP_STEP_RESIZE, HP_RWHY_FITS};
}

struct hp_realloc_plan hp_realloc_after(const struct hp_realloc_block *b, int32_t resize_rc,
                                        uint64_t flags, uint64_t base_page_size)
{
    if (resize_rc == HP_ENOMEM && b->page_size > base_page_size) {
        if (flags & HP_F_REQUIRE_HUGE)
            return (struct hp_realloc_plan){HP_STEP_FAIL, HP_RWHY_POOL_DRY};
        return copy(b, HP_RWHY_POOL_DRY);
    }
    return copy(b, HP_RWHY_RESIZE_FAILED);
}

const char *hp_realloc_why_name(uint32_t why)
{
    static const char *const names[HP_RWHY_COUNT] = {
        "fits", "page-size", "require-huge", "promote", "shared-after-fork", "pool-after-fork",
        "pool-dry", "resize-failed", "no-pool"};
    return why < HP_RWHY_COUNT ? names[why] : "?";
}

/* ---- stack planning ---- */

#define STACK_HUGE_FLAGS (HP_STACK_HUGE | HP_STACK_HUGETLB | HP_STACK_THP)

static void stack_note(char *why, size_t cap, const char *name, const char *what)
{
    size_t used = strlen(why);
    if (used + 3 >= cap)
        return;
    snprintf(why + used, cap - used, "%s%s: %s", used ? "; " : "", name, what);
}

/* Index of page size ps in caps, or -1. */
static int size_index(const struct hp_backend_caps *caps, uint64_t ps)
{
    unsigned n = caps->n_page_sizes < HP_MAX_PAGE_SIZES ? caps->n_page_sizes : HP_MAX_PAGE_SIZES;
    for (unsigned i = 0; i < n; i++)
        if (caps->page_sizes[i] == ps)
            return (int)i;
    return -1;
}

/* Can backend b serve the stack with page size ps (huge: every page from
 * a pool that can reserve them; the kind of page the flags ask for)? NULL
 * if yes, else why not. */
static const char *stack_unfit(const struct hp_stack_request *req,
                               const struct hp_select_backend *b, uint64_t ps, int huge,
                               uint32_t *guaranteed, char *buf, size_t cap)
{
    int i = size_index(b->caps, ps);
    if (i < 0) {
        /* Said only of a backend with huge pages of other sizes. */
        unsigned n = b->caps->n_page_sizes;
        int larger = n && n <= HP_MAX_PAGE_SIZES && b->caps->page_sizes[n - 1] > req->base_page_size;
        if (!larger)
            return "";
        snprintf(buf, cap, "no %llu KiB pages", (unsigned long long)(ps >> 10));
        return buf;
    }
    *guaranteed = (b->caps->page_flags[i] & HP_PAGE_GUARANTEED) != 0;
    if (!huge)
        return NULL;
    if ((req->flags & HP_STACK_HUGETLB) && !*guaranteed)
        return "its pages are not from a reserved pool (HP_STACK_HUGETLB)";
    if ((req->flags & HP_STACK_THP) && *guaranteed)
        return "its pages are from a reserved pool, not THP (HP_STACK_THP)";
    if (pool_short(b->caps, (unsigned)i, req->usable)) {
        snprintf(buf, cap, "pool can reserve %llu pages of %llu KiB, the stack needs %llu",
                 (unsigned long long)b->caps->pool_free[i], (unsigned long long)(ps >> 10),
                 (unsigned long long)(req->usable / ps));
        return buf;
    }
    return NULL;
}

/* Append the ways of one mode (page size ps) to out[n..max), ranked as
 * hp_select ranks backends. Returns the new count; *offered says whether
 * any eligible backend has the page size at all. */
static unsigned stack_ways(const struct hp_stack_request *req, const struct hp_select_backend *bk,
                           unsigned n_backends, uint64_t ps, struct hp_stack_plan *out,
                           unsigned n, unsigned max, char *why, size_t why_cap, int *offered)
{
    int huge = ps > req->base_page_size;
    struct hp_select_request sr = {.len = req->usable, .base_page_size = req->base_page_size,
                                   .n_only = req->n_only, .only = req->only,
                                   .n_never = req->n_never, .never = req->never};
    unsigned first = n, tier[HP_STACK_PLAN_MAX];
    for (unsigned i = 0; i < n_backends && n < max; i++) {
        const struct hp_select_backend *b = &bk[i];
        int pos;
        if (!b->name)
            continue;
        uint32_t out_why = backend_out(&sr, b, i, &pos);
        char buf[200];
        const char *no = NULL;
        uint32_t guaranteed = 0;
        if (out_why == HP_WHY_UNAVAILABLE && b->caps && size_index(b->caps, ps) >= 0) {
            *offered = 1;
            snprintf(buf, sizeof(buf), "unavailable (%.120s)", b->caps->reason);
            no = buf;
        } else if (out_why == HP_WHY_EXCLUDED_ENV ||
                   (out_why == HP_WHY_NOT_LISTED && (!b->caps || size_index(b->caps, ps) >= 0))) {
            no = hp_select_list_text(out_why);
        } else if (out_why != HP_WHY_CANDIDATE) {
            continue;  /* unprobed third party, or no such page size: not a way */
        } else {
            *offered |= size_index(b->caps, ps) >= 0;
            no = stack_unfit(req, b, ps, huge, &guaranteed, buf, sizeof(buf));
        }
        if (no) {
            if (huge && no[0])
                stack_note(why, why_cap, b->name, no);
            continue;
        }
        /* Insert by tier (HP_BACKENDS position when it lists backends),
         * stable: a handful of entries. */
        unsigned t = req->n_only ? (unsigned)pos : tier_of(b), j = n;
        while (j > first && tier[j - first - 1] > t) {
            out[j] = out[j - 1];
            tier[j - first] = tier[j - first - 1];
            j--;
        }
        out[j] = (struct hp_stack_plan){i, ps, guaranteed};
        tier[j - first] = t;
        n++;
    }
    return n;
}

unsigned hp_stack_plan(const struct hp_stack_request *req, const struct hp_select_backend *bk,
                       unsigned n_backends, struct hp_stack_plan *out, unsigned max, char *why,
                       size_t why_cap)
{
    unsigned n = 0;
    int offered = 0;
    if (why_cap)
        why[0] = '\0';
    if (max > HP_STACK_PLAN_MAX)
        max = HP_STACK_PLAN_MAX;
    if (req->flags & STACK_HUGE_FLAGS) {
        n = stack_ways(req, bk, n_backends, req->huge_page_size, out, 0, max, why, why_cap,
                       &offered);
        if (!offered) {
            char what[120];
            snprintf(what, sizeof(what), "no backend offers %llu KiB pages",
                     (unsigned long long)(req->huge_page_size >> 10));
            stack_note(why, why_cap, what, "check HP_BACKEND_PATH and `hpctl status`");
        }
        if (!(req->flags & HP_STACK_ALLOW_LEAN))
            return n;
    }
    int lean_offered = 0;
    unsigned before = n;
    n = stack_ways(req, bk, n_backends, req->base_page_size, out, n, max, why, why_cap,
                   &lean_offered);
    if (n == before && !(req->flags & STACK_HUGE_FLAGS))
        stack_note(why, why_cap, "lean stack",
                   "no backend allowed by HP_BACKENDS offers base pages");
    return n;
}
