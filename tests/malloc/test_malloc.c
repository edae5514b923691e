/*
 * libhp-malloc.so under a program that does not know it is there: this
 * binary runs with LD_PRELOAD=libhp-malloc.so (meson.build) and calls the
 * plain malloc family. It checks that the preload took, the family's
 * contracts (alignment, errno, overflow), that large blocks are libhp
 * blocks moved by hp_realloc, foreign pointers, threads, fork+exec from a
 * threaded program, and ENOMEM under RLIMIT_AS.
 *
 *   test_malloc          the tests above
 *   test_malloc pool     a hugetlb pool drained while the program runs, with
 *                        HP_MALLOC_POOL=all; fork children writing their heap
 *                        with the pool drained, by default, with
 *                        HP_MALLOC_POOL=1 (large blocks) and =all
 *                        (root; takes the knob lock, restores the pool)
 */
#include <hp.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pattern.h"
#include "support.h"

#define MiB ((size_t)1 << 20)

/* Hide where a pointer came from, so the compiler lets the test hand
 * non-heap memory to free() on purpose. */
static void *opaque(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

static void t_preloaded(void **state)
{
    (void)state;
    union {
        void *(*fn)(size_t);
        void *p;
    } m = {.fn = malloc};
    Dl_info info;
    assert_true(dladdr(m.p, &info));
    assert_non_null(strstr(info.dli_fname, "libhp-malloc.so"));
}

/* Sizes the compiler cannot see through, for the deliberate overflows. */
static volatile size_t size_max = SIZE_MAX;

static void t_errno_and_overflow(void **state)
{
    (void)state;
    const size_t big = size_max;
    errno = 0;
    assert_null(calloc(big / 2, 3));
    assert_int_equal(errno, ENOMEM);
    errno = 0;
    assert_null(malloc(big));
    assert_int_equal(errno, ENOMEM);
    errno = 0;
    assert_null(malloc(big - 4096));
    assert_int_equal(errno, ENOMEM);

    char *p = malloc(16);
    assert_non_null(p);
    strcpy(p, "kept");
    errno = 0;
    assert_null(reallocarray(opaque(p), big / 2, 4));
    assert_int_equal(errno, ENOMEM);
    assert_string_equal(opaque(p), "kept");  /* untouched on failure */
    errno = 0;
    assert_null(realloc(opaque(p), big - 64));
    assert_int_equal(errno, ENOMEM);
    assert_string_equal(opaque(p), "kept");
    p = reallocarray(p, 100, 10);
    assert_non_null(p);
    assert_string_equal(p, "kept");
    assert_true(malloc_usable_size(p) >= 1000);
    assert_null(realloc(p, 0));  /* glibc's realloc(p, 0): free, NULL */

    void *z = malloc(0);
    assert_non_null(z);
    free(z);
    free(NULL);
    assert_int_equal(malloc_usable_size(NULL), 0);

    /* errno survives a successful call and free(): a libhp block, */
    errno = 1234;
    void *q = malloc(10 * MiB);
    assert_non_null(q);
    q = realloc(q, 20 * MiB);  /* hp_realloc */
    assert_non_null(q);
    assert_int_equal(errno, 1234);
    free(q);
    assert_int_equal(errno, 1234);
}

/* docs/malloc.md, "Errors": a successful call and free never change errno.
 * Small requests are served by mimalloc in libhp's arenas; errno is checked
 * after every call, so the one that changed it is named. */
static void t_errno_kept_by_arena_calls(void **state)
{
    (void)state;
    const int sentinel = 12345;
    errno = sentinel;
    char *m = malloc(24);
    assert_non_null(m);
    assert_int_equal(errno, sentinel);
    char *c = calloc(3, 8);
    assert_non_null(c);
    assert_int_equal(errno, sentinel);
    m = realloc(m, 100);
    assert_non_null(m);
    assert_int_equal(errno, sentinel);
    m = realloc(m, 5000);
    assert_non_null(m);
    assert_int_equal(errno, sentinel);
    void *a = aligned_alloc(64, 64);
    assert_non_null(a);
    assert_int_equal((uintptr_t)a % 64, 0);
    assert_int_equal(errno, sentinel);
    void *pm = NULL;
    assert_int_equal(posix_memalign(&pm, 256, 300), 0);
    assert_int_equal(errno, sentinel);
    assert_true(malloc_usable_size(m) >= 5000);
    assert_true(malloc_usable_size(c) >= 24);
    assert_int_equal(errno, sentinel);
    free(m);
    assert_int_equal(errno, sentinel);
    free(c);
    assert_int_equal(errno, sentinel);
    free(a);
    assert_int_equal(errno, sentinel);
    free(pm);
    assert_int_equal(errno, sentinel);
}

/* The first malloc of a process keeps errno. libhp-malloc sets itself up
 * (options, the first arena, libhp's plugins and probes) when it is loaded,
 * or at the first allocation if one comes earlier, and keeps errno on both
 * paths. Run as the first thing of a fresh exec. */
static int errno_child(void)
{
    errno = 12345;
    void *p = malloc(24);
    int after = errno;
    if (!p || after != 12345) {
        fprintf(stderr, "# the first malloc returned %p and left errno %d (%s)\n", p, after,
                strerror(after));
        return 1;
    }
    free(p);
    return errno == 12345 ? 0 : 2;
}

static void t_aligned(void **state)
{
    (void)state;
    void *p = NULL;
    assert_int_equal(posix_memalign(&p, 3, 10), EINVAL);
    assert_int_equal(posix_memalign(&p, 4, 10), EINVAL);  /* not a multiple of sizeof(void *) */
    assert_null(p);
    errno = 77;
    assert_int_equal(posix_memalign(&p, 64, SIZE_MAX - 4096), ENOMEM);
    assert_int_equal(errno, 77);  /* posix_memalign reports through its result only */
    assert_null(p);
    static const size_t aligns[] = {8, 16, 32, 64, 4096, 65536, MiB, 4 * MiB};
    static const size_t sizes[] = {1, 100, 5000, 300000, 5 * MiB};
    for (size_t i = 0; i < sizeof(aligns) / sizeof(*aligns); i++)
        for (size_t k = 0; k < sizeof(sizes) / sizeof(*sizes); k++) {
            assert_int_equal(posix_memalign(&p, aligns[i], sizes[k]), 0);
            assert_int_equal((uintptr_t)p % aligns[i], 0);
            memset(p, 0x5a, sizes[k]);
            assert_true(malloc_usable_size(p) >= sizes[k]);
            free(p);
            p = aligned_alloc(aligns[i], sizes[k]);
            assert_non_null(p);
            assert_int_equal((uintptr_t)p % aligns[i], 0);
            free(p);
        }
    errno = 0;
    assert_null(aligned_alloc(3, 30));
    assert_int_equal(errno, EINVAL);
    /* Above 16 MiB: refused at once, without arenas grown in vain. */
    errno = 0;
    assert_null(aligned_alloc(64 * MiB, 100));
    assert_int_equal(errno, ENOMEM);
    p = memalign(24, 10);  /* glibc rounds 24 up to 32 */
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 32, 0);
    free(p);
    p = valloc(100);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 4096, 0);
    free(p);
    p = pvalloc(1);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 4096, 0);
    assert_true(malloc_usable_size(p) >= 4096);
    free(p);
    errno = 0;
    assert_null(pvalloc(SIZE_MAX - 10));
    assert_int_equal(errno, ENOMEM);
}

