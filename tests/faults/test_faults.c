/*
 * Fault injection: mmap, munmap, mremap, madvise, mprotect, mbind, getcpu
 * and /proc, /sys reads fail with ENOMEM, EINVAL or EAGAIN at the Nth call,
 * for every N a scenario reaches (once, and "from the Nth call on"). Every
 * libhp call either succeeds (falling back where it can) or fails with a
 * clear error (an allocation-class code and a detail message); a failed
 * resize leaves the block as it was; the blocks that existed before (one
 * per backend, each with its own pattern) are untouched; and nothing leaks:
 * the /proc/self/maps count, the registry count and the hugetlb pool are
 * back to their values before each run.
 *
 * Plugins are dlopen'd by this program, which links the internal core, so
 * they get its host table and the injected faults reach them too. Every
 * available backend that libhp may choose takes part, plus those named on
 * the command line (tests/plugin runs it with the example plugin).
 */
#include <hp.h>

#include "loader.h"
#include "os.h"
#include "pattern.h"
#include "registry.h"
#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#if __has_include(<hp/stack.h>)
#define HAVE_STACKS 1
#endif

/* The cache keeps freed huge-page memory for reuse; what it holds is not a
 * leak, so it is emptied before anything is counted. */
#if __has_include("cache.h")
#include "cache.h"
static void drop_caches(void)
{
    hp_cache_flush(NULL, 0);
}

/* The fault tests want the cache's reuse paths with nothing released behind
 * their back: a fixed limit, no idle release. */
static void enable_cache(void)
{
    hp_cache_set_limits(UINT64_C(256) << 20, 0);
}
#else
static void drop_caches(void)
{
}

static void enable_cache(void)
{
}
#endif


#define MAX_BLOCKS 64
#define MAX_BACKENDS 8

static const char *backends[MAX_BACKENDS];   /* NULL = libhp chooses */
static unsigned n_backends;
/* Backends named on the command line join them, kind other included (a
 * third-party plugin serves only when named): usage test_faults [NAME...]. */
static char **named;
static int n_named;

static const enum hp_os_op ops[] = {HP_OS_MAP, HP_OS_UNMAP, HP_OS_REMAP, HP_OS_ADVISE,
                                    HP_OS_PROTECT, HP_OS_READ, HP_OS_MBIND, HP_OS_GETCPU};
static const char *op_names[] = {"mmap", "munmap", "mremap", "madvise", "mprotect", "read",
                                 [HP_OS_MBIND] = "mbind", [HP_OS_GETCPU] = "getcpu",
                                 [HP_OS_NODE] = "get_mempolicy"};
static const int errs[] = {ENOMEM, EINVAL, EAGAIN};

/* Blocks made before the faults and checked after each run. */
struct blk {
    unsigned char *p;
    size_t size;
    uint64_t seed;
};

static struct blk witnesses[MAX_BACKENDS * 2];
static unsigned n_witnesses;

/* One run of a scenario. */
struct run {
    struct blk b[MAX_BLOCKS];
    unsigned n;
#ifdef HAVE_STACKS
    struct hp_stack *stacks[8];
    unsigned n_stacks;
#endif
    char fail[400];
    unsigned long ok, failed;
};

struct scenario {
    const char *name;
    void (*prepare)(struct run *r);
    void (*act)(struct run *r);
};

/* Totals for the closing note. */
static unsigned long runs, fired, calls_ok, calls_failed;

