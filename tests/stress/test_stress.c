/*
 * Stress: 8 threads x 20,000 random operations (alloc, realloc, free, info,
 * foreign, interior and double frees) across every available backend, each
 * block's contents checked against its own pattern. At the end nothing is
 * left: /proc/self/maps has as many lines as before, the hugetlb pool is
 * back to where it was, and the registry is empty.
 *
 * A double free is only recognisable while nobody else can have been given
 * the same address again (after reuse, the stale pointer *is* the other
 * block). So double frees run under a test-side write lock that pauses the
 * other threads' allocations; everything else runs concurrently.
 */
#include <hp.h>

#include "pattern.h"
#include "registry.h"
#include "stress_env.h"
#include "support.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <cmocka.h>

#define NTHREADS 8
#define NSLOTS 16
#define FOREIGN_LEN (1u << 20)

enum op { OP_ALLOC, OP_REALLOC, OP_FREE, OP_INFO, OP_FOREIGN, OP_DOUBLE, OP_N };
static const char *op_names[OP_N] = {"alloc", "realloc", "free", "info", "foreign", "double"};

struct slot {
    unsigned char *p;
    size_t size;        /* bytes asked for (and stamped) */
    size_t usable;      /* from hp_info */
    uint64_t seed;
    uint64_t flags;     /* HP_F_* the block was made with */
    const char *backend;
};

struct worker {
    pthread_t thread;
    unsigned id;
    unsigned long ops;
    uint64_t rng, next_seed;
    struct slot slots[NSLOTS];
    unsigned long done[OP_N];
    unsigned long calls;          /* libhp calls made */
    unsigned long pool_short;     /* hugetlbfs refusals (pool drained) */
    unsigned long by_backend[STRESS_MAX_BACKENDS];
    char fail[320];
};

static pthread_rwlock_t world;    /* write-held during double-free checks */
static unsigned char *foreign_region;
static int static_foreign;

#define FAIL(w, ...)                                                        \
    do {                                                                    \
        snprintf((w)->fail, sizeof((w)->fail), __VA_ARGS__);                \
        return -1;                                                          \
    } while (0)

static int check_slot(struct worker *w, const struct slot *s, const char *when)
{
    size_t bad = pattern_check(s->p, s->size, s->size, s->seed);
    if (bad)
        FAIL(w, "%s: block %p (%zu bytes, %s) corrupt at offset %zu", when, (void *)s->p,
             s->size, s->backend ? s->backend : "any", bad - 1);
    return 0;
}

static int check_info(struct worker *w, struct slot *s)
{
    uint64_t flags = s->flags;
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    w->calls++;
    int32_t rc = hp_info(s->p, &info);
    if (rc != HP_OK)
        FAIL(w, "hp_info(%p): %s %s", (void *)s->p, hp_error_name(rc), hp_last_error_detail());
    if (s->backend && strcmp(info.backend, s->backend))
        FAIL(w, "block asked from %s is served by %s", s->backend, info.backend);
    if (info.usable_size < s->size || info.mapped_size < info.usable_size ||
        info.page_size < 4096 || (info.page_size & (info.page_size - 1)) ||
        info.huge_bytes > info.mapped_size || info.flags != flags ||
        ((uintptr_t)s->p & 4095))
        FAIL(w, "hp_info(%p) is inconsistent: size %zu usable %llu mapped %llu page %llu "
             "huge %llu flags %llx", (void *)s->p, s->size, (unsigned long long)info.usable_size,
             (unsigned long long)info.mapped_size, (unsigned long long)info.page_size,
             (unsigned long long)info.huge_bytes, (unsigned long long)info.flags);
    s->usable = info.usable_size;
    return 0;
}

static uint64_t random_flags(struct worker *w)
{
    unsigned r = (unsigned)(stress_rand(&w->rng) % 100);
    if (r < 8)
        return HP_F_POPULATE;
    if (r < 12)
        return HP_F_NOZERO;
    return 0;
}