static void t_calloc_zero(void **state)
{
    (void)state;
    static const size_t sizes[] = {24, 4000, 200000, 3 * MiB, 6 * MiB, 40 * MiB};
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
            unsigned char *p = malloc(sizes[i]);
            assert_non_null(p);
            memset(p, 0xff, sizes[i]);
            free(p);
            p = calloc(1, sizes[i]);
            assert_non_null(p);
            for (size_t off = 0; off < sizes[i]; off += 509)
                assert_int_equal(p[off], 0);
            assert_int_equal(p[sizes[i] - 1], 0);
            free(p);
        }
}

/* Requests from HP_MALLOC_LARGE (8 MiB by default) up are libhp blocks;
 * realloc keeps the contents across every kind of move. */
static void t_large_blocks(void **state)
{
    (void)state;
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    unsigned char *small = malloc(1000);
    assert_non_null(small);
    assert_int_not_equal(hp_info(small, &info), HP_OK);  /* inside an arena */
    pattern_stamp(small, 1000, 1);
    unsigned char *p = realloc(small, 8 * MiB);  /* arena -> libhp block */
    assert_non_null(p);
    assert_int_equal(hp_info(p, &info), HP_OK);
    assert_true(info.usable_size >= 8 * MiB);
    assert_int_equal(pattern_check(p, 1000, 1000, 1), 0);
    pattern_stamp(p, 8 * MiB, 2);
    p = realloc(p, 96 * MiB);  /* libhp block grows: hp_realloc */
    assert_non_null(p);
    assert_int_equal(hp_info(p, &info), HP_OK);
    assert_true(info.usable_size >= 96 * MiB);
    assert_true(malloc_usable_size(p) >= 96 * MiB);
    assert_int_equal(pattern_check(p, 8 * MiB, 8 * MiB, 2), 0);
    pattern_stamp(p, 96 * MiB, 3);
    p = realloc(p, 5 * MiB);  /* shrinks in place */
    assert_non_null(p);
    assert_int_equal(pattern_check(p, 96 * MiB, 5 * MiB, 3), 0);
    p = realloc(p, 3000);  /* back into an arena */
    assert_non_null(p);
    assert_int_not_equal(hp_info(p, &info), HP_OK);
    assert_int_equal(pattern_check(p, 96 * MiB, 3000, 3), 0);
    free(p);
}

