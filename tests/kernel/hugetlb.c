/*
 * hugetlbfs backend, proven by the kernel's own counters: KernelPageSize and
 * *_Hugetlb in smaps, KPF_HUGE in kpageflags, the pool's free and reserved
 * pages, mincore after free. Also the pool running dry: whole pool then one
 * more, fallback blocks, and the pool drained by another process between
 * libhp's probe and its mmap (never a SIGBUS).
 *
 * Knobs (restored at exit): a 2 MiB pool of POOL pages, no 1 GiB page
 * usable (one for the 1 GiB test; kt_pool_usable holds the others, so that
 * pages reserved at boot stay), THP enabled=madvise, mTHP off.
 */
#include <hp.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kt.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define POOL 16L          /* 2 MiB pages reserved for this program */
#define NO_HUGE_SOURCES "thp-madvise,anon-orders"

extern void (*kt_mmap_hook)(size_t len, int flags);

static struct kt_snapshot before_all, after_setup;

static long pool2m(const char *file)
{
    return pool_get(2048, file);
}

/* The pool must settle at these counts (see kt_pool_wait). */
#define EXPECT_POOL(kb, free, rsvd, what)                                                          \
    do {                                                                                           \
        long got_free_, got_rsvd_;                                                                 \
        KT_CHECK(kt_pool_wait((kb), (free), (rsvd), &got_free_, &got_rsvd_) == 0,                  \
                 "%s: %lu kB pool has Free %ld Rsvd %ld, expected Free %ld Rsvd %ld", (what),      \
                 (unsigned long)(kb), got_free_, got_rsvd_, (long)(free), (long)(rsvd));          \
    } while (0)

/* After every test: nothing of ours left in the pools, and libhp's view of
 * them fresh (it re-reads pool counters at most every 100 ms otherwise, and
 * the next test must not see the pool this one emptied). */
static int teardown(void **state)
{
    (void)state;
    kt_drainers_stop_all();
    kt_free_held();
    if (kt_pool_exists(1048576) && kt_pool_unreserved(1048576) != 0)
        kt_pool_usable(1048576, 0);
    hp_reprobe();
    return 0;
}

static void expect_failure(void *p, int32_t code, const char *what)
{
    if (p)
        fail_msg("%s: expected %s, got a block (%s)", what, hp_error_name(code),
                 kt_info(p).backend);
    KT_CHECK(hp_last_error() == code, "%s: got %s (%s)", what, hp_error_name(hp_last_error()),
             hp_last_error_detail());
    KT_CHECK(hp_last_error_detail()[0] != '\0', "%s: no error detail", what);
}

static void expect_fill_ok(void *p, size_t len, unsigned char byte)
{
    size_t off = 0;
    int rc = kt_fill_verify(p, len, byte, &off);
    KT_CHECK(rc == 0, "%s at offset %zu of %zu bytes", rc < 0 ? "SIGBUS/SIGSEGV" : "wrong byte",
             off, len);
}

/*
 * A hugetlb block from start to end, with no other block of ours alive:
 * reserved at map time (Rsvd rises, Free does not move), faulted on touch
 * (Free drops, Rsvd returns), smaps and kpageflags show page size ps,
 * hp_info agrees with smaps, and hp_free unmaps and gives every page back.
 */
