/*
 * NUMA placement on the real kernel, measured where the pages are
 * (move_pages(2) through hp_block_nodes, and get_mempolicy(MPOL_F_ADDR) for
 * the policy the block's memory carries).
 *
 * On any machine: bad placements are refused; a block and a huge stack
 * placed on the last node with memory (node 0 on a one-node machine) are
 * there, for every page kind this kernel offers (base, mTHP 64 KiB, THP,
 * 2 MiB and 1 GiB hugetlb), with the policy on their memory, the calling
 * thread's own policy unchanged, and hp_realloc keeping the node.
 * With two or more nodes (the kernel lab's guest: tools/klab/run --test
 * kernel-numa): node 1's 2 MiB pool emptied, a thread bound to node 1 with
 * set_mempolicy(MPOL_BIND), and a process bound as numactl --membind=1 would
 * bind it, get node-1 memory of another kind, or HP_ENOHUGE when only the
 * pool would do; never SIGBUS; and hpctl (argv[1]) sets the pool of node 1
 * alone and shows every node's pool in status --json. On one node those
 * tests skip and say why. On any machine, hpctl watch PID shows a block
 * bound to the last node (base pages, and 2 MiB hugetlb when that node's
 * pool has or can be grown to two free pages) among that node's pages.
 */
#include <hp.h>

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kt.h"

#define MPOL_DEFAULT 0
#define MPOL_BIND 2
#define MPOL_F_ADDR (1 << 1)
#define NODES "/sys/devices/system/node"

static struct kt_snapshot before_all, after_setup;
static int last_node = -1, n_nodes;  /* nodes with memory */
static uint64_t node_mask[16];

/* Nodes with memory: has_memory, "0" or "0-1" or "0,2". */
static void read_nodes(void)
{
    char buf[256];
    if (knob_get(NODES "/has_memory", buf, sizeof(buf)) != 0)
        return;
    for (char *s = buf; *s;) {
        char *end;
        long lo = strtol(s, &end, 10), hi = lo;
        if (end == s)
            break;
        if (*end == '-')
            hi = strtol(end + 1, &end, 10);
        for (long n = lo; n <= hi && n < 1024; n++) {
            node_mask[n / 64] |= UINT64_C(1) << (n % 64);
            last_node = (int)n;
            n_nodes++;
        }
        s = *end == ',' ? end + 1 : end;
    }
}

static struct hp_alloc_opts placed(uint32_t mode, int node, uint64_t *mask)
{
    memset(mask, 0, 16 * sizeof(*mask));
    mask[node / 64] = UINT64_C(1) << (node % 64);
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.numa_mode = mode;
    o.numa_max_node = 1024;
    o.numa_nodes = mask;
    return o;
}

/* The policy mode the kernel keeps for the memory at p. */
static int vma_policy(const void *p)
{
    int mode = -1;
    unsigned long nodes[16] = {0};
    if (syscall(SYS_get_mempolicy, &mode, nodes, 1024UL, p, (unsigned long)MPOL_F_ADDR) != 0)
        return -errno;
    return mode;
}

static int thread_policy(unsigned long *first_word)
{
    int mode = -1;
    unsigned long nodes[16] = {0};
    if (syscall(SYS_get_mempolicy, &mode, nodes, 1024UL, NULL, 0UL) != 0)
        return -errno;
    *first_word = nodes[0];
    return mode;
}

static int bind_thread(int node)
{
    unsigned long nodes[16] = {0};
    nodes[node / 64] = 1UL << (node % 64);
    return syscall(SYS_set_mempolicy, MPOL_BIND, nodes, 1025UL) == 0 ? 0 : -errno;
}

/* Every resident byte of [p, p + len) on node, and the whole range resident. */
static void expect_on(const void *p, size_t len, int node, const char *what)
{
    uint64_t bytes[1024] = {0};
    int32_t n = hp_block_nodes(p, bytes, 1024);
    struct hp_block_info info = kt_info(p);
    kt_note("%s: %d node(s), %llu of %zu bytes on node %d (backend %s, %llu KiB pages)", what,
            n, (unsigned long long)bytes[node], len, node, info.backend,
            (unsigned long long)(info.page_size >> 10));
    KT_CHECK(n == 1, "%s spans %d nodes", what, n);
    KT_CHECK(bytes[node] >= len, "%s: %llu bytes on node %d", what,
             (unsigned long long)bytes[node], node);
    KT_CHECK(info.numa_count == 1, "numa_count %u", info.numa_count);
    KT_CHECK(node >= 64 || info.numa_mask == UINT64_C(1) << node, "numa_mask 0x%llx",
             (unsigned long long)info.numa_mask);
}

