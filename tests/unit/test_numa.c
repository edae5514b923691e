/*
 * NUMA and the hugetlb pools: a thread whose memory policy (MPOL_BIND) or
 * cpuset leaves only some nodes gets a hugetlb block only when those nodes'
 * pools hold its pages (mm/hugetlb.c: the reservation at mmap counts the
 * allowed nodes' free pages, and the faults take pages from them alone);
 * otherwise the next kind serves, or HP_ENOHUGE with HP_F_REQUIRE_HUGE.
 *
 * Three layers: the pure rule (hp_select_pool_nodes, hp_select_limit_pool),
 * the node-list reader of the OS layer, and the whole path on fabricated
 * sysfs trees (HP_SYSFS_ROOT) with 0, 1, 2 and 4 nodes, a node without
 * memory and an empty node pool, where the thread's policy comes from the
 * OS layer's test seam (hp_os_fake_mempolicy) since this machine may have
 * one node only. Decisions are read with hp_alloc_explain (nothing mapped);
 * the cases that must stay off the pool also allocate for real. None maps
 * pool pages, so none needs the knob lock. tests/kernel/numa.c measures
 * placement on the real kernel.
 */
#include <hp.h>

#include "explain.h"
#include "nodes.h"
#include "numa.h"
#include "os.h"
#include "select.h"
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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#define M (UINT64_C(1) << 20)
#define G (UINT64_C(1) << 30)

static struct hp_nodes nodes_of(const char *list)
{
    struct hp_nodes s;
    hp_nodes_clear(&s);
    for (const char *p = list; *p;) {
        char *end;
        unsigned long lo = strtoul(p, &end, 10), hi = lo;
        if (*end == '-')
            hi = strtoul(end + 1, &end, 10);
        for (unsigned long n = lo; n <= hi; n++)
            hp_nodes_set(&s, (unsigned)n);
        p = *end == ',' ? end + 1 : end;
    }
    return s;
}

/* ---- the pure rule ---------------------------------------------------- */

struct rule_case {
    const char *what;
    int mode;
    const char *policy, *mems, *with_memory;
    int restricted;
    const char *out;      /* when restricted */
};