static void exercise_hugetlb(size_t len, const char *backend, uint64_t flags, uint64_t ps)
{
    unsigned long kb = (unsigned long)(ps >> 10);
    uint64_t mapped = kt_round_up(len, ps);
    long pages = (long)(mapped / ps), nr = pool_get(kb, "nr_hugepages");
    long held = kt_pool_held(kb);  /* reserved by us, never faulted */
    EXPECT_POOL(kb, nr, held, "before the allocation");

    char *p = kt_must_alloc(len, backend, NULL, flags);
    struct hp_block_info info = kt_info(p);
    KT_CHECK(!strcmp(info.backend, "hugetlbfs"), "served by %s", info.backend);
    KT_CHECK(info.page_size == ps, "page_size %llu", (unsigned long long)info.page_size);
    KT_CHECK(info.usable_size >= len && info.mapped_size == mapped, "usable %llu mapped %llu",
             (unsigned long long)info.usable_size, (unsigned long long)info.mapped_size);
    KT_CHECK((uintptr_t)p % ps == 0, "%p is not aligned to its page size", (void *)p);
    /* No MAP_NORESERVE, and populated before hp_alloc returns: every page
     * is taken from the pool (none left merely reserved) before any touch,
     * so no first touch can SIGBUS. */
    EXPECT_POOL(kb, nr - pages, held, "mapped (populated), not touched");
    KT_CHECK(info.huge_bytes == mapped, "huge_bytes %llu of %llu before any touch",
             (unsigned long long)info.huge_bytes, (unsigned long long)mapped);

    if (mapped <= (UINT64_C(64) << 20))
        expect_fill_ok(p, mapped, 0x5a);
    else
        touch_pages(p, len);
    EXPECT_POOL(kb, nr - pages, held, "touched");

    struct kt_vma v;
    KT_CHECK(kt_vma_of(p, &v) == 0, "no mapping in smaps");
    KT_CHECK(v.kernel_page_kb == (long)kb, "KernelPageSize %ld kB", v.kernel_page_kb);
    KT_CHECK(v.start == (uintptr_t)p && v.end == (uintptr_t)p + mapped,
             "mapping %#lx-%#lx, block %p+%llu", (unsigned long)v.start, (unsigned long)v.end,
             (void *)p, (unsigned long long)mapped);
    KT_CHECK((uint64_t)v.hugetlb_kb << 10 == mapped, "Private+Shared_Hugetlb %ld kB",
             v.hugetlb_kb);
    info = kt_info(p);
    KT_CHECK(info.huge_bytes == (uint64_t)v.hugetlb_kb << 10,
             "hp_info says %llu huge bytes, smaps %ld kB", (unsigned long long)info.huge_bytes,
             v.hugetlb_kb);
    int64_t f = kt_page_flags(p + len - 1);
    KT_CHECK(f >= 0 && (f >> KT_KPF_HUGE & 1), "page of the last byte: kpageflags %llx",
             (unsigned long long)f);

    kt_release(p);
    kt_expect_unmapped(p, mapped);
    EXPECT_POOL(kb, nr, held, "after hp_free");
}

static void hugetlb_2m_named(void **state)
{
    KT_PRECONDITIONS();
    struct hp_backend_info b;
    KT_CHECK(kt_backend("hugetlbfs", &b) == 0 && b.available, "hugetlbfs backend: %s",
             b.reason);
    exercise_hugetlb(4 * KT_2M, "hugetlbfs", 0, KT_2M);
    exercise_hugetlb(4 * KT_2M, "hugetlbfs", HP_F_PAGE_2M | HP_F_REQUIRE_HUGE, KT_2M);
}

static void hugetlb_2m_automatic(void **state)
{
    KT_PRECONDITIONS();
    /* The pool covers the request: the policy prefers it to THP. */
    exercise_hugetlb(4 * KT_2M, NULL, 0, KT_2M);
    exercise_hugetlb(POOL * KT_2M, NULL, 0, KT_2M);
}

static void hugetlb_unaligned_length(void **state)
{
    KT_PRECONDITIONS();
    /* The page holding the last byte must be huge: 2 pages + 3 base pages + 100. */
    exercise_hugetlb(2 * KT_2M + 3 * KT_4K + 100, "hugetlbfs", 0, KT_2M);
    exercise_hugetlb(100, "hugetlbfs", 0, KT_2M);
    exercise_hugetlb(3 * KT_2M - 1, NULL, 0, KT_2M);
}

static void hugetlb_free_unmaps(void **state)
{
    KT_PRECONDITIONS();
    char *p = kt_must_alloc(3 * KT_2M, "hugetlbfs", NULL, 0);
    touch_pages(p, 3 * KT_2M);
    KT_CHECK(kt_mincore_errno(p, 3 * KT_2M) == 0, "block not mapped before free");
    kt_release(p);
    for (int i = 0; i < 3; i++)
        kt_expect_unmapped(p + i * KT_2M, KT_4K);
    KT_CHECK(hp_free(p) == HP_EDOUBLEFREE, "second hp_free: %s", hp_error_name(hp_last_error()));
    EXPECT_POOL(2048, POOL, 0, "after hp_free");
}