static int do_alloc(struct worker *w, struct slot *s)
{
    unsigned k = (unsigned)(stress_rand(&w->rng) % stress_n_backends);
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = stress_backends[k];
    o.flags = random_flags(w);
    size_t size = stress_size(&w->rng);
    w->calls++;
    unsigned char *p = hp_alloc_ex(size, &o);
    if (!p) {
        int32_t code = hp_last_error();
        /* Only the pool can run dry: 8 pages shared by 8 threads. */
        if (o.backend && !strcmp(o.backend, "hugetlbfs") &&
            (code == HP_ENOMEM || code == HP_ENOBACKEND) && hp_last_error_detail()[0]) {
            w->pool_short++;
            return 0;
        }
        FAIL(w, "hp_alloc_ex(%zu, %s, 0x%llx): %s %s", size, o.backend ? o.backend : "any",
             (unsigned long long)o.flags, hp_error_name(code), hp_last_error_detail());
    }
    if (!(o.flags & HP_F_NOZERO) && !pattern_zero_at(p, size, (size_t)stress_rand(&w->rng)))
        FAIL(w, "new block %p (%zu bytes, %s) is not zero-filled", (void *)p, size,
             o.backend ? o.backend : "any");
    s->p = p;
    s->size = size;
    s->seed = w->next_seed++;
    s->backend = o.backend;
    s->flags = o.flags;
    w->by_backend[k]++;
    pattern_stamp(p, size, s->seed);
    return check_info(w, s);
}

static int do_free(struct worker *w, struct slot *s)
{
    if (check_slot(w, s, "before free"))
        return -1;
    w->calls++;
    int32_t rc = hp_free(s->p);
    if (rc != HP_OK)
        FAIL(w, "hp_free(%p): %s %s", (void *)s->p, hp_error_name(rc), hp_last_error_detail());
    s->p = NULL;
    return 0;
}

static int do_realloc(struct worker *w, struct slot *s)
{
    size_t n = stress_size(&w->rng);
    uint64_t flags = (stress_rand(&w->rng) % 10) == 0 ? HP_F_POPULATE : 0;
    w->calls++;
    unsigned char *q = hp_realloc(s->p, n, flags);
    if (!q) {
        int32_t code = hp_last_error();
        if (check_slot(w, s, "after a failed realloc"))
            return -1;
        /* A block whose backend was named stays there: with its pool
         * drained by the other threads, the resize fails, block unchanged. */
        if ((code == HP_ENOMEM || code == HP_ENOBACKEND || code == HP_ENOHUGE) &&
            strstr(hp_last_error_detail(), "the block stays in backend"))
            return 0;
        FAIL(w, "hp_realloc(%p, %zu -> %zu): %s %s", (void *)s->p, s->size, n,
             hp_error_name(code), hp_last_error_detail());
    }
    size_t bad = pattern_check(q, s->size, n, s->seed);
    if (bad)
        FAIL(w, "hp_realloc(%zu -> %zu) lost contents at offset %zu", s->size, n, bad - 1);
    s->p = q;
    s->size = n;
    s->backend = NULL;  /* a copy may land on any backend */
    s->flags = flags;
    pattern_stamp(q, n, s->seed);
    return check_info(w, s);
}

static int expect_code(struct worker *w, int32_t rc, int32_t want, const char *what)
{
    w->calls++;
    if (rc != want)
        FAIL(w, "%s: got %s, want %s (%s)", what, hp_error_name(rc), hp_error_name(want),
             hp_last_error_detail());
    if (!hp_last_error_detail()[0])
        FAIL(w, "%s: no error detail", what);
    return 0;
}

/* Pointers that are not blocks, and pointers inside this thread's blocks. */
static int do_foreign(struct worker *w, struct slot *live)
{
    int local;
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    size_t off = (size_t)(stress_rand(&w->rng) % (FOREIGN_LEN / 4096)) * 4096;
    if (expect_code(w, hp_free(&local), HP_EFOREIGN, "hp_free(stack)") ||
        expect_code(w, hp_free(foreign_region + off), HP_EFOREIGN, "hp_free(own mmap)") ||
        expect_code(w, hp_info(&static_foreign, &info), HP_EFOREIGN, "hp_info(static)"))
        return -1;
    w->calls++;
    if (hp_realloc(foreign_region, 4096, 0) || hp_last_error() != HP_EFOREIGN)
        FAIL(w, "hp_realloc(foreign) did not fail with HP_EFOREIGN");
    w->calls++;
    if (hp_free(NULL) != HP_OK)
        FAIL(w, "hp_free(NULL) failed");
    if (!live)
        return 0;
    size_t inner = 1 + (size_t)(stress_rand(&w->rng) % (live->usable - 1));
    if (expect_code(w, hp_free(live->p + inner), HP_EINTERIOR, "hp_free(interior)") ||
        expect_code(w, hp_info(live->p + inner, &info), HP_EINTERIOR, "hp_info(interior)"))
        return -1;
    w->calls++;
    if (hp_realloc(live->p + inner, 4096, 0) || hp_last_error() != HP_EINTERIOR)
        FAIL(w, "hp_realloc(interior) did not fail with HP_EINTERIOR");
    return check_slot(w, live, "after interior pointer errors");
}