static void pool_nodes_rule(void **state)
{
    (void)state;
    static const struct rule_case cases[] = {
        {"default, two nodes", HP_MPOL_DEFAULT, "", "0-1", "0-1", 0, NULL},
        {"local", HP_MPOL_LOCAL, "", "0-1", "0-1", 0, NULL},
        {"bind to node 1", HP_MPOL_BIND, "1", "0-1", "0-1", 1, "1"},
        {"bind to both", HP_MPOL_BIND, "0-1", "0-1", "0-1", 0, NULL},
        {"preferred node 1 falls back", HP_MPOL_PREFERRED, "1", "0-1", "0-1", 0, NULL},
        {"preferred-many falls back", HP_MPOL_PREFERRED_MANY, "1", "0-1", "0-1", 0, NULL},
        {"interleave falls back", HP_MPOL_INTERLEAVE, "1", "0-1", "0-1", 0, NULL},
        {"weighted interleave falls back", HP_MPOL_WEIGHTED_INTERLEAVE, "1", "0-1", "0-1", 0, NULL},
        {"cpuset of node 1", HP_MPOL_DEFAULT, "", "1", "0-1", 1, "1"},
        {"bind outside the cpuset is ignored", HP_MPOL_BIND, "1", "0", "0-1", 1, "0"},
        {"empty cpuset answer: every node", HP_MPOL_DEFAULT, "", "", "0-1", 0, NULL},
        {"four nodes, bind to 2-3", HP_MPOL_BIND, "2-3", "0-3", "0-3", 1, "2-3"},
        {"four nodes, cpuset 1-3, bind 0,3", HP_MPOL_BIND, "0,3", "1-3", "0-3", 1, "3"},
        {"memoryless node 1 in the binding", HP_MPOL_BIND, "1-2", "0-2", "0,2", 1, "2"},
        {"bound to the memoryless node only", HP_MPOL_BIND, "1", "0-2", "0,2", 0, NULL},
        {"one node, bound to it", HP_MPOL_BIND, "0", "0", "0", 0, NULL},
        {"node 1000", HP_MPOL_BIND, "1000", "0,1000", "0,1000", 1, "1000"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        const struct rule_case *c = &cases[i];
        struct hp_nodes pol = nodes_of(c->policy), mems = nodes_of(c->mems),
                        mem = nodes_of(c->with_memory), out;
        int r = hp_select_pool_nodes(c->mode, &pol, &mems, &mem, &out);
        char text[64];
        hp_nodes_format(&out, text, sizeof(text));
        print_message("# %-36s restricted %d, nodes %s\n", c->what, r, text);
        assert_int_equal(r, c->restricted);
        if (c->out) {
            struct hp_nodes want = nodes_of(c->out);
            assert_true(hp_nodes_equal(&out, &want));
        }
    }
}

static void format_nodes(void **state)
{
    (void)state;
    char buf[64];
    struct hp_nodes s = nodes_of("0-3,5,7-8,1023");
    hp_nodes_format(&s, buf, sizeof(buf));
    assert_string_equal(buf, "0-3,5,7-8,1023");
    hp_nodes_clear(&s);
    hp_nodes_format(&s, buf, sizeof(buf));
    assert_string_equal(buf, "");
    s = nodes_of("0,2,4,6,8,10,12,14,16,18,20");
    hp_nodes_format(&s, buf, 12);
    assert_string_equal(buf, "0,2,4,6...");
}

/* hp_nodes_parse takes what hp_nodes_format writes, and the kernel's list
 * format of user input (cpuset.mems, hpctl explain --node). */
static void parse_nodes(void **state)
{
    (void)state;
    char buf[64];
    struct hp_nodes s, want = nodes_of("0-3,5,7-8,1023");
    hp_nodes_format(&want, buf, sizeof(buf));
    assert_int_equal(hp_nodes_parse(buf, &s), 0);
    assert_true(hp_nodes_equal(&s, &want));
    assert_int_equal(hp_nodes_parse("2-2,0\n", &s), 0);
    want = nodes_of("0,2");
    assert_true(hp_nodes_equal(&s, &want));
    assert_int_equal(hp_nodes_parse("", &s), 0);
    assert_int_equal(hp_nodes_count(&s), 0);
    static const char *const bad[] = {"3-1", "1-", "-1", "+1", " 1", "0,,1", "0-1024", "1024",
                                      "0\n\n", "0 1", "a", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        print_message("# \"%s\"\n", bad[i]);
        assert_int_equal(hp_nodes_parse(bad[i], &s), -EINVAL);
    }
}

/* A machine with 2 MiB and 1 GiB pools, and THP. */
static void limit_pool_then_select(void **state)
{
    (void)state;
    struct hp_backend_caps caps[2];
    memset(caps, 0, sizeof(caps));
    caps[0].available = 1;
    caps[0].n_page_sizes = 2;
    caps[0].page_sizes[0] = 2 * M;
    caps[0].pool_free[0] = 8;
    caps[0].page_sizes[1] = G;
    caps[0].pool_free[1] = 2;
    snprintf(caps[0].reason, sizeof(caps[0].reason), "2048K 8/8 free");
    caps[1].available = 1;
    caps[1].n_page_sizes = 1;
    caps[1].page_sizes[0] = 2 * M;
    caps[1].pool_free[0] = UINT64_MAX;
    struct hp_select_backend view[2] = {{"hugetlbfs", HP_KIND_HUGETLB, &caps[0], 0},
                                        {"thp-madvise", HP_KIND_THP, &caps[1], 0}};
    struct hp_options env = {0};
    struct hp_select_request req;
    struct hp_candidate out[HP_SELECT_MAX];

    /* Node 1 has one 2 MiB page and no 1 GiB page; the THP backend's
     * unpooled size is never capped. */
    uint64_t node_free[HP_MAX_PAGE_SIZES];
    for (unsigned k = 0; k < HP_MAX_PAGE_SIZES; k++)
        node_free[k] = UINT64_MAX;
    node_free[0] = 1;
    node_free[1] = 0;
    const char *who = "the thread's memory policy and cpuset allow";
    hp_select_limit_pool(&caps[0], node_free, who, "1");
    hp_select_limit_pool(&caps[1], node_free, who, "1");
    assert_int_equal(caps[0].pool_free[0], 1);
    assert_int_equal(caps[0].pool_free[1], 0);
    assert_int_equal(caps[1].pool_free[0], UINT64_MAX);
    assert_int_equal(caps[0].available, 1);
    assert_non_null(strstr(caps[0].reason, "allow only node 1, whose pools have fewer free pages"));

    hp_select_request_init(&req, 2 * M, 0, 4096, NULL, NULL, 0, &env);
    unsigned n = hp_select(&req, view, 2, out, HP_SELECT_MAX);
    assert_true(n >= 1);
    assert_int_equal(out[0].backend, 0);  /* one page: the pool of node 1 has it */
    hp_select_request_init(&req, 4 * M, 0, 4096, NULL, NULL, 0, &env);
    n = hp_select(&req, view, 2, out, HP_SELECT_MAX);
    assert_true(n >= 1);
    assert_int_equal(out[0].backend, 1);  /* two pages: THP, not the pool */
    for (unsigned i = 0; i < n; i++)
        assert_int_not_equal(out[i].backend, 0);

    /* Nothing on node 1 at all: the pool backend is unavailable, and a
     * request for huge pages that only it could serve finds nothing. */
    node_free[0] = 0;
    hp_select_limit_pool(&caps[0], node_free, "the block's placement allows", "1");
    assert_int_equal(caps[0].available, 0);
    assert_non_null(strstr(caps[0].reason, "the block's placement allows only node 1, whose pools "
                                           "have none free"));
    hp_select_request_init(&req, 2 * M, HP_F_REQUIRE_HUGE, 4096, "hugetlbfs", NULL, 0, &env);
    assert_int_equal(hp_select(&req, view, 2, out, HP_SELECT_MAX), 0);

    /* No per-node figure (UINT64_MAX): the global one stands. */
    caps[0].available = 1;
    caps[0].pool_free[0] = 8;
    caps[0].reason[0] = '\0';
    node_free[0] = UINT64_MAX;
    hp_select_limit_pool(&caps[0], node_free, "the block's placement allows", "1");
    assert_int_equal(caps[0].pool_free[0], 8);
    assert_string_equal(caps[0].reason, "");
}

/* ---- the node-list reader --------------------------------------------- */

/* In a child: reading a file sets up libhp's options (HP_SYSFS_ROOT among
 * them) for the process, and the fabricated machines below need them
 * unset until their own children start. */
static int nodelist_child(void *unused)
{
    (void)unused;
    static const struct {
        const char *text;
        int rc;
        const char *nodes;
    } cases[] = {
        {"0\n", 0, "0"}, {"0-3,5\n", 0, "0-3,5"}, {"", 0, ""}, {"\n", 0, ""},
        {"1023\n", 0, "1023"}, {"0,2-3", 0, "0,2-3"},
        {"1-0\n", -EINVAL, NULL}, {"a\n", -EINVAL, NULL}, {"0-\n", -EINVAL, NULL},
        {"1024\n", -EINVAL, NULL}, {"0,,1\n", -EINVAL, NULL}, {"0 1\n", -EINVAL, NULL},
        {"-1\n", -EINVAL, NULL}, {"0\n1\n", -EINVAL, NULL},
        {"99999999999999999999999\n", -EINVAL, NULL},
    };
    char dir[] = "/root/hp-nodelist-XXXXXX";
    if (!mkdtemp(dir)) {
        strcpy(dir, "/tmp/hp-nodelist-XXXXXX");
        if (!mkdtemp(dir))
            return 1;
    }
    char path[128];
    snprintf(path, sizeof(path), "%s/list", dir);
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        FILE *f = fopen(path, "w");
        if (!f)
            return 1;
        fputs(cases[i].text, f);
        fclose(f);
        struct hp_nodes got;
        int rc = hp_os_read_nodelist(path, &got);
        fprintf(stderr, "# \"%.*s\" -> %d\n", (int)strcspn(cases[i].text, "\n"),
                cases[i].text, rc);
        if (rc != cases[i].rc)
            return 1;
        if (cases[i].nodes) {
            struct hp_nodes want = nodes_of(cases[i].nodes);
            if (!hp_nodes_equal(&got, &want))
                return 1;
        }
    }
    unlink(path);
    int gone = hp_os_read_nodelist(path, &(struct hp_nodes){{0}});
    rmdir(dir);
    return gone == -ENOENT ? 0 : 1;
}