/* The mapping of /proc/self/maps that holds p: its range, 0 if none. */
static int mapping_of(const void *p, uintptr_t *lo, uintptr_t *hi)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    int found = 0;
    while (f && !found && fgets(line, sizeof(line), f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a <= (uintptr_t)p && (uintptr_t)p < b) {
            *lo = a;
            *hi = b;
            found = 1;
        }
    }
    if (f)
        fclose(f);
    return found;
}

/* docs/malloc.md: arenas are never unmapped; memory freed in them goes
 * back to mimalloc. 200,000 objects (about 20 MiB) and all freed again,
 * then malloc_trim: the arena that held the first object is still mapped,
 * over at least the range it had, and serves the same size again. */
static void t_arenas_stay(void **state)
{
    (void)state;
    enum { N = 200000 };
    void **v = malloc(N * sizeof(*v));
    assert_non_null(v);
    for (int i = 0; i < N; i++) {
        v[i] = malloc(64 + (size_t)(i % 7) * 16);
        assert_non_null(v[i]);
        memset(v[i], i, 64);
    }
    uintptr_t lo, hi, lo2, hi2;
    assert_true(mapping_of(v[0], &lo, &hi));
    for (int i = 0; i < N; i++)
        free(v[i]);
    malloc_trim(0);
    assert_true(mapping_of(v[0], &lo2, &hi2));  /* still mapped: no SIGSEGV to come */
    assert_true(lo2 <= lo && hi2 >= hi);
    void *again = malloc(64);
    assert_non_null(again);
    memset(again, 1, 64);
    free(again);
    free(v);
}

/* Pointers libhp-malloc did not hand out: freeing them is ignored, realloc
 * copies what is readable, nothing crashes and the memory is untouched. */
static char static_buf[256] __attribute__((aligned(64)));


static void t_foreign(void **state)
{
    (void)state;
    strcpy(static_buf + 8, "not from malloc");
    free(opaque(static_buf + 8));
    assert_string_equal(static_buf + 8, "not from malloc");
    assert_int_equal(malloc_usable_size(static_buf + 8), 0);
    char *q = realloc(opaque(static_buf + 8), 4000);
    assert_non_null(q);
    assert_string_equal(q, "not from malloc");
    free(q);

    /* Page aligned, so it looks like a libhp block until libhp says no. */
    char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    strcpy(m, "mapped by hand");
    free(opaque(m));
    assert_string_equal(m, "mapped by hand");
    /* A block at the end of a mapping: the copy stops where memory does. */
    char *tail = m + 8192 - 16;
    strcpy(tail, "end of the map");
    q = realloc(opaque(tail), 1 << 20);
    assert_non_null(q);
    assert_string_equal(q, "end of the map");
    free(q);
    munmap(m, 8192);
}

#define NTHREADS 8
#define SLOTS 512
static void *_Atomic shared_slots[SLOTS];

