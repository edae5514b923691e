/* The selection policy, driven with fabricated capability records. */
#include "select.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define K (UINT64_C(1) << 10)
#define M (UINT64_C(1) << 20)
#define G (UINT64_C(1) << 30)
#define UNPOOLED UINT64_MAX

enum { HUGETLB, THP, MTHP, BASE, OTHER, NB };

static struct hp_backend_caps caps[NB];
static struct hp_select_backend view[NB];

static void add_size(struct hp_backend_caps *c, uint64_t ps, uint64_t pool)
{
    c->page_sizes[c->n_page_sizes] = ps;
    c->pool_free[c->n_page_sizes] = pool;
    c->n_page_sizes++;
    c->available = 1;
}

/* A machine with 2 MiB and 1 GiB pools, THP, 16K/64K mTHP, base pages and
 * a third-party plugin. */
static int machine(void **state)
{
    (void)state;
    memset(caps, 0, sizeof(caps));
    add_size(&caps[HUGETLB], 2 * M, 1000);
    add_size(&caps[HUGETLB], G, 2);
    add_size(&caps[THP], 2 * M, UNPOOLED);
    add_size(&caps[MTHP], 16 * K, UNPOOLED);
    add_size(&caps[MTHP], 64 * K, UNPOOLED);
    add_size(&caps[BASE], 4 * K, UNPOOLED);
    add_size(&caps[OTHER], 4 * K, UNPOOLED);
    const char *names[NB] = {"hugetlbfs", "thp-madvise", "anon-orders", "fallback", "example"};
    uint32_t kinds[NB] = {HP_KIND_HUGETLB, HP_KIND_THP, HP_KIND_MTHP, HP_KIND_BASE, HP_KIND_OTHER};
    for (int i = 0; i < NB; i++)
        view[i] = (struct hp_select_backend){names[i], kinds[i], &caps[i], 0};
    return 0;
}

struct expect {
    unsigned backend;
    uint64_t page_size;
};

static void check(const struct hp_select_request *req, const struct expect *want, unsigned n_want)
{
    struct hp_candidate out[HP_SELECT_MAX];
    unsigned n = hp_select(req, view, NB, out, HP_SELECT_MAX);
    for (unsigned i = 0; i < n; i++)
        print_message("#   %u: %s %llu\n", i, view[out[i].backend].name,
                      (unsigned long long)out[i].page_size);
    assert_int_equal(n, n_want);
    for (unsigned i = 0; i < n; i++) {
        assert_int_equal(out[i].backend, want[i].backend);
        assert_int_equal(out[i].page_size, want[i].page_size);
    }
}

static struct hp_select_request req(uint64_t len, uint64_t flags)
{
    struct hp_select_request r = {.len = len, .flags = flags, .base_page_size = 4 * K};
    return r;
}

static void small_block_takes_base_pages(void **state)
{
    (void)state;
    struct hp_select_request r = req(4 * K, 0);
    check(&r, (struct expect[]){{BASE, 4 * K}}, 1);
}

static void mid_block_takes_largest_mthp_order(void **state)
{
    (void)state;
    struct hp_select_request r = req(100 * K, 0);
    check(&r, (struct expect[]){{MTHP, 64 * K}, {BASE, 4 * K}}, 2);
}

static void pool_first_and_least_waste(void **state)
{
    (void)state;
    /* 2 MiB + 4 KiB must not take a 1 GiB page. */
    struct hp_select_request r = req(2 * M + 4 * K, 0);
    check(&r, (struct expect[]){{HUGETLB, 2 * M}, {THP, 2 * M}, {MTHP, 64 * K}, {BASE, 4 * K}}, 4);
    /* 1.5 GiB: 2 MiB pages waste nothing, a 1 GiB page wastes 512 MiB. */
    r = req(3 * G / 2, 0);
    check(&r,
          (struct expect[]){{HUGETLB, 2 * M}, {HUGETLB, G}, {THP, 2 * M}, {MTHP, 64 * K},
                            {BASE, 4 * K}},
          5);
}

static void equal_waste_prefers_larger_page(void **state)
{
    (void)state;
    caps[HUGETLB].pool_free[0] = 2000;
    struct hp_select_request r = req(2 * G, 0);
    check(&r,
          (struct expect[]){{HUGETLB, G}, {HUGETLB, 2 * M}, {THP, 2 * M}, {MTHP, 64 * K},
                            {BASE, 4 * K}},
          5);
}

static void short_pool_is_skipped(void **state)
{
    (void)state;
    /* 3 GiB needs three 1 GiB pages (two free) or 1536 2 MiB pages (1000 free). */
    struct hp_select_request r = req(3 * G, 0);
    check(&r, (struct expect[]){{THP, 2 * M}, {MTHP, 64 * K}, {BASE, 4 * K}}, 3);
    caps[HUGETLB].pool_free[0] = 0;
    caps[HUGETLB].pool_free[1] = 0;
    r = req(4 * M, 0);
    check(&r, (struct expect[]){{THP, 2 * M}, {MTHP, 64 * K}, {BASE, 4 * K}}, 3);
}

/* HP_F_NOPOOL: no pooled page size is a candidate, whatever the pool
 * holds; with HP_F_REQUIRE_HUGE only THP and mTHP are left; a named pool
 * backend serves nothing; explain says "pooled" for each size dropped. */