static void read_nodelist(void **state)
{
    (void)state;
    assert_int_equal(run_in_child(nodelist_child, NULL), 0);
}

/* ---- fabricated machines ---------------------------------------------- */

#define POOL "sys/kernel/mm/hugepages/hugepages-2048kB/"
#define THP "sys/kernel/mm/transparent_hugepage/"
#define NODE "sys/devices/system/node/"

static void put(const char *root, const char *rel, const char *text)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        mkdir(path, 0755);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A global 2 MiB pool of `total` free pages, THP madvise; nodes as listed
 * in has_memory, online; node_free[i] pages free on node i (-1: node i
 * has no hugepages directory, as a node without memory). */
static char *make_machine(const char *has_memory, const char *online, const int *node_free,
                          int n_nodes, unsigned total)
{
    char *root = strdup("/tmp/hp-numa-XXXXXX");
    assert_non_null(mkdtemp(root));
    char num[32];
    snprintf(num, sizeof(num), "%u\n", total);
    put(root, POOL "nr_hugepages", num);
    put(root, POOL "free_hugepages", num);
    put(root, POOL "resv_hugepages", "0\n");
    put(root, POOL "surplus_hugepages", "0\n");
    put(root, POOL "nr_overcommit_hugepages", "0\n");
    put(root, THP "enabled", "always [madvise] never\n");
    put(root, THP "defrag", "always defer defer+madvise [madvise] never\n");
    put(root, THP "hpage_pmd_size", "2097152\n");
    put(root, THP "hugepages-2048kB/enabled", "always [inherit] madvise never\n");
    put(root, THP "hugepages-64kB/enabled", "always inherit [madvise] never\n");
    put(root, "proc/mounts", "proc /proc proc rw 0 0\n");
    put(root, "proc/self/cgroup", "0::/\n");
    if (has_memory) {
        put(root, NODE "has_memory", has_memory);
        put(root, NODE "online", online);
    }
    for (int i = 0; i < n_nodes; i++) {
        char rel[160];
        if (node_free[i] < 0) {
            snprintf(rel, sizeof(rel), NODE "node%d/cpulist", i);
            put(root, rel, "\n");
            continue;
        }
        snprintf(rel, sizeof(rel), NODE "node%d/hugepages/hugepages-2048kB/free_hugepages", i);
        snprintf(num, sizeof(num), "%d\n", node_free[i]);
        put(root, rel, num);
        snprintf(rel, sizeof(rel), NODE "node%d/hugepages/hugepages-2048kB/nr_hugepages", i);
        put(root, rel, num);
    }
    return root;
}