static void *churn(void *arg)
{
    uint64_t seed = (uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
    long ops = (long)env_count("HPTEST_OPS", 40000);  /* scaled down under valgrind */
    for (long i = 0; i < ops; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        size_t n = (seed & 255) == 0 ? (seed >> 20) % (6 * MiB) + 1 : (seed >> 20) % 2000 + 8;
        unsigned char *p = malloc(n);
        if (!p)
            return (void *)1;
        p[0] = (unsigned char)n;
        p[n - 1] = (unsigned char)(n >> 8);
        /* Swap with a shared slot: blocks are freed by other threads. */
        unsigned char *old = atomic_exchange(&shared_slots[seed % SLOTS], p);
        if (old) {
            size_t u = malloc_usable_size(old);
            if (u < 8)
                return (void *)2;
            free(old);
        }
    }
    return NULL;
}

static void t_threads(void **state)
{
    (void)state;
    pthread_t t[NTHREADS];
    for (uintptr_t i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, churn, (void *)i), 0);
    for (int i = 0; i < NTHREADS; i++) {
        void *r;
        pthread_join(t[i], &r);
        assert_null(r);
    }
    for (int i = 0; i < SLOTS; i++)
        free(atomic_exchange(&shared_slots[i], NULL));
}

static _Atomic int stop_churn;

static void *churn_until_stopped(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_churn)) {
        void *p = malloc(100 + (size_t)rand() % 10000);
        void *q = malloc(5 * MiB);
        free(p);
        free(q);
    }
    return NULL;
}

/* A child between fork and exec: allocates and writes a small and a large
 * block, frees them and execs true, as shells and Python do. 3 or 4 if
 * that fails. */
static void child_mallocs_then_execs(size_t small, size_t large)
{
    char *a = malloc(small), *b = malloc(large);
    if (!a || !b)
        _exit(3);
    memset(a, 1, small);
    memset(b, 2, large);
    free(a);
    free(b);
    execl("/bin/true", "true", (char *)NULL);
    _exit(4);
}

static void t_fork_exec_threaded(void **state)
{
    (void)state;
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, churn_until_stopped, NULL), 0);
    for (int i = 0; i < 30; i++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            child_mallocs_then_execs(200, 6 * MiB);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    atomic_store(&stop_churn, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
}

/* Out of address space: NULL with ENOMEM from every path, never a crash;
 * the blocks that exist stay usable. Runs in a child so the limit stays
 * there. */
static int oom_child(void)
{
    long vm_pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &vm_pages) != 1)
        return 10;
    fclose(f);
    char *keep = malloc(6 * MiB);
    if (!keep)
        return 11;
    memset(keep, 7, 6 * MiB);
    struct rlimit rl = {.rlim_cur = (rlim_t)vm_pages * 4096 + 256 * MiB};
    rl.rlim_max = rl.rlim_cur;
    if (setrlimit(RLIMIT_AS, &rl))
        return 12;
    errno = 0;
    if (malloc((size_t)1 << 30) || errno != ENOMEM)
        return 13;
    errno = 0;
    if (realloc(keep, (size_t)1 << 30) || errno != ENOMEM || keep[6 * MiB - 1] != 7)
        return 14;
    errno = 0;
    if (calloc(1, 700 * MiB) || errno != ENOMEM)
        return 15;
    /* Small objects until the arenas cannot grow. */
    long n = 0;
    void *p;
    errno = 0;
    while ((p = malloc(60000)) && n < 100000) {
        memset(p, 1, 64);
        n++;
    }
    if (p || errno != ENOMEM)
        return 16;
    if (n < 100)
        return 17;  /* the limit left room for 256 MiB */
    return keep[0] == 7 ? 0 : 18;
}

/* Exit status of a fresh exec of this test as "mode arg", with
 * HP_MALLOC_POOL set to pool (NULL: unset), so its first arena is made
 * with the pool as it is now. */
static int exec_self(const char *mode, const char *arg, const char *pool)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (pool)
            setenv("HP_MALLOC_POOL", pool, 1);
        else
            unsetenv("HP_MALLOC_POOL");
        execl("/proc/self/exe", "test_malloc", mode, arg, (char *)NULL);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

/* A fresh exec: its first malloc, right after libhp-malloc set itself up
 * at load time. */
static void t_errno_kept_by_the_first_malloc(void **state)
{
    (void)state;
    assert_int_equal(exec_self("errno-child", NULL, NULL), 0);
}

