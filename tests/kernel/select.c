/*
 * The selection policy on a real machine with every source switched on: a
 * 2 MiB pool, a 1 GiB pool (when one page can be reserved), THP madvise and
 * 64 KiB mTHP madvise (where the kernel has mTHP, Linux 6.8+; without it the
 * 64 KiB checks skip and the rest runs). The kernel says which page size each block really
 * got (smaps KernelPageSize, the pools' reservations), so a 2 MiB + 4 KiB
 * request that took a 1 GiB page cannot hide. One check runs the pure
 * policy (hp_select) on records copied from this machine's probe.
 */
#include <hp.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kt.h"
#include "loader.h"
#include "select.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POOL 8L

static struct kt_snapshot before_all, after_setup;
static int have_1g;  /* one 1 GiB page reserved */
static int have_mthp;  /* mTHP controls (Linux 6.8+): 64 KiB set to madvise */
#define NEED_MTHP()                                                                                \
    do {                                                                                           \
        if (!have_mthp)                                                                            \
            KT_SKIP("no 64 KiB mTHP controls (%s/hugepages-64kB; Linux 6.8+)", KT_THP);          \
    } while (0)

static int teardown(void **state)
{
    (void)state;
    kt_free_held();
    if (!kt_skip_all[0] && pool_get(2048, "nr_hugepages") != POOL) {
        pool_set(2048, POOL);
        hp_reprobe();
    }
    return 0;
}

/* Allocate automatically and check who served it with which page size;
 * the block is touched and smaps must agree on the page size for hugetlb. */
static void expect_choice(size_t len, uint64_t flags, const char *backend, uint64_t page_size)
{
    char *p = kt_must_alloc(len, NULL, NULL, flags);
    struct hp_block_info info = kt_info(p);
    KT_CHECK(!strcmp(info.backend, backend) && info.page_size == page_size,
             "%zu bytes, flags 0x%llx: served by %s with %llu KiB pages, expected %s with %llu KiB",
             len, (unsigned long long)flags, info.backend,
             (unsigned long long)(info.page_size >> 10), backend,
             (unsigned long long)(page_size >> 10));
    p[0] = 1;
    p[len - 1] = 1;
    struct kt_vma v;
    KT_CHECK(kt_vma_of(p + len - 1, &v) == 0, "no mapping");
    long want_kb = !strcmp(backend, "hugetlbfs") ? (long)(page_size >> 10) : 4;
    KT_CHECK(v.kernel_page_kb == want_kb, "%zu bytes: KernelPageSize %ld kB, expected %ld",
             len, v.kernel_page_kb, want_kb);
    kt_release(p);
}

static void two_mib_plus_4k_never_takes_1g(void **state)
{
    KT_PRECONDITIONS();
    if (!have_1g)
        KT_SKIP("no 1 GiB page could be reserved (%s/hugepages-1048576kB)", KT_POOLS);
    /* Both pools can serve it: 2 pages of 2 MiB waste 2 MiB - 4 KiB, one
     * 1 GiB page would waste 1022 MiB. */
    expect_choice(KT_2M + KT_4K, 0, "hugetlbfs", KT_2M);
    KT_CHECK(pool_get(1048576, "free_hugepages") == 1 + kt_pool_held(1048576) &&
                 kt_pool_unreserved(1048576) == 1,
             "the 1 GiB page was touched or reserved");
    /* Without the 2 MiB pool the 1 GiB page is still not worth it: THP. */
    KT_CHECK(pool_set(2048, 0) == 0, "2 MiB pool did not empty");
    hp_reprobe();
    expect_choice(KT_2M + KT_4K, 0, "thp-madvise", KT_2M);
    KT_CHECK(kt_pool_unreserved(1048576) == 1, "the 1 GiB page was reserved");
}

static void exactly_1g_takes_1g(void **state)
{
    KT_PRECONDITIONS();
    if (!have_1g)
        KT_SKIP("no 1 GiB page could be reserved (%s/hugepages-1048576kB)", KT_POOLS);
    expect_choice(KT_1G, 0, "hugetlbfs", KT_1G);
    /* Asked for by flags, the 1 GiB page serves a small block too. */
    expect_choice(KT_2M + KT_4K, HP_F_PAGE_1G, "hugetlbfs", KT_1G);
}

static void pool_preferred_only_when_it_covers_the_block(void **state)
{
    KT_PRECONDITIONS();
    expect_choice(POOL * KT_2M, 0, "hugetlbfs", KT_2M);
    /* One page short: the pool is not used at all (no partial reservation). */
    char *p = kt_must_alloc(POOL * KT_2M + 1, NULL, NULL, 0);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    KT_CHECK(hp_info(p, &info) == HP_OK && !strcmp(info.backend, "thp-madvise"),
             "pool+1 bytes: served by %s", info.backend);
    KT_CHECK(pool_get(2048, "resv_hugepages") == 0 && pool_get(2048, "free_hugepages") == POOL,
             "the pool was touched: Rsvd %ld Free %ld", pool_get(2048, "resv_hugepages"),
             pool_get(2048, "free_hugepages"));
    kt_release(p);
}