static void remove_machine(char *root)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    free(root);
}

/* One question to a machine: a thread under (mode, policy, mems) asks for
 * len bytes with flags (and exclude); is hugetlbfs among the candidates? */
struct ask {
    const char *what;
    int mode;
    const char *policy, *mems;
    uint64_t len, flags;
    const char *exclude;
    int hugetlb;           /* expected: 1 a candidate (first), 0 not one */
    int32_t status;        /* expected status of the explain */
    int allocate;          /* also allocate: served, never by hugetlbfs (hugetlb 0) */
    int stack;             /* also a huge stack of len: never from the pool
                            * (hugetlb 0): HP_STACK_HUGETLB fails, HP_STACK_HUGE
                            * gets THP */
};

struct machine_case {
    const char *name;
    const char *has_memory, *online;
    int node_free[4];
    int n_nodes;
    unsigned total;
    struct ask asks[8];
};

static int hugetlb_index(const struct hp_explain *ex)
{
    for (unsigned i = 0; i < ex->n_backends; i++)
        if (!strcmp(ex->backends[i].name, "hugetlbfs"))
            return (int)i;
    return -1;
}

static int ask_one(const struct ask *a)
{
    struct hp_nodes pol = nodes_of(a->policy), mems = nodes_of(a->mems);
    hp_os_fake_mempolicy(a->mode, &pol, &mems);
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.flags = a->flags;
    o.exclude = a->exclude;
    static struct hp_explain ex;
    int32_t st = hp_alloc_explain(a->len, &o, &ex);
    int h = hugetlb_index(&ex);
    CHILD_CHECK(h >= 0);
    int first = ex.n_cand > 0 && ex.cand[0].backend == (unsigned)h;
    int any = 0;
    for (unsigned i = 0; i < ex.n_cand; i++)
        any |= ex.cand[i].backend == (unsigned)h;
    fprintf(stderr, "#   %-40s %s, %u candidates, hugetlbfs %s; %s%s%s\n", a->what,
            hp_error_name(st), ex.n_cand, first ? "first" : any ? "later" : "not one",
            ex.backends[h].caps.reason, st ? ": " : "", st ? ex.detail : "");
    CHILD_CHECK(st == a->status);
    CHILD_CHECK(a->hugetlb ? first : !any);
    if (a->allocate) {
        void *p = hp_alloc_ex(a->len, &o);
        if (a->status != HP_OK) {
            CHILD_CHECK(p == NULL && hp_last_error() == a->status);
            CHILD_CHECK(strstr(hp_last_error_detail(), "node") != NULL);
        } else {
            CHILD_CHECK(p != NULL);
            struct hp_block_info info = HP_BLOCK_INFO_INIT;
            CHILD_CHECK(hp_info(p, &info) == HP_OK);
            CHILD_CHECK(strcmp(info.backend, "hugetlbfs") != 0);
            memset(p, 0x5a, a->len);
            CHILD_CHECK(hp_free(p) == HP_OK);
        }
    }
    if (a->stack) {
        struct hp_stack *stk = hp_stack_create(a->len, HP_STACK_HUGETLB);
        fprintf(stderr, "#     hugetlb stack: %s (%s)\n", stk ? "served" : hp_error_name(hp_last_error()),
                hp_last_error_detail());
        CHILD_CHECK(stk == NULL && hp_last_error() == HP_ENOHUGE);
        stk = hp_stack_create(a->len, HP_STACK_HUGE);
        CHILD_CHECK(stk != NULL);
        struct hp_stack_info si = HP_STACK_INFO_INIT;
        CHILD_CHECK(hp_stack_get_info(stk, &si) == HP_OK);
        fprintf(stderr, "#     huge stack from %s\n", si.source);
        CHILD_CHECK(strcmp(si.source, "hugetlbfs") != 0 && si.mode == HP_STACK_MODE_HUGE);
        memset(hp_stack_base(stk), 1, hp_stack_size(stk));
        CHILD_CHECK(hp_stack_destroy(stk) == HP_OK);
    }
    hp_os_fake_mempolicy(-1, NULL, NULL);
    return 0;
}