static void hugetlb_whole_pool_then_one_more(void **state)
{
    KT_PRECONDITIONS();
    char *all = kt_must_alloc(POOL * KT_2M, "hugetlbfs", NULL, HP_F_REQUIRE_HUGE);
    touch_pages(all, POOL * KT_2M);
    EXPECT_POOL(2048, 0, 0, "whole pool taken and touched");

    expect_failure(kt_alloc(KT_2M, "hugetlbfs", NULL, HP_F_REQUIRE_HUGE), HP_ENOHUGE,
                   "one more page from hugetlbfs, huge required");
    expect_failure(kt_alloc(KT_2M, NULL, NO_HUGE_SOURCES, HP_F_REQUIRE_HUGE), HP_ENOHUGE,
                   "one more page with THP excluded, huge required");
    EXPECT_POOL(2048, 0, 0, "after the refused requests (no reservation left behind)");

    char *fb = kt_must_alloc(KT_2M, NULL, NO_HUGE_SOURCES, 0);
    KT_CHECK(!strcmp(kt_info(fb).backend, "fallback"), "served by %s", kt_info(fb).backend);
    expect_fill_ok(fb, KT_2M, 0x11);
    kt_release(fb);

    char *any = kt_must_alloc(KT_2M, NULL, NULL, 0);
    KT_CHECK(strcmp(kt_info(any).backend, "hugetlbfs"), "hugetlbfs served an empty pool");
    expect_fill_ok(any, KT_2M, 0x22);
    kt_release(any);

    kt_release(all);
    EXPECT_POOL(2048, POOL, 0, "after hp_free");

    /* The pool was last seen empty; a request naming hugetlbfs must look
     * again rather than trust that stale figure. */
    hp_reprobe();
    all = kt_must_alloc(POOL * KT_2M, "hugetlbfs", NULL, 0);
    hp_reprobe();
    kt_release(all);
    kt_release(kt_must_alloc(KT_2M, "hugetlbfs", NULL, 0));
    EXPECT_POOL(2048, POOL, 0, "after the named request on a refilled pool");
}

static void hugetlb_pool_plus_one_block(void **state)
{
    KT_PRECONDITIONS();
    size_t len = (POOL + 1) * KT_2M;
    expect_failure(kt_alloc(len, "hugetlbfs", NULL, HP_F_REQUIRE_HUGE), HP_ENOHUGE,
                   "pool+1 pages, huge required");
    KT_CHECK(strstr(hp_last_error_detail(), "hugetlbfs") != NULL,
             "the detail does not name the backend: %s", hp_last_error_detail());
    expect_failure(kt_alloc(len, NULL, NO_HUGE_SOURCES, HP_F_REQUIRE_HUGE), HP_ENOHUGE,
                   "pool+1 pages, THP excluded, huge required");
    EXPECT_POOL(2048, POOL, 0, "after the refused requests (no reservation left behind)");

    char *fb = kt_must_alloc(len, NULL, NO_HUGE_SOURCES, 0);
    KT_CHECK(!strcmp(kt_info(fb).backend, "fallback"), "served by %s", kt_info(fb).backend);
    expect_fill_ok(fb, len, 0x33);
    kt_release(fb);
    EXPECT_POOL(2048, POOL, 0, "after the fallback block");
}

static void fallback_blocks_free_independently(void **state)
{
    KT_PRECONDITIONS();
    char *all = kt_must_alloc(POOL * KT_2M, "hugetlbfs", NULL, 0);
    size_t len = 3 * KT_2M / 2 + 5;
    char *a = kt_must_alloc(len, NULL, NO_HUGE_SOURCES, 0);
    char *b = kt_must_alloc(len, NULL, NO_HUGE_SOURCES, 0);
    KT_CHECK(!strcmp(kt_info(a).backend, "fallback") && !strcmp(kt_info(b).backend, "fallback"),
             "served by %s and %s", kt_info(a).backend, kt_info(b).backend);
    size_t usable = kt_info(a).usable_size;
    expect_fill_ok(a, usable, 0xaa);
    expect_fill_ok(b, usable, 0xbb);

    size_t off;
    kt_release(a);
    kt_expect_unmapped(a, usable);
    KT_CHECK(kt_mincore_errno(b, usable) == 0, "freeing a unmapped part of b");
    KT_CHECK(kt_verify(b, usable, 0xbb, &off) == 0, "b changed at %zu after freeing a", off);

    char *c = kt_must_alloc(len, NULL, NO_HUGE_SOURCES, 0);
    expect_fill_ok(c, usable, 0xcc);
    kt_release(b);
    kt_expect_unmapped(b, usable);
    KT_CHECK(kt_verify(c, usable, 0xcc, &off) == 0, "c changed at %zu after freeing b", off);
    kt_release(c);
    kt_release(all);
    EXPECT_POOL(2048, POOL, 0, "after hp_free");
}