/* A program whose first allocation is libhp's own: hp_alloc before any
 * malloc, in a fresh exec. libhp's start-up allocates; had libhp-malloc
 * not set itself up when it was loaded, that allocation would set it up
 * from inside libhp's start-up, which it cannot call back (the wait would
 * be for ever; libhp now refuses it), and the first arena would come from
 * plain mmap with a warning. So: the block is served, nothing waits on
 * itself (the alarm ends a hang) and no warning is written. */
static int hp_first_child(void)
{
    alarm(20);
    int fds[2];
    if (pipe(fds) != 0 || fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0)
        return 2;
    int err = dup(2);
    dup2(fds[1], 2);
    void *p = hp_alloc(1 << 20, 0);
    char *q = malloc(24);
    char said[512] = "";
    ssize_t n = read(fds[0], said, sizeof(said) - 1);
    said[n > 0 ? n : 0] = '\0';
    dup2(err, 2);
    if (!p || !q || said[0]) {
        fprintf(stderr, "# hp_alloc %p (%s), malloc %p, stderr: \"%s\"\n", p,
                p ? "" : hp_last_error_detail(), (void *)q, said);
        return 1;
    }
    free(q);
    return hp_free(p) == HP_OK ? 0 : 3;
}

static void t_hp_alloc_first(void **state)
{
    (void)state;
    assert_int_equal(exec_self("hp-first-child", NULL, NULL), 0);
}

/* The child runs in a fresh exec, not in a fork of this process, so its
 * address-space limit counts its own mappings only. */
static void t_oom(void **state)
{
    (void)state;
    assert_int_equal(exec_self("oom-child", NULL, NULL), 0);
}

/* ---- the pool drained mid-run ---- */

#define POOL "/sys/kernel/mm/hugepages/hugepages-2048kB/"

static long pool_value(const char *file)
{
    char buf[64];
    char path[128];
    snprintf(path, sizeof(path), POOL "%s", file);
    return knob_get(path, buf, sizeof(buf)) ? -1 : atol(buf);
}

/* KernelPageSize of the mapping holding p, in KiB (0 if not found). */
static long kernel_page_kb(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    int in = 0;
    long kb = 0;
    while (f && fgets(line, sizeof(line), f)) {
        uintptr_t lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (in && sscanf(line, "KernelPageSize: %ld kB", &kb) == 1)
            break;
    }
    if (f)
        fclose(f);
    return kb;
}

static int drain_child(void)
{
    /* Arenas and large blocks made while the pool has pages... */
    enum { N = 20000 };
    static unsigned char *objs[N];
    for (int i = 0; i < N; i++) {
        objs[i] = malloc(1000);
        if (!objs[i])
            return 20;
        pattern_stamp(objs[i], 1000, (uint64_t)i);
    }
    if (kernel_page_kb(objs[0]) != 2048)
        return 21;  /* the first arena did not come from the pool */
    unsigned char *big = malloc(16 * MiB);
    if (!big)
        return 22;
    pattern_stamp(big, 16 * MiB, 99);
    /* ...then someone else takes every free page of the pool... */
    long taken = 0;
    while (mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0) != MAP_FAILED)
        taken++;
    if (pool_value("free_hugepages") - pool_value("resv_hugepages") > 0)
        return 23;
    /* ...and the program goes on: new arenas and blocks come from
     * elsewhere, old ones keep their pages; no SIGBUS anywhere. */
    static unsigned char *more[60000];
    for (int i = 0; i < 60000; i++) {
        more[i] = malloc(4000);
        if (!more[i])
            return 24;
        pattern_stamp(more[i], 4000, (uint64_t)i + N);
    }
    if (kernel_page_kb(more[59999]) != 4)
        return 25;  /* must be a new arena, not from the pool */
    big = realloc(big, 200 * MiB);
    if (!big)
        return 26;
    memset(big + 16 * MiB, 1, 184 * MiB);
    if (pattern_check(big, 16 * MiB, 16 * MiB, 99))
        return 27;
    for (int i = 0; i < N; i++)
        if (pattern_check(objs[i], 1000, 1000, (uint64_t)i))
            return 28;
    for (int i = 0; i < 60000; i++)
        if (pattern_check(more[i], 4000, 4000, (uint64_t)i + N))
            return 29;
    return taken > 0 ? 0 : 30;
}

/* Take every free page of the 2 MiB pool, as another program would. 0 if
 * the pool is empty afterwards. */
static int take_the_pool(void)
{
    while (mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0) != MAP_FAILED)
        ;
    return pool_value("free_hugepages") - pool_value("resv_hugepages") > 0 ? -1 : 0;
}