static void nopool_drops_pooled_sizes(void **state)
{
    (void)state;
    struct hp_select_request r = req(4 * M, HP_F_NOPOOL);
    check(&r, (struct expect[]){{THP, 2 * M}, {MTHP, 64 * K}, {BASE, 4 * K}}, 3);
    r = req(4 * M, HP_F_NOPOOL | HP_F_REQUIRE_HUGE);
    check(&r, (struct expect[]){{THP, 2 * M}, {MTHP, 64 * K}}, 2);
    r = req(2 * G, HP_F_NOPOOL | HP_F_PAGE_1G);
    check(&r, NULL, 0);
    r = req(4 * M, HP_F_NOPOOL);
    r.backend = "hugetlbfs";
    check(&r, NULL, 0);
    /* A pooled size of a non-hugetlb kind is dropped too: the pool, not
     * the kind, carries the fork rule. */
    caps[THP].pool_free[0] = 100;
    r = req(4 * M, HP_F_NOPOOL);
    check(&r, (struct expect[]){{MTHP, 64 * K}, {BASE, 4 * K}}, 2);
    caps[THP].pool_free[0] = UNPOOLED;
    struct hp_candidate out[HP_SELECT_MAX];
    struct hp_select_note notes[32];
    unsigned n_notes = 0, pooled = 0;
    r = req(4 * M, HP_F_NOPOOL);
    hp_select_explain(&r, view, NB, out, HP_SELECT_MAX, notes, 32, &n_notes);
    for (unsigned i = 0; i < n_notes; i++)
        if (notes[i].why == HP_WHY_POOLED) {
            assert_int_equal(notes[i].backend, HUGETLB);
            pooled++;
        }
    assert_int_equal(pooled, 2);
    assert_string_equal(hp_select_why_name(HP_WHY_POOLED), "pooled");
}

static void require_huge_drops_base_pages(void **state)
{
    (void)state;
    struct hp_select_request r = req(4 * K, HP_F_REQUIRE_HUGE);
    check(&r, NULL, 0);
    r = req(100 * K, HP_F_REQUIRE_HUGE);
    check(&r, (struct expect[]){{MTHP, 64 * K}}, 1);
}

static void requested_page_size(void **state)
{
    (void)state;
    struct hp_select_request r = req(4 * K, HP_F_PAGE_1G);
    check(&r, (struct expect[]){{HUGETLB, G}}, 1);
    r = req(4 * M, HP_F_PAGE_2M);
    check(&r, (struct expect[]){{HUGETLB, 2 * M}, {THP, 2 * M}}, 2);
    r = req(4 * M, HP_F_PAGE_2M | HP_F_REQUIRE_HUGE);
    check(&r, (struct expect[]){{HUGETLB, 2 * M}, {THP, 2 * M}}, 2);
    /* A size nobody offers. */
    r = req(4 * M, UINT64_C(25) << HP_F_PAGE_SHIFT_POS);
    check(&r, NULL, 0);
}

static void named_backend(void **state)
{
    (void)state;
    struct hp_select_request r = req(4 * K, 0);
    r.backend = "thp-madvise";
    check(&r, (struct expect[]){{THP, 2 * M}}, 1);
    r.backend = "example";  /* third-party plugins serve only when named */
    check(&r, (struct expect[]){{OTHER, 4 * K}}, 1);
    r.backend = "nonexistent";
    check(&r, NULL, 0);
}

static void exclusions_and_order_override(void **state)
{
    (void)state;
    const char excl[][HP_OPT_NAME_LEN] = {"hugetlbfs", "anon-orders"};
    struct hp_select_request r = req(2 * M + 4 * K, 0);
    r.exclude = excl;
    r.n_exclude = 2;
    check(&r, (struct expect[]){{THP, 2 * M}, {BASE, 4 * K}}, 2);

    const char only[][HP_OPT_NAME_LEN] = {"fallback", "thp-madvise"};
    r = req(4 * M, 0);
    r.only = only;
    r.n_only = 2;
    check(&r, (struct expect[]){{BASE, 4 * K}, {THP, 2 * M}}, 2);
}

static void unavailable_backends_are_skipped(void **state)
{
    (void)state;
    caps[HUGETLB].available = 0;
    caps[THP].available = 0;
    view[MTHP].caps = NULL;
    struct hp_select_request r = req(8 * M, 0);
    check(&r, (struct expect[]){{BASE, 4 * K}}, 1);
}

static void flags_page_size_decoding(void **state)
{
    (void)state;
    assert_true(hp_flags_page_size(0) == 0);
    assert_true(hp_flags_page_size(HP_F_PAGE_2M | HP_F_POPULATE) == 2 * M);
    assert_true(hp_flags_page_size(HP_F_PAGE_1G) == G);
}

/* The note hp_select_explain gave (backend, page size), or NULL. */
static const struct hp_select_note *find(const struct hp_select_note *notes, unsigned n,
                                         unsigned backend, uint64_t ps)
{
    for (unsigned i = 0; i < n; i++)
        if (notes[i].backend == backend && notes[i].page_size == ps)
            return &notes[i];
    return NULL;
}

/* Explain and select agree, and every candidate has its rank. */
static unsigned explain(const struct hp_select_request *r, struct hp_select_note *notes,
                        unsigned max)
{
    struct hp_candidate a[HP_SELECT_MAX], b[HP_SELECT_MAX];
    unsigned n_notes = 0;
    unsigned na = hp_select(r, view, NB, a, HP_SELECT_MAX);
    unsigned nb = hp_select_explain(r, view, NB, b, HP_SELECT_MAX, notes, max, &n_notes);
    assert_int_equal(na, nb);
    for (unsigned i = 0; i < na; i++) {
        assert_int_equal(a[i].backend, b[i].backend);
        assert_true(a[i].page_size == b[i].page_size);
        int ranked = 0;
        for (unsigned k = 0; k < n_notes; k++)
            ranked += notes[k].backend == a[i].backend && notes[k].page_size == a[i].page_size &&
                      notes[k].why == HP_WHY_CANDIDATE && notes[k].rank == (int)i;
        assert_int_equal(ranked, 1);
    }
    return n_notes;
}