/* ---- on any machine ---- */

static void bad_placements(void **state)
{
    KT_PRECONDITIONS();
    uint64_t mask[16];
    struct hp_alloc_opts o = placed(HP_NUMA_BIND, 0, mask);
    o.numa_mode = 7;
    KT_CHECK(hp_alloc_ex(4096, &o) == NULL && hp_last_error() == HP_EINVAL, "mode 7");
    o = placed(HP_NUMA_BIND, 0, mask);
    o.numa_nodes = NULL;
    KT_CHECK(hp_alloc_ex(4096, &o) == NULL && hp_last_error() == HP_EINVAL, "no nodes");
    o = placed(HP_NUMA_BIND, 0, mask);
    o.numa_max_node = 1025;
    KT_CHECK(hp_alloc_ex(4096, &o) == NULL && hp_last_error() == HP_EINVAL, "1025 nodes");
    o = placed(HP_NUMA_DEFAULT, 0, mask);
    KT_CHECK(hp_alloc_ex(4096, &o) == NULL && hp_last_error() == HP_EINVAL,
             "nodes without a mode");
    o = placed(HP_NUMA_PREFER, 0, mask);
    mask[0] = 0;
    KT_CHECK(hp_alloc_ex(4096, &o) == NULL && hp_last_error() == HP_EINVAL, "empty node set");
    int none = last_node + 1;  /* no memory there */
    o = placed(HP_NUMA_BIND, none, mask);
    KT_CHECK(hp_alloc_ex(4096, &o) == NULL && hp_last_error() == HP_EINVAL, "node %d", none);
    KT_CHECK(strstr(hp_last_error_detail(), "has no memory") != NULL, "detail: %s",
             hp_last_error_detail());
    /* A caller built against libhp 1.3 (its struct ends at exclude) gets no
     * placement, whatever lies past its struct. */
    o = placed(HP_NUMA_BIND, none, mask);
    o.size = 32;
    void *p = hp_alloc_ex(4096, &o);
    KT_CHECK(p != NULL, "a 1.3-sized hp_alloc_opts: %s", hp_last_error_detail());
    KT_CHECK(hp_free(p) == HP_OK, "free");
}

struct kind {
    const char *what, *backend;
    uint64_t flags, len;
};

/* The kinds this machine can serve now: base, mTHP 64 KiB, THP, and the
 * hugetlb sizes whose pool on node has a free page. */
static unsigned kinds_here(int node, struct kind *k)
{
    unsigned n = 0;
    struct hp_backend_info bi;
    k[n++] = (struct kind){"base pages", "fallback", HP_F_PAGE_4K, 1 << 20};
    if (kt_backend("anon-orders", &bi) == 0 && bi.available)
        k[n++] = (struct kind){"mTHP 64 KiB", "anon-orders", HP_F_PAGE_64K, 1 << 20};
    if (kt_backend("thp-madvise", &bi) == 0 && bi.available)
        k[n++] = (struct kind){"THP", "thp-madvise", HP_F_PAGE_2M | HP_F_POPULATE, 8 << 20};
    static const struct {
        const char *what;
        unsigned long kb;
        uint64_t flag, len;
    } pools[] = {{"hugetlb 2 MiB", 2048, HP_F_PAGE_2M, 4 << 20},
                 {"hugetlb 1 GiB", 1048576, HP_F_PAGE_1G, UINT64_C(1) << 30}};
    for (unsigned i = 0; i < 2; i++) {
        char path[160], buf[32];
        snprintf(path, sizeof(path), NODES "/node%d/hugepages/hugepages-%lukB/free_hugepages",
                 node, pools[i].kb);
        if (knob_get(path, buf, sizeof(buf)) == 0 &&
            (uint64_t)atol(buf) * pools[i].kb * 1024 >= pools[i].len)
            k[n++] = (struct kind){pools[i].what, "hugetlbfs", pools[i].flag, pools[i].len};
        else
            kt_note("%s: no free page on node %d: not tried", pools[i].what, node);
    }
    return n;
}

