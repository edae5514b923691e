/*
 * What the backends read from /proc and /sys (hugetlb pools, THP and mTHP
 * switches, /proc/mounts, the hugetlb cgroup files), served by a fake host
 * from the fuzz input, then probed by the real backend sources (hugetlbfs,
 * thp-madvise, anon-orders; compiled in with renamed entries) and by
 * hpb_read_mode. Whatever the files say: no crash, at most 16 page sizes,
 * ascending powers of two, a terminated reason, and a map that the (failing)
 * OS layer refuses comes back as a clean error.
 *
 * Input: records of [path id][length, 2 bytes little-endian][contents];
 * the path id picks one of the files below (ids wrap). A file with no
 * record does not exist (ENOENT).
 */
#include "backend_util.h"
#include "fuzz.h"
#include "fuzz_backends.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HP2 "/sys/kernel/mm/hugepages/hugepages-2048kB/"
#define HP1G "/sys/kernel/mm/hugepages/hugepages-1048576kB/"
#define HP64 "/sys/kernel/mm/hugepages/hugepages-64kB/"
#define THP "/sys/kernel/mm/transparent_hugepage/"

static const char *const paths[] = {
    HP2 "nr_hugepages", HP2 "free_hugepages", HP2 "resv_hugepages", HP2 "surplus_hugepages",
    HP2 "nr_overcommit_hugepages",
    HP1G "nr_hugepages", HP1G "free_hugepages", HP1G "resv_hugepages", HP1G "surplus_hugepages",
    HP1G "nr_overcommit_hugepages",
    HP64 "nr_hugepages", HP64 "free_hugepages", HP64 "resv_hugepages", HP64 "surplus_hugepages",
    HP64 "nr_overcommit_hugepages",
    THP "enabled", THP "defrag", THP "hpage_pmd_size", THP "hugepages-2048kB/enabled",
    THP "hugepages-64kB/enabled", THP "hugepages-16kB/enabled", THP "hugepages-1024kB/enabled",
    THP "hugepages-8kB/enabled",
    "/proc/mounts", "/proc/self/cgroup",
    /* cgroup files: matched by their end, whatever directory the cgroup
     * file named */
    "*hugetlb.2MB.max", "*hugetlb.2MB.current", "*hugetlb.1GB.max", "*hugetlb.64KB.max",
};
#define NPATHS (sizeof(paths) / sizeof(*paths))

static const uint8_t *file_data[NPATHS];
static size_t file_len[NPATHS];

static int lookup(const char *path)
{
    size_t n = strlen(path);
    for (size_t i = 0; i < NPATHS; i++) {
        const char *p = paths[i];
        if (p[0] == '*') {
            size_t k = strlen(p + 1);
            if (n >= k && !strcmp(path + n - k, p + 1) && file_data[i])
                return (int)i;
        } else if (!strcmp(path, p) && file_data[i]) {
            return (int)i;
        }
    }
    return -1;
}

static int64_t fake_read(const char *path, char *buf, size_t cap)
{
    if (!buf || !cap)
        return -EINVAL;
    buf[0] = '\0';
    int i = lookup(path);
    if (i < 0)
        return -ENOENT;
    size_t n = file_len[i] < cap - 1 ? file_len[i] : cap - 1;
    memcpy(buf, file_data[i], n);
    buf[n] = '\0';
    return (int64_t)n;
}

static void fake_log(const char *backend, const char *msg)
{
    FUZZ_CHECK(backend && msg);
}

static char detail[512];

static void fake_detail(const char *msg)
{
    snprintf(detail, sizeof(detail), "%s", msg ? msg : "");
}

static int fake_map(void *hint, size_t len, int prot, int flags, int fd, int64_t off, void **out)
{
    (void)hint, (void)len, (void)prot, (void)flags, (void)fd, (void)off, (void)out;
    return -ENOMEM;
}

static int fake_unmap(void *addr, size_t len)
{
    (void)addr, (void)len;
    abort();  /* nothing was ever mapped */
}

static int fake_remap(void *a, size_t ol, size_t nl, int fl, void *na, void **out)
{
    (void)a, (void)ol, (void)nl, (void)fl, (void)na, (void)out;
    return -ENOMEM;
}