static void small_requests(void **state)
{
    KT_PRECONDITIONS();
    NEED_MTHP();
    expect_choice(KT_2M, 0, "hugetlbfs", KT_2M);
    expect_choice(KT_2M / 2, 0, "anon-orders", KT_64K);
    expect_choice(KT_64K, 0, "anon-orders", KT_64K);
    expect_choice(KT_64K - KT_4K, 0, "fallback", KT_4K);
    expect_choice(1, 0, "fallback", KT_4K);
    char *p = hp_alloc(KT_64K - KT_4K, HP_F_REQUIRE_HUGE);
    KT_CHECK(p == NULL && hp_last_error() == HP_ENOHUGE, "60 KiB, huge required: %s",
             p ? "got a block" : hp_error_name(hp_last_error()));
}

static void requested_page_sizes(void **state)
{
    KT_PRECONDITIONS();
    NEED_MTHP();
    expect_choice(4 * KT_2M, HP_F_PAGE_64K, "anon-orders", KT_64K);
    expect_choice(4 * KT_2M, HP_F_PAGE_4K, "fallback", KT_4K);
    char *p = kt_must_alloc(4 * KT_2M, NULL, "hugetlbfs", HP_F_PAGE_2M);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    KT_CHECK(hp_info(p, &info) == HP_OK && !strcmp(info.backend, "thp-madvise") &&
                 info.requested_page_size == KT_2M,
             "2 MiB pages, hugetlbfs excluded: %s", info.backend);
    kt_release(p);
}

/* The node /proc/self/numa_maps gives for the mapping that holds addr (its
 * one "N<node>=<pages>" entry), -1 if it lists none, -2 if several. */
static int numa_maps_node(const void *addr)
{
    struct kt_vma v;
    FILE *f = fopen("/proc/self/numa_maps", "r");
    if (!f || kt_vma_of(addr, &v) != 0) {
        if (f)
            fclose(f);
        return -1;
    }
    char line[1024];
    int node = -1;
    while (fgets(line, sizeof(line), f)) {
        if (strtoull(line, NULL, 16) != v.start)
            continue;
        for (char *t = strstr(line, " N"); t; t = strstr(t + 2, " N")) {
            int n;
            if (sscanf(t, " N%d=", &n) == 1)
                node = node == -1 ? n : -2;
        }
        break;
    }
    fclose(f);
    return node;
}

/* Every built-in answers the query op: hp_info's numa_node is the node the
 * kernel put the block's pages on (numa_maps agrees), and no descriptor. */
static void builtins_report_numa_node(void **state)
{
    KT_PRECONDITIONS();
    if (access("/proc/self/numa_maps", R_OK) != 0) {
        kt_note("skipped: no /proc/self/numa_maps (kernel without CONFIG_NUMA)");
        return;
    }
    static const struct {
        const char *backend;
        size_t len;
        uint64_t flags;
    } cases[] = {{"hugetlbfs", 2 * KT_2M, HP_F_PAGE_2M}, {"thp-madvise", 2 * KT_2M, 0},
                 {"anon-orders", 4 * KT_64K, HP_F_PAGE_64K}, {"fallback", 4 * KT_4K, 0}};
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (!have_mthp && !strcmp(cases[i].backend, "anon-orders")) {
            kt_note("anon-orders: no mTHP controls (Linux 6.8+), not checked");
            continue;
        }
        char *p = kt_must_alloc(cases[i].len, cases[i].backend, NULL,
                                cases[i].flags | HP_F_POPULATE);
        struct hp_block_info info = kt_info(p);
        int want = numa_maps_node(p);
        kt_note("%s: numa_node %d, numa_maps N%d, fd %d", cases[i].backend, info.numa_node, want,
                info.fd);
        KT_CHECK(want >= 0 && info.numa_node == want && info.fd == -1 && info.fd_offset == 0,
                 "%s: hp_info numa_node %d fd %d, numa_maps says node %d", cases[i].backend,
                 info.numa_node, info.fd, want);
        kt_release(p);
    }
}

