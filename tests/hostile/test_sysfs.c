/*
 * Hostile system files: every /proc and /sys file libhp reads, served from a
 * test root (HP_SYSFS_ROOT) that is missing, empty, truncated, garbage,
 * binary, absurdly large or negative. Probing never crashes; a backend that
 * cannot make sense of its files is listed as unavailable with the reason;
 * hp_alloc still works through the fallback and hp_info still reports
 * sane figures. Each case runs in a fresh child (options are read once per
 * process). The smaps, pagemap and kpageflags cases write the fake files
 * after allocating, so that they describe the very block being measured.
 */
#include <hp.h>

#include "support.h"

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

#define HUGE_DIR "sys/kernel/mm/hugepages/hugepages-2048kB/"
#define THP_DIR "sys/kernel/mm/transparent_hugepage/"
#define REMOVE ((const char *)1)     /* edit: delete the path (file or tree) */
#define LONG_TEXT ((const char *)2)  /* edit: 64 KiB of 'a', no newline */

struct edit {
    const char *rel;
    const char *text;   /* REMOVE, LONG_TEXT, or contents */
    size_t len;         /* 0: strlen(text) */
};

struct sysfs_case {
    const char *name;
    struct edit edits[3];
    const char *backend;    /* NULL: only the general checks */
    int available;          /* 0 or 1; -1: either */
    const char *why;        /* substring of the reason, or NULL */
};

static const char junk[] = "\x7f" "ELF\x02\x01\x00\x00\xff\xfe[\x00]\x80\x81\n\x00\x01";