static int machine_child(void *arg)
{
    const struct machine_case *c = arg;
    alarm(30);
    for (int i = 0; i < 8 && c->asks[i].what; i++)
        if (ask_one(&c->asks[i]))
            return 1;
    return 0;
}

#define NOT_HUGETLB "hugetlbfs"
#define ONLY_POOL "thp-madvise,anon-orders,fallback"

static const struct machine_case machines[] = {
    {"no NUMA sysfs (0 nodes)", NULL, NULL, {0}, 0, 4,
     {{"bound to node 1", HP_MPOL_BIND, "1", "0-1", 2 * M, 0, NULL, 1, HP_OK, 0, 0},
      {"default", HP_MPOL_DEFAULT, "", "0", 4 * M, 0, NULL, 1, HP_OK, 0, 0}}},
    {"one node", "0\n", "0\n", {4}, 1, 4,
     {{"bound to node 0", HP_MPOL_BIND, "0", "0", 8 * M, 0, NULL, 1, HP_OK, 0, 0},
      {"too big for the pool", HP_MPOL_BIND, "0", "0", 10 * M, 0, NULL, 0, HP_OK, 0, 0}}},
    {"two nodes, node 1's pool empty", "0-1\n", "0-1\n", {4, 0}, 2, 4,
     {{"default", HP_MPOL_DEFAULT, "", "0-1", 2 * M, 0, NULL, 1, HP_OK, 0, 0},
      {"bound to node 0", HP_MPOL_BIND, "0", "0-1", 8 * M, 0, NULL, 1, HP_OK, 0, 0},
      {"bound to node 1: THP serves", HP_MPOL_BIND, "1", "0-1", 2 * M, 0, NULL, 0, HP_OK, 1, 1},
      {"bound to node 1, require huge, pool only", HP_MPOL_BIND, "1", "0-1", 2 * M,
       HP_F_REQUIRE_HUGE, ONLY_POOL, 0, HP_ENOHUGE, 1, 0},
      {"preferred node 1: falls back to node 0", HP_MPOL_PREFERRED, "1", "0-1", 2 * M, 0, NULL,
       1, HP_OK, 0, 0},
      {"preferred-many node 1", HP_MPOL_PREFERRED_MANY, "1", "0-1", 2 * M, 0, NULL, 1, HP_OK, 0, 0},
      {"interleave 0-1", HP_MPOL_INTERLEAVE, "0-1", "0-1", 2 * M, 0, NULL, 1, HP_OK, 0, 0},
      {"cpuset of node 1", HP_MPOL_DEFAULT, "", "1", 2 * M, 0, NULL, 0, HP_OK, 1, 0}}},
    {"two nodes, one page on node 1", "0-1\n", "0-1\n", {3, 1}, 2, 4,
     {{"bound to node 1, one page", HP_MPOL_BIND, "1", "0-1", 2 * M, 0, NULL, 1, HP_OK, 0, 0},
      {"bound to node 1, two pages", HP_MPOL_BIND, "1", "0-1", 4 * M, 0, NULL, 0, HP_OK, 1, 0}}},
    {"four nodes", "0-3\n", "0-3\n", {0, 0, 2, 2}, 4, 4,
     {{"bound to 2-3, four pages", HP_MPOL_BIND, "2-3", "0-3", 8 * M, 0, NULL, 1, HP_OK, 0, 0},
      {"bound to 1-2, four pages", HP_MPOL_BIND, "1-2", "0-3", 8 * M, 0, NULL, 0, HP_OK, 1, 1},
      {"bound to 0-1, none", HP_MPOL_BIND, "0-1", "0-3", 2 * M, HP_F_REQUIRE_HUGE, ONLY_POOL, 0,
       HP_ENOHUGE, 1, 0},
      {"cpuset 3, two pages", HP_MPOL_DEFAULT, "", "3", 4 * M, 0, NULL, 1, HP_OK, 0, 0}}},
    {"node 1 without memory", "0,2\n", "0-2\n", {0, -1, 4}, 3, 4,
     {{"bound to 1-2", HP_MPOL_BIND, "1-2", "0-2", 8 * M, 0, NULL, 1, HP_OK, 0, 0},
      {"bound to 0-1: node 0's pool is empty", HP_MPOL_BIND, "0-1", "0-2", 2 * M, 0, NULL, 0,
       HP_OK, 1, 0},
      {"bound to node 1 only: ignored", HP_MPOL_BIND, "1", "0-2", 2 * M, 0, NULL, 1, HP_OK, 0, 0}}},
};

