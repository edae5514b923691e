/*
 * Faults while libhp starts, and a pool drained between probe and map.
 *
 * Start-up: in a fresh child per case, /proc and /sys reads, mmap, munmap
 * and madvise, and the loader's file calls (openat, fstat, readdir and
 * readlink of the plugin directories and files, which the trust checks
 * make: lib/trust.c) fail at the Nth call of loading and probing (every N
 * that start-up reaches). The backend list still comes up; a backend that
 * could not be probed says why it is unavailable; a plugin that could not
 * be loaded is missing only with a row that names the error; no descriptor
 * is left open; allocations work.
 *
 * Pool drained: the hugetlb pool looks free when libhp probes it, but
 * another process has taken it by the time libhp maps. The allocation falls
 * back to THP (or fails cleanly when hugetlbfs was required by name), and
 * every byte of what was handed out can be touched: no SIGBUS. Two ways:
 * a test root whose sysfs lies about the pool, and the real pool drained by
 * a second process right after a probe (libhp trusts a fresh probe for
 * HP_REPROBE_NS).
 */
#include <hp.h>

#include "os.h"
#include "registry.h"
#include "support.h"

#include <dirent.h>
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
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* Issue 4's cache keeps freed huge-page memory (and hugetlb pages) for
 * reuse; emptied where the test needs the pages back in the pool. */
#if __has_include("cache.h")
#include "cache.h"
static void drop_caches(void)
{
    hp_cache_flush(NULL, 0);
}
#else
static void drop_caches(void)
{
}
#endif

/* Shared with the children: call counts of a clean start-up, then its
 * loaded backends and open descriptors. */
static uint64_t *shared;
#define SHARED_LOADED HP_OS_NOPS
#define SHARED_FDS (HP_OS_NOPS + 1)

static uint64_t open_fds(void)
{
    uint64_t n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n - 1;  /* not the one reading */
}

struct init_case {
    enum hp_os_op op;
    uint64_t nth;
    int err, every;
};

static void touch_all(void *p, size_t len)
{
    memset(p, 0xa5, len);
}

static int child_start(void *arg)
{
    const struct init_case *c = arg;
    alarm(20);
    if (c->nth)
        hp_os_inject_fault(c->op, c->nth, c->err, c->every);
    uint64_t before[HP_OS_NOPS];
    for (int op = 0; op < HP_OS_NOPS; op++)
        before[op] = hp_os_calls((enum hp_os_op)op);
    int32_t n = hp_backend_count();
    hp_os_clear_faults();
    uint64_t fds = open_fds();
    if (!c->nth)
        for (int op = 0; op < HP_OS_NOPS; op++)
            shared[op] = hp_os_calls((enum hp_os_op)op) - before[op];
    CHILD_CHECK(n >= 1);
    int fallback = 0, named = 0;
    uint64_t loaded = 0;
    for (int32_t i = 0; i < n; i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        CHILD_CHECK(hp_backend_get((uint32_t)i, &bi) == HP_OK);
        CHILD_CHECK(bi.available || bi.reason[0]);  /* "unavailable, because ..." */
        fallback |= !strcmp(bi.name, "fallback") && bi.available;
        loaded += strcmp(bi.path, "builtin") != 0 && bi.name[0];
        named |= c->nth && strstr(bi.reason, strerror(c->err)) != NULL;
    }
    CHILD_CHECK(fallback);
    if (!c->nth) {
        shared[SHARED_LOADED] = loaded;
        shared[SHARED_FDS] = fds;
    } else {
        /* A plugin or directory the fault kept out has a row naming it. */
        if (loaded < shared[SHARED_LOADED] && !named)
            fprintf(stderr, "# op %d failing at call %llu: %llu of %llu plugins loaded, and no "
                    "row says %s\n", (int)c->op, (unsigned long long)c->nth,
                    (unsigned long long)loaded, (unsigned long long)shared[SHARED_LOADED],
                    strerror(c->err));
        CHILD_CHECK(loaded == shared[SHARED_LOADED] || named);
        if (fds != shared[SHARED_FDS])
            fprintf(stderr, "# %llu descriptors open after start-up, %llu without the fault\n",
                    (unsigned long long)fds, (unsigned long long)shared[SHARED_FDS]);
        CHILD_CHECK(fds == shared[SHARED_FDS]);
    }
    static const size_t sizes[] = {4096, 65536 + 7, (4u << 20) + 1};
    for (unsigned i = 0; i < 3; i++) {
        void *p = hp_alloc(sizes[i], 0);
        CHILD_CHECK(p != NULL);
        touch_all(p, sizes[i]);
        CHILD_CHECK(hp_free(p) == HP_OK);
    }
    CHILD_CHECK(hp_registry_count() == 0);
    return 0;
}