static const struct sysfs_case cases[] = {
    /* hugetlb pools */
    {"no hugepages dir", {{"sys/kernel/mm/hugepages", REMOVE, 0}}, "hugetlbfs", 0, "no hugetlb support"},
    {"empty nr_hugepages", {{HUGE_DIR "nr_hugepages", "", 0}}, "hugetlbfs", 0, NULL},
    {"garbage nr_hugepages", {{HUGE_DIR "nr_hugepages", "lots\n", 0}}, "hugetlbfs", 0, NULL},
    {"negative nr_hugepages", {{HUGE_DIR "nr_hugepages", "-5\n", 0}}, "hugetlbfs", 0, NULL},
    {"overflowing nr_hugepages", {{HUGE_DIR "nr_hugepages", "99999999999999999999999999\n", 0},
                                  {HUGE_DIR "free_hugepages", "99999999999999999999999999\n", 0}},
     "hugetlbfs", -1, NULL},
    {"binary free_hugepages", {{HUGE_DIR "free_hugepages", junk, sizeof(junk) - 1}}, "hugetlbfs", 0, NULL},
    {"missing resv_hugepages", {{HUGE_DIR "resv_hugepages", REMOVE, 0}}, "hugetlbfs", 0, NULL},
    {"reserved above free", {{HUGE_DIR "free_hugepages", "1\n", 0}, {HUGE_DIR "resv_hugepages", "9\n", 0}},
     "hugetlbfs", -1, NULL},
    /* Linux 6.18: while a fork child still maps pages of a private
     * mapping the parent unmapped, resv_hugepages reads below zero. */
    {"reserved wrapped below zero", {{HUGE_DIR "resv_hugepages", "18446744073709551615\n", 0}},
     "hugetlbfs", 1, "4/4 free"},
    {"overcommit at UINT64_MAX", {{HUGE_DIR "nr_overcommit_hugepages", "18446744073709551615\n", 0}},
     "hugetlbfs", -1, NULL},
    {"empty pool dir", {{"sys/kernel/mm/hugepages/hugepages-2048kB", REMOVE, 0},
                        {"sys/kernel/mm/hugepages/hugepages-2048kB/.keep", "", 0}},
     "hugetlbfs", 0, NULL},
    {"long nr_hugepages", {{HUGE_DIR "nr_hugepages", LONG_TEXT, 0}}, "hugetlbfs", 0, NULL},
    /* THP */
    {"no THP dir", {{"sys/kernel/mm/transparent_hugepage", REMOVE, 0}}, "thp-madvise", 0, "no THP support"},
    {"pmd size 0", {{THP_DIR "hpage_pmd_size", "0\n", 0}}, "thp-madvise", 0, "no THP support"},
    {"pmd size not a power of two", {{THP_DIR "hpage_pmd_size", "3000000\n", 0}}, "thp-madvise", 0, NULL},
    {"pmd size of a base page", {{THP_DIR "hpage_pmd_size", "4096\n", 0}}, "thp-madvise", 0, NULL},
    {"pmd size 2^63", {{THP_DIR "hpage_pmd_size", "9223372036854775808\n", 0}}, "thp-madvise", -1, NULL},
    {"pmd size negative", {{THP_DIR "hpage_pmd_size", "-2097152\n", 0}}, "thp-madvise", -1, NULL},
    {"pmd size binary", {{THP_DIR "hpage_pmd_size", junk, sizeof(junk) - 1}}, "thp-madvise", 0, NULL},
    {"enabled garbage", {{THP_DIR "enabled", "garbage\n", 0}}, "thp-madvise", 0, "unreadable or invalid"},
    {"enabled without brackets", {{THP_DIR "enabled", "always madvise never\n", 0}}, "thp-madvise", 0, NULL},
    {"enabled empty brackets", {{THP_DIR "enabled", "always [] never\n", 0}}, "thp-madvise", 0, NULL},
    {"enabled unclosed bracket", {{THP_DIR "enabled", "always [madvise never\n", 0}}, "thp-madvise", 0, NULL},
    {"enabled unknown mode", {{THP_DIR "enabled", "[sometimes] never\n", 0}}, "thp-madvise", 0, NULL},
    {"enabled never", {{THP_DIR "enabled", "always madvise [never]\n", 0}}, "thp-madvise", 0, "never"},
    {"enabled empty", {{THP_DIR "enabled", "", 0}}, "thp-madvise", 0, NULL},
    {"enabled binary", {{THP_DIR "enabled", junk, sizeof(junk) - 1}}, "thp-madvise", 0, NULL},
    {"enabled 64 KiB long", {{THP_DIR "enabled", LONG_TEXT, 0}}, "thp-madvise", 0, NULL},
    {"pmd per-size inherit, no top switch", {{THP_DIR "enabled", REMOVE, 0}}, "thp-madvise", 0, NULL},
    {"pmd per-size binary", {{THP_DIR "hugepages-2048kB/enabled", junk, sizeof(junk) - 1}},
     "thp-madvise", -1, NULL},
    {"defrag garbage", {{THP_DIR "defrag", junk, sizeof(junk) - 1}}, "thp-madvise", 1, NULL},
    {"mTHP enabled binary", {{THP_DIR "hugepages-64kB/enabled", junk, sizeof(junk) - 1}},
     "anon-orders", 0, NULL},
    {"mTHP dirs missing", {{THP_DIR "hugepages-64kB", REMOVE, 0}, {THP_DIR "hugepages-16kB", REMOVE, 0}},
     "anon-orders", 0, "no per-size THP controls"},
    {"mTHP inherit of garbage top", {{THP_DIR "hugepages-64kB/enabled", "always [inherit] never\n", 0},
                                     {THP_DIR "enabled", "[[[\n", 0}},
     "anon-orders", -1, NULL},
    /* mounts */
    {"mounts missing", {{"proc/mounts", REMOVE, 0}}, "hugetlbfs", 1, "not mounted"},
    {"mounts binary", {{"proc/mounts", junk, sizeof(junk) - 1}}, "hugetlbfs", 1, NULL},
    {"mounts 64 KiB long", {{"proc/mounts", LONG_TEXT, 0}}, "hugetlbfs", 1, NULL},
    /* cgroup */
    {"cgroup missing", {{"proc/self/cgroup", REMOVE, 0}}, "hugetlbfs", 1, NULL},
    {"cgroup garbage", {{"proc/self/cgroup", "0:::::\n::0\n", 0}}, "hugetlbfs", 1, NULL},
    {"cgroup path escapes", {{"proc/self/cgroup", "0::/../../../../../../etc\n", 0}}, "hugetlbfs", 1, NULL},
    {"cgroup 64 KiB path", {{"proc/self/cgroup", LONG_TEXT, 0}}, "hugetlbfs", 1, NULL},
    {"cgroup limit 0", {{"proc/self/cgroup", "0::/lim\n", 0}, {"sys/fs/cgroup/lim/hugetlb.2MB.max", "0\n", 0}},
     "hugetlbfs", 0, "0/4 free"},
    {"cgroup limit garbage", {{"proc/self/cgroup", "0::/lim\n", 0},
                              {"sys/fs/cgroup/lim/hugetlb.2MB.max", junk, sizeof(junk) - 1},
                              {"sys/fs/cgroup/lim/hugetlb.2MB.current", "-1\n", 0}},
     "hugetlbfs", 1, NULL},
    {"cgroup current above max", {{"proc/self/cgroup", "0::/lim\n", 0},
                                  {"sys/fs/cgroup/lim/hugetlb.2MB.max", "18446744073709551615\n", 0},
                                  {"sys/fs/cgroup/lim/hugetlb.2MB.current", "99999999999999999999\n", 0}},
     "hugetlbfs", 0, "0/4 free"},
    /* meminfo: not parsed by libhp itself, but must not matter either */
    {"meminfo binary", {{"proc/meminfo", junk, sizeof(junk) - 1}}, NULL, -1, NULL},
    {"everything missing", {{"sys", REMOVE, 0}, {"proc", REMOVE, 0}}, "fallback", 1, NULL},
};