static void failf(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failf(struct run *r, const char *fmt, ...)
{
    if (r->fail[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->fail, sizeof(r->fail), fmt, ap);
    va_end(ap);
}

/* A failing allocation-class call must say why with an allocation-class code. */
static int clear_error(struct run *r, const char *what)
{
    int32_t code = hp_last_error();
    const char *detail = hp_last_error_detail();
    r->failed++;
    if (code != HP_ENOMEM && code != HP_ENOHUGE && code != HP_ENOBACKEND &&
        code != HP_EBACKEND && code != HP_EOS) {
        failf(r, "%s failed with %s (%s): not an allocation-class error", what,
              hp_error_name(code), detail);
        return 0;
    }
    if (!detail[0]) {
        failf(r, "%s failed with %s and no detail", what, hp_error_name(code));
        return 0;
    }
    return 1;
}

static void stamp_new(struct run *r, unsigned char *p, size_t size)
{
    struct blk *b = &r->b[r->n++];
    b->p = p;
    b->size = size;
    b->seed = UINT64_C(0xfa017000) + r->n;
    pattern_stamp(p, size, b->seed);
}

static unsigned char *alloc_on(const char *backend, size_t size, uint64_t flags)
{
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = backend;
    o.flags = flags;
    return hp_alloc_ex(size, &o);
}

static const size_t sizes[] = {5000, (3u << 20) + 5};

/* ---- scenarios ---------------------------------------------------------- */

static void prepare_nothing(struct run *r)
{
    (void)r;
    hp_reprobe();  /* a faulted read in the last run may have left a backend unavailable */
}

/* Allocate on every backend, small and PMD-sized (populated); collapse
 * once, on thp-madvise (MADV_COLLAPSE costs ~0.1 s here). */
static void act_alloc(struct run *r)
{
    for (unsigned k = 0; k < n_backends; k++) {
        for (unsigned s = 0; s < 2; s++) {
            uint64_t flags = s ? HP_F_POPULATE : 0;
            if (s && backends[k] && !strcmp(backends[k], "thp-madvise"))
                flags |= HP_F_COLLAPSE;
            unsigned char *p = alloc_on(backends[k], sizes[s], flags);
            char what[96];
            snprintf(what, sizeof(what), "hp_alloc_ex(%zu, %s, 0x%llx)", sizes[s],
                     backends[k] ? backends[k] : "any", (unsigned long long)flags);
            if (!p) {
                clear_error(r, what);
                continue;
            }
            r->ok++;
            if (!pattern_zero(p, sizes[s]))
                failf(r, "%s: block not zero-filled", what);
            struct hp_block_info info = HP_BLOCK_INFO_INIT;
            if (hp_info(p, &info) != HP_OK || info.usable_size < sizes[s] ||
                (backends[k] && strcmp(info.backend, backends[k])))
                failf(r, "%s: hp_info disagrees (%s, %s)", what, info.backend,
                      hp_last_error_detail());
            stamp_new(r, p, sizes[s]);
        }
    }
}

static void prepare_blocks(struct run *r)
{
    hp_reprobe();  /* a faulted read in the last run may have left a backend unavailable */
    for (unsigned k = 0; k < n_backends; k++) {
        for (unsigned s = 0; s < 2; s++) {
            unsigned char *p = alloc_on(backends[k], sizes[s], 0);
            if (!p && backends[k] && !strcmp(backends[k], "hugetlbfs"))
                continue;  /* pool too small for this one */
            if (!p) {
                failf(r, "prepare: no block from %s: %s", backends[k] ? backends[k] : "any",
                      hp_last_error_detail());
                return;
            }
            stamp_new(r, p, sizes[s]);
        }
    }
}

/* Grow every block (across the PMD, or 2x), then shrink it. */
static void act_realloc(struct run *r)
{
    for (unsigned i = 0; i < r->n; i++) {
        struct blk *b = &r->b[i];
        size_t targets[] = {b->size < (2u << 20) ? (2u << 20) + 3 : b->size * 2, b->size / 3 + 1};
        for (unsigned t = 0; t < 2; t++) {
            size_t n = targets[t];
            unsigned char *q = hp_realloc(b->p, n, 0);
            char what[96];
            snprintf(what, sizeof(what), "hp_realloc(%zu -> %zu)", b->size, n);
            if (!q) {
                clear_error(r, what);
                struct hp_block_info info = HP_BLOCK_INFO_INIT;
                if (hp_info(b->p, &info) != HP_OK)
                    failf(r, "%s failed and the block is gone: %s", what, hp_last_error_detail());
                else if (pattern_check(b->p, b->size, b->size, b->seed))
                    failf(r, "%s failed and the block changed", what);
                continue;
            }
            r->ok++;
            if (pattern_check(q, b->size, n, b->seed))
                failf(r, "%s lost the contents", what);
            b->p = q;
            b->size = n;
            pattern_stamp(q, n, b->seed);
        }
    }
}

/* Free every block. A free that fails must leave the block usable. */
static void act_free(struct run *r)
{
    for (unsigned i = 0; i < r->n; i++) {
        struct blk *b = &r->b[i];
        int32_t rc = hp_free(b->p);
        if (rc == HP_OK) {
            r->ok++;
            struct hp_block_info info = HP_BLOCK_INFO_INIT;
            if (hp_info(b->p, &info) == HP_OK)
                failf(r, "hp_free said OK but the block is still registered");
            b->p = NULL;
            continue;
        }
        r->failed++;
        struct hp_block_info info = HP_BLOCK_INFO_INIT;
        if (!hp_last_error_detail()[0] || hp_info(b->p, &info) != HP_OK ||
            pattern_check(b->p, b->size, b->size, b->seed))
            failf(r, "hp_free failed (%s) and the block is not intact", hp_error_name(rc));
    }
}

/* Introspection never fails for lack of a syscall: it reports what it can. */
static void act_info(struct run *r)
{
    for (unsigned i = 0; i < r->n; i++) {
        struct hp_block_info info = HP_BLOCK_INFO_INIT;
        int32_t rc = hp_info(r->b[i].p, &info);
        if (rc != HP_OK || info.huge_bytes > info.mapped_size)
            failf(r, "hp_info: %s, huge_bytes %llu of %llu", hp_error_name(rc),
                  (unsigned long long)info.huge_bytes, (unsigned long long)info.mapped_size);
        r->ok++;
    }
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        int32_t rc = hp_backend_get((uint32_t)i, &bi);
        if (rc != HP_OK || (!bi.available && !bi.reason[0]))
            failf(r, "hp_backend_get(%d): %s, reason \"%s\"", i, hp_error_name(rc), bi.reason);
        r->ok++;
    }
    if (hp_reprobe() != HP_OK)
        failf(r, "hp_reprobe failed: %s", hp_last_error_detail());
    unsigned char *p = alloc_on(NULL, 3u << 20, 0);
    if (p)
        stamp_new(r, p, 3u << 20), r->ok++;
    else
        clear_error(r, "hp_alloc after hp_reprobe");
}

#ifdef HAVE_STACKS
/* Stacks use mprotect (guards): lean and huge-or-lean, never cached. */
static void act_stack(struct run *r)
{
    static const uint64_t flags[] = {HP_STACK_NOCACHE,
                                     HP_STACK_HUGE | HP_STACK_ALLOW_LEAN | HP_STACK_NOCACHE,
                                     HP_STACK_HUGE | HP_STACK_NOCACHE | HP_STACK_POPULATE};
    for (unsigned i = 0; i < 3; i++) {
        struct hp_stack *s = hp_stack_create(i ? (2u << 20) : (256u << 10), flags[i]);
        if (!s) {
            clear_error(r, "hp_stack_create");
            continue;
        }
        r->ok++;
        unsigned char *base = hp_stack_base(s);
        size_t size = hp_stack_size(s);
        if (!base || size < (256u << 10))
            failf(r, "stack without base or size");
        else
            base[size - 1] = 1, base[0] = 1;
        r->stacks[r->n_stacks++] = s;
    }
}
#endif

static void cleanup(struct run *r)
{
    for (unsigned i = 0; i < r->n; i++)
        if (r->b[i].p && hp_free(r->b[i].p) != HP_OK && !r->fail[0])
            failf(r, "cleanup: hp_free: %s", hp_last_error_detail());
#ifdef HAVE_STACKS
    for (unsigned i = 0; i < r->n_stacks; i++)
        if (hp_stack_destroy(r->stacks[i]) != HP_OK && !r->fail[0])
            failf(r, "cleanup: hp_stack_destroy: %s", hp_last_error_detail());
#endif
}

/* ---- the harness ---------------------------------------------------------- */

/* Bytes of anonymous memory mapped (hugetlb included, heap and stack
 * not). Unlike the line count it cannot hide a leak by VMA merging. */
static long long anon_bytes(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -1;
    char line[512];
    long long sum = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long lo, hi;
        int path = 0;
        if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %n", &lo, &hi, &path) < 2)
            continue;
        const char *name = path ? line + path : "";
        if (name[0] == '\n' || name[0] == '\0' || !strncmp(name, "/anon_hugepage", 14))
            sum += (long long)(hi - lo);
    }
    fclose(f);
    return sum;
}

