/*
 * anon-orders backend (multi-size THP), proven by the kernel: the delta of
 * hugepages-64kB/stats/anon_fault_alloc, and pagemap + kpageflags showing
 * every 64 KiB chunk of the block as exactly one 64 KiB folio (a head page
 * and 15 tails on contiguous frames), with no PMD THP (AnonHugePages 0).
 *
 * This is the case only anon-orders serves: the 2 MiB THP size off
 * (hugepages-2048kB=never) and 64 KiB on (madvise; always and inherit in
 * fresh processes). Knobs restored at exit.
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
#include <unistd.h>

static struct kt_snapshot before_all, after_setup;

/* What the kernel must show for a touched anon-orders block of 64 KiB
 * folios. Shared with the fresh-process checks, so it returns a message
 * instead of failing: NULL if all is well. */
static const char *check_mthp_block(char *p, size_t len, uint64_t flags, int advised,
                                    char *why, size_t cap)
{
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    uint64_t usable = kt_round_up(len, KT_4K), chunks = usable / KT_64K;
    long before = mthp_stat(64, "anon_fault_alloc");
    struct kt_folios f;
    struct kt_vma v;
#define WHY(...) return snprintf(why, cap, __VA_ARGS__), why
    if (hp_info(p, &info) != HP_OK)
        WHY("hp_info: %s", hp_last_error_detail());
    if (strcmp(info.backend, "anon-orders") || info.page_size != KT_64K ||
        info.usable_size != usable)
        WHY("served by %s, page_size %llu, usable %llu", info.backend,
            (unsigned long long)info.page_size, (unsigned long long)info.usable_size);
    if ((uintptr_t)p % KT_64K)
        WHY("%p is not aligned to 64 KiB", (void *)p);
    if (kt_vma_of(p, &v) != 0)
        WHY("no mapping in smaps");
    if (!!strstr(v.vmflags, " hg") != advised)
        WHY("64 KiB is %s, but VmFlags%s", advised ? "madvise" : "always", v.vmflags);
    if (kt_folio_scan(p, usable, KT_64K, &f) != 0)
        WHY("pagemap/kpageflags unreadable");
    if (!(flags & HP_F_POPULATE) && f.present)
        WHY("%llu pages present before any touch", (unsigned long long)f.present);

    touch_pages(p, len);
    long after = mthp_stat(64, "anon_fault_alloc");
    if (kt_folio_scan(p, usable, KT_64K, &f) != 0)
        WHY("pagemap/kpageflags unreadable");
    if (f.exact_chunks != chunks)
        WHY("%llu of %llu chunks are exactly one 64 KiB folio (%llu of %llu pages in large "
            "folios)", (unsigned long long)f.exact_chunks, (unsigned long long)chunks,
            (unsigned long long)f.in_large, (unsigned long long)f.present);
    if (!(flags & HP_F_POPULATE) && (after < 0 || (uint64_t)(after - before) < chunks))
        WHY("hugepages-64kB/stats/anon_fault_alloc rose by %ld, expected at least %llu",
            after - before, (unsigned long long)chunks);
    if (kt_vma_of(p, &v) != 0 || v.anon_huge_kb != 0 || v.kernel_page_kb != 4)
        WHY("AnonHugePages %ld kB (PMD THP is off), KernelPageSize %ld kB", v.anon_huge_kb,
            v.kernel_page_kb);
    if (hp_info(p, &info) != HP_OK || info.huge_bytes != f.in_large * KT_4K ||
        info.huge_bytes != chunks * KT_64K)
        WHY("hp_info says %llu huge bytes, kpageflags %llu", (unsigned long long)info.huge_bytes,
            (unsigned long long)(f.in_large * KT_4K));
#undef WHY
    return NULL;
}

static void exercise_mthp(size_t len, const char *backend, uint64_t flags)
{
    char why[256];
    long before = mthp_stat(64, "anon_fault_alloc");
    char *p = kt_must_alloc(len, backend, NULL, flags);
    const char *bad = check_mthp_block(p, len, flags, 1, why, sizeof(why));
    KT_CHECK(bad == NULL, "%zu bytes: %s", len, bad);
    long after = mthp_stat(64, "anon_fault_alloc");
    uint64_t chunks = kt_round_up(len, KT_4K) / KT_64K;
    KT_CHECK((uint64_t)(after - before) >= chunks, "anon_fault_alloc rose by %ld over the block's "
             "life, expected at least %llu", after - before, (unsigned long long)chunks);
    kt_release(p);
    kt_expect_unmapped(p, kt_round_up(len, KT_4K));
}

static void mthp_named(void **state)
{
    KT_PRECONDITIONS();
    struct hp_backend_info b;
    KT_CHECK(kt_backend("anon-orders", &b) == 0 && b.available, "anon-orders: %s", b.reason);
    KT_CHECK(strstr(b.reason, "64K=madvise") != NULL, "probe: %s", b.reason);
    KT_CHECK(b.n_page_sizes == 1 && b.page_sizes[0] == KT_64K, "%u sizes, first %llu",
             b.n_page_sizes, (unsigned long long)b.page_sizes[0]);
    exercise_mthp(4 * KT_2M / 2, "anon-orders", 0);
    exercise_mthp(KT_64K, "anon-orders", HP_F_PAGE_64K);
}

static void mthp_automatic(void **state)
{
    KT_PRECONDITIONS();
    /* No pool, no PMD THP: anon-orders is the only source of large pages. */
    exercise_mthp(4 * KT_2M, NULL, 0);
    exercise_mthp(KT_2M / 2, NULL, HP_F_REQUIRE_HUGE);
}

static void mthp_populate(void **state)
{
    KT_PRECONDITIONS();
    exercise_mthp(2 * KT_2M, "anon-orders", HP_F_POPULATE);
}