/* Cases where an hp_alloc naming the case's backend must fail, and how. */
static const struct {
    const char *name;
    int32_t error;
} named_fails[] = {
    {"pmd size 2^63", HP_ENOMEM},  /* no request fits a 2^63-byte page */
};

static int32_t named_fail(const char *name)
{
    for (size_t i = 0; i < sizeof(named_fails) / sizeof(*named_fails); i++)
        if (!strcmp(named_fails[i].name, name))
            return named_fails[i].error;
    return HP_OK;
}

static void write_file(const char *path, const char *text, size_t len)
{
    for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        mkdir(path, 0755);
        *s = '/';
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
}

static void put(const char *root, const char *rel, const char *text, size_t len)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    if (text == REMOVE) {
        char cmd[700];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
        assert_int_equal(system(cmd), 0);
        return;
    }
    if (text == LONG_TEXT) {
        static char big[65536];
        memset(big, 'a', sizeof(big));
        write_file(path, big, sizeof(big));
        return;
    }
    write_file(path, text, len ? len : strlen(text));
}

/* A sane tree: a 4-page 2 MiB pool, THP madvise, 64 KiB mTHP madvise. */
static void base_tree(const char *root)
{
    static const char *const files[][2] = {
        {HUGE_DIR "nr_hugepages", "4\n"},
        {HUGE_DIR "free_hugepages", "4\n"},
        {HUGE_DIR "resv_hugepages", "0\n"},
        {HUGE_DIR "surplus_hugepages", "0\n"},
        {HUGE_DIR "nr_overcommit_hugepages", "0\n"},
        {"sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "0\n"},
        {"sys/kernel/mm/hugepages/hugepages-1048576kB/free_hugepages", "0\n"},
        {"sys/kernel/mm/hugepages/hugepages-1048576kB/resv_hugepages", "0\n"},
        {"sys/kernel/mm/hugepages/hugepages-1048576kB/surplus_hugepages", "0\n"},
        {"sys/kernel/mm/hugepages/hugepages-1048576kB/nr_overcommit_hugepages", "0\n"},
        {THP_DIR "enabled", "always [madvise] never\n"},
        {THP_DIR "defrag", "always defer defer+madvise [madvise] never\n"},
        {THP_DIR "hpage_pmd_size", "2097152\n"},
        {THP_DIR "hugepages-2048kB/enabled", "always [inherit] madvise never\n"},
        {THP_DIR "hugepages-64kB/enabled", "always inherit [madvise] never\n"},
        {THP_DIR "hugepages-16kB/enabled", "always inherit madvise [never]\n"},
        {"proc/mounts", "proc /proc proc rw,relatime 0 0\nsysfs /sys sysfs rw 0 0\n"},
        {"proc/self/cgroup", "0::/\n"},
        {"proc/meminfo", "MemTotal: 1000 kB\nHugePages_Free: 4\n"},
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++)
        put(root, files[i][0], files[i][1], 0);
}

static char *make_root(void)
{
    char *root = strdup("/tmp/hp-sysfs-XXXXXX");
    assert_non_null(mkdtemp(root));
    base_tree(root);
    return root;
}

static void remove_root(char *root)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    free(root);
}