static void explain_says_why(void **state)
{
    (void)state;
    struct hp_select_note notes[64];
    /* 3 GiB: the 1 GiB pool (2 free) is short by 1, the 2 MiB one (1000
     * free) by 536; 16K mTHP loses to 64K; the plugin is never automatic. */
    struct hp_select_request r = req(3 * G, 0);
    unsigned n = explain(&r, notes, 64);
    const struct hp_select_note *x = find(notes, n, HUGETLB, G);
    assert_non_null(x);
    assert_int_equal(x->why, HP_WHY_POOL_SHORT);
    assert_true(x->short_pages == 1);
    x = find(notes, n, HUGETLB, 2 * M);
    assert_int_equal(x->why, HP_WHY_POOL_SHORT);
    assert_true(x->short_pages == 536);
    assert_int_equal(find(notes, n, MTHP, 16 * K)->why, HP_WHY_BEATEN);
    assert_int_equal(find(notes, n, OTHER, 0)->why, HP_WHY_THIRD_PARTY);
    /* 100 KiB: 2 MiB pages are larger than the block. */
    r = req(100 * K, 0);
    n = explain(&r, notes, 64);
    assert_int_equal(find(notes, n, HUGETLB, 2 * M)->why, HP_WHY_LARGER);
    assert_int_equal(find(notes, n, THP, 2 * M)->why, HP_WHY_LARGER);
    /* A page larger than the block is passed over for that, even when its
     * pool is empty: the pool is not what keeps a 4 KiB block off it (the
     * 1 GiB pool of a machine that has the size but reserved no page). */
    caps[HUGETLB].pool_free[0] = caps[HUGETLB].pool_free[1] = 0;
    r = req(4 * K, HP_F_REQUIRE_HUGE);
    n = explain(&r, notes, 64);
    assert_int_equal(find(notes, n, HUGETLB, 2 * M)->why, HP_WHY_LARGER);
    assert_int_equal(find(notes, n, HUGETLB, G)->why, HP_WHY_LARGER);
    caps[HUGETLB].pool_free[0] = 1000;
    caps[HUGETLB].pool_free[1] = 2;
    /* Required huge pages drop base pages; a page size asked for rules
     * out the others. */
    r = req(4 * M, HP_F_REQUIRE_HUGE | HP_F_PAGE_2M);
    n = explain(&r, notes, 64);
    assert_int_equal(find(notes, n, BASE, 4 * K)->why, HP_WHY_BASE_PAGE);
    assert_int_equal(find(notes, n, HUGETLB, G)->why, HP_WHY_OTHER_SIZE);
    assert_int_equal(find(notes, n, MTHP, 64 * K)->why, HP_WHY_OTHER_SIZE);
    /* A size not asked for is passed over for that, even when its pool
     * is short too: the pool of the size asked for is the one to blame. */
    r = req(3 * G, HP_F_PAGE_1G);
    n = explain(&r, notes, 64);
    assert_int_equal(find(notes, n, HUGETLB, 2 * M)->why, HP_WHY_OTHER_SIZE);
    assert_int_equal(find(notes, n, HUGETLB, G)->why, HP_WHY_POOL_SHORT);
}

static void explain_names_each_exclusion(void **state)
{
    (void)state;
    struct hp_select_note notes[64];
    const char excl[][HP_OPT_NAME_LEN] = {"hugetlbfs"};
    const char never[][HP_OPT_NAME_LEN] = {"anon-orders"};
    struct hp_select_request r = req(4 * M, 0);
    r.exclude = excl;
    r.n_exclude = 1;
    r.never = never;
    r.n_never = 1;
    unsigned n = explain(&r, notes, 64);
    assert_int_equal(find(notes, n, HUGETLB, 0)->why, HP_WHY_EXCLUDED);
    assert_int_equal(find(notes, n, MTHP, 0)->why, HP_WHY_EXCLUDED_ENV);
    check(&r, (struct expect[]){{THP, 2 * M}, {BASE, 4 * K}}, 2);

    const char only[][HP_OPT_NAME_LEN] = {"fallback"};
    r = req(4 * M, 0);
    r.only = only;
    r.n_only = 1;
    n = explain(&r, notes, 64);
    assert_int_equal(find(notes, n, THP, 0)->why, HP_WHY_NOT_LISTED);
    r = req(4 * M, 0);
    r.backend = "thp-madvise";
    n = explain(&r, notes, 64);
    assert_int_equal(find(notes, n, HUGETLB, 0)->why, HP_WHY_NOT_NAMED);
    caps[MTHP].available = 0;
    r = req(4 * M, 0);
    n = explain(&r, notes, 64);
    assert_int_equal(find(notes, n, MTHP, 0)->why, HP_WHY_UNAVAILABLE);
    /* A named backend that fits nothing serves with its smallest size. */
    r = req(4 * K, 0);
    r.backend = "hugetlbfs";
    n = explain(&r, notes, 64);
    /* (it did not fit: the 2 MiB page is larger than the block) */
    assert_int_equal(find(notes, n, HUGETLB, 2 * M)->why, HP_WHY_LARGER);
    assert_int_equal(notes[n - 1].why, HP_WHY_CANDIDATE);
    assert_true(notes[n - 1].page_size == 2 * M && notes[n - 1].named_smallest);
    /* A short notes array loses notes, never candidates (mTHP is off now). */
    r = req(3 * G, 0);
    unsigned got = 0;
    struct hp_candidate out[HP_SELECT_MAX];
    assert_int_equal(hp_select_explain(&r, view, NB, out, HP_SELECT_MAX, notes, 2, &got), 2);
    assert_int_equal(got, 2);
    assert_string_equal(hp_select_why_name(HP_WHY_POOL_SHORT), "pool-short");
    assert_string_equal(hp_select_why_name(HP_WHY_COUNT), "?");
}