static long maps0, pool_free0, pool_rsvd0;
static long long anon0;
static int baseline_taken;

static void mark_all_stale(void)
{
    struct hp_core *c = hp_core();
    for (unsigned i = 0; i < c->n; i++)
        if (c->backends[i].ops)
            hp_backend_mark_stale(&c->backends[i]);
}

/* When munmap fails for good (every call from the nth on), nothing can be
 * given back to the kernel, so for those runs the leak check only counts;
 * a single refused munmap must leak nothing (hp_free keeps the block and
 * says HP_EOS; trims keep their slack in the mapping). Every other check
 * stays strict. */
static int leak_is_known;
static unsigned long known_leaks;

static void check_world(const char *ctx)
{
    drop_caches();
    for (unsigned i = 0; i < n_witnesses; i++) {
        struct blk *w = &witnesses[i];
        struct hp_block_info info = HP_BLOCK_INFO_INIT;
        if (hp_info(w->p, &info) != HP_OK || pattern_check(w->p, w->size, w->size, w->seed)) {
            print_message("# %s: witness block %u damaged\n", ctx, i);
            fail();
        }
    }
    long maps = maps_count();
    long long anon = anon_bytes();
    uint64_t live = hp_registry_count();
    long pf = meminfo_get("HugePages_Free"), pr = meminfo_get("HugePages_Rsvd");
    /* Under memcheck (HPTEST_VALGRIND) valgrind's own mappings come and go. */
    if (getenv("HPTEST_VALGRIND"))
        maps = maps0, anon = anon0;
    if (maps != maps0 || anon != anon0 || live != n_witnesses || pf != pool_free0 ||
        pr != pool_rsvd0) {
        print_message("# %s: leaked: maps %ld (was %ld), anonymous bytes %lld (was %lld), "
                      "registry %llu (was %u), hugetlb free %ld rsvd %ld (were %ld, %ld)\n", ctx,
                      maps, maps0, anon, anon0, (unsigned long long)live, n_witnesses, pf, pr,
                      pool_free0, pool_rsvd0);
        /* The next test starts from here, not from this one's leak. */
        maps0 = maps, anon0 = anon, pool_free0 = pf, pool_rsvd0 = pr;
        if (leak_is_known && live == n_witnesses) {
            known_leaks++;
            return;
        }
        fail();
    }
}