/* The pure policy, fed this machine's own probe results. */
static void policy_on_this_machines_records(void **state)
{
    KT_PRECONDITIONS();
    struct hp_core *c = hp_core();
    struct hp_backend_caps caps[HP_MAX_BACKENDS];
    struct hp_select_backend view[HP_MAX_BACKENDS];
    hp_reprobe();
    for (unsigned i = 0; i < c->n; i++) {
        view[i].name = c->backends[i].ops ? c->backends[i].name : NULL;
        view[i].kind = c->backends[i].kind;
        view[i].caps = NULL;
        if (c->backends[i].ops) {
            hp_backend_caps_now(&c->backends[i], UINT64_MAX, 0, &caps[i]);
            view[i].caps = &caps[i];
        }
    }
    struct {
        uint64_t len;
        const char *first;
        uint64_t first_ps;
    } cases[] = {
        {KT_2M + KT_4K, "hugetlbfs", KT_2M},
        {KT_1G, "hugetlbfs", KT_1G},
        {KT_1G + KT_2M, "thp-madvise", KT_2M},  /* neither pool covers it */
        {KT_2M / 2, "anon-orders", KT_64K},
        {KT_4K, "fallback", KT_4K},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(*cases); k++) {
        if ((cases[k].first_ps == KT_1G && !have_1g) || (cases[k].first_ps == KT_64K && !have_mthp))
            continue;
        struct hp_select_request req = {.len = cases[k].len, .base_page_size = KT_4K};
        struct hp_candidate out[HP_SELECT_MAX];
        unsigned n = hp_select(&req, view, c->n, out, HP_SELECT_MAX);
        KT_CHECK(n > 0, "no candidate for %llu bytes", (unsigned long long)cases[k].len);
        KT_CHECK(!strcmp(view[out[0].backend].name, cases[k].first) &&
                     out[0].page_size == cases[k].first_ps,
                 "%llu bytes: first choice %s/%llu KiB, expected %s/%llu KiB",
                 (unsigned long long)cases[k].len, view[out[0].backend].name,
                 (unsigned long long)(out[0].page_size >> 10), cases[k].first,
                 (unsigned long long)(cases[k].first_ps >> 10));
        for (unsigned i = 0; i < n; i++)
            KT_CHECK(!(cases[k].len < KT_1G && out[i].page_size == KT_1G),
                     "%llu bytes: a 1 GiB page is candidate %u", (unsigned long long)cases[k].len,
                     i);
        KT_CHECK(!strcmp(view[out[n - 1].backend].name, "fallback"),
                 "%llu bytes: base pages are not the last resort",
                 (unsigned long long)cases[k].len);
    }
}

static void pool_snapshot_identical(void **state)
{
    KT_PRECONDITIONS();
    teardown(state);
    kt_expect_restored(&after_setup, &before_all);
}

static void setup(void)
{
    if (kt_need_root("pools and THP knobs"))
        return;
    if (!kt_pool_exists(2048)) {
        snprintf(kt_skip_all, sizeof(kt_skip_all), "needs 2 MiB hugetlb pages (%s missing)",
                 KT_POOLS "/hugepages-2048kB");
        return;
    }
    have_mthp = access(KT_THP "/hugepages-64kB/enabled", F_OK) == 0;
    if (!have_mthp)
        kt_note("no mTHP controls (Linux 6.8+): the 64 KiB checks skip");
    if (kt_lock(30))
        return;
    kt_snapshot_take(&before_all);
    if (kt_thp_knob("enabled", "madvise") || kt_thp_knob("defrag", "madvise") ||
        (have_mthp && (kt_thp_knob("hugepages-2048kB/enabled", "inherit") ||
                       kt_mthp_all("never") || kt_thp_knob("hugepages-64kB/enabled", "madvise"))) ||
        kt_pool_exact(2048, POOL))
        return;
    if (kt_pool_exists(1048576)) {
        long got = kt_pool_usable(1048576, 1);  /* holds the others: see kt.h */
        have_1g = got == 1;
        if (!have_1g) {
            kt_note("1 GiB checks will skip: the kernel gave %ld of 1 page", got);
            kt_pool_usable(1048576, 0);
        }
    }
    kt_snapshot_take(&after_setup);
}

int main(void)
{
    kt_backends_only();
    setup();
    if (getenv("KT_FILTER"))
        cmocka_set_test_filter(getenv("KT_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(two_mib_plus_4k_never_takes_1g, teardown),
        cmocka_unit_test_teardown(exactly_1g_takes_1g, teardown),
        cmocka_unit_test_teardown(pool_preferred_only_when_it_covers_the_block, teardown),
        cmocka_unit_test_teardown(small_requests, teardown),
        cmocka_unit_test_teardown(requested_page_sizes, teardown),
        cmocka_unit_test_teardown(policy_on_this_machines_records, teardown),
        cmocka_unit_test_teardown(builtins_report_numa_node, teardown),
        cmocka_unit_test(pool_snapshot_identical),
    };
    return cmocka_run_group_tests_name("kernel-select", tests, NULL, NULL);
}