static void faults_during_start_up(void **state)
{
    (void)state;
    static const enum hp_os_op ops[] = {HP_OS_READ, HP_OS_MAP,  HP_OS_UNMAP,    HP_OS_ADVISE,
                                        HP_OS_OPEN, HP_OS_STAT, HP_OS_READDIR, HP_OS_READLINK};
    static const char *names[] = {"read", "mmap", "munmap", "madvise",
                                  "openat", "fstat", "readdir", "readlink"};
    static const int errs[] = {ENOMEM, EINVAL, EAGAIN};
    struct init_case dry = {HP_OS_READ, 0, 0, 0};
    assert_int_equal(run_in_child(child_start, &dry), 0);
    unsigned long children = 1;
    for (size_t o = 0; o < sizeof(ops) / sizeof(*ops); o++) {
        uint64_t k = shared[ops[o]];
        /* Under memcheck every child costs ~0.3 s: ENOMEM only there. */
        int ways = getenv("HPTEST_VALGRIND") ? 1 : 4;
        for (uint64_t n = 1; n <= k; n++) {
            for (int e = 0; e < ways; e++) {
                struct init_case c = {ops[o], n, errs[e % 3], e == 3};
                int rc = run_in_child(child_start, &c);
                if (rc)
                    print_message("# %s fails with %s at call %llu%s: child returned %d\n",
                                  names[o], strerror(c.err), (unsigned long long)n,
                                  c.every ? " and after" : "", rc);
                assert_int_equal(rc, 0);
                children++;
            }
        }
        print_message("# start-up makes %llu %s calls; each failed %d ways\n",
                      (unsigned long long)k, names[o], ways);
    }
    print_message("# %lu fresh processes started under faults\n", children);
}

/* ---- pool drained between probe and map ---------------------------------- */