static int fake_advise(void *addr, size_t len, int advice)
{
    (void)addr, (void)len, (void)advice;
    return -EINVAL;
}

static int fake_protect(void *addr, size_t len, int prot)
{
    (void)addr, (void)len, (void)prot;
    return -ENOMEM;
}

/* The descriptor and NUMA calls fail like the memory ones. */
static int fake_memfd(const char *name, unsigned flags, int *fd)
{
    (void)name, (void)flags, (void)fd;
    return -ENOSYS;
}

static int fake_ftruncate(int fd, int64_t len)
{
    (void)fd, (void)len;
    abort();  /* no descriptor was ever made */
}

static int fake_close(int fd)
{
    (void)fd;
    abort();
}

static int fake_mbind(void *addr, uint64_t len, int mode, const unsigned long *nodemask,
                      uint64_t maxnode, unsigned flags)
{
    (void)addr, (void)len, (void)mode, (void)nodemask, (void)maxnode, (void)flags;
    return -ENOSYS;
}

static int fake_getcpu(unsigned *cpu, unsigned *node)
{
    (void)cpu, (void)node;
    return -ENOSYS;
}

static int fake_page_node(const void *addr, int *node)
{
    (void)addr, (void)node;
    return -ENOSYS;
}

static int64_t fake_measure(const void *addr, size_t len)
{
    (void)addr, (void)len;
    return 0;
}

static const struct hp_host host = {
    HP_BACKEND_ABI_VERSION, sizeof(struct hp_host), fake_log, fake_detail, fake_map,
    fake_unmap, fake_remap, fake_advise, fake_protect, fake_read, fake_measure, 4096,
    fake_memfd, fake_ftruncate, fake_close, fake_mbind, fake_getcpu, fake_page_node,
};

static const struct hp_backend_ops *ops[3];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ops[0] = fz_hugetlbfs_entry(&host);
    ops[1] = fz_thp_entry(&host);
    ops[2] = fz_orders_entry(&host);
    return 0;
}

static void check_caps(const struct hp_backend_ops *o, const struct hp_backend_caps *c)
{
    FUZZ_CHECK(memchr(c->reason, '\0', sizeof(c->reason)));
    FUZZ_CHECK(c->n_page_sizes <= HP_MAX_PAGE_SIZES);
    FUZZ_CHECK(!c->available || c->n_page_sizes > 0);
    for (uint32_t i = 0; i < c->n_page_sizes; i++) {
        uint64_t ps = c->page_sizes[i];
        FUZZ_CHECK(ps > 4096 && !(ps & (ps - 1)));
        FUZZ_CHECK(i == 0 || ps > c->page_sizes[i - 1]);
        /* Every size the probe offers must fail cleanly when the OS says no. */
        struct hp_map_request req = {sizeof(req), 0, HP_F_POPULATE, 5000, ps, 0, 0};
        struct hp_mapping m = {.size = sizeof(m)};
        int rc = o->map(NULL, &req, &m);
        FUZZ_CHECK(rc < 0 && rc >= HP_EOS);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memset(file_data, 0, sizeof(file_data));
    memset(file_len, 0, sizeof(file_len));
    for (size_t at = 0; at + 3 <= size;) {
        size_t id = data[at] % NPATHS;
        size_t len = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;
        at += 3;
        if (len > size - at)
            len = size - at;
        file_data[id] = data + at;
        file_len[id] = len;
        at += len;
    }
    fz_hugetlbfs_reset();
    for (int k = 0; k < 3; k++) {
        struct hp_backend_caps caps;
        memset(&caps, 0, sizeof(caps));
        caps.size = sizeof(caps);
        FUZZ_CHECK(ops[k]->probe(NULL, &caps) == HP_OK);
        check_caps(ops[k], &caps);
    }
    for (size_t i = 15; i < 23; i++) {
        char mode[16];
        int rc = hpb_read_mode(&host, paths[i], mode, sizeof(mode));
        FUZZ_CHECK(rc <= 0);
        if (rc == 0)
            FUZZ_CHECK(!strcmp(mode, "always") || !strcmp(mode, "madvise") ||
                       !strcmp(mode, "never") || !strcmp(mode, "inherit"));
    }
    return 0;
}