static void cached_pages_count_as_free(void **state)
{
    (void)state;
    uint64_t cached[HP_MAX_PAGE_SIZES] = {6 * M + 4 * K, 2 * G};
    caps[HUGETLB].pool_free[0] = 0;
    caps[HUGETLB].pool_free[1] = 0;
    caps[HUGETLB].available = 0;
    hp_select_credit_cached(&caps[HUGETLB], cached);
    assert_true(caps[HUGETLB].pool_free[0] == 3);   /* whole pages only */
    assert_true(caps[HUGETLB].pool_free[1] == 2);
    assert_true(caps[HUGETLB].available);
    hp_select_credit_cached(&caps[THP], cached);
    assert_true(caps[THP].pool_free[0] == UNPOOLED);
    struct hp_select_request r = req(6 * M, 0);
    check(&r, (struct expect[]){{HUGETLB, 2 * M}, {THP, 2 * M}, {MTHP, 64 * K}, {BASE, 4 * K}}, 4);
}

/* The list that leaves a named backend out, for hp_alloc's error detail. */
static void named_backend_left_out_by(void **state)
{
    (void)state;
    const char excl[][HP_OPT_NAME_LEN] = {"fallback"};
    const char never[][HP_OPT_NAME_LEN] = {"thp-madvise"};
    const char only[][HP_OPT_NAME_LEN] = {"hugetlbfs"};
    struct hp_select_request r = req(4 * M, 0);
    assert_int_equal(hp_select_named_out(&r), HP_WHY_CANDIDATE);  /* nothing named */
    r.backend = "fallback";
    assert_int_equal(hp_select_named_out(&r), HP_WHY_CANDIDATE);
    r.exclude = excl;
    r.n_exclude = 1;
    assert_int_equal(hp_select_named_out(&r), HP_WHY_EXCLUDED);
    r = req(4 * M, 0);
    r.backend = "thp-madvise";
    r.never = never;
    r.n_never = 1;
    assert_int_equal(hp_select_named_out(&r), HP_WHY_EXCLUDED_ENV);
    r = req(4 * M, 0);
    r.backend = "thp-madvise";
    r.only = only;
    r.n_only = 1;
    assert_int_equal(hp_select_named_out(&r), HP_WHY_NOT_LISTED);
    r.backend = "hugetlbfs";
    assert_int_equal(hp_select_named_out(&r), HP_WHY_CANDIDATE);
}

/* The environment as hp_options() would hold it after parsing HP_BACKENDS. */
static struct hp_options env_of(const char *const *only, unsigned n_only,
                                const char *const *never, unsigned n_never)
{
    struct hp_options o;
    memset(&o, 0, sizeof(o));
    for (unsigned i = 0; i < n_only; i++)
        strcpy(o.only[i], only[i]);
    for (unsigned i = 0; i < n_never; i++)
        strcpy(o.never[i], never[i]);
    o.n_only = n_only;
    o.n_never = n_never;
    return o;
}

/* HP_BACKENDS "anon-orders,hugetlbfs,-thp-madvise" and the caller's exclude
 * list meet in one request: the list's order replaces the tiers, "-name"
 * and the exclude list both remove. */
static void hp_backends_merges_with_opts(void **state)
{
    (void)state;
    struct hp_options env = env_of((const char *[]){"anon-orders", "hugetlbfs"}, 2,
                                   (const char *[]){"thp-madvise"}, 1);
    const char exclude[][HP_OPT_NAME_LEN] = {"fallback"};
    struct hp_select_request r;
    hp_select_request_init(&r, 8 * M, HP_F_POPULATE, 4 * K, NULL, exclude, 1, &env);
    assert_true(r.len == 8 * M && r.flags == HP_F_POPULATE && r.base_page_size == 4 * K);
    assert_int_equal(r.n_only, 2);
    assert_int_equal(r.n_never, 1);
    assert_int_equal(r.n_exclude, 1);
    assert_null(r.backend);
    check(&r, (struct expect[]){{MTHP, 64 * K}, {HUGETLB, 2 * M}}, 2);

    /* Only "-name": the policy's tiers, without that backend. */
    env = env_of(NULL, 0, (const char *[]){"hugetlbfs"}, 1);
    hp_select_request_init(&r, 8 * M, 0, 4 * K, NULL, NULL, 0, &env);
    assert_int_equal(r.n_exclude, 0);
    check(&r, (struct expect[]){{THP, 2 * M}, {MTHP, 64 * K}, {BASE, 4 * K}}, 3);
    /* The caller's exclusion of the only backend HP_BACKENDS lists: nothing. */
    env = env_of((const char *[]){"fallback"}, 1, NULL, 0);
    hp_select_request_init(&r, 8 * M, 0, 4 * K, NULL, exclude, 1, &env);
    check(&r, NULL, 0);
    /* HP_BACKENDS listing a name no backend has serves nothing. */
    env = env_of((const char *[]){"no-such"}, 1, NULL, 0);
    hp_select_request_init(&r, 8 * M, 0, 4 * K, NULL, NULL, 0, &env);
    check(&r, NULL, 0);
}

/* A block is pinned when the caller named its backend, or HP_BACKENDS
 * listed exactly one; a longer list lets hp_realloc move it among them. */