/* Heap made while the pool has free pages (HP_MALLOC_POOL is pool: "0",
 * "1" or "all"), then the pool taken, then fork (from a threaded program)
 * ten times: each child writes every object it inherited, and the large
 * block too if write_big, allocates, frees and execs, as a shell does
 * between fork and exec. 0 when every child exited 0 and the arenas and
 * the large block were where pool puts them (arenas on the pool with "all"
 * only, the large block with "1" and "all"); 128 + signal of the first
 * child killed; 40-59 otherwise. */
static int fork_write_child(const char *pool, int write_big)
{
    int arena_pooled = !strcmp(pool, "all"), big_pooled = strcmp(pool, "0") != 0;
    enum { N = 20000 };
    static unsigned char *objs[N];
    for (int i = 0; i < N; i++) {
        if (!(objs[i] = malloc(1000)))
            return 40;
        pattern_stamp(objs[i], 1000, (uint64_t)i);
    }
    unsigned char *big = malloc(16 * MiB);
    if (!big)
        return 41;
    pattern_stamp(big, 16 * MiB, 7);
    long kb_small = kernel_page_kb(objs[0]), kb_big = kernel_page_kb(big);
    fprintf(stderr, "# HP_MALLOC_POOL=%s: arena on %ld kB pages, large block on %ld kB\n",
            pool, kb_small, kb_big);
    if (take_the_pool())
        return 43;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, churn_until_stopped, NULL))
            return 44;
    int ret = 0;
    for (int k = 1; k <= 10 && !ret; k++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            ret = 45;
            break;
        }
        if (pid == 0) {
            signal(SIGBUS, SIG_DFL);
            for (int i = 0; i < N; i++)
                memset(objs[i], k, 1000);
            if (write_big)
                memset(big, k, 16 * MiB);
            free(objs[0]);
            child_mallocs_then_execs(300, 9 * MiB);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid)
            ret = 46;
        else if (WIFSIGNALED(st))
            ret = 128 + WTERMSIG(st);
        else if (WEXITSTATUS(st))
            ret = 50 + WEXITSTATUS(st);
    }
    atomic_store(&stop_churn, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < N && !ret; i++)
        if (pattern_check(objs[i], 1000, 1000, (uint64_t)i))
            ret = 47;
    if (!ret && pattern_check(big, 16 * MiB, 16 * MiB, 7))
        ret = 48;
    /* Checked last, so that a SIGBUS is what a misplaced arena shows. */
    if (!ret && ((kb_small == 2048) != arena_pooled || (kb_big == 2048) != big_pooled))
        ret = 42;
    return ret;
}

/* Grow the 2 MiB pool to 64 pages more than in use: room for the first
 * arena (96 MiB with its alignment slack), not for everything a child
 * allocates. 0, or -1 (skip: restored already). */
static int pool_with_room(void)
{
    long total = pool_value("nr_hugepages"), fr = pool_value("free_hugepages");
    char v[32];
    snprintf(v, sizeof(v), "%ld", total - fr + 64);
    assert_int_equal(knob_set(POOL "nr_hugepages", v), 0);
    if (pool_value("free_hugepages") < 48) {
        knob_restore_all();
        print_message("skip: the kernel gave too few pool pages\n");
        return -1;
    }
    return 0;
}

static int need_pool(void)
{
    if (geteuid() != 0 || pool_value("nr_hugepages") < 0) {
        print_message("skip: needs root and a 2 MiB hugetlb pool\n");
        return -1;
    }
    return 0;
}

static void t_drained_pool(void **state)
{
    (void)state;
    if (need_pool() || pool_with_room())
        skip();
    int st = exec_self("drain-child", NULL, "all");
    knob_restore_all();
    assert_int_equal(st, 0);
}

/* By default nothing comes from the pool, so a fork child may write all it
 * inherited with the pool empty. With HP_MALLOC_POOL=all the same child dies
 * of SIGBUS (the kernel rule of hp/alloc.h), which shows the pool really
 * was empty and the default is what saves it. */