/* A placement in the request replaces the thread's policy for the pools
 * that count: two nodes, node 1's pool empty, the thread unbound. */
struct place_case {
    const char *what;
    uint32_t mode;
    const char *nodes, *mems;
    uint64_t flags;
    const char *exclude;
    int hugetlb;
    int32_t status;
    const char *detail;   /* substring of the error detail */
};

static const struct place_case places[] = {
    {"bind to node 1", HP_NUMA_BIND, "1", "0-1", 0, NULL, 0, HP_OK, NULL},
    {"bind to node 1, pool only", HP_NUMA_BIND, "1", "0-1", HP_F_REQUIRE_HUGE, ONLY_POOL, 0,
     HP_ENOHUGE, "the block's placement allows the hugetlb pools of node 1 only"},
    {"prefer node 1", HP_NUMA_PREFER, "1", "0-1", 0, NULL, 1, HP_OK, NULL},
    {"bind to node 0", HP_NUMA_BIND, "0", "0-1", 0, NULL, 1, HP_OK, NULL},
    {"interleave 0-1", HP_NUMA_INTERLEAVE, "0-1", "0-1", 0, NULL, 1, HP_OK, NULL},
    {"bind to node 2 (no memory)", HP_NUMA_BIND, "2", "0-1", 0, NULL, 0, HP_EINVAL,
     "node 2 has no memory"},
    {"bind to node 1 outside the cpuset", HP_NUMA_BIND, "1", "0", 0, NULL, 0, HP_EINVAL,
     "node 1 is outside the thread's cpuset"},
};