static void pin_rule(void **state)
{
    (void)state;
    struct hp_options none = env_of(NULL, 0, NULL, 0);
    struct hp_options one = env_of((const char *[]){"example"}, 1, NULL, 0);
    struct hp_options two = env_of((const char *[]){"example", "fallback"}, 2, NULL, 0);
    struct hp_options never = env_of(NULL, 0, (const char *[]){"hugetlbfs"}, 1);
    struct hp_select_request r;
    hp_select_request_init(&r, 4 * K, 0, 4 * K, NULL, NULL, 0, &none);
    assert_int_equal(hp_select_pin(&r), HP_PIN_NONE);
    hp_select_request_init(&r, 4 * K, 0, 4 * K, "example", NULL, 0, &none);
    assert_int_equal(hp_select_pin(&r), HP_PIN_NAMED);
    hp_select_request_init(&r, 4 * K, 0, 4 * K, NULL, NULL, 0, &one);
    assert_int_equal(hp_select_pin(&r), HP_PIN_ENV);
    /* The one listed backend is the only candidate, third-party or not. */
    check(&r, (struct expect[]){{OTHER, 4 * K}}, 1);
    hp_select_request_init(&r, 4 * K, 0, 4 * K, "example", NULL, 0, &one);
    assert_int_equal(hp_select_pin(&r), HP_PIN_NAMED);
    hp_select_request_init(&r, 4 * K, 0, 4 * K, NULL, NULL, 0, &two);
    assert_int_equal(hp_select_pin(&r), HP_PIN_NONE);
    hp_select_request_init(&r, 4 * K, 0, 4 * K, NULL, NULL, 0, &never);
    assert_int_equal(hp_select_pin(&r), HP_PIN_NONE);
}

/* A named backend that is unavailable yields no candidate (the caller's
 * check_named reports its reason) and nothing else stands in for it. */
static void named_unavailable_backend(void **state)
{
    (void)state;
    caps[HUGETLB].available = 0;
    struct hp_select_request r = req(2 * M, 0);
    r.backend = "hugetlbfs";
    check(&r, NULL, 0);
    struct hp_select_note notes[64];
    unsigned n = explain(&r, notes, 64);
    assert_int_equal(find(notes, n, HUGETLB, 0)->why, HP_WHY_UNAVAILABLE);
    assert_int_equal(find(notes, n, THP, 0)->why, HP_WHY_NOT_NAMED);
}

/* HP_F_REQUIRE_HUGE with only base-page backends allowed: nothing. */
static void require_huge_with_base_only(void **state)
{
    (void)state;
    struct hp_options env = env_of((const char *[]){"fallback", "example"}, 2, NULL, 0);
    struct hp_select_request r;
    hp_select_request_init(&r, 8 * M, HP_F_REQUIRE_HUGE, 4 * K, NULL, NULL, 0, &env);
    check(&r, NULL, 0);
    hp_select_request_init(&r, 8 * M, 0, 4 * K, NULL, NULL, 0, &env);
    check(&r, (struct expect[]){{BASE, 4 * K}, {OTHER, 4 * K}}, 2);
}

/* A pool short by one page is passed over; the one page the cache holds
 * closes the gap. */
static void pool_short_by_one_page_and_cache_credit(void **state)
{
    (void)state;
    caps[HUGETLB].pool_free[0] = 3;  /* 8 MiB needs 4 */
    struct hp_select_request r = req(8 * M, 0);
    struct hp_select_note notes[64];
    unsigned n = explain(&r, notes, 64);
    assert_int_equal(find(notes, n, HUGETLB, 2 * M)->why, HP_WHY_POOL_SHORT);
    assert_int_equal(find(notes, n, HUGETLB, 2 * M)->short_pages, 1);
    check(&r, (struct expect[]){{THP, 2 * M}, {MTHP, 64 * K}, {BASE, 4 * K}}, 3);
    uint64_t cached[HP_MAX_PAGE_SIZES] = {2 * M - 1};  /* less than a page: no credit */
    hp_select_credit_cached(&caps[HUGETLB], cached);
    assert_true(caps[HUGETLB].pool_free[0] == 3);
    cached[0] = 2 * M;
    hp_select_credit_cached(&caps[HUGETLB], cached);
    assert_true(caps[HUGETLB].pool_free[0] == 4);
    check(&r, (struct expect[]){{HUGETLB, 2 * M}, {THP, 2 * M}, {MTHP, 64 * K}, {BASE, 4 * K}},
          4);
}

/* Which kinds are chosen automatically, and a third-party plugin of kind
 * HP_KIND_HUGETLB beside the built-ins: it is a hugetlb tier like the
 * built-in, its pool is credited like any pool, and the plugin of kind
 * other stays out until named. */
static void third_party_hugetlb_kind_is_automatic(void **state)
{
    (void)state;
    assert_true(hp_select_automatic(HP_KIND_HUGETLB) && hp_select_automatic(HP_KIND_THP) &&
                hp_select_automatic(HP_KIND_MTHP) && hp_select_automatic(HP_KIND_BASE));
    assert_false(hp_select_automatic(HP_KIND_OTHER));
    assert_false(hp_select_automatic(5));
    struct hp_backend_caps memfd = {0};
    add_size(&memfd, 2 * M, 0);       /* empty pool: unavailable as probed */
    memfd.available = 0;
    struct hp_select_backend bk[NB + 1];
    memcpy(bk, view, sizeof(view));
    bk[NB] = (struct hp_select_backend){"memfd-huge", HP_KIND_HUGETLB, &memfd, 0};
    caps[HUGETLB].pool_free[0] = 1;   /* the built-in holds one 2 MiB page */
    struct hp_select_request r = req(4 * M, 0);
    struct hp_candidate out[HP_SELECT_MAX];
    unsigned n = hp_select(&r, bk, NB + 1, out, HP_SELECT_MAX);
    assert_int_equal(n, 3);
    assert_int_equal(out[0].backend, THP);
    /* The cache holds two pages of the plugin's pool: it serves first. */
    uint64_t cached[HP_MAX_PAGE_SIZES] = {4 * M};
    hp_select_credit_cached(&memfd, cached);
    assert_true(memfd.available && memfd.pool_free[0] == 2);
    n = hp_select(&r, bk, NB + 1, out, HP_SELECT_MAX);
    assert_int_equal(n, 4);
    assert_int_equal(out[0].backend, NB);
    assert_true(out[0].page_size == 2 * M);
    for (unsigned i = 0; i < n; i++)
        assert_int_not_equal(out[i].backend, OTHER);
}