/* Drained between probe and map: the hook runs inside libhp's mmap call. */
static int hook_armed;
static pid_t hook_pid;
static long hook_pages;

static void drain_hook(size_t len, int flags)
{
    (void)len;
    if (!hook_armed || !(flags & MAP_HUGETLB))
        return;
    hook_armed = 0;
    hook_pid = kt_drainer_start(2048, &hook_pages);
}

static void arm_drain(void)
{
    hook_pid = 0;
    hook_pages = 0;
    hook_armed = 1;
    kt_mmap_hook = drain_hook;
}

static void disarm_drain(void)
{
    hook_armed = 0;
    kt_mmap_hook = NULL;
    KT_CHECK(hook_pid > 0, "the mmap hook never ran (pid %d): libhp did not map hugetlb pages "
             "through mmap, or the drainer failed", (int)hook_pid);
    KT_CHECK(hook_pages == POOL, "the drainer took %ld pages, expected %ld", hook_pages, POOL);
}

static void drained_between_probe_and_map(void **state)
{
    KT_PRECONDITIONS();
    size_t len = 4 * KT_2M;
    arm_drain();
    char *p = kt_alloc(len, NULL, NULL, 0);
    disarm_drain();
    KT_CHECK(p != NULL, "automatic selection failed instead of falling back: %s: %s",
             hp_error_name(hp_last_error()), hp_last_error_detail());
    KT_CHECK(strcmp(kt_info(p).backend, "hugetlbfs"), "hugetlbfs served a drained pool");
    EXPECT_POOL(2048, 0, 0, "drained; after the refused hugetlb mmap");
    expect_fill_ok(p, len, 0x44);
    kt_release(p);
    kt_drainer_stop(hook_pid);

    arm_drain();
    p = kt_alloc(len, "hugetlbfs", NULL, HP_F_REQUIRE_HUGE);
    disarm_drain();
    expect_failure(p, HP_ENOHUGE, "hugetlbfs only, huge required, pool drained after the probe");
    EXPECT_POOL(2048, 0, 0, "drained; after the refused hugetlb mmap");
    kt_drainer_stop(hook_pid);

    arm_drain();
    p = kt_alloc(len, NULL, NO_HUGE_SOURCES, 0);
    disarm_drain();
    KT_CHECK(p != NULL && !strcmp(kt_info(p).backend, "fallback"), "no fallback block: %s",
             hp_last_error_detail());
    expect_fill_ok(p, len, 0x55);
    kt_release(p);
    kt_drainer_stop(hook_pid);
    EXPECT_POOL(2048, POOL, 0, "after the drainer left");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Another process takes and returns the whole pool as fast as it can while
 * we allocate and touch every byte: each block is either reserved or not
 * hugetlb at all, never a SIGBUS. */
static void drain_race_never_sigbus(void **state)
{
    KT_PRECONDITIONS();
    pid_t churner = kt_churner_start(2048);
    KT_CHECK(churner > 0, "fork: %s", strerror((int)-churner));
    unsigned long rounds = 0, huge = 0, other = 0, refused = 0;
    size_t len = 2 * KT_2M;
    double end = now_s() + 0.8;
    while (now_s() < end || rounds < 20) {
        int named = rounds & 1;
        char *p = kt_alloc(len, named ? "hugetlbfs" : NULL, named ? NULL : NO_HUGE_SOURCES, 0);
        rounds++;
        if (!p) {
            /* Named and the pool taken: refused, from a failed mmap or from
             * a probe that saw the pool empty. */
            if (!named || (hp_last_error() != HP_ENOMEM && hp_last_error() != HP_ENOBACKEND)) {
                kt_drainer_stop(churner);
                fail_msg("allocation failed: %s: %s", hp_error_name(hp_last_error()),
                         hp_last_error_detail());
            }
            refused++;
            continue;
        }
        size_t off;
        int rc = kt_fill_verify(p, len, (unsigned char)rounds, &off);
        if (rc != 0) {
            kt_drainer_stop(churner);
            fail_msg("%s at offset %zu of a %s block", rc < 0 ? "SIGBUS" : "wrong byte", off,
                     kt_info(p).backend);
        }
        if (!strcmp(kt_info(p).backend, "hugetlbfs"))
            huge++;
        else
            other++;
        kt_release(p);
    }
    kt_drainer_stop(churner);
    kt_note("%lu rounds: %lu hugetlb blocks, %lu fallback blocks, %lu refused (pool taken)",
            rounds, huge, other, refused);
    EXPECT_POOL(2048, POOL, 0, "after the churner left");
}

static void hugetlb_1g(void **state)
{
    KT_PRECONDITIONS();
    if (!kt_pool_exists(1048576))
        KT_SKIP("this kernel has no 1 GiB hugetlb pages (%s/hugepages-1048576kB missing)",
                KT_POOLS);
    long got = kt_pool_usable(1048576, 1);
    if (got != 1) {
        kt_pool_usable(1048576, 0);
        KT_SKIP("could not reserve one 1 GiB page (the kernel gave %ld): memory too "
                "fragmented or too small", got);
    }
    hp_reprobe();  /* documented: pool changes are seen at once only after this */
    exercise_hugetlb(KT_1G, "hugetlbfs", HP_F_PAGE_1G, KT_1G);
    /* Exactly 1 GiB: no waste with either size, so the larger page wins. */
    exercise_hugetlb(KT_1G, NULL, 0, KT_1G);
    KT_CHECK(kt_pool_usable(1048576, 0) == 0, "1 GiB pool not held back again");
    hp_reprobe();
    EXPECT_POOL(2048, POOL, 0, "2 MiB pool after the 1 GiB test");
}

/* A 1 GiB block through its life: grown onto a second page (in place or
 * moved: the test says which), the pool then short (HP_F_REQUIRE_HUGE
 * fails cleanly and leaves no reservation; without it, another source
 * serves), shrunk back in place (the page returns to the pool at once),
 * freed. The bytes stay. */
static void hugetlb_1g_resize(void **state)
{
    KT_PRECONDITIONS();
    if (!kt_pool_exists(1048576))
        KT_SKIP("this kernel has no 1 GiB hugetlb pages (%s/hugepages-1048576kB missing)",
                KT_POOLS);
    long got = kt_pool_usable(1048576, 2);
    if (got != 2) {
        kt_pool_usable(1048576, 0);
        KT_SKIP("could not make two 1 GiB pages usable (the kernel gave %ld): memory too "
                "fragmented or too small", got);
    }
    hp_reprobe();
    long nr = pool_get(1048576, "nr_hugepages"), held = kt_pool_held(1048576);
    char *p = kt_must_alloc(KT_1G, "hugetlbfs", NULL, HP_F_PAGE_1G);
    struct hp_block_info info = kt_info(p);
    KT_CHECK(info.page_size == KT_1G, "page_size %llu", (unsigned long long)info.page_size);
    p[0] = 1;
    p[KT_1G - 1] = 2;
    EXPECT_POOL(1048576, nr - 1, held, "one 1 GiB block");

    char *q = kt_realloc(p, 2 * KT_1G, 0);
    KT_CHECK(q != NULL, "growth to 2 GiB: %s: %s", hp_error_name(hp_last_error()),
             hp_last_error_detail());
    info = kt_info(q);
    /* mapped_size may include address space reserved for later growth. */
    KT_CHECK(!strcmp(info.backend, "hugetlbfs") && info.page_size == KT_1G &&
                 info.usable_size >= 2 * KT_1G && info.huge_bytes == 2 * KT_1G,
             "grown: %s, page_size %llu, usable %llu, huge %llu", info.backend,
             (unsigned long long)info.page_size, (unsigned long long)info.usable_size,
             (unsigned long long)info.huge_bytes);
    KT_CHECK(q[0] == 1 && q[KT_1G - 1] == 2, "bytes lost in the growth");
    q[2 * KT_1G - 1] = 3;
    EXPECT_POOL(1048576, nr - 2, held, "grown to 2 GiB");
    kt_note("1 GiB block grown to 2 GiB %s", q == p ? "in place" : "by a move");

    expect_failure(kt_alloc(KT_1G, "hugetlbfs", NULL, HP_F_PAGE_1G | HP_F_REQUIRE_HUGE),
                   HP_ENOHUGE, "a third 1 GiB page, huge required");
    EXPECT_POOL(1048576, nr - 2, held, "after the refused request (no reservation left)");
    char *other = kt_must_alloc(KT_1G, NULL, NULL, 0);
    info = kt_info(other);
    KT_CHECK(info.page_size < KT_1G, "the 1 GiB pool is empty, yet %s gave %llu-byte pages",
             info.backend, (unsigned long long)info.page_size);
    kt_release(other);

    char *s = kt_realloc(q, KT_1G, 0);
    KT_CHECK(s == q, "shrinking moved the block (%p to %p)", (void *)q, (void *)s);
    EXPECT_POOL(1048576, nr - 1, held, "shrunk to 1 GiB: its second page is back in the pool");
    KT_CHECK(s[0] == 1 && s[KT_1G - 1] == 2, "bytes lost in the shrink");

    kt_release(s);
    EXPECT_POOL(1048576, nr, held, "after hp_free");
    KT_CHECK(kt_pool_usable(1048576, 0) == 0, "1 GiB pool not held back again");
    hp_reprobe();
}

static void pool_snapshot_identical(void **state)
{
    KT_PRECONDITIONS();
    teardown(state);
    kt_expect_restored(&after_setup, &before_all);
}

static void setup(void)
{
    if (kt_need_root("hugetlb pools and THP knobs"))
        return;
    if (!kt_pool_exists(2048)) {
        snprintf(kt_skip_all, sizeof(kt_skip_all), "no 2 MiB hugetlb pages (%s missing)",
                 KT_POOLS "/hugepages-2048kB");
        return;
    }
    if (kt_lock(60))
        return;
    kt_snapshot_take(&before_all);
    if (kt_thp_knob("enabled", "madvise") || kt_mthp_all("never") ||
        (kt_pool_exists(1048576) && kt_pool_usable_exact(1048576, 0)) ||
        kt_pool_exact(2048, POOL))
        return;
    if (pool2m("free_hugepages") != POOL || pool2m("resv_hugepages") != 0) {
        snprintf(kt_skip_all, sizeof(kt_skip_all),
                 "another process holds pages of the 2 MiB pool (free %ld, rsvd %ld)",
                 pool2m("free_hugepages"), pool2m("resv_hugepages"));
        return;
    }
    kt_snapshot_take(&after_setup);
}

int main(void)
{
    kt_backends_only();
    setup();
    if (getenv("KT_FILTER"))  /* run some tests only: KT_FILTER='*1g*' */
        cmocka_set_test_filter(getenv("KT_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(hugetlb_2m_named, teardown),
        cmocka_unit_test_teardown(hugetlb_2m_automatic, teardown),
        cmocka_unit_test_teardown(hugetlb_unaligned_length, teardown),
        cmocka_unit_test_teardown(hugetlb_free_unmaps, teardown),
        cmocka_unit_test_teardown(hugetlb_whole_pool_then_one_more, teardown),
        cmocka_unit_test_teardown(hugetlb_pool_plus_one_block, teardown),
        cmocka_unit_test_teardown(fallback_blocks_free_independently, teardown),
        cmocka_unit_test_teardown(drained_between_probe_and_map, teardown),
        cmocka_unit_test_teardown(drain_race_never_sigbus, teardown),
        cmocka_unit_test_teardown(hugetlb_1g, teardown),
        cmocka_unit_test_teardown(hugetlb_1g_resize, teardown),
        cmocka_unit_test(pool_snapshot_identical),
    };
    return cmocka_run_group_tests_name("kernel-hugetlb", tests, NULL, NULL);
}