/* Runs with every other thread paused (write lock): no address reuse. */
static int do_double(struct worker *w, struct slot *live)
{
    struct slot tmp = {0};
    struct slot *s = live;
    if (!s) {
        if (do_alloc(w, &tmp))
            return -1;
        if (!tmp.p)
            return 0;
        s = &tmp;
    }
    void *p = s->p;
    if (do_free(w, s))
        return -1;
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    if (expect_code(w, hp_free(p), HP_EDOUBLEFREE, "second hp_free") ||
        expect_code(w, hp_info(p, &info), HP_EDOUBLEFREE, "hp_info after free"))
        return -1;
    w->calls++;
    if (hp_realloc(p, 8192, 0) || hp_last_error() != HP_EDOUBLEFREE)
        FAIL(w, "hp_realloc after free did not fail with HP_EDOUBLEFREE");
    return 0;
}

static struct slot *pick(struct worker *w, int want_live)
{
    unsigned start = (unsigned)(stress_rand(&w->rng) % NSLOTS);
    for (unsigned i = 0; i < NSLOTS; i++) {
        struct slot *s = &w->slots[(start + i) % NSLOTS];
        if ((s->p != NULL) == want_live)
            return s;
    }
    return NULL;
}

static int step(struct worker *w)
{
    unsigned r = (unsigned)(stress_rand(&w->rng) % 1000);
    struct slot *live = pick(w, 1);
    if (r < 8) {
        pthread_rwlock_wrlock(&world);
        int rc = do_double(w, live);
        pthread_rwlock_unlock(&world);
        w->done[OP_DOUBLE]++;
        return rc;
    }
    pthread_rwlock_rdlock(&world);
    int rc = 0;
    enum op op;
    if (r < 380 || !live) {
        struct slot *s = pick(w, 0);
        if (!s) {
            rc = do_free(w, live);
            s = live;
        }
        op = OP_ALLOC;
        rc = rc ? rc : do_alloc(w, s);
    } else if (r < 560) {
        op = OP_REALLOC;
        rc = do_realloc(w, live);
    } else if (r < 800) {
        op = OP_FREE;
        rc = do_free(w, live);
    } else if (r < 940) {
        op = OP_INFO;
        rc = check_slot(w, live, "info") ? -1 : check_info(w, live);
    } else {
        op = OP_FOREIGN;
        rc = do_foreign(w, live);
    }
    pthread_rwlock_unlock(&world);
    w->done[op]++;
    return rc;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (unsigned long i = 0; i < w->ops && !w->fail[0]; i++)
        if (step(w))
            break;
    for (unsigned i = 0; i < NSLOTS && !w->fail[0]; i++)
        if (w->slots[i].p)
            do_free(w, &w->slots[i]);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void run_workers(struct worker *ws, unsigned long ops, uint64_t seed)
{
    for (unsigned i = 0; i < NTHREADS; i++) {
        memset(&ws[i], 0, sizeof(ws[i]));
        ws[i].id = i;
        ws[i].ops = ops;
        ws[i].rng = seed * 1000003u + i * UINT64_C(0x9e3779b97f4a7c15) + 1;
        ws[i].next_seed = ((uint64_t)i << 48) | 1;
        assert_int_equal(pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]), 0);
    }
    for (unsigned i = 0; i < NTHREADS; i++)
        pthread_join(ws[i].thread, NULL);
    for (unsigned i = 0; i < NTHREADS; i++) {
        if (ws[i].fail[0])
            print_message("# thread %u: %s\n", i, ws[i].fail);
        assert_string_equal(ws[i].fail, "");
    }
}