static void put(const char *root, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        mkdir(path, 0755);
        *s = '/';
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static int child_stale_tree(void *root)
{
    alarm(20);
    setenv("HP_SYSFS_ROOT", root, 1);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    /* The lying probe says 64 free pages; the kernel has none to reserve. */
    for (int i = 0; i < 4; i++) {
        size_t len = (4u << 20) + (size_t)i * 4096;
        void *p = hp_alloc(len, i & 1 ? HP_F_POPULATE : 0);
        CHILD_CHECK(p != NULL);
        CHILD_CHECK(hp_info(p, &info) == HP_OK);
        fprintf(stderr, "# pool claimed free but empty: served by %s\n", info.backend);
        CHILD_CHECK(strcmp(info.backend, "hugetlbfs") != 0);
        touch_all(p, len);
        CHILD_CHECK(hp_free(p) == HP_OK);
    }
    void *p = hp_alloc(4u << 20, HP_F_REQUIRE_HUGE);
    CHILD_CHECK(p != NULL);
    CHILD_CHECK(hp_info(p, &info) == HP_OK && !strcmp(info.backend, "thp-madvise"));
    touch_all(p, 4u << 20);
    CHILD_CHECK(hp_free(p) == HP_OK);
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "hugetlbfs";
    CHILD_CHECK(hp_alloc_ex(4u << 20, &o) == NULL);
    fprintf(stderr, "# hugetlbfs by name: %s: %s\n", hp_error_name(hp_last_error()),
            hp_last_error_detail());
    CHILD_CHECK(hp_last_error() == HP_ENOMEM || hp_last_error() == HP_ENOBACKEND);
    CHILD_CHECK(hp_last_error_detail()[0]);
    CHILD_CHECK(hp_registry_count() == 0);
    return 0;
}

static void copy_real(const char *root, const char *path)
{
    char buf[256];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    put(root, path + 1, buf);
}

static void lying_sysfs_pool(void **state)
{
    (void)state;
    if (!is_root()) {
        print_message("# skipped: needs root for the pool knob\n");
        skip();
    }
    assert_true(pool_set(2048, 0) == 0);
    char root[] = "/tmp/hp-stale-XXXXXX";
    assert_non_null(mkdtemp(root));
    static const char *const files[][2] = {
        {"nr_hugepages", "64\n"}, {"free_hugepages", "64\n"}, {"resv_hugepages", "0\n"},
        {"surplus_hugepages", "0\n"}, {"nr_overcommit_hugepages", "0\n"}};
    for (size_t i = 0; i < 5; i++) {
        char rel[160];
        snprintf(rel, sizeof(rel), "sys/kernel/mm/hugepages/hugepages-2048kB/%s", files[i][0]);
        put(root, rel, files[i][1]);
    }
    copy_real(root, "/sys/kernel/mm/transparent_hugepage/enabled");
    copy_real(root, "/sys/kernel/mm/transparent_hugepage/defrag");
    copy_real(root, "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
    copy_real(root, "/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled");
    put(root, "proc/self/cgroup", "0::/\n");
    int rc = run_in_child(child_stale_tree, root);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(rc, 0);
}

/* Holds every free 2 MiB page of the real pool until killed, or until its
 * parent dies (it must never outlive the test: it would keep the pages,
 * and the inherited knob lock). */
static void drainer(int ready_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    long free_pages = pool_get(2048, "free_hugepages") - pool_get(2048, "resv_hugepages");
    size_t len = (size_t)(free_pages > 0 ? free_pages : 1) << 21;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (p != MAP_FAILED)
        memset(p, 1, len);
    char ok = p != MAP_FAILED ? 'y' : 'n';
    if (write(ready_fd, &ok, 1) != 1)
        _exit(1);
    pause();
    _exit(0);
}

/* With the pool drained behind libhp's back. */
static int while_drained(int ready_fd)
{
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    char ok = 0;
    CHILD_CHECK(read(ready_fd, &ok, 1) == 1 && ok == 'y');
    /* libhp still believes the pool is free: the map fails, THP serves. */
    void *p = hp_alloc(4u << 20, HP_F_REQUIRE_HUGE);
    int served = p && hp_info(p, &info) == HP_OK;
    fprintf(stderr, "# pool drained after the probe: served by %s\n", served ? info.backend : "-");
    CHILD_CHECK(served && !strcmp(info.backend, "thp-madvise"));
    touch_all(p, 4u << 20);
    CHILD_CHECK(hp_free(p) == HP_OK);
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "hugetlbfs";
    CHILD_CHECK(hp_alloc_ex(2u << 20, &o) == NULL);
    CHILD_CHECK(hp_last_error() == HP_ENOMEM || hp_last_error() == HP_ENOBACKEND);
    return 0;
}

static int child_drained(void *unused)
{
    (void)unused;
    alarm(20);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    /* A probe that sees the pool free, and a block from it. */
    void *p = hp_alloc(4u << 20, 0);
    CHILD_CHECK(p && hp_info(p, &info) == HP_OK && !strcmp(info.backend, "hugetlbfs"));
    CHILD_CHECK(hp_free(p) == HP_OK);
    drop_caches();  /* the pages go back to the pool, for the drainer */
    /* Another process takes every page, right after that probe. */
    int fds[2];
    CHILD_CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    CHILD_CHECK(pid >= 0);
    if (pid == 0)
        drainer(fds[1]);
    int rc = while_drained(fds[0]);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (rc)
        return rc;
    /* The failed map marked the figures stale: the pool is used again. */
    hp_reprobe();
    p = hp_alloc(4u << 20, 0);
    CHILD_CHECK(p && hp_info(p, &info) == HP_OK && !strcmp(info.backend, "hugetlbfs"));
    touch_all(p, 4u << 20);
    CHILD_CHECK(hp_free(p) == HP_OK);
    return 0;
}

static void real_pool_drained_after_probe(void **state)
{
    (void)state;
    if (!is_root() || getenv("HPTEST_VALGRIND")) {
        /* valgrind does not follow hugetlb mappings (tests/stress/stress_env.h) */
        print_message("# skipped: needs root for the pool knob, and no valgrind\n");
        skip();
    }
    assert_true(pool_set(2048, 2) == 2);
    long free0 = pool_get(2048, "free_hugepages");
    assert_int_equal(run_in_child(child_drained, NULL), 0);
    assert_int_equal(pool_get(2048, "free_hugepages"), free0);
}

int main(void)
{
    shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        return 1;
    if (is_root())  /* start-up probes a pool that exists (none under valgrind) */
        pool_set(2048, getenv("HPTEST_VALGRIND") ? 0 : 4);
    else
        knob_lock();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(faults_during_start_up),
        cmocka_unit_test(lying_sysfs_pool),
        cmocka_unit_test(real_pool_drained_after_probe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