static void each_kind_on_last_node(void **state)
{
    KT_PRECONDITIONS();
    int node = last_node;
    struct kind k[6];
    unsigned n = kinds_here(node, k);
    unsigned long before_word = 0, after_word = 0;
    int before = thread_policy(&before_word);
    for (unsigned i = 0; i < n; i++) {
        for (uint32_t mode = HP_NUMA_PREFER; mode <= HP_NUMA_BIND; mode++) {
            uint64_t mask[16];
            struct hp_alloc_opts o = placed(mode, node, mask);
            o.backend = k[i].backend;
            o.flags = k[i].flags;
            unsigned char *p = hp_alloc_ex(k[i].len, &o);
            KT_CHECK(p != NULL, "%s on node %d: %s", k[i].what, node, hp_last_error_detail());
            size_t off;
            KT_CHECK(kt_fill_verify(p, k[i].len, 0x6b, &off) == 0, "fill at %zu", off);
            char what[96];
            snprintf(what, sizeof(what), "%s, %s node %d", k[i].what,
                     mode == HP_NUMA_BIND ? "bound to" : "preferring", node);
            expect_on(p, k[i].len, node, what);
            struct hp_block_info info = kt_info(p);
            KT_CHECK(info.numa_mode == mode, "numa_mode %u", info.numa_mode);
            int vp = vma_policy(p);
            KT_CHECK(vp == (mode == HP_NUMA_BIND ? MPOL_BIND : 1 /* MPOL_PREFERRED */),
                     "the block's memory has policy %d", vp);
            KT_CHECK(hp_free(p) == HP_OK, "free");
        }
    }
    int after = thread_policy(&after_word);
    KT_CHECK(before == after && before_word == after_word,
             "the thread's policy changed: %d/0x%lx -> %d/0x%lx", before, before_word, after,
             after_word);
}

static void realloc_keeps_the_node(void **state)
{
    KT_PRECONDITIONS();
    int node = last_node;
    static const struct {
        const char *backend;
        uint64_t flags;
    } kinds[] = {{"thp-madvise", HP_F_PAGE_2M}, {"fallback", HP_F_PAGE_4K}};
    for (unsigned i = 0; i < 2; i++) {
        uint64_t mask[16];
        struct hp_alloc_opts o = placed(HP_NUMA_BIND, node, mask);
        o.backend = kinds[i].backend;
        o.flags = kinds[i].flags;
        unsigned char *p = hp_alloc_ex(4 << 20, &o);
        KT_CHECK(p != NULL, "%s: %s", kinds[i].backend, hp_last_error_detail());
        memset(p, 1, 4 << 20);
        unsigned char *q = hp_realloc(p, 32 << 20, 0);
        KT_CHECK(q != NULL, "grow: %s", hp_last_error_detail());
        size_t off;
        KT_CHECK(kt_verify(q, 4 << 20, 1, &off) == 0, "contents at %zu", off);
        KT_CHECK(kt_fill_verify(q, 32 << 20, 2, &off) == 0, "fill at %zu", off);
        char what[96];
        snprintf(what, sizeof(what), "%s grown to 32 MiB", kinds[i].backend);
        expect_on(q, 32 << 20, node, what);
        KT_CHECK(kt_info(q).numa_mode == HP_NUMA_BIND, "placement lost");
        KT_CHECK(vma_policy((char *)q + (31 << 20)) == MPOL_BIND, "the tail has no policy");
        KT_CHECK(hp_free(q) == HP_OK, "free");
    }
}

