/*
 * Options are part of the block (hp_realloc in hp/alloc.h): every resize
 * selects with the allocation's exclude list, keeps HP_F_NOPOOL and
 * HP_F_REQUIRE_HUGE once given, keeps the requested page size unless the
 * call names another, and takes HP_F_NOZERO, HP_F_POPULATE and
 * HP_F_COLLAPSE from the call alone. Where the block's pages come from is
 * read from /proc/self/smaps, not from libhp's answer. A 2 MiB pool with
 * free pages is there throughout, so a rule that is lost shows as a block
 * on hugetlb; the rules that only matter when nothing huge is left run in a
 * copy of this program started with HP_BACKENDS=hugetlbfs,fallback.
 */
#include "rt.h"

#include "os.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define POOL_PAGES 64
#define FORKS 20

static long hugetlb_kb(const void *p, uint64_t len)
{
    /* Private 1 GiB mappings sometimes show as Shared_Hugetlb: sum both. */
    return smaps_field_kb(p, len, "Private_Hugetlb") + smaps_field_kb(p, len, "Shared_Hugetlb");
}

/* Free 2 MiB pool pages nobody holds a reservation on (a wrapped
 * resv_hugepages, KERNEL-FACTS, counts as none). */
static long pool_unreserved(void)
{
    long rsvd = pool_get(2048, "resv_hugepages");
    return pool_get(2048, "free_hugepages") - (rsvd == LONG_MAX ? 0 : rsvd);
}

/* Take every free 2 MiB pool page: *drain is the block holding them (NULL
 * if there were none). 0, or -1 if they could not be taken. */
static int drain_pool(unsigned char **drain)
{
    long free_now = pool_unreserved();
    *drain = free_now > 0 ? rt_alloc("hugetlbfs", (uint64_t)free_now * 2 * MIB,
                                     HP_F_PAGE_2M | HP_F_NOZERO) : NULL;
    if (free_now > 0 && !*drain)
        return -1;
    return pool_unreserved() == 0 ? 0 : -1;
}

static void need_pool(long pages)
{
    if (!rt_available("hugetlbfs") || pool_unreserved() < pages) {
        print_message("# needs hugetlbfs with %ld free 2 MiB pages (%ld here)\n", pages,
                      pool_unreserved());
        skip();
    }
}

static void *alloc_excluding(uint64_t size, uint64_t flags, const char *exclude)
{
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.flags = flags;
    o.exclude = exclude;
    return hp_alloc_ex(size, &o);
}

/* The recipe: a small block that excludes the pool and THP grows
 * to 8 MiB, a size the selection would serve from either. */
static void exclude_survives_promotion(void **state)
{
    (void)state;
    need_pool(8);
    rt_cache(0, 0);
    struct rt_snapshot before = rt_snap();
    unsigned char *p = alloc_excluding(64 * KIB, 0, "hugetlbfs,thp-madvise");
    RT_CHECK(p != NULL, "alloc");
    rt_stamp(p, 0, 64 * KIB, 1);
    unsigned char *q = hp_realloc(p, 8 * MIB, 0);
    RT_CHECK(q != NULL, "growth to 8 MiB");
    struct hp_block_info info = rt_info(q);
    long kb = hugetlb_kb(q, 8 * MIB);
    print_message("# 64 KiB excluding hugetlbfs,thp-madvise, grown to 8 MiB: %s, %ld kB "
                  "hugetlb\n", info.backend, kb);
    RT_CHECK(kb == 0, "%ld kB of the grown block are hugetlb", kb);
    RT_CHECK(strcmp(info.backend, "hugetlbfs") && strcmp(info.backend, "thp-madvise"),
             "grown onto excluded backend %s", info.backend);
    RT_CHECK(rt_check(q, 64 * KIB, 1) == 0, "contents");
    rt_stamp(q, 0, 8 * MIB, 2);
    /* And back down, and up again past the pool. */
    q = hp_realloc(q, 16 * KIB, 0);
    RT_CHECK(q != NULL, "shrink");
    q = hp_realloc(q, 16 * MIB, HP_F_POPULATE);
    RT_CHECK(q != NULL && hugetlb_kb(q, 16 * MIB) == 0, "regrown to 16 MiB: %ld kB hugetlb",
             q ? hugetlb_kb(q, 16 * MIB) : -1);
    RT_CHECK(strcmp(rt_info(q).backend, "thp-madvise"), "regrown onto thp-madvise");
    RT_CHECK(hp_free(q) == HP_OK, "free");
    rt_expect_clean(before, "exclude across promotion");
}