/* A plugin that claims kind THP or HUGETLB, loaded before the built-ins
 * (HP_BACKEND_PATH comes first: a lower index, so it wins a tie). Until
 * it has shown huge pages (unproven) it ranks right after the built-in of
 * its kind; once shown, with it. */
static void claimed_kind_is_earned(void **state)
{
    (void)state;
    struct hp_backend_caps claim = {0};
    add_size(&claim, 2 * M, UNPOOLED);
    enum { CLAIM = NB };
    struct hp_select_backend bk[NB + 1];
    memcpy(bk, view, sizeof(view));
    /* The claimant first in load order: swap it with entry 0. */
    bk[CLAIM] = bk[0];
    bk[0] = (struct hp_select_backend){"claims-thp", HP_KIND_THP, &claim, 1};
    const unsigned thp = THP, mthp = MTHP;
    struct hp_select_request r = req(4 * M, HP_F_NOPOOL);  /* the built-in pool out */
    struct hp_candidate out[HP_SELECT_MAX];
    unsigned n = hp_select(&r, bk, NB + 1, out, HP_SELECT_MAX);
    assert_true(n >= 3);
    assert_int_equal(out[0].backend, thp);
    assert_int_equal(out[1].backend, 0);
    assert_int_equal(out[2].backend, mthp);
    bk[0].unproven = 0;  /* huge bytes measured in a block of its */
    n = hp_select(&r, bk, NB + 1, out, HP_SELECT_MAX);
    assert_true(n >= 2);
    assert_int_equal(out[0].backend, 0);
    assert_int_equal(out[1].backend, thp);
    /* Claiming hugetlb: below the hugetlb built-in, still above THP. */
    bk[0] = (struct hp_select_backend){"claims-hugetlb", HP_KIND_HUGETLB, &claim, 1};
    r = req(4 * M, 0);
    n = hp_select(&r, bk, NB + 1, out, HP_SELECT_MAX);
    assert_true(n >= 3);
    assert_int_equal(out[0].backend, CLAIM);  /* the built-in hugetlbfs, moved */
    assert_int_equal(out[1].backend, 0);
}

/* hp_realloc's rules, block by block. */
static struct hp_realloc_block blk(uint64_t page_size, uint64_t len, uint32_t map_flags,
                                   uint32_t pin, int forked)
{
    return (struct hp_realloc_block){page_size, len, map_flags, pin, forked};
}

static void expect_plan(struct hp_realloc_plan got, uint32_t step, uint32_t why)
{
    assert_int_equal(got.step, step);
    assert_int_equal(got.why, why);
}