static void stack_on_the_node(void **state)
{
    KT_PRECONDITIONS();
    int node = last_node;
    uint64_t mask[16] = {0};
    mask[node / 64] = UINT64_C(1) << (node % 64);
    struct hp_stack_opts so = HP_STACK_OPTS_INIT;
    so.flags = HP_STACK_HUGE | HP_STACK_ALLOW_LEAN | HP_STACK_POPULATE;
    so.numa_mode = HP_NUMA_BIND;
    so.numa_max_node = 1024;
    so.numa_nodes = mask;
    struct hp_stack *s = hp_stack_create_ex(4 << 20, &so);
    KT_CHECK(s != NULL, "stack: %s", hp_last_error_detail());
    size_t off;
    KT_CHECK(kt_fill_verify(hp_stack_base(s), hp_stack_size(s), 3, &off) == 0, "fill");
    struct hp_stack_info si = HP_STACK_INFO_INIT;
    KT_CHECK(hp_stack_get_info(s, &si) == HP_OK, "info");
    int vp = vma_policy(hp_stack_base(s));
    kt_note("stack from %s, policy %d", si.source, vp);
    KT_CHECK(vp == MPOL_BIND, "the stack's memory has policy %d", vp);
    KT_CHECK(hp_stack_destroy(s) == HP_OK, "destroy");
    so.flags = HP_STACK_HUGE | HP_STACK_ALLOW_LEAN;
    s = hp_stack_create_ex(4 << 20, &so);
    KT_CHECK(s != NULL, "second stack: %s", hp_last_error_detail());
    KT_CHECK(hp_stack_get_info(s, &si) == HP_OK && !si.from_cache,
             "a placed stack came from the stack cache");
    KT_CHECK(hp_stack_destroy(s) == HP_OK, "destroy");
}

/* ---- two nodes or more ---- */

#define NEED_TWO_NODES()                                                                           \
    do {                                                                                           \
        if (n_nodes < 2)                                                                           \
            KT_SKIP("needs two NUMA nodes with memory (this machine has %d); the kernel lab "      \
                    "runs it: tools/klab/run --test kernel-numa 7.3", n_nodes);                    \
    } while (0)

static char node_pool_path[160], node_pool_was[32];

/* Empty the 2 MiB pool of node (put back by the test, and at exit in any
 * case) and leave the other nodes' pools alone; 0 or -1 (skip). */
static int empty_node_pool(int node)
{
    snprintf(node_pool_path, sizeof(node_pool_path),
             NODES "/node%d/hugepages/hugepages-2048kB/nr_hugepages", node);
    char buf[32];
    if (knob_get(node_pool_path, node_pool_was, sizeof(node_pool_was)) != 0 ||
        knob_set(node_pool_path, "0") != 0 || knob_get(node_pool_path, buf, sizeof(buf)) != 0 ||
        atol(buf) != 0)
        return -1;
    return 0;
}

struct bound_result {
    int node;
    char why[200];
};

/* In a thread bound to node with set_mempolicy: a default hp_alloc, and a
 * pool-only request with HP_F_REQUIRE_HUGE. */
static void *bound_thread(void *arg)
{
    struct bound_result *r = arg;
    if (bind_thread(r->node) != 0) {
        snprintf(r->why, sizeof(r->why), "set_mempolicy: %s", strerror(errno));
        return NULL;
    }
    size_t len = 8 << 20, off;
    unsigned char *p = hp_alloc(len, 0);
    if (!p) {
        snprintf(r->why, sizeof(r->why), "hp_alloc: %s", hp_last_error_detail());
        return NULL;
    }
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    hp_info(p, &info);
    if (!strcmp(info.backend, "hugetlbfs")) {
        snprintf(r->why, sizeof(r->why), "served by hugetlbfs with node %d's pool empty", r->node);
        return NULL;
    }
    if (kt_fill_verify(p, len, 0x44, &off) != 0) {
        snprintf(r->why, sizeof(r->why), "fault at %zu of a %s block", off, info.backend);
        return NULL;
    }
    uint64_t bytes[1024] = {0};
    int32_t n = hp_block_nodes(p, bytes, 1024);
    if (n != 1 || bytes[r->node] < len) {
        snprintf(r->why, sizeof(r->why), "%d nodes, %llu bytes on node %d", n,
                 (unsigned long long)bytes[r->node], r->node);
        return NULL;
    }
    hp_free(p);
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.flags = HP_F_REQUIRE_HUGE;
    o.exclude = "thp-madvise,anon-orders";
    p = hp_alloc_ex(len, &o);
    if (p || hp_last_error() != HP_ENOHUGE) {
        snprintf(r->why, sizeof(r->why), "pool-only request: %s (%s)",
                 p ? "served" : hp_error_name(hp_last_error()), hp_last_error_detail());
        return NULL;
    }
    kt_note("bound thread: %s block on node %d; pool only: %s", info.backend, r->node,
            hp_last_error_detail());
    return r;
}