/* exclude="hugetlbfs", the fork recipe the Python README gave: growth
 * past a pool with free pages stays off it. */
static void exclude_hugetlbfs_keeps_growth_off_the_pool(void **state)
{
    (void)state;
    need_pool(16);
    rt_cache(0, 0);
    struct rt_snapshot before = rt_snap();
    unsigned char *p = alloc_excluding(64 * KIB, 0, "hugetlbfs");
    RT_CHECK(p != NULL, "alloc");
    uint64_t size = 64 * KIB;
    for (int i = 0; i < 4; i++) {
        uint64_t n = size * 4;
        p = hp_realloc(p, n, 0);
        RT_CHECK(p != NULL, "growth %d", i);
        long kb = hugetlb_kb(p, n);
        RT_CHECK(kb == 0 && strcmp(rt_info(p).backend, "hugetlbfs"),
                 "growth %d to %llu: %s, %ld kB hugetlb", i, (unsigned long long)n,
                 rt_info(p).backend, kb);
        size = n;
    }
    print_message("# grown to %llu MiB on %s with %ld free pool pages\n",
                  (unsigned long long)(size >> 20), rt_info(p).backend, pool_unreserved());
    RT_CHECK(hp_free(p) == HP_OK, "free");
    rt_expect_clean(before, "exclude hugetlbfs");
}

/* A pool block whose pool runs dry mid-growth moves: not to a backend the
 * allocation excluded. */
static int dry_move_child(void *arg)
{
    (void)arg;
    unsigned char *p = alloc_excluding(4 * MIB, 0, "thp-madvise");
    CHILD_CHECK(p != NULL && hugetlb_kb(p, 4 * MIB) == 4096);
    rt_stamp(p, 0, 4 * MIB, 3);
    unsigned char *drain;
    CHILD_CHECK(drain_pool(&drain) == 0);
    unsigned char *q = hp_realloc(p, 8 * MIB, 0);
    CHILD_CHECK(q != NULL);
    struct hp_block_info info = rt_info(q);
    fprintf(stderr, "# pool dry: the block moved to %s (%ld kB hugetlb)\n", info.backend,
            hugetlb_kb(q, 8 * MIB));
    CHILD_CHECK(strcmp(info.backend, "thp-madvise") != 0);
    CHILD_CHECK(hugetlb_kb(q, 8 * MIB) == 0);
    CHILD_CHECK(rt_check(q, 4 * MIB, 3) == 0);
    CHILD_CHECK(hp_free(q) == HP_OK);
    CHILD_CHECK(!drain || hp_free(drain) == HP_OK);
    return 0;
}

static void exclude_survives_a_dry_pool(void **state)
{
    (void)state;
    need_pool(2);
    rt_cache(0, 0);
    struct rt_snapshot before = rt_snap();
    RT_CHECK(run_in_child(dry_move_child, NULL) == 0, "child");
    rt_expect_clean(before, "exclude with the pool dry");
}

/* run_in_child body: write a stamp on every page of [p, p + len) and read
 * it back; dies of SIGBUS (default action) if the kernel refuses. */
struct span {
    unsigned char *p;
    uint64_t len;
};

static int write_all(void *arg)
{
    const struct span *sp = arg;
    signal(SIGBUS, SIG_DFL);
    rt_stamp(sp->p, 0, sp->len, 31);
    return rt_check(sp->p, sp->len, 31) == 0 ? 0 : 1;
}

/* A block allocated with HP_F_NOPOOL and one given HP_F_NOPOOL at a resize
 * grow with flags 0 past a pool with free pages (where an unflagged block
 * of the same history lands: the control), stay off hugetlb, and FORKS
 * children each write them with the pool drained afterwards. */
