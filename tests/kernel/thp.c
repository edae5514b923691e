/*
 * thp-madvise backend, proven by the kernel: AnonHugePages and VmFlags "hg"
 * in smaps, KPF_THP in kpageflags, mincore after free. MADV_POPULATE_WRITE
 * for HP_F_POPULATE, MADV_COLLAPSE for HP_F_COLLAPSE, and the probe of
 * enabled=never and prctl(PR_SET_THP_DISABLE) in fresh processes.
 *
 * Knobs (restored at exit): THP enabled=madvise, defrag=madvise,
 * hugepages-2048kB=inherit, every smaller mTHP size never, both hugetlb
 * pools empty (so automatic selection has THP as its best choice).
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
#include <sys/prctl.h>
#include <unistd.h>

static struct kt_snapshot before_all, after_setup;

/* A test that failed half-way may leave a block or THP switched off. */
static int teardown(void **state)
{
    (void)state;
    kt_free_held();
    char raw[128];
    if (!kt_skip_all[0] && knob_get(KT_THP "/enabled", raw, sizeof(raw)) == 0 &&
        !strstr(raw, "[madvise]")) {
        knob_set(KT_THP "/enabled", "madvise");
        hp_reprobe();
    }
    return 0;
}

/* smaps of the block's own mapping; the block must be exactly one VMA. */
static struct kt_vma vma_of_block(const char *p, uint64_t len)
{
    struct kt_vma v;
    KT_CHECK(kt_vma_of(p, &v) == 0, "no mapping in smaps");
    KT_CHECK(v.start == (uintptr_t)p && v.end == (uintptr_t)p + len,
             "mapping %#lx-%#lx is not the block %p+%llu", (unsigned long)v.start,
             (unsigned long)v.end, (const void *)p, (unsigned long long)len);
    return v;
}

/*
 * A THP block: PMD-aligned, marked VM_HUGEPAGE ("hg"), every whole PMD a
 * huge page once touched (AnonHugePages, KPF_THP), hp_info agrees with
 * smaps, and hp_free unmaps it.
 */
static void exercise_thp(size_t len, const char *backend, uint64_t flags)
{
    char *p = kt_must_alloc(len, backend, NULL, flags);
    struct hp_block_info info = kt_info(p);
    uint64_t usable = kt_round_up(len, KT_4K), whole = usable / KT_2M * KT_2M;
    KT_CHECK(!strcmp(info.backend, "thp-madvise"), "served by %s", info.backend);
    KT_CHECK(info.page_size == KT_2M, "page_size %llu", (unsigned long long)info.page_size);
    KT_CHECK(info.usable_size == usable, "usable %llu", (unsigned long long)info.usable_size);
    KT_CHECK((uintptr_t)p % KT_2M == 0, "%p is not PMD-aligned", (void *)p);
    struct kt_vma v = vma_of_block(p, usable);
    KT_CHECK(strstr(v.vmflags, " hg") != NULL, "no MADV_HUGEPAGE: VmFlags%s", v.vmflags);
    if (flags & HP_F_POPULATE) {
        KT_CHECK((uint64_t)v.rss_kb << 10 == usable, "populated, but Rss %ld kB", v.rss_kb);
        KT_CHECK((uint64_t)v.anon_huge_kb << 10 == whole, "populated: AnonHugePages %ld kB",
                 v.anon_huge_kb);
    } else {
        KT_CHECK(v.rss_kb == 0 && info.huge_bytes == 0, "Rss %ld kB before any touch",
                 v.rss_kb);
    }

    touch_pages(p, len);
    v = vma_of_block(p, usable);
    KT_CHECK((uint64_t)v.anon_huge_kb << 10 == whole,
             "AnonHugePages %ld kB, expected %llu kB (every whole PMD)", v.anon_huge_kb,
             (unsigned long long)(whole >> 10));
    KT_CHECK(v.kernel_page_kb == 4, "KernelPageSize %ld kB", v.kernel_page_kb);
    info = kt_info(p);
    KT_CHECK(info.huge_bytes == (uint64_t)v.anon_huge_kb << 10,
             "hp_info says %llu huge bytes, smaps AnonHugePages %ld kB",
             (unsigned long long)info.huge_bytes, v.anon_huge_kb);
    if (whole) {
        int64_t f = kt_page_flags(p + whole - 1);
        KT_CHECK(f >= 0 && (f >> KT_KPF_THP & 1), "last whole PMD: kpageflags %llx",
                 (unsigned long long)f);
    }

    kt_release(p);
    kt_expect_unmapped(p, usable);
}