static void bound_thread_empty_node_pool(void **state)
{
    KT_PRECONDITIONS();
    NEED_TWO_NODES();
    if (empty_node_pool(last_node))
        KT_SKIP("cannot empty node %d's 2 MiB pool", last_node);
    hp_reprobe();
    pthread_t t;
    struct bound_result r = {last_node, ""};
    void *res = NULL;
    KT_CHECK(pthread_create(&t, NULL, bound_thread, &r) == 0, "pthread_create");
    KT_CHECK(pthread_join(t, &res) == 0, "join");
    KT_CHECK(res == &r, "%s", r.why);
    /* The same through a placement, on an unbound thread. */
    uint64_t mask[16];
    struct hp_alloc_opts o = placed(HP_NUMA_BIND, last_node, mask);
    o.flags = HP_F_REQUIRE_HUGE;
    o.exclude = "thp-madvise,anon-orders";
    void *p = hp_alloc_ex(4 << 20, &o);
    KT_CHECK(p == NULL && hp_last_error() == HP_ENOHUGE, "bound placement, pool only: %s",
             p ? "served" : hp_last_error_detail());
    o.flags = 0;
    o.exclude = NULL;
    p = hp_alloc_ex(4 << 20, &o);
    KT_CHECK(p != NULL, "bound placement: %s", hp_last_error_detail());
    KT_CHECK(strcmp(kt_info(p).backend, "hugetlbfs") != 0, "hugetlbfs with the pool empty");
    size_t off;
    KT_CHECK(kt_fill_verify(p, 4 << 20, 5, &off) == 0, "fault at %zu", off);
    expect_on(p, 4 << 20, last_node, "bound placement, pool empty");
    KT_CHECK(hp_free(p) == HP_OK, "free");
    KT_CHECK(knob_set(node_pool_path, node_pool_was) == 0, "node %d's pool back to %s",
             last_node, node_pool_was);
    hp_reprobe();
}

/* A process bound as numactl --membind=N binds it (set_mempolicy before
 * anything else), calling plain hp_alloc. */
static int membind_child(int node)
{
    if (bind_thread(node) != 0)
        return 10;
    size_t len = 16 << 20, off;
    unsigned char *p = hp_alloc(len, 0);
    if (!p)
        return 11;
    if (kt_fill_verify(p, len, 9, &off) != 0)
        return 12;
    uint64_t bytes[1024] = {0};
    if (hp_block_nodes(p, bytes, 1024) != 1 || bytes[node] < len)
        return 13;
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    hp_info(p, &info);
    fprintf(stderr, "# membind child: %zu bytes from %s on node %d\n", len, info.backend, node);
    return hp_free(p) == HP_OK ? 0 : 14;
}

static void membind_process(void **state)
{
    KT_PRECONDITIONS();
    NEED_TWO_NODES();
    char mode[32];
    snprintf(mode, sizeof(mode), "membind-%d", last_node);
    int rc = kt_run_child(mode);
    KT_CHECK(rc == 0, "child exit %d (10 bind, 11 alloc, 12 fault, 13 wrong node, 14 free)", rc);
}

/* hpctl, as an operator runs it (its path is argv[1]): hpctl pool set 2M
 * N --node LAST changes that node's pool only, and hpctl status --json
 * lists every node's pool. */
static const char *hpctl_path;