static void t_fork_writes_with_pool_taken(void **state)
{
    (void)state;
    if (need_pool() || pool_with_room())
        skip();
    int by_default = exec_self("fork-child", "0 1", NULL);
    int pooled = exec_self("fork-child", "all 1", "all");
    knob_restore_all();
    print_message("# fork children writing inherited heap, pool empty: default %d, "
                  "HP_MALLOC_POOL=all %d\n", by_default, pooled);
    assert_int_equal(by_default, 0);
    assert_int_equal(pooled, 128 + SIGBUS);
}

/* HP_MALLOC_POOL=1 (hpctl run --pool) puts the large block on the pool and
 * keeps the arenas off it: children that write their heap between fork and
 * exec, as shells and xargs do, live with the pool empty; a child that
 * writes the inherited large block dies of SIGBUS, as docs/malloc.md says. */
static void t_fork_heap_writes_pool_large(void **state)
{
    (void)state;
    if (need_pool() || pool_with_room())
        skip();
    int heap = exec_self("fork-child", "1 0", "1");
    int big = exec_self("fork-child", "1 1", "1");
    knob_restore_all();
    print_message("# HP_MALLOC_POOL=1, pool empty: children writing their heap %d, "
                  "writing the large block too %d\n", heap, big);
    assert_int_equal(heap, 0);
    assert_int_equal(big, 128 + SIGBUS);
}

/* ---- the next arena mapped ahead (HP_MALLOC_AHEAD, arena.c) ---- */

/* Is a thread of this process named hpm-ahead? */
static int ahead_thread_runs(void)
{
    char path[64], comm[32];
    int found = 0;
    for (int tid = 1; tid < 4194304 && !found; tid++) {
        snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        found = fgets(comm, sizeof(comm), f) && !strncmp(comm, "hpm-ahead", 9);
        fclose(f);
    }
    return found;
}

/* Small objects until the arenas have grown several times (HP_MALLOC_ARENA
 * 32M, so about eight arenas for 240 MiB), each written with its index;
 * with argument "fork", a second thread forks meanwhile (children that
 * allocate and exit). Then every object is checked. Exits 0, or the line
 * of the first check that failed. */
#define AHEAD_N (240 * 1024 * 1024 / 64)
static _Atomic int grow_done;