/* Run sc once with op failing with err at call nth (every: and after). */
static void run_once(const struct scenario *sc, enum hp_os_op op, uint64_t nth, int err,
                     int every, uint64_t *calls_out)
{
    struct run r;
    memset(&r, 0, sizeof(r));
    sc->prepare(&r);
    mark_all_stale();
    uint64_t c0 = hp_os_calls(op);
    if (nth)
        hp_os_inject_fault(op, nth, err, every);
    sc->act(&r);
    hp_os_clear_faults();
    uint64_t made = hp_os_calls(op) - c0;
    if (calls_out)
        *calls_out = made;
    cleanup(&r);
    runs++;
    fired += nth && made >= nth;
    calls_ok += r.ok;
    calls_failed += r.failed;
    char ctx[160];
    snprintf(ctx, sizeof(ctx), "%s, %s fails with %s at call %llu%s", sc->name,
             op_names[op], strerror(err), (unsigned long long)nth, every ? " and after" : "");
    if (r.fail[0]) {
        print_message("# %s: %s\n", ctx, r.fail);
        fail();
    }
    leak_is_known = op == HP_OS_UNMAP && nth && every;
    if (baseline_taken)
        check_world(ctx);
}

/* The 4 ways a call fails: once with each of errs[], or ENOMEM from that
 * call on. */
#define FAULT_WAYS 4

/* HPTEST_FAULT_WAYS=1..3 (the sanitizer and valgrind stages, which look for
 * memory errors and pay 2 to 20 times per run): each call fails that many
 * ways instead of all 4, the ways rotating with the call number, so every
 * call of every scenario still fails and every way still occurs. */
static unsigned fault_ways(void)
{
    unsigned long n = env_count("HPTEST_FAULT_WAYS", FAULT_WAYS);
    return n < FAULT_WAYS ? (unsigned)n : FAULT_WAYS;
}

static void run_scenario(const struct scenario *sc)
{
    unsigned long runs0 = runs, fired0 = fired;
    unsigned ways = fault_ways();
    for (size_t o = 0; o < sizeof(ops) / sizeof(*ops); o++) {
        uint64_t k = 0;
        run_once(sc, ops[o], 0, 0, 0, &k);  /* dry run: how many calls */
        for (uint64_t n = 1; n <= k; n++) {
            unsigned first = ways < FAULT_WAYS ? (unsigned)((n + o) % FAULT_WAYS) : 0;
            for (unsigned j = 0; j < ways; j++) {
                unsigned w = (first + j) % FAULT_WAYS;
                if (w < sizeof(errs) / sizeof(*errs))
                    run_once(sc, ops[o], n, errs[w], 0, NULL);
                else
                    run_once(sc, ops[o], n, ENOMEM, 1, NULL);
            }
        }
        print_message("# %-8s %-8s: %llu calls, each failed %u ways\n", sc->name,
                      op_names[ops[o]], (unsigned long long)k, ways);
    }
    print_message("# %s: %lu runs, %lu injected faults fired\n", sc->name, runs - runs0,
                  fired - fired0);
}