static int nopool_child(void *arg)
{
    (void)arg;
    unsigned char *a = hp_alloc(64 * KIB, HP_F_NOPOOL);
    unsigned char *b = hp_alloc(64 * KIB, 0);
    unsigned char *ctl = hp_alloc(64 * KIB, 0);
    CHILD_CHECK(a && b && ctl);
    b = hp_realloc(b, 128 * KIB, HP_F_NOPOOL);  /* from now on, b keeps it */
    CHILD_CHECK(b != NULL);
    uint64_t sizes[] = {8 * MIB, 20 * MIB, 6 * MIB, 32 * MIB};
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint64_t n = sizes[i];
        a = hp_realloc(a, n, 0);
        b = hp_realloc(b, n, i == 2 ? HP_F_NOZERO : 0);
        CHILD_CHECK(a && b);
        long ka = hugetlb_kb(a, n), kb = hugetlb_kb(b, n);
        fprintf(stderr, "# %llu MiB: allocated NOPOOL %s %ld kB hugetlb; NOPOOL at a resize "
                "%s %ld kB hugetlb\n", (unsigned long long)(n >> 20), rt_info(a).backend, ka,
                rt_info(b).backend, kb);
        CHILD_CHECK(ka == 0 && kb == 0);
        CHILD_CHECK((rt_info(a).flags & HP_F_NOPOOL) && (rt_info(b).flags & HP_F_NOPOOL));
    }
    ctl = hp_realloc(ctl, 8 * MIB, 0);
    CHILD_CHECK(ctl != NULL);
    fprintf(stderr, "# control without HP_F_NOPOOL: %s, %ld kB hugetlb\n", rt_info(ctl).backend,
            hugetlb_kb(ctl, 8 * MIB));
    CHILD_CHECK(hugetlb_kb(ctl, 8 * MIB) == 8192);  /* the pool was there to take */
    rt_stamp(a, 0, 32 * MIB, 5);
    rt_stamp(b, 0, 32 * MIB, 6);
    rt_stamp(ctl, 0, 8 * MIB, 7);
    unsigned char *drain;
    CHILD_CHECK(drain_pool(&drain) == 0);
    struct span sa = {a, 32 * MIB}, sb = {b, 32 * MIB}, sc = {ctl, 8 * MIB};
    unsigned bad = 0;
    for (int i = 0; i < FORKS; i++)
        bad += (run_in_child(write_all, &sa) != 0) + (run_in_child(write_all, &sb) != 0);
    int st_ctl = run_in_child(write_all, &sc);
    fprintf(stderr, "# pool drained: %u of %d children writing the NOPOOL blocks failed; "
            "the control's child: %d\n", bad, 2 * FORKS, st_ctl);
    CHILD_CHECK(bad == 0);
    CHILD_CHECK(st_ctl == 128 + SIGBUS);  /* the pool really was empty */
    CHILD_CHECK(rt_check(a, 32 * MIB, 5) == 0 && rt_check(b, 32 * MIB, 6) == 0);
    CHILD_CHECK(hp_free(a) == HP_OK && hp_free(b) == HP_OK && hp_free(ctl) == HP_OK);
    CHILD_CHECK(!drain || hp_free(drain) == HP_OK);
    return 0;
}

static void nopool_sticks_through_growth_past_a_free_pool(void **state)
{
    (void)state;
    need_pool(8);
    rt_cache(0, 0);
    struct rt_snapshot before = rt_snap();
    RT_CHECK(run_in_child(nopool_child, NULL) == 0, "child");
    rt_expect_clean(before, "HP_F_NOPOOL sticks");
}