static int run_hpctl(char *const argv[], char *out, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(hpctl_path, argv);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t n;
    while (used + 1 < cap && (n = read(fds[0], out + used, cap - 1 - used)) > 0)
        used += (size_t)n;
    out[used] = '\0';
    char sink[512];
    while (read(fds[0], sink, sizeof(sink)) > 0)
        ;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static long node_pages(int node)
{
    char path[160], buf[32];
    snprintf(path, sizeof(path), NODES "/node%d/hugepages/hugepages-2048kB/nr_hugepages", node);
    return knob_get(path, buf, sizeof(buf)) == 0 ? atol(buf) : -1;
}

static void hpctl_pool_set_on_one_node(void **state)
{
    KT_PRECONDITIONS();
    NEED_TWO_NODES();
    if (!hpctl_path || access(hpctl_path, X_OK) != 0)
        KT_SKIP("no hpctl to run (argv[1])");
    char path[160], was[32], count[32], out[16384];
    snprintf(path, sizeof(path), NODES "/node%d/hugepages/hugepages-2048kB/nr_hugepages",
             last_node);
    /* Registered with the knob restorer first, so the value goes back at
     * exit even if hpctl's change outlives a failed check. */
    KT_CHECK(knob_get(path, was, sizeof(was)) == 0 && knob_set(path, was) == 0, "%s", path);
    long others[64], target = atol(was) + 2;
    for (int n = 0; n <= last_node && n < 64; n++)
        others[n] = node_pages(n);
    snprintf(count, sizeof(count), "%ld", target);
    char node[16];
    snprintf(node, sizeof(node), "%d", last_node);
    char *set[] = {"hpctl", "pool", "set", "2M", count, "--node", node, NULL};
    int rc = run_hpctl(set, out, sizeof(out));
    kt_note("hpctl pool set 2M %s --node %s: exit %d", count, node, rc);
    KT_CHECK(rc == 0, "exit %d: %s", rc, out);
    KT_CHECK(node_pages(last_node) == target, "node %d has %ld pages, not %ld", last_node,
             node_pages(last_node), target);
    for (int n = 0; n < last_node && n < 64; n++)
        KT_CHECK(node_pages(n) == others[n], "node %d changed: %ld -> %ld", n, others[n],
                 node_pages(n));
    char *status[] = {"hpctl", "status", "--json", NULL};
    rc = run_hpctl(status, out, sizeof(out));
    const char *pools = strstr(out, "\"hugetlb_pools\"");
    KT_CHECK(rc == 0 && pools, "hpctl status --json: exit %d", rc);
    for (int n = 0; n <= last_node; n++) {
        char want[64];
        snprintf(want, sizeof(want), "{\"node\": %d, \"total\": ", n);
        KT_CHECK(strstr(pools, want) != NULL, "no pool of node %d in hpctl status --json", n);
    }
    char mine[64];
    snprintf(mine, sizeof(mine), "{\"node\": %d, \"total\": %ld", last_node, target);
    KT_CHECK(strstr(pools, mine) != NULL, "hpctl status does not show node %d's %ld pages",
             last_node, target);
    KT_CHECK(knob_set(path, was) == 0, "restore %s", path);
}

/* The rss_kb and hugetlb_kb hpctl watch PID --json shows for node. */
static int watch_node(int node, long long *rss_kb, long long *hugetlb_kb)
{
    char pid[16], want[48], out[16384];
    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    char *watch[] = {"hpctl", "watch", pid, "--count", "1", "--json", NULL};
    int rc = run_hpctl(watch, out, sizeof(out));
    snprintf(want, sizeof(want), "{\"node\": %d, \"rss_kb\": ", node);
    const char *at = strstr(out, want);
    if (rc != 0 || !at ||
        sscanf(at + strlen(want), "%lld, \"hugetlb_kb\": %lld", rss_kb, hugetlb_kb) != 2)
        return rc ? rc : -1;
    return 0;
}

/* hpctl watch PID shows, per node, the process's pages from numa_maps:
 * 16 MiB of base pages and (when the node's 2 MiB pool has or gets the
 * pages) a 4 MiB hugetlb block bound to the last node appear on that node. */
static void hpctl_watch_per_node(void **state)
{
    KT_PRECONDITIONS();
    if (!hpctl_path || access(hpctl_path, X_OK) != 0)
        KT_SKIP("no hpctl to run (argv[1])");
    int node = last_node;
    long long rss0, huge0, rss1, huge1;
    KT_CHECK(watch_node(node, &rss0, &huge0) == 0, "hpctl watch --json: no node %d", node);
    uint64_t mask[16];
    struct hp_alloc_opts o = placed(HP_NUMA_BIND, node, mask);
    o.backend = "fallback";
    o.flags = HP_F_PAGE_4K;
    size_t base_len = 16 << 20, huge_len = 4 << 20;
    char *base = hp_alloc_ex(base_len, &o);
    KT_CHECK(base != NULL, "16 MiB of base pages on node %d: %s", node, hp_last_error_detail());
    memset(base, 1, base_len);
    kt_hold(base);
    /* Two free 2 MiB pages on the node: the pool grown by what it lacks,
     * registered with the knob restorer and put back below. */
    char path[160], nr[160], buf[32], was[32] = "";
    snprintf(path, sizeof(path), NODES "/node%d/hugepages/hugepages-2048kB/free_hugepages", node);
    snprintf(nr, sizeof(nr), NODES "/node%d/hugepages/hugepages-2048kB/nr_hugepages", node);
    long lack = knob_get(path, buf, sizeof(buf)) == 0 ? 2 - atol(buf) : 0;
    if (lack > 0 && knob_get(nr, was, sizeof(was)) == 0 && knob_set(nr, was) == 0) {
        char more[32];
        snprintf(more, sizeof(more), "%ld", atol(was) + lack);
        knob_set(nr, more);
    }
    void *huge = NULL;
    if (knob_get(path, buf, sizeof(buf)) == 0 && atol(buf) >= 2) {
        o.backend = "hugetlbfs";
        o.flags = HP_F_PAGE_2M | HP_F_REQUIRE_HUGE;
        huge = hp_alloc_ex(huge_len, &o);
        kt_note("4 MiB hugetlb on node %d: %s", node, huge ? "yes" : hp_last_error_detail());
        if (huge)
            kt_hold(huge);
    } else {
        kt_note("node %d's 2 MiB pool has fewer than 2 free pages: no hugetlb block", node);
    }
    KT_CHECK(watch_node(node, &rss1, &huge1) == 0, "hpctl watch --json: no node %d", node);
    kt_note("hpctl watch, node %d: rss %lld -> %lld kB, hugetlb %lld -> %lld kB", node, rss0,
            rss1, huge0, huge1);
    KT_CHECK(rss1 - rss0 >= (long long)(base_len >> 10) - 1024, "node %d rss grew %lld kB",
             node, rss1 - rss0);
    KT_CHECK(huge1 - huge0 == (huge ? (long long)(huge_len >> 10) : 0),
             "node %d hugetlb grew %lld kB", node, huge1 - huge0);
    if (huge)
        kt_release(huge);
    kt_release(base);
    KT_CHECK(!was[0] || knob_set(nr, was) == 0, "restore %s", nr);
}

static int teardown(void **state)
{
    (void)state;
    kt_free_held();
    return 0;
}

static void machine_restored(void **state)
{
    KT_PRECONDITIONS();
    kt_expect_restored(&after_setup, &before_all);
}

static void setup(void)
{
    read_nodes();
    if (last_node < 0) {
        snprintf(kt_skip_all, sizeof(kt_skip_all), "no %s/has_memory (no NUMA support)", NODES);
        return;
    }
    if (kt_need_root("per-node hugetlb pools"))
        return;
    if (kt_lock(60))
        return;
    kt_snapshot_take(&before_all);
    /* mTHP 64 KiB on request, so anon-orders is one of the kinds tried. */
    if (access(KT_THP "/hugepages-64kB/enabled", F_OK) == 0 &&
        kt_thp_knob("hugepages-64kB/enabled", "madvise"))
        return;
    hp_reprobe();
    kt_snapshot_take(&after_setup);
}

int main(int argc, char **argv)
{
    kt_backends_only();
    const char *mode = kt_child_mode(argc, argv);
    if (mode && !strncmp(mode, "membind-", 8))
        return membind_child(atoi(mode + 8));
    if (argc > 1 && argv[1][0] == '/')
        hpctl_path = argv[1];
    setup();
    if (getenv("KT_FILTER"))
        cmocka_set_test_filter(getenv("KT_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(bad_placements, teardown),
        cmocka_unit_test_teardown(each_kind_on_last_node, teardown),
        cmocka_unit_test_teardown(realloc_keeps_the_node, teardown),
        cmocka_unit_test_teardown(stack_on_the_node, teardown),
        cmocka_unit_test_teardown(bound_thread_empty_node_pool, teardown),
        cmocka_unit_test_teardown(membind_process, teardown),
        cmocka_unit_test_teardown(hpctl_pool_set_on_one_node, teardown),
        cmocka_unit_test_teardown(hpctl_watch_per_node, teardown),
        cmocka_unit_test(machine_restored),
    };
    return cmocka_run_group_tests_name("kernel-numa", tests, NULL, NULL);
}