static void realloc_rules(void **state)
{
    (void)state;
    const struct hp_candidate huge = {HUGETLB, 2 * M}, base = {BASE, 4 * K};
    struct hp_realloc_block b = blk(4 * K, 64 * K, 0, HP_PIN_NONE, 0);
    /* Promotion: a base-page block of at most one huge page that grows to
     * a size the selection serves with huge pages moves. */
    assert_true(hp_realloc_may_promote(&b, 4 * M, 4 * K));
    expect_plan(hp_realloc_plan(&b, 4 * M, 0, 4 * K, &huge), HP_STEP_MOVE, HP_RWHY_PROMOTE);
    expect_plan(hp_realloc_plan(&b, 4 * M, 0, 4 * K, &base), HP_STEP_RESIZE, HP_RWHY_FITS);
    expect_plan(hp_realloc_plan(&b, 4 * M, 0, 4 * K, NULL), HP_STEP_RESIZE, HP_RWHY_FITS);
    b.len = 2 * M;   /* exactly one huge page: still promoted */
    expect_plan(hp_realloc_plan(&b, 4 * M, 0, 4 * K, &huge), HP_STEP_MOVE, HP_RWHY_PROMOTE);
    b.len = 2 * M + 4 * K;  /* more than one: grows where it is */
    expect_plan(hp_realloc_plan(&b, 4 * M, 0, 4 * K, &huge), HP_STEP_RESIZE, HP_RWHY_FITS);
    b.len = 64 * K;
    assert_false(hp_realloc_may_promote(&b, 32 * K, 4 * K));  /* shrinking */
    /* HP_F_NOPOOL: a pool block is copied out, growing or shrinking (to
     * its own backend when pinned, where the map then fails); other blocks
     * resize as before. */
    struct hp_realloc_block pool = blk(2 * M, 4 * M, HP_MAP_POOL, HP_PIN_NONE, 0);
    expect_plan(hp_realloc_plan(&pool, 8 * M, HP_F_NOPOOL, 4 * K, NULL), HP_STEP_MOVE,
                HP_RWHY_NOPOOL);
    expect_plan(hp_realloc_plan(&pool, 2 * M, HP_F_NOPOOL, 4 * K, NULL), HP_STEP_MOVE,
                HP_RWHY_NOPOOL);
    expect_plan(hp_realloc_plan(&pool, 8 * M, 0, 4 * K, NULL), HP_STEP_RESIZE, HP_RWHY_FITS);
    pool.pin = HP_PIN_NAMED;
    expect_plan(hp_realloc_plan(&pool, 8 * M, HP_F_NOPOOL, 4 * K, NULL), HP_STEP_COPY_WITHIN,
                HP_RWHY_NOPOOL);
    struct hp_realloc_block thp = blk(2 * M, 4 * M, 0, HP_PIN_NONE, 0);
    expect_plan(hp_realloc_plan(&thp, 8 * M, HP_F_NOPOOL, 4 * K, NULL), HP_STEP_RESIZE,
                HP_RWHY_FITS);
    assert_string_equal(hp_realloc_why_name(HP_RWHY_NOPOOL), "no-pool");
    /* Pinned blocks (named, or HP_BACKENDS alone) are never promoted and
     * never move: a copy stays in their backend. */
    for (uint32_t pin = HP_PIN_NAMED; pin <= HP_PIN_ENV; pin++) {
        struct hp_realloc_block p = blk(4 * K, 64 * K, 0, pin, 0);
        assert_false(hp_realloc_may_promote(&p, 4 * M, 4 * K));
        expect_plan(hp_realloc_plan(&p, 4 * M, 0, 4 * K, &huge), HP_STEP_RESIZE, HP_RWHY_FITS);
        expect_plan(hp_realloc_plan(&p, 4 * M, HP_F_PAGE_2M, 4 * K, NULL), HP_STEP_COPY_WITHIN,
                    HP_RWHY_PAGE_SIZE);
        expect_plan(hp_realloc_plan(&p, 4 * M, HP_F_REQUIRE_HUGE, 4 * K, NULL),
                    HP_STEP_COPY_WITHIN, HP_RWHY_REQUIRE_HUGE);
        expect_plan(hp_realloc_after(&p, HP_ENOMEM, 0, 4 * K), HP_STEP_COPY_WITHIN,
                    HP_RWHY_RESIZE_FAILED);
        expect_plan(hp_realloc_after(&p, HP_ENOTSUP, 0, 4 * K), HP_STEP_COPY_WITHIN,
                    HP_RWHY_RESIZE_FAILED);
        p.page_size = 2 * M;
        expect_plan(hp_realloc_after(&p, HP_ENOMEM, 0, 4 * K), HP_STEP_COPY_WITHIN,
                    HP_RWHY_POOL_DRY);
        expect_plan(hp_realloc_after(&p, HP_ENOMEM, HP_F_REQUIRE_HUGE, 4 * K), HP_STEP_FAIL,
                    HP_RWHY_POOL_DRY);
    }
    /* The flags: another page size, or HP_F_REQUIRE_HUGE for base pages. */
    expect_plan(hp_realloc_plan(&b, 4 * M, HP_F_PAGE_2M, 4 * K, &huge), HP_STEP_MOVE,
                HP_RWHY_PAGE_SIZE);
    expect_plan(hp_realloc_plan(&b, 16 * K, HP_F_REQUIRE_HUGE, 4 * K, NULL), HP_STEP_MOVE,
                HP_RWHY_REQUIRE_HUGE);
    struct hp_realloc_block h = blk(2 * M, 4 * M, HP_MAP_POOL | HP_MAP_CARVABLE, HP_PIN_NONE, 0);
    expect_plan(hp_realloc_plan(&h, 8 * M, HP_F_PAGE_2M | HP_F_REQUIRE_HUGE, 4 * K, NULL),
                HP_STEP_RESIZE, HP_RWHY_FITS);
    /* A dry pool: move, unless HP_F_REQUIRE_HUGE; a failed remap: move. */
    expect_plan(hp_realloc_after(&h, HP_ENOMEM, 0, 4 * K), HP_STEP_MOVE, HP_RWHY_POOL_DRY);
    expect_plan(hp_realloc_after(&h, HP_ENOMEM, HP_F_REQUIRE_HUGE, 4 * K), HP_STEP_FAIL,
                HP_RWHY_POOL_DRY);
    expect_plan(hp_realloc_after(&h, HP_EBACKEND, 0, 4 * K), HP_STEP_MOVE,
                HP_RWHY_RESIZE_FAILED);
    expect_plan(hp_realloc_after(&b, HP_ENOMEM, 0, 4 * K), HP_STEP_MOVE, HP_RWHY_RESIZE_FAILED);
    /* Fork rules: pool pages from before a fork grow by copy but shrink in
     * place; shared memory from before a fork is never remapped. */
    h.forked = 1;
    expect_plan(hp_realloc_plan(&h, 8 * M, 0, 4 * K, NULL), HP_STEP_MOVE, HP_RWHY_POOL_FORK);
    expect_plan(hp_realloc_plan(&h, 2 * M, 0, 4 * K, NULL), HP_STEP_RESIZE, HP_RWHY_FITS);
    h.pin = HP_PIN_ENV;
    expect_plan(hp_realloc_plan(&h, 8 * M, 0, 4 * K, NULL), HP_STEP_COPY_WITHIN,
                HP_RWHY_POOL_FORK);
    struct hp_realloc_block sh = blk(4 * K, 64 * K, HP_MAP_SHARED, HP_PIN_NAMED, 0);
    expect_plan(hp_realloc_plan(&sh, 32 * K, 0, 4 * K, NULL), HP_STEP_RESIZE, HP_RWHY_FITS);
    sh.forked = 1;
    expect_plan(hp_realloc_plan(&sh, 32 * K, 0, 4 * K, NULL), HP_STEP_COPY_WITHIN,
                HP_RWHY_SHARED_FORK);
    assert_string_equal(hp_realloc_why_name(HP_RWHY_POOL_DRY), "pool-dry");
    assert_string_equal(hp_realloc_why_name(HP_RWHY_COUNT), "?");
}

/* The options a block keeps across resizes: HP_F_NOPOOL and
 * HP_F_REQUIRE_HUGE stick, the page size is kept unless the call names
 * another, the rest is the call's. */