static void make_witnesses(void)
{
    for (unsigned k = 0; k < n_backends; k++) {
        size_t size = k % 2 ? (2u << 20) + 12345 : 77777;
        unsigned char *p = alloc_on(backends[k], size, 0);
        if (!p)
            continue;
        struct blk *w = &witnesses[n_witnesses++];
        w->p = p;
        w->size = size;
        w->seed = UINT64_C(0x717e55) + k;
        pattern_stamp(p, size, w->seed);
    }
}

static int setup(void **state)
{
    (void)state;
    static char names[MAX_BACKENDS][32];
    backends[n_backends++] = NULL;
    for (int32_t i = 0; i < hp_backend_count() && n_backends < MAX_BACKENDS; i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) != HP_OK || !bi.available ||
            bi.kind == HP_KIND_OTHER)
            continue;
        snprintf(names[n_backends], sizeof(names[0]), "%s", bi.name);
        backends[n_backends] = names[n_backends];
        n_backends++;
    }
    for (int i = 0; i < n_named && n_backends < MAX_BACKENDS; i++) {
        void *p = alloc_on(named[i], 4096, 0);
        if (!p) {
            printf("# SKIP: %s cannot serve here: %s\n", named[i], hp_last_error_detail());
            exit(77);
        }
        hp_free(p);
        backends[n_backends++] = named[i];
    }
    make_witnesses();
    /* One clean pass of everything, so lazily made state exists already. */
    static const struct scenario warm = {"warm-up", prepare_blocks, act_realloc};
    run_once(&warm, HP_OS_MAP, 0, 0, 0, NULL);
#ifdef HAVE_STACKS
    /* The stack handle table is mapped on first use. */
    hp_stack_destroy(hp_stack_create(1u << 16, HP_STACK_NOCACHE));
#endif
    drop_caches();
    maps0 = maps_count();
    anon0 = anon_bytes();
    pool_free0 = meminfo_get("HugePages_Free");
    pool_rsvd0 = meminfo_get("HugePages_Rsvd");
    baseline_taken = 1;
    return 0;
}

static void faults_in_alloc(void **state)
{
    (void)state;
    static const struct scenario sc = {"alloc", prepare_nothing, act_alloc};
    run_scenario(&sc);
}

static void faults_in_realloc(void **state)
{
    (void)state;
    static const struct scenario sc = {"realloc", prepare_blocks, act_realloc};
    run_scenario(&sc);
}

static void faults_in_free(void **state)
{
    (void)state;
    static const struct scenario sc = {"free", prepare_blocks, act_free};
    run_scenario(&sc);
}

static void faults_in_introspection(void **state)
{
    (void)state;
    static const struct scenario sc = {"info", prepare_blocks, act_info};
    run_scenario(&sc);
}

static void faults_in_stacks(void **state)
{
    (void)state;
#ifdef HAVE_STACKS
    static const struct scenario sc = {"stack", prepare_nothing, act_stack};
    run_scenario(&sc);
#else
    print_message("# skipped: this libhp has no stacks\n");
#endif
}

/* The descriptor and NUMA upcalls a plugin gets in struct hp_host fail on
 * demand like the memory ones, and work again once the fault is cleared. */