static void thp_named(void **state)
{
    KT_PRECONDITIONS();
    struct hp_backend_info b;
    KT_CHECK(kt_backend("thp-madvise", &b) == 0 && b.available, "thp-madvise: %s", b.reason);
    KT_CHECK(strstr(b.reason, "enabled=madvise") && strstr(b.reason, "defrag=madvise"),
             "the probe does not report the knobs: %s", b.reason);
    exercise_thp(8 * KT_2M / 2, "thp-madvise", 0);
    exercise_thp(4 * KT_2M, "thp-madvise", HP_F_PAGE_2M | HP_F_REQUIRE_HUGE);
}

static void thp_automatic(void **state)
{
    KT_PRECONDITIONS();
    /* Both pools empty, no mTHP: THP is the best source for >= one PMD. */
    exercise_thp(4 * KT_2M, NULL, 0);
    exercise_thp(KT_2M, NULL, HP_F_REQUIRE_HUGE);
}

static void thp_populate(void **state)
{
    KT_PRECONDITIONS();
    exercise_thp(4 * KT_2M, "thp-madvise", HP_F_POPULATE);
    exercise_thp(4 * KT_2M + 3 * KT_4K, NULL, HP_F_POPULATE);
}

static void thp_unaligned_length(void **state)
{
    KT_PRECONDITIONS();
    /* The tail past the last whole PMD stays in base pages. */
    exercise_thp(2 * KT_2M + 12345, "thp-madvise", 0);
    exercise_thp(3 * KT_2M - 1, NULL, 0);
}