/* Every backend listed, each available or saying why not; allocations of
 * every class work and hp_info is sane. */
static int general_checks(void)
{
    int32_t n = hp_backend_count();
    CHILD_CHECK(n >= 1);
    for (int32_t i = 0; i < n; i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        CHILD_CHECK(hp_backend_get((uint32_t)i, &bi) == HP_OK);
        CHILD_CHECK(bi.available || bi.reason[0]);
        CHILD_CHECK(memchr(bi.reason, '\0', sizeof(bi.reason)) != NULL);
        CHILD_CHECK(bi.n_page_sizes <= HP_MAX_PAGE_SIZES);
    }
    static const size_t sizes[] = {1, 65536, (4u << 20) + 1};
    for (unsigned i = 0; i < 3; i++) {
        unsigned char *p = hp_alloc(sizes[i], 0);
        CHILD_CHECK(p != NULL);
        memset(p, 0x3c, sizes[i]);
        struct hp_block_info info = HP_BLOCK_INFO_INIT;
        CHILD_CHECK(hp_info(p, &info) == HP_OK);
        CHILD_CHECK(info.huge_bytes <= info.mapped_size);
        CHILD_CHECK(hp_free(p) == HP_OK);
    }
    return 0;
}

static int child_case(void *arg)
{
    const struct sysfs_case *c = arg;
    alarm(20);
    if (general_checks())
        return 1;
    if (!c->backend)
        return 0;
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        CHILD_CHECK(hp_backend_get((uint32_t)i, &bi) == HP_OK);
        if (strcmp(bi.name, c->backend))
            continue;
        fprintf(stderr, "# %-36s %s: %s: %s\n", c->name, bi.name,
                bi.available ? "available" : "unavailable", bi.reason);
        CHILD_CHECK(c->available < 0 || (int)bi.available == c->available);
        CHILD_CHECK(!c->why || strstr(bi.reason, c->why));
        if (named_fail(c->name) != HP_OK) {
            struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
            o.backend = c->backend;
            void *p = hp_alloc_ex(65536, &o);
            fprintf(stderr, "# %-36s hp_alloc naming %s: %s (%s)\n", "", c->backend,
                    p ? "served" : hp_error_name(hp_last_error()), hp_last_error_detail());
            CHILD_CHECK(p == NULL && hp_last_error() == named_fail(c->name));
        }
        return 0;
    }
    fprintf(stderr, "# %s: backend %s not listed\n", c->name, c->backend);
    return 1;
}

static void bad_system_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        const struct sysfs_case *c = &cases[i];
        char *root = make_root();
        for (int e = 0; e < 3 && c->edits[e].rel; e++)
            put(root, c->edits[e].rel, c->edits[e].text, c->edits[e].len);
        setenv("HP_SYSFS_ROOT", root, 1);
        int rc = run_in_child(child_case, (void *)c);
        unsetenv("HP_SYSFS_ROOT");
        remove_root(root);
        if (rc)
            print_message("# case \"%s\" failed: %d\n", c->name, rc);
        assert_int_equal(rc, 0);
    }
    print_message("# %zu hostile sysfs/procfs trees: no crash, reasons given, "
                  "allocations served\n", sizeof(cases) / sizeof(*cases));
}

/* ---- measuring through lying smaps, pagemap and kpageflags ------------- */

static const char *measure_root;

static void put_at(const char *rel, const void *data, size_t len, uint64_t off)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", measure_root, rel);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        if (pwrite(fd, data, len, (off_t)off) != (ssize_t)len)
            fprintf(stderr, "# short pwrite to %s\n", path);
        close(fd);
    }
}

static void put_text(const char *rel, const char *text)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", measure_root, rel);
    unlink(path);
    put_at(rel, text, strlen(text), 0);
}

static int info_sane(void *p, const char *what)
{
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    int32_t rc = hp_info(p, &info);
    fprintf(stderr, "# %-44s hp_info %s, huge_bytes %llu of %llu\n", what, hp_error_name(rc),
            (unsigned long long)info.huge_bytes, (unsigned long long)info.mapped_size);
    CHILD_CHECK(rc == HP_OK && info.huge_bytes <= info.mapped_size);
    return 0;
}