static void faults_in_plugin_upcalls(void **state)
{
    (void)state;
    const struct hp_host *h = &hp_core()->host;
    int fd = -1;
    hp_os_inject_fault(HP_OS_MEMFD, 1, ENOMEM, 0);
    assert_int_equal(h->os_memfd("hp-fault", 0, &fd), -ENOMEM);
    assert_int_equal(fd, -1);
    assert_int_equal(h->os_memfd("hp-fault", 0, &fd), 0);
    assert_true(fd >= 0);
    hp_os_inject_fault(HP_OS_FTRUNCATE, 1, EINVAL, 0);
    assert_int_equal(h->os_ftruncate(fd, 1 << 16), -EINVAL);
    assert_int_equal(h->os_ftruncate(fd, 1 << 16), 0);
    assert_int_equal(h->os_ftruncate(fd, -1), -EINVAL);
    void *p;
    assert_int_equal(h->os_map(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0, &p), 0);
    memset(p, 0x5a, 1 << 16);
    assert_int_equal(h->os_unmap(p, 1 << 16), 0);
    /* An injected close failure still closes: the descriptor does not leak. */
    hp_os_inject_fault(HP_OS_CLOSE, 1, EINTR, 0);
    assert_int_equal(h->os_close(fd), -EINTR);
    assert_int_equal(fcntl(fd, F_GETFD), -1);
    assert_int_equal(h->os_close(-1), -EBADF);
    unsigned cpu = 9999, node = 9999;
    hp_os_inject_fault(HP_OS_GETCPU, 1, EAGAIN, 0);
    assert_int_equal(h->os_getcpu(&cpu, &node), -EAGAIN);
    assert_int_equal(cpu, 9999);
    assert_int_equal(h->os_getcpu(&cpu, &node), 0);
    assert_true(cpu < 4096 && node < 4096);
    assert_int_equal(h->os_getcpu(NULL, NULL), 0);
    assert_int_equal(h->os_map(NULL, 1 << 16, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0, &p), 0);
    hp_os_inject_fault(HP_OS_MBIND, 1, EIO, 0);
    assert_int_equal(h->os_mbind(p, 1 << 16, 0 /* MPOL_DEFAULT */, NULL, 0, 0), -EIO);
    int rc = h->os_mbind(p, 1 << 16, 0 /* MPOL_DEFAULT */, NULL, 0, 0);
    assert_true(rc == 0 || rc == -ENOSYS);
    assert_int_equal(h->os_mbind(p, 1 << 16, 0, NULL, 5000, 0), -EINVAL);
    /* os_page_node never faults a page in: untouched memory has no node. */
    int node_of = 9999;
    assert_int_equal(h->os_page_node(p, &node_of), -ENOENT);
    assert_int_equal(node_of, 9999);
    ((volatile char *)p)[0] = 1;
    hp_os_inject_fault(HP_OS_NODE, 1, EIO, 0);
    assert_int_equal(h->os_page_node(p, &node_of), -EIO);
    rc = h->os_page_node(p, &node_of);
    assert_true((rc == 0 && node_of >= 0 && node_of < 4096) || rc == -ENOSYS);
    assert_int_equal(h->os_unmap(p, 1 << 16), 0);
    /* hp_info of a built-in's block asks the upcall; when it fails the node
     * is unknown and hp_info still succeeds. */
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "fallback";
    o.flags = HP_F_POPULATE;
    void *b = hp_alloc_ex(1 << 16, &o);
    assert_non_null(b);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    assert_int_equal(hp_info(b, &info), HP_OK);
    assert_true(info.numa_node == (rc == 0 ? node_of : -1) && info.fd == -1);
    hp_os_inject_fault(HP_OS_NODE, 1, EIO, 0);
    assert_int_equal(hp_info(b, &info), HP_OK);
    assert_true(info.numa_node == -1 && info.fd == -1);
    assert_int_equal(hp_free(b), HP_OK);
    hp_os_clear_faults();
}

static void totals(void **state)
{
    (void)state;
    print_message("# total: %lu scenario runs, %lu injected faults fired; %lu libhp calls "
                  "succeeded, %lu failed cleanly\n", runs, fired, calls_ok, calls_failed);
    print_message("# known open finding: %lu runs leaked a range after a failed munmap\n",
                  known_leaks);
    for (unsigned i = 0; i < n_witnesses; i++)
        assert_int_equal(hp_free(witnesses[i].p), HP_OK);
    assert_int_equal(hp_registry_count(), 0);
}

int main(int argc, char **argv)
{
    named = argv + 1;
    n_named = argc - 1;
    /* Under memcheck no hugetlb pool: valgrind does not follow hugetlb
     * mappings (see tests/stress/stress_env.h). */
    if (is_root())
        pool_set(2048, getenv("HPTEST_VALGRIND") ? 0 : 8);
    else
        knob_lock();
    enable_cache();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(faults_in_alloc),
        cmocka_unit_test(faults_in_realloc),
        cmocka_unit_test(faults_in_free),
        cmocka_unit_test(faults_in_introspection),
        cmocka_unit_test(faults_in_stacks),
        cmocka_unit_test(faults_in_plugin_upcalls),
        cmocka_unit_test(totals),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