/* The per-call flags do not stick; the page size does, unless named. */
static void per_call_flags_and_page_size(void **state)
{
    (void)state;
    need_pool(8);
    rt_cache(0, 0);
    struct rt_snapshot before = rt_snap();
    uint64_t once = HP_F_NOZERO | HP_F_POPULATE | HP_F_COLLAPSE;
    unsigned char *p = hp_alloc(4 * MIB, HP_F_PAGE_2M | HP_F_NOZERO | HP_F_POPULATE);
    RT_CHECK(p != NULL, "alloc");
    p = hp_realloc(p, 6 * MIB, 0);
    RT_CHECK(p != NULL, "grow");
    struct hp_block_info info = rt_info(p);
    RT_CHECK(info.requested_page_size == 2 * MIB && (info.flags & HP_F_PAGE_SHIFT_MASK) ==
             HP_F_PAGE_2M, "page size kept: %llu", (unsigned long long)info.requested_page_size);
    RT_CHECK(!(info.flags & once), "per-call flags stuck: 0x%llx",
             (unsigned long long)info.flags);
    RT_CHECK(smaps_kernel_page_kb(p) == 2048 || info.page_size == 2 * MIB, "2 MiB pages");
    /* Naming another page size copies the block to it. */
    p = hp_realloc(p, 6 * MIB, HP_F_PAGE_4K);
    RT_CHECK(p != NULL, "to 4 KiB pages");
    info = rt_info(p);
    RT_CHECK(info.page_size == 4 * KIB && info.requested_page_size == 4 * KIB &&
             hugetlb_kb(p, 6 * MIB) == 0, "4 KiB: %s %llu", info.backend,
             (unsigned long long)info.page_size);
    /* ... and that page size is then the one kept. */
    p = hp_realloc(p, 12 * MIB, 0);
    RT_CHECK(p != NULL && rt_info(p).page_size == 4 * KIB && hugetlb_kb(p, 12 * MIB) == 0,
             "4 KiB kept through growth");
    RT_CHECK(hp_free(p) == HP_OK, "free");
    rt_expect_clean(before, "per-call flags");
}

/* HP_BACKENDS=hugetlbfs,fallback: once the pool is dry, only base pages
 * are left. A HP_F_REQUIRE_HUGE block, or one that asked for 2 MiB pages,
 * must then fail to grow (unchanged, still on the pool) rather than move
 * onto them; naming base pages is what lets it. Runs in the copy of this
 * program (main). */
static int base_only_left(void)
{
    int rc = 0;
#define BCHECK(cond)                                                                     \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "# check failed at line %d: %s (%s: %s)\n", __LINE__, #cond, \
                    hp_error_name(hp_last_error()), hp_last_error_detail());             \
            return 1;                                                                    \
        }                                                                                \
    } while (0)
    hp_cache_set_limits(0, 0);
    unsigned char *req = hp_alloc(4 * MIB, HP_F_REQUIRE_HUGE);
    unsigned char *pg = hp_alloc(4 * MIB, HP_F_PAGE_2M);
    BCHECK(req && pg);
    BCHECK(hugetlb_kb(req, 4 * MIB) == 4096 && hugetlb_kb(pg, 4 * MIB) == 4096);
    BCHECK(rt_info(req).pin == HP_BLOCK_PIN_NONE);  /* may move between the two */
    rt_stamp(req, 0, 4 * MIB, 21);
    rt_stamp(pg, 0, 4 * MIB, 22);
    unsigned char *drain;
    BCHECK(drain_pool(&drain) == 0);
    BCHECK(hp_realloc(req, 8 * MIB, 0) == NULL);
    fprintf(stderr, "# HP_F_REQUIRE_HUGE block, pool dry: %s: %s\n",
            hp_error_name(hp_last_error()), hp_last_error_detail());
    BCHECK(hp_last_error() == HP_ENOHUGE);
    BCHECK(hugetlb_kb(req, 4 * MIB) == 4096 && rt_check(req, 4 * MIB, 21) == 0);
    BCHECK(hp_realloc(pg, 8 * MIB, HP_F_NOZERO) == NULL);
    fprintf(stderr, "# 2 MiB-page block, pool dry: %s: %s\n", hp_error_name(hp_last_error()),
            hp_last_error_detail());
    BCHECK(hugetlb_kb(pg, 4 * MIB) == 4096 && rt_check(pg, 4 * MIB, 22) == 0);
    /* Named, base pages are allowed. */
    unsigned char *q = hp_realloc(pg, 8 * MIB, HP_F_PAGE_4K);
    BCHECK(q != NULL && hugetlb_kb(q, 8 * MIB) == 0 && rt_check(q, 4 * MIB, 22) == 0);
    BCHECK(!strcmp(rt_info(q).backend, "fallback"));
    BCHECK(hp_free(q) == HP_OK && hp_free(req) == HP_OK);
    BCHECK(!drain || hp_free(drain) == HP_OK);