static void mthp_unaligned_length(void **state)
{
    KT_PRECONDITIONS();
    /* Five whole 64 KiB folios; the 100-byte tail is a base page. */
    exercise_mthp(5 * KT_64K + 100, "anon-orders", 0);
    exercise_mthp(KT_2M - 1, NULL, 0);
}

static void mthp_only_source_when_2m_is_off(void **state)
{
    KT_PRECONDITIONS();
    struct hp_backend_info b;
    KT_CHECK(kt_backend("thp-madvise", &b) == 0 && !b.available && strstr(b.reason, "never"),
             "hugepages-2048kB=never, but thp-madvise: available %u, %s", b.available, b.reason);
    KT_CHECK(kt_backend("hugetlbfs", &b) == 0 && !b.available, "hugetlbfs available: %s",
             b.reason);
    struct hp_block_info info;
    char *p = kt_must_alloc(4 * KT_2M, NULL, NULL, HP_F_REQUIRE_HUGE);
    info = kt_info(p);
    KT_CHECK(!strcmp(info.backend, "anon-orders"), "huge required: served by %s", info.backend);
    kt_release(p);
    p = kt_must_alloc(16 * KT_4K, NULL, NULL, 0);  /* a 64 KiB page fits: still anon-orders */
    KT_CHECK(!strcmp(kt_info(p).backend, "anon-orders"), "64 KiB: served by %s",
             kt_info(p).backend);
    kt_release(p);
    p = kt_must_alloc(8 * KT_4K, NULL, NULL, 0);   /* smaller than the page: base pages */
    KT_CHECK(!strcmp(kt_info(p).backend, "fallback"), "32 KiB: served by %s",
             kt_info(p).backend);
    kt_release(p);
}

static int child_main(const char *mode)
{
    char why[256], reason[64];
    int advised = !strcmp(mode, "inherit");  /* inherit resolves to the top-level madvise */
    snprintf(reason, sizeof(reason), "64K=%s", advised ? "madvise" : "always");
    struct hp_backend_info b;
    if (kt_backend("anon-orders", &b) != 0 || !b.available || !strstr(b.reason, reason)) {
        kt_note("child %s: anon-orders probe says: %s (expected %s)", mode, b.reason, reason);
        return 1;
    }
    char *p = hp_alloc(4 * KT_2M, 0);
    if (!p) {
        kt_note("child %s: hp_alloc: %s", mode, hp_last_error_detail());
        return 1;
    }
    const char *bad = check_mthp_block(p, 4 * KT_2M, 0, advised, why, sizeof(why));
    if (bad)
        kt_note("child %s: %s", mode, bad);
    hp_free(p);
    return bad ? 1 : 0;
}

static void mthp_in_a_fresh_process(void **state)
{
    KT_PRECONDITIONS();
    static const char *modes[] = {"always", "inherit"};
    for (size_t i = 0; i < 2; i++) {
        KT_CHECK(kt_thp_knob("hugepages-64kB/enabled", modes[i]) == 0, "%s", kt_skip_all);
        int rc = kt_run_child(modes[i]);
        KT_CHECK(kt_thp_knob("hugepages-64kB/enabled", "madvise") == 0, "%s", kt_skip_all);
        KT_CHECK(rc == 0, "hugepages-64kB=%s: child exited with %d", modes[i], rc);
    }
}

static void pool_snapshot_identical(void **state)
{
    KT_PRECONDITIONS();
    kt_free_held();
    kt_expect_restored(&after_setup, &before_all);
}

static void setup(void)
{
    if (kt_need_root("mTHP knobs"))
        return;
    if (access(KT_THP "/hugepages-64kB/enabled", F_OK) != 0 ||
        access(KT_THP "/hugepages-64kB/stats/anon_fault_alloc", F_OK) != 0) {
        snprintf(kt_skip_all, sizeof(kt_skip_all),
                 "no 64 KiB mTHP controls or stats (%s/hugepages-64kB; needs Linux 6.8+)", KT_THP);
        return;
    }
    if (access("/proc/kpageflags", R_OK) != 0) {
        snprintf(kt_skip_all, sizeof(kt_skip_all), "/proc/kpageflags unreadable: %s",
                 strerror(errno));
        return;
    }
    if (kt_lock(30))
        return;
    kt_snapshot_take(&before_all);
    if (kt_thp_knob("enabled", "madvise") || kt_thp_knob("defrag", "madvise") ||
        kt_thp_knob("hugepages-2048kB/enabled", "never") || kt_mthp_all("never") ||
        kt_thp_knob("hugepages-64kB/enabled", "madvise") ||
        (kt_pool_exists(2048) && kt_pool_exact(2048, 0)) ||
        (kt_pool_exists(1048576) && kt_pool_usable_exact(1048576, 0)))
        return;
    kt_snapshot_take(&after_setup);
}

int main(int argc, char **argv)
{
    kt_backends_only();
    const char *mode = kt_child_mode(argc, argv);
    if (mode)
        return child_main(mode);
    setup();
    if (getenv("KT_FILTER"))
        cmocka_set_test_filter(getenv("KT_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(mthp_named, kt_teardown_held),
        cmocka_unit_test_teardown(mthp_automatic, kt_teardown_held),
        cmocka_unit_test_teardown(mthp_populate, kt_teardown_held),
        cmocka_unit_test_teardown(mthp_unaligned_length, kt_teardown_held),
        cmocka_unit_test_teardown(mthp_only_source_when_2m_is_off, kt_teardown_held),
        cmocka_unit_test_teardown(mthp_in_a_fresh_process, kt_teardown_held),
        cmocka_unit_test(pool_snapshot_identical),
    };
    return cmocka_run_group_tests_name("kernel-mthp", tests, NULL, NULL);
}