static void *fork_while_growing(void *arg)
{
    (void)arg;
    int forks = 0;
    while (!atomic_load(&grow_done) || forks < 20) {
        pid_t pid = fork();
        if (pid < 0)
            return (void *)1;
        if (pid == 0) {
            char *a = malloc(100), *b = malloc(1 << 20);
            if (!a || !b)
                _exit(3);
            memset(a, 1, 100);
            memset(b, 2, 1 << 20);
            free(a);
            free(b);
            _exit(0);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return (void *)2;
        forks++;
    }
    return NULL;
}

static int ahead_child(const char *how)
{
    int forking = !strcmp(how, "fork");
    pthread_t t;
    alarm(120);
    if (forking && pthread_create(&t, NULL, fork_while_growing, NULL) != 0)
        return __LINE__;
    uint64_t **v = malloc(AHEAD_N * sizeof(*v));
    if (!v)
        return __LINE__;
    for (size_t i = 0; i < AHEAD_N; i++) {
        v[i] = malloc(64);
        if (!v[i])
            return __LINE__;
        v[i][0] = i;
        v[i][7] = ~i;
    }
    int runs = ahead_thread_runs();
    atomic_store(&grow_done, 1);
    if (forking) {
        void *rc;
        if (pthread_join(t, &rc) != 0 || rc)
            return __LINE__;
    }
    for (size_t i = 0; i < AHEAD_N; i++)
        if (v[i][0] != i || v[i][7] != ~i)
            return __LINE__;
    const char *off = getenv("HP_MALLOC_AHEAD");
    if (runs != !(off && !strcmp(off, "0")))
        return __LINE__;
    if (!strcmp(how, "exit"))
        exit(0);  /* the helper may be mapping: exit waits for it */
    for (size_t i = 0; i < AHEAD_N; i++)
        free(v[i]);
    free(v);
    return 0;
}

/* Runs ahead_child(how) in a fresh process with HP_MALLOC_AHEAD=ahead and
 * its stats in a file; returns how many arenas it took from the helper
 * (-1: the child failed, after saying where). */
static long run_ahead_child(const char *how, const char *ahead)
{
    char stats[] = "/tmp/libhp-ahead-XXXXXX";
    int fd = mkstemp(stats);
    assert_true(fd >= 0);
    close(fd);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("HP_MALLOC_AHEAD", ahead, 1);
        setenv("HP_MALLOC_ARENA", "32M", 1);
        setenv("HP_MALLOC_STATS", "1", 1);
        setenv("HP_MALLOC_STATS_FILE", stats, 1);
        unsetenv("HP_MALLOC_POOL");
        execl("/proc/self/exe", "test_malloc", "ahead-child", how, (char *)NULL);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    long taken = -1;
    FILE *f = fopen(stats, "re");
    char line[512];
    while (f && fgets(line, sizeof(line), f))
        sscanf(line, "libhp-malloc:   arenas mapped ahead by the helper thread: %ld", &taken);
    if (f)
        fclose(f);
    unlink(stats);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        print_message("ahead-child %s (HP_MALLOC_AHEAD=%s): %s %d\n", how, ahead,
                      WIFEXITED(st) ? "failed at line" : "killed by signal",
                      WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        return -1;
    }
    return taken;
}

/* docs/malloc.md: once a second arena was needed, a helper thread maps
 * the next arena ahead and later growths take it; HP_MALLOC_AHEAD=0 turns
 * that off. The objects are intact either way, the stats say which, and
 * the helper is a thread of the program (hpm-ahead) only when on. */
static void t_arenas_ahead(void **state)
{
    (void)state;
    long on = run_ahead_child("check", "1"), off = run_ahead_child("check", "0");
    print_message("arenas taken from the helper: %ld (on), %ld (off)\n", on, off);
    assert_true(on >= 2);
    assert_int_equal(off, 0);
}

/* A fork from another thread while the arenas grow (the helper mapping or
 * holding an arena, at any moment): no deadlock (the child's alarm), every
 * child allocates and exits, and exit() while the helper may be mapping
 * waits for it rather than tearing libhp down under it. */
static void t_arenas_ahead_fork_and_exit(void **state)
{
    (void)state;
    assert_true(run_ahead_child("fork", "1") >= 1);
    for (int i = 0; i < 5; i++)
        assert_true(run_ahead_child("exit", "1") >= 0);
}

int main(int argc, char **argv)
{
    if (getenv("HPTEST_VALGRIND")) {
        /* valgrind puts its own malloc under the program: nothing here
         * would test libhp-malloc. */
        printf("1..0 # SKIP valgrind replaces malloc itself\n");
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "errno-child"))
        return errno_child();
    if (argc > 1 && !strcmp(argv[1], "drain-child"))
        return drain_child();
    if (argc > 1 && !strcmp(argv[1], "hp-first-child"))
        return hp_first_child();
    if (argc > 1 && !strcmp(argv[1], "oom-child"))
        return oom_child();
    if (argc > 2 && !strcmp(argv[1], "ahead-child"))
        return ahead_child(argv[2]);
    if (argc > 2 && !strcmp(argv[1], "fork-child")) {
        char pool[8] = "";
        int write_big = 0;
        if (sscanf(argv[2], "%7s %d", pool, &write_big) != 2)
            return 2;
        return fork_write_child(pool, write_big);
    }
    /* The pool tests resize and take the hugetlb pool, and the others must
     * not meet a pool changing under them: hold the knob lock. */
    knob_lock();
    if (argc > 1 && !strcmp(argv[1], "pool")) {
        const struct CMUnitTest pool[] = {cmocka_unit_test(t_drained_pool),
                                          cmocka_unit_test(t_fork_writes_with_pool_taken),
                                          cmocka_unit_test(t_fork_heap_writes_pool_large)};
        return cmocka_run_group_tests(pool, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t_preloaded),
        cmocka_unit_test(t_errno_and_overflow),
        cmocka_unit_test(t_errno_kept_by_arena_calls),
        cmocka_unit_test(t_errno_kept_by_the_first_malloc),
        cmocka_unit_test(t_hp_alloc_first),
        cmocka_unit_test(t_aligned),
        cmocka_unit_test(t_calloc_zero),
        cmocka_unit_test(t_large_blocks),
        cmocka_unit_test(t_arenas_stay),
        cmocka_unit_test(t_foreign),
        cmocka_unit_test(t_threads),
        cmocka_unit_test(t_fork_exec_threaded),
        cmocka_unit_test(t_oom),
        cmocka_unit_test(t_arenas_ahead),
        cmocka_unit_test(t_arenas_ahead_fork_and_exit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