static void realloc_flags_rule(void **state)
{
    (void)state;
    const uint64_t per_call = HP_F_NOZERO | HP_F_POPULATE | HP_F_COLLAPSE;
    assert_int_equal(hp_realloc_flags(HP_F_NOPOOL, 0), HP_F_NOPOOL);
    assert_int_equal(hp_realloc_flags(HP_F_REQUIRE_HUGE, 0), HP_F_REQUIRE_HUGE);
    assert_int_equal(hp_realloc_flags(HP_F_REQUIRE_HUGE | per_call, 0), HP_F_REQUIRE_HUGE);
    assert_int_equal(hp_realloc_flags(per_call, 0), 0);
    assert_int_equal(hp_realloc_flags(0, per_call), per_call);
    assert_int_equal(hp_realloc_flags(HP_F_PAGE_2M, 0), HP_F_PAGE_2M);
    assert_int_equal(hp_realloc_flags(HP_F_PAGE_2M, HP_F_PAGE_4K), HP_F_PAGE_4K);
    assert_int_equal(hp_realloc_flags(HP_F_PAGE_1G | HP_F_NOPOOL, HP_F_PAGE_2M | HP_F_NOZERO),
                     HP_F_PAGE_2M | HP_F_NOPOOL | HP_F_NOZERO);
    /* Given at a resize, they stick from then on. */
    uint64_t f = hp_realloc_flags(0, HP_F_NOPOOL | HP_F_POPULATE);
    assert_int_equal(f, HP_F_NOPOOL | HP_F_POPULATE);
    assert_int_equal(hp_realloc_flags(f, 0), HP_F_NOPOOL);
    f = hp_realloc_flags(HP_F_NOPOOL, HP_F_REQUIRE_HUGE | HP_F_PAGE_2M);
    assert_int_equal(hp_realloc_flags(f, HP_F_NOZERO),
                     HP_F_NOPOOL | HP_F_REQUIRE_HUGE | HP_F_PAGE_2M | HP_F_NOZERO);
}

/* A block's exclusions, kept as a mask over the backends array, leave the
 * same backends out of every later selection as the names did. */
static void excluded_mask_survives(void **state)
{
    (void)state;
    const char names[2][HP_OPT_NAME_LEN] = {"hugetlbfs", "thp-madvise"};
    struct hp_select_request r = req(64 * K, 0);
    r.exclude = names;
    r.n_exclude = 2;
    uint32_t mask = hp_select_excluded(&r, view, NB);
    assert_int_equal(mask, (1u << HUGETLB) | (1u << THP));
    /* Growth to 8 MiB under the mask alone (no names): no pool, no THP. */
    struct hp_select_request g = req(8 * M, 0);
    g.excluded = mask;
    check(&g, (struct expect[]){{MTHP, 64 * K}, {BASE, 4 * K}}, 2);
    /* A name that no backend has adds nothing; an earlier mask is kept. */
    const char other[1][HP_OPT_NAME_LEN] = {"no-such"};
    r.exclude = other;
    r.n_exclude = 1;
    r.excluded = 1u << BASE;
    assert_int_equal(hp_select_excluded(&r, view, NB), 1u << BASE);
    /* explain says why: excluded. */
    struct hp_candidate out[HP_SELECT_MAX];
    struct hp_select_note notes[64];
    unsigned n_notes = 0;
    hp_select_explain(&g, view, NB, out, HP_SELECT_MAX, notes, 64, &n_notes);
    int saw = 0;
    for (unsigned i = 0; i < n_notes; i++)
        if (notes[i].backend == HUGETLB && notes[i].page_size == 0)
            saw = notes[i].why == HP_WHY_EXCLUDED;
    assert_true(saw);
    /* A named backend in the mask is left out too (and so cannot serve). */
    g.backend = "thp-madvise";
    check(&g, NULL, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(small_block_takes_base_pages, machine),
        cmocka_unit_test_setup(mid_block_takes_largest_mthp_order, machine),
        cmocka_unit_test_setup(pool_first_and_least_waste, machine),
        cmocka_unit_test_setup(equal_waste_prefers_larger_page, machine),
        cmocka_unit_test_setup(short_pool_is_skipped, machine),
        cmocka_unit_test_setup(require_huge_drops_base_pages, machine),
        cmocka_unit_test_setup(nopool_drops_pooled_sizes, machine),
        cmocka_unit_test_setup(requested_page_size, machine),
        cmocka_unit_test_setup(named_backend, machine),
        cmocka_unit_test_setup(exclusions_and_order_override, machine),
        cmocka_unit_test_setup(unavailable_backends_are_skipped, machine),
        cmocka_unit_test(flags_page_size_decoding),
        cmocka_unit_test(named_backend_left_out_by),
        cmocka_unit_test_setup(explain_says_why, machine),
        cmocka_unit_test_setup(explain_names_each_exclusion, machine),
        cmocka_unit_test_setup(cached_pages_count_as_free, machine),
        cmocka_unit_test_setup(hp_backends_merges_with_opts, machine),
        cmocka_unit_test_setup(pin_rule, machine),
        cmocka_unit_test_setup(named_unavailable_backend, machine),
        cmocka_unit_test_setup(require_huge_with_base_only, machine),
        cmocka_unit_test_setup(pool_short_by_one_page_and_cache_credit, machine),
        cmocka_unit_test_setup(third_party_hugetlb_kind_is_automatic, machine),
        cmocka_unit_test_setup(claimed_kind_is_earned, machine),
        cmocka_unit_test(realloc_rules),
        cmocka_unit_test(realloc_flags_rule),
        cmocka_unit_test_setup(excluded_mask_survives, machine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