static void random_operations_leave_nothing_behind(void **state)
{
    (void)state;
    static struct worker ws[NTHREADS];
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&world, &attr);
    foreign_region = mmap(NULL, FOREIGN_LEN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(foreign_region != MAP_FAILED);
    stress_list_backends();

    /* Warm-up: thread stacks, malloc arenas and libhp's own tables exist
     * before the counts are taken, so only blocks could change them. */
    run_workers(ws, 300, 7);
    drop_caches();
    long maps0 = maps_count();
    long free0 = meminfo_get("HugePages_Free"), rsvd0 = meminfo_get("HugePages_Rsvd");
    assert_int_equal(hp_registry_count(), 0);

    unsigned long ops = stress_ops(20000);
    double t0 = now_s();
    run_workers(ws, ops, 42);
    double secs = now_s() - t0;

    unsigned long done[OP_N] = {0}, calls = 0, short_pool = 0, per[STRESS_MAX_BACKENDS] = {0};
    for (unsigned i = 0; i < NTHREADS; i++) {
        for (int k = 0; k < OP_N; k++)
            done[k] += ws[i].done[k];
        for (unsigned k = 0; k < stress_n_backends; k++)
            per[k] += ws[i].by_backend[k];
        calls += ws[i].calls;
        short_pool += ws[i].pool_short;
    }
    unsigned long total = 0;
    for (int k = 0; k < OP_N; k++)
        total += done[k];
    print_message("# %u threads x %lu ops = %lu random operations, %lu libhp calls, %.2f s\n",
                  NTHREADS, ops, total, calls, secs);
    for (int k = 0; k < OP_N; k++)
        print_message("#   %-8s %lu\n", op_names[k], done[k]);
    for (unsigned k = 0; k < stress_n_backends; k++)
        print_message("#   allocations asked of %-12s %lu\n",
                      stress_backends[k] ? stress_backends[k] : "(any)", per[k]);
    print_message("#   hugetlbfs refusals (pool of %d pages drained) %lu\n", STRESS_POOL_PAGES,
                  short_pool);
#ifdef HP_TEST_HAVE_CACHE
    struct hp_cache_figures cs;
    hp_cache_get_figures(&cs);
    print_message("#   cache: %llu hits, %llu misses, %llu bytes adopted by in-place growth\n",
                  (unsigned long long)cs.hits, (unsigned long long)cs.misses,
                  (unsigned long long)cs.adopted);
#endif
    assert_true(total >= (unsigned long)NTHREADS * ops);

    drop_caches();
    assert_int_equal(hp_registry_count(), 0);
    if (!maps_unreliable())
        assert_int_equal(maps_count(), maps0);
    assert_int_equal(meminfo_get("HugePages_Free"), free0);
    assert_int_equal(meminfo_get("HugePages_Rsvd"), rsvd0);
    munmap(foreign_region, FOREIGN_LEN);
    pthread_rwlock_destroy(&world);
}

/* Two threads free the same block at once: exactly one wins, the other is
 * told it is a double free. Nobody else allocates meanwhile. */
struct race {
    pthread_barrier_t go;
    void *p;
    int32_t rc[2];
};

static struct race race;

static void *racer(void *arg)
{
    int k = (int)(intptr_t)arg;
    pthread_barrier_wait(&race.go);
    race.rc[k] = hp_free(race.p);
    return NULL;
}

static void racing_frees_one_wins(void **state)
{
    (void)state;
    unsigned long rounds = stress_ops(20000) / 10;
    unsigned long wins[2] = {0, 0};
    for (unsigned long i = 0; i < rounds; i++) {
        pthread_t t[2];
        race.p = hp_alloc(4096 * (1 + i % 8), 0);
        assert_non_null(race.p);
        pthread_barrier_init(&race.go, NULL, 2);
        for (int k = 0; k < 2; k++)
            assert_int_equal(pthread_create(&t[k], NULL, racer, (void *)(intptr_t)k), 0);
        for (int k = 0; k < 2; k++)
            pthread_join(t[k], NULL);
        pthread_barrier_destroy(&race.go);
        int ok0 = race.rc[0] == HP_OK, ok1 = race.rc[1] == HP_OK;
        assert_true(ok0 != ok1);
        assert_int_equal(ok0 ? race.rc[1] : race.rc[0], HP_EDOUBLEFREE);
        wins[ok1]++;
    }
    print_message("# %lu racing double frees: thread 0 won %lu, thread 1 won %lu\n", rounds,
                  wins[0], wins[1]);
    assert_int_equal(hp_registry_count(), 0);
}

int main(void)
{
    stress_knobs();
    enable_cache();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_operations_leave_nothing_behind),
        cmocka_unit_test(racing_frees_one_wins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