static int placement_child(void *unused)
{
    (void)unused;
    alarm(30);
    for (size_t i = 0; i < sizeof(places) / sizeof(*places); i++) {
        const struct place_case *c = &places[i];
        struct hp_nodes none, mems = nodes_of(c->mems), want = nodes_of(c->nodes);
        hp_nodes_clear(&none);
        hp_os_fake_mempolicy(HP_MPOL_DEFAULT, &none, &mems);
        struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
        o.flags = c->flags;
        o.exclude = c->exclude;
        o.numa_mode = c->mode;
        o.numa_max_node = HP_NODES_MAX;
        o.numa_nodes = want.w;
        static struct hp_explain ex;
        int32_t st = hp_alloc_explain(2 * M, &o, &ex);
        int h = hugetlb_index(&ex), first = 0, any = 0;
        CHILD_CHECK(h >= 0 || st == HP_EINVAL);  /* refused before selection */
        first = h >= 0 && ex.n_cand > 0 && ex.cand[0].backend == (unsigned)h;
        for (unsigned k = 0; h >= 0 && k < ex.n_cand; k++)
            any |= ex.cand[k].backend == (unsigned)h;
        fprintf(stderr, "#   %-36s %s, hugetlbfs %s%s%s\n", c->what, hp_error_name(st),
                first ? "first" : any ? "later" : "not one", st ? ": " : "", st ? ex.detail : "");
        CHILD_CHECK(st == c->status);
        CHILD_CHECK(c->hugetlb ? first : !any);
        CHILD_CHECK(!c->detail || strstr(ex.detail, c->detail));
    }
    hp_os_fake_mempolicy(-1, NULL, NULL);
    return 0;
}

static void placement_on_a_fabricated_machine(void **state)
{
    (void)state;
    static const int node_free[2] = {4, 0};
    char *root = make_machine("0-1\n", "0-1\n", node_free, 2, 4);
    setenv("HP_SYSFS_ROOT", root, 1);
    int rc = run_in_child(placement_child, NULL);
    unsetenv("HP_SYSFS_ROOT");
    remove_machine(root);
    assert_int_equal(rc, 0);
}

static void fabricated_machines(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(machines) / sizeof(*machines); i++) {
        const struct machine_case *c = &machines[i];
        char *root = make_machine(c->has_memory, c->online, c->node_free, c->n_nodes, c->total);
        print_message("# %s\n", c->name);
        setenv("HP_SYSFS_ROOT", root, 1);
        int rc = run_in_child(machine_child, (void *)c);
        unsetenv("HP_SYSFS_ROOT");
        remove_machine(root);
        assert_int_equal(rc, 0);
    }
}

/* ---- this machine ------------------------------------------------------ */

/* A thread really bound with set_mempolicy(2) to a node this machine has:
 * allocations work as before, and on a machine with one node with memory
 * libhp makes no get_mempolicy call for them (HP_OS_MEMPOLICY counts). */
static void *bound_thread(void *arg)
{
    (void)arg;
    unsigned long mask = 1;  /* node 0 */
    if (syscall(SYS_set_mempolicy, HP_MPOL_BIND, &mask, 64UL) != 0)
        return (void *)"set_mempolicy failed";
    uint64_t before = hp_os_calls(HP_OS_MEMPOLICY);
    /* Off the pool: the machine's pool is the kernel tests' (knob lock). */
    void *p = hp_alloc(4 * M, HP_F_NOPOOL);
    if (!p)
        return (void *)"hp_alloc failed";
    memset(p, 1, 4 * M);
    int node = -1;
    if (hp_os_page_node(p, &node) != 0 || node != 0)
        return (void *)"the block is not on node 0";
    if (hp_free(p) != HP_OK)
        return (void *)"hp_free failed";
    int one = hp_nodes_count(hp_numa_with_memory()) < 2;
    if (one && hp_os_calls(HP_OS_MEMPOLICY) != before)
        return (void *)"get_mempolicy called on a machine with one node";
    return NULL;
}