static int child_measure(void *unused)
{
    (void)unused;
    alarm(20);
    size_t len = 4u << 20;
    unsigned char *p = hp_alloc(len, 0);
    CHILD_CHECK(p != NULL);
    memset(p, 1, len);
    uintptr_t a = (uintptr_t)p, e = a + len;
    char text[4096];

    /* smaps: absurd, negative, overflowing and garbage figures. */
    static const char *const figures[] = {"18446744073709551615", "9223372036854775807",
                                          "-1", "4096", "0x10", "", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof(figures) / sizeof(*figures); i++) {
        snprintf(text, sizeof(text),
                 "%lx-%lx rw-p 00000000 00:00 0\nAnonHugePages: %s kB\n"
                 "Private_Hugetlb: %s kB\nShared_Hugetlb: %s kB\n",
                 (unsigned long)a, (unsigned long)e, figures[i], figures[i], figures[i]);
        put_text("proc/self/smaps", text);
        char what[96];
        snprintf(what, sizeof(what), "smaps says %s kB", figures[i]);
        if (info_sane(p, what))
            return 1;
    }
    /* smaps: many tiny mappings inside the block, each claiming a lot. */
    size_t used = 0;
    for (int i = 0; i < 40 && used < sizeof(text) - 100; i++)
        used += (size_t)snprintf(text + used, sizeof(text) - used,
                                 "%lx-%lx rw-p 0 0:0 0\nAnonHugePages: 999999999999 kB\n",
                                 (unsigned long)(a + (uintptr_t)i * 4096),
                                 (unsigned long)(a + (uintptr_t)i * 4096 + 4096));
    put_text("proc/self/smaps", text);
    if (info_sane(p, "smaps: 40 mappings claim 1 PB each"))
        return 1;
    /* smaps: binary junk and a line longer than the line buffer. */
    put_text("proc/self/smaps", junk);
    if (info_sane(p, "smaps: binary junk"))
        return 1;
    memset(text, '7', sizeof(text) - 1);
    text[sizeof(text) - 1] = '\0';
    put_text("proc/self/smaps", text);
    if (info_sane(p, "smaps: one 4 KiB line"))
        return 1;

    /* pagemap + kpageflags: every page present, on PFNs the fake kpageflags
     * file calls compound (a sparse file at the block's own offsets). */
    uint64_t ps = 4096, vpn = a / ps, npages = len / ps;
    uint64_t entries[1024];
    for (uint64_t i = 0; i < npages; i++)
        entries[i] = (UINT64_C(1) << 63) | (1000 + i);
    put_text("proc/self/pagemap", "");
    put_at("proc/self/pagemap", entries, npages * 8, vpn * 8);
    uint64_t flags[1024];
    for (uint64_t i = 0; i < npages; i++)
        flags[i] = (UINT64_C(1) << 15) | (UINT64_C(1) << 16);
    put_text("proc/kpageflags", "");
    put_at("proc/kpageflags", flags, npages * 8, 1000 * 8);
    if (info_sane(p, "pagemap: all present, all compound"))
        return 1;
    /* PFNs far beyond the kpageflags file, and at the top of the range. */
    for (uint64_t i = 0; i < npages; i++)
        entries[i] = (UINT64_C(1) << 63) | ((UINT64_C(1) << 55) - 1 - (i & 1));
    put_at("proc/self/pagemap", entries, npages * 8, vpn * 8);
    if (info_sane(p, "pagemap: PFNs past kpageflags' end"))
        return 1;
    /* pagemap shorter than the block. */
    put_text("proc/self/pagemap", "");
    put_at("proc/self/pagemap", entries, 8 * 3, vpn * 8);
    if (info_sane(p, "pagemap: truncated inside the block"))
        return 1;
    CHILD_CHECK(hp_free(p) == HP_OK);
    return 0;
}

static void lying_smaps_and_pagemap(void **state)
{
    (void)state;
    char *root = make_root();
    measure_root = root;
    setenv("HP_SYSFS_ROOT", root, 1);
    int rc = run_in_child(child_measure, NULL);
    unsetenv("HP_SYSFS_ROOT");
    remove_root(root);
    assert_int_equal(rc, 0);
}

int main(void)
{
    knob_lock();  /* the fake pools may send a MAP_HUGETLB to the real one */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_system_files),
        cmocka_unit_test(lying_smaps_and_pagemap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