#undef BCHECK
    return rc;
}

static void require_huge_and_page_size_stick(void **state)
{
    (void)state;
    need_pool(8);
    fflush(NULL);
    pid_t pid = fork();
    RT_CHECK(pid >= 0, "fork");
    if (pid == 0) {
        setenv("HP_BACKENDS", "hugetlbfs,fallback", 1);
        execl("/proc/self/exe", "test_realloc-options", "--base-only-left", (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        RT_CHECK(errno == EINTR, "waitpid");
    RT_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the HP_BACKENDS=hugetlbfs,fallback copy: "
             "status 0x%x", st);
}

/* HP_F_POPULATE and HP_F_COLLAPSE reach the kernel once per allocation:
 * map leaves them to the backend's advise, which the core calls after it
 * (hp/backend.h, "Population"), and hugetlbfs populates every mapping when
 * it maps it. Counted at the OS layer: the madvise calls an allocation with
 * the flags makes beyond the same allocation without them. The block is
 * resident whole after it (smaps), so "once" is not "never". */
static void populate_and_collapse_are_asked_once(void **state)
{
    (void)state;
    rt_cache(0, 0);  /* fresh mappings: a carve from the cache counts no map */
    struct rt_snapshot before = rt_snap();
    static const struct {
        const char *backend;
        uint64_t flags;
        uint64_t madvises;
    } cases[] = {
        {"fallback", HP_F_POPULATE, 1},
        {"anon-orders", HP_F_POPULATE, 1},
        {"thp-madvise", HP_F_POPULATE, 1},
        {"thp-madvise", HP_F_POPULATE | HP_F_COLLAPSE, 2},  /* one 8 MiB range to collapse */
        {"hugetlbfs", HP_F_POPULATE, 0},
    };
    unsigned checked = 0;
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *be = cases[i].backend;
        if (!rt_available(be)) {
            print_message("# %s unavailable here: not checked\n", be);
            continue;
        }
        uint64_t n0 = hp_os_calls(HP_OS_ADVISE);
        unsigned char *plain = rt_alloc(be, 8 * MIB, 0);
        uint64_t n1 = hp_os_calls(HP_OS_ADVISE);
        unsigned char *p = rt_alloc(be, 8 * MIB, cases[i].flags);
        uint64_t n2 = hp_os_calls(HP_OS_ADVISE);
        RT_CHECK(plain && p, "%s: two 8 MiB blocks", be);
        RT_CHECK((n2 - n1) - (n1 - n0) == cases[i].madvises,
                 "%s, flags 0x%llx: %llu madvise calls beyond a plain allocation's %llu, "
                 "expected %llu", be, (unsigned long long)cases[i].flags,
                 (unsigned long long)((n2 - n1) - (n1 - n0)), (unsigned long long)(n1 - n0),
                 (unsigned long long)cases[i].madvises);
        long kb = smaps_field_kb(p, 8 * MIB, "Rss") + hugetlb_kb(p, 8 * MIB);
        RT_CHECK(kb == 8 * 1024, "%s: %ld kB of 8 MiB resident after HP_F_POPULATE", be, kb);
        RT_CHECK(hp_free(plain) == HP_OK && hp_free(p) == HP_OK, "%s: free", be);
        checked++;
    }
    if (!checked)
        skip();
    rt_expect_clean(before, "populate once");
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--base-only-left"))
        return base_only_left();  /* the parent holds the knob lock and set the pool */
    if (!is_root() || pool_set(2048, POOL_PAGES) < 32) {
        fprintf(stderr, "# no 2 MiB hugetlb pool here: the pool tests skip\n");
        knob_lock();
    }
    hp_reprobe();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exclude_survives_promotion),
        cmocka_unit_test(exclude_hugetlbfs_keeps_growth_off_the_pool),
        cmocka_unit_test(exclude_survives_a_dry_pool),
        cmocka_unit_test(nopool_sticks_through_growth_past_a_free_pool),
        cmocka_unit_test(per_call_flags_and_page_size),
        cmocka_unit_test(require_huge_and_page_size_stick),
        cmocka_unit_test(populate_and_collapse_are_asked_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