static void real_bound_thread(void **state)
{
    (void)state;
    struct stat st;
    if (stat("/sys/devices/system/node/node0", &st) != 0) {
        print_message("# skipped: no /sys/devices/system/node/node0 (no NUMA support)\n");
        skip();
    }
    pthread_t t;
    void *res = (void *)"not run";
    assert_int_equal(pthread_create(&t, NULL, bound_thread, NULL), 0);
    assert_int_equal(pthread_join(t, &res), 0);
    if (res)
        print_message("# %s\n", (const char *)res);
    assert_null(res);
}

/* A placed allocation whose set_mempolicy or mbind fails (injected) fails
 * cleanly: no mapping left behind, the thread's own policy as it was; the
 * next one succeeds. On this machine's node 0, off the pool. */
static int injected_child(void *unused)
{
    (void)unused;
    alarm(30);
    uint64_t node0 = 1;
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.flags = HP_F_NOPOOL;
    o.numa_mode = HP_NUMA_BIND;
    o.numa_max_node = 64;
    o.numa_nodes = &node0;
    void *warm = hp_alloc_ex(4 * M, &o);  /* libhp loaded, backends probed */
    CHILD_CHECK(warm != NULL);
    CHILD_CHECK(hp_free(warm) == HP_OK);
    int mode_before = -1, mode_after = -2;
    unsigned long nodes_before[16] = {0}, nodes_after[16] = {0};
    CHILD_CHECK(syscall(SYS_get_mempolicy, &mode_before, nodes_before, 1024UL, NULL, 0UL) == 0);
    static const enum hp_os_op ops[] = {HP_OS_MEMPOLICY, HP_OS_MBIND};
    for (unsigned i = 0; i < 2; i++) {
        long maps = maps_count();
        hp_os_inject_fault(ops[i], 1, EPERM, 1);
        void *p = hp_alloc_ex(4 * M, &o);
        hp_os_clear_faults();
        fprintf(stderr, "#   %s fails: %s (%s)\n", i ? "mbind" : "set_mempolicy",
                p ? "served" : hp_error_name(hp_last_error()), hp_last_error_detail());
        CHILD_CHECK(p == NULL);
        CHILD_CHECK(strstr(hp_last_error_detail(), i ? "mbind" : "NUMA policy") != NULL);
        CHILD_CHECK(maps_count() == maps);
        CHILD_CHECK(syscall(SYS_get_mempolicy, &mode_after, nodes_after, 1024UL, NULL, 0UL) == 0);
        CHILD_CHECK(mode_after == mode_before && nodes_after[0] == nodes_before[0]);
    }
    void *p = hp_alloc_ex(4 * M, &o);
    CHILD_CHECK(p != NULL);
    memset(p, 3, 4 * M);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHILD_CHECK(hp_info(p, &info) == HP_OK && info.numa_mode == HP_NUMA_BIND);
    CHILD_CHECK(info.numa_count == 1 && info.numa_mask == 1);
    CHILD_CHECK(hp_free(p) == HP_OK);
    return 0;
}

static void injected_failures(void **state)
{
    (void)state;
    struct stat st;
    if (stat("/sys/devices/system/node/node0", &st) != 0) {
        print_message("# skipped: no /sys/devices/system/node/node0 (no NUMA support)\n");
        skip();
    }
    assert_int_equal(run_in_child(injected_child, NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pool_nodes_rule),
        cmocka_unit_test(format_nodes),
        cmocka_unit_test(parse_nodes),
        cmocka_unit_test(limit_pool_then_select),
        cmocka_unit_test(read_nodelist),
        cmocka_unit_test(fabricated_machines),
        cmocka_unit_test(placement_on_a_fabricated_machine),
        cmocka_unit_test(real_bound_thread),
        cmocka_unit_test(injected_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
