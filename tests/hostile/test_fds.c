/*
 * Descriptors: libhp keeps none open after loading its plugins. A program
 * that uses libhp sees only the descriptors it opened itself (Python's
 * subprocess tests list a child's descriptors and found libhp's there),
 * and a program that closes every descriptor above 2 (the daemon idiom,
 * closefrom(3)) and then opens its own files gets its own numbers, which
 * libhp never touches afterwards. Each case runs in a fresh child that has
 * not called libhp yet, so the plugins load inside the case.
 */
#include <hp.h>

#include "support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

/* The open descriptors of this process as a bit set (fds 0..1023), and
 * their count. */
static int open_fds(unsigned char set[128])
{
    memset(set, 0, 128);
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0, own = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        int fd = atoi(e->d_name);
        if (fd == own || fd < 0 || fd >= 1024)
            continue;
        set[fd / 8] |= (unsigned char)(1u << (fd % 8));
        n++;
    }
    closedir(d);
    return n;
}

/* Every call that loads, probes, maps and releases: plugins of every
 * backend, named and chosen, with the cache and a re-probe. */
static int use_libhp(void)
{
    const char *names[] = {NULL, "hugetlbfs", "thp-madvise", "anon-orders", "fallback"};
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++) {
        struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
        o.backend = names[i];
        size_t len = 4u << 20;
        char *p = hp_alloc_ex(len, &o);
        if (!p && i)
            continue;  /* that backend is unavailable here */
        CHILD_CHECK(p);
        memset(p, 0x5a, len);
        /* A named pool backend may find the pool taken by other tests:
         * then the block stays as it was. */
        char *q = hp_realloc(p, 2 * len, 0);
        CHILD_CHECK(q || hp_last_error() == HP_ENOMEM);
        q = q ? q : p;
        CHILD_CHECK(q[0] == 0x5a && q[len - 1] == 0x5a);
        CHILD_CHECK(hp_free(q) == HP_OK);
    }
    CHILD_CHECK(hp_reprobe() == HP_OK);
    struct hp_backend_info info = HP_BACKEND_INFO_INIT;
    for (int32_t i = 0; i < hp_backend_count(); i++)
        CHILD_CHECK(hp_backend_get((uint32_t)i, &info) == HP_OK);
    CHILD_CHECK(hp_cache_trim() == HP_OK);
    return 0;
}

static int child_keeps_no_descriptor(void *arg)
{
    (void)arg;
    unsigned char before[128], after[128];
    int n_before = open_fds(before);
    CHILD_CHECK(n_before >= 0);
    CHILD_CHECK(hp_backend_count() >= 1);  /* loads every plugin */
    int n_loaded = open_fds(after);
    if (n_loaded != n_before || memcmp(before, after, sizeof(before))) {
        fprintf(stderr, "# %d descriptors before libhp loaded, %d after\n", n_before, n_loaded);
        return 1;
    }
    if (use_libhp())
        return 1;
    CHILD_CHECK(open_fds(after) == n_before && !memcmp(before, after, sizeof(before)));
    return 0;
}

static void keeps_no_descriptor(void **state)
{
    (void)state;
    assert_int_equal(run_in_child(child_keeps_no_descriptor, NULL), 0);
}

/* A file of the program's own, with contents it can check. */
static int own_file(const char *dir, int i, struct stat *st)
{
    char path[256], text[64];
    snprintf(path, sizeof(path), "%s/own-%d", dir, i);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int n = snprintf(text, sizeof(text), "file %d of the program\n", i);
    if (write(fd, text, (size_t)n) != n || fstat(fd, st) != 0) {
        close(fd);
        return -1;
    }
    unlink(path);
    return fd;
}

static int intact(int fd, int i, const struct stat *was)
{
    char text[64], want[64];
    struct stat st;
    int n = snprintf(want, sizeof(want), "file %d of the program\n", i);
    if (fstat(fd, &st) != 0 || st.st_ino != was->st_ino || st.st_dev != was->st_dev)
        return 0;
    if (st.st_size != n || pread(fd, text, sizeof(text), 0) != n)
        return 0;
    return !memcmp(text, want, (size_t)n);
}

/* The daemon idiom after libhp loaded: every descriptor above 2 closed,
 * then files of the program's own take the lowest numbers. libhp keeps
 * working and never reads, writes or closes them. */
static int child_survives_closefrom(void *dir)
{
    CHILD_CHECK(use_libhp() == 0);
    CHILD_CHECK(close_range(3, ~0u, 0) == 0);
    enum { N = 8 };
    int fds[N];
    struct stat st[N];
    for (int i = 0; i < N; i++) {
        fds[i] = own_file(dir, i, &st[i]);
        CHILD_CHECK(fds[i] == 3 + i);  /* the numbers libhp used to hold */
    }
    CHILD_CHECK(use_libhp() == 0);
    for (int i = 0; i < N; i++) {
        CHILD_CHECK(intact(fds[i], i, &st[i]));
        CHILD_CHECK(close(fds[i]) == 0);
    }
    return 0;
}

static void survives_closefrom(void **state)
{
    (void)state;
    char dir[] = "/tmp/hp-fds-XXXXXX";  /* the program's own files, not plugins */
    char *d = mkdtemp(dir);
    assert_non_null(d);
    int rc = run_in_child(child_survives_closefrom, d);
    rmdir(d);
    assert_int_equal(rc, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(keeps_no_descriptor),
        cmocka_unit_test(survives_closefrom),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