static void thp_small_requests(void **state)
{
    KT_PRECONDITIONS();
    struct {
        size_t len;
        const char *backend;
    } cases[] = {
        {KT_2M, "thp-madvise"},
        {KT_2M - KT_4K, "fallback"},  /* below one PMD THP would waste most of a page */
        {KT_64K, "fallback"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        char *p = kt_must_alloc(cases[i].len, NULL, NULL, 0);
        struct hp_block_info info = kt_info(p);
        KT_CHECK(!strcmp(info.backend, cases[i].backend), "%zu bytes: served by %s, expected %s",
                 cases[i].len, info.backend, cases[i].backend);
        kt_release(p);
    }
}

static long huge_kb_after(const char *backend, uint64_t flags)
{
    char *p = kt_must_alloc(4 * KT_2M, backend, NULL, flags);
    touch_pages(p, 4 * KT_2M);
    long kb = vma_of_block(p, 4 * KT_2M).anon_huge_kb;
    kt_release(p);
    return kb;
}

static void thp_collapse(void **state)
{
    KT_PRECONDITIONS();
    /* An untouched block has nothing to collapse: 6.x says EINVAL for it,
     * which must not be taken for "MADV_COLLAPSE unsupported" (it was). */
    huge_kb_after("thp-madvise", HP_F_COLLAPSE);
    /* Faults now give base pages; libhp probed THP at load and still offers
     * it (THP switches are read at load, or by hp_reprobe). */
    if (kt_thp_knob("enabled", "never"))
        KT_SKIP("%s", kt_skip_all);
    long plain = huge_kb_after("thp-madvise", HP_F_POPULATE);
    long collapsed = huge_kb_after("thp-madvise", HP_F_POPULATE | HP_F_COLLAPSE);
    KT_CHECK(kt_thp_knob("enabled", "madvise") == 0, "%s", kt_skip_all);
    KT_CHECK(plain == 0, "enabled=never, yet populate gave %ld kB of THP", plain);
    KT_CHECK(collapsed == 8192, "MADV_COLLAPSE gave %ld kB of THP, expected 8192", collapsed);
}

static void thp_reprobe_sees_never(void **state)
{
    KT_PRECONDITIONS();
    struct hp_backend_info b;
    KT_CHECK(kt_thp_knob("enabled", "never") == 0, "%s", kt_skip_all);
    KT_CHECK(hp_reprobe() == HP_OK, "hp_reprobe");
    KT_CHECK(kt_backend("thp-madvise", &b) == 0, "no thp-madvise backend");
    int off_ok = !b.available && strstr(b.reason, "never");
    char reason[256];
    snprintf(reason, sizeof(reason), "%s", b.reason);
    KT_CHECK(kt_thp_knob("enabled", "madvise") == 0, "%s", kt_skip_all);
    KT_CHECK(hp_reprobe() == HP_OK, "hp_reprobe");
    KT_CHECK(off_ok, "after enabled=never and hp_reprobe: %s", reason);
    KT_CHECK(kt_backend("thp-madvise", &b) == 0 && b.available, "back to madvise: %s",
             b.reason);
}

#define KT_CHILD_CHECK(cond, ...)                                                                     \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            kt_note("child: " __VA_ARGS__);                                                        \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* In a fresh process: THP is off (by the knob or by prctl), so thp-madvise
 * is unavailable with that reason, and an 8 MiB block gets no huge page. */
static int child_thp_off(const char *why)
{
    struct hp_backend_info b;
    KT_CHILD_CHECK(kt_backend("thp-madvise", &b) == 0, "no thp-madvise backend");
    KT_CHILD_CHECK(!b.available && strstr(b.reason, why), "thp-madvise: available %u, reason: %s",
                b.available, b.reason);
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "thp-madvise";
    KT_CHILD_CHECK(hp_alloc_ex(8 * KT_2M, &o) == NULL && hp_last_error() == HP_ENOBACKEND,
                "named thp-madvise: %s", hp_error_name(hp_last_error()));
    char *p = hp_alloc(8 * KT_2M, 0);
    KT_CHILD_CHECK(p != NULL, "hp_alloc: %s", hp_last_error_detail());
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    KT_CHILD_CHECK(hp_info(p, &info) == HP_OK && !strcmp(info.backend, "fallback"),
                "8 MiB served by %s", info.backend);
    touch_pages(p, 8 * KT_2M);
    struct kt_vma v;
    KT_CHILD_CHECK(kt_vma_of(p, &v) == 0 && v.anon_huge_kb == 0, "AnonHugePages %ld kB",
                v.anon_huge_kb);
    KT_CHILD_CHECK(hp_free(p) == HP_OK, "hp_free");
    return 0;
}

static int child_main(const char *mode)
{
    if (!strcmp(mode, "never"))
        return child_thp_off("never");
    if (!strcmp(mode, "prctl")) {
        KT_CHILD_CHECK(prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0, "prctl: %s", strerror(errno));
        int rc = child_thp_off("prctl");
        struct hp_backend_info b;
        KT_CHILD_CHECK(kt_backend("anon-orders", &b) == 0 && !b.available &&
                        strstr(b.reason, "prctl"),
                    "anon-orders under prctl: %s", b.reason);
        return rc;
    }
    kt_note("child: unknown mode %s", mode);
    return 2;
}

static void thp_never_in_a_fresh_process(void **state)
{
    KT_PRECONDITIONS();
    KT_CHECK(kt_thp_knob("enabled", "never") == 0, "%s", kt_skip_all);
    int rc = kt_run_child("never");
    KT_CHECK(kt_thp_knob("enabled", "madvise") == 0, "%s", kt_skip_all);
    KT_CHECK(rc == 0, "child exited with %d", rc);
}

static void thp_prctl_disabled_in_a_fresh_process(void **state)
{
    KT_PRECONDITIONS();
    int rc = kt_run_child("prctl");
    KT_CHECK(rc == 0, "child exited with %d", rc);
}

static void pool_snapshot_identical(void **state)
{
    KT_PRECONDITIONS();
    teardown(state);
    kt_expect_restored(&after_setup, &before_all);
}

static void setup(void)
{
    if (kt_need_root("THP knobs"))
        return;
    if (access(KT_THP "/hpage_pmd_size", R_OK) != 0) {
        snprintf(kt_skip_all, sizeof(kt_skip_all), "no THP in this kernel (%s missing)",
                 KT_THP "/hpage_pmd_size");
        return;
    }
    if (kt_lock(30))
        return;
    kt_snapshot_take(&before_all);
    if (kt_thp_knob("enabled", "madvise") || kt_thp_knob("defrag", "madvise") ||
        (access(KT_THP "/hugepages-2048kB/enabled", F_OK) == 0 &&
         kt_thp_knob("hugepages-2048kB/enabled", "inherit")) ||
        kt_mthp_all("never") || (kt_pool_exists(2048) && kt_pool_exact(2048, 0)) ||
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
        cmocka_unit_test_teardown(thp_named, teardown),
        cmocka_unit_test_teardown(thp_automatic, teardown),
        cmocka_unit_test_teardown(thp_populate, teardown),
        cmocka_unit_test_teardown(thp_unaligned_length, teardown),
        cmocka_unit_test_teardown(thp_small_requests, teardown),
        cmocka_unit_test_teardown(thp_collapse, teardown),
        cmocka_unit_test_teardown(thp_reprobe_sees_never, teardown),
        cmocka_unit_test_teardown(thp_never_in_a_fresh_process, teardown),
        cmocka_unit_test_teardown(thp_prctl_disabled_in_a_fresh_process, teardown),
        cmocka_unit_test(pool_snapshot_identical),
    };
    return cmocka_run_group_tests_name("kernel-thp", tests, NULL, NULL);
}
