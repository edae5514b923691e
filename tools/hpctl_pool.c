/*
 * hpctl pool: the hugetlb pools, per page size and per NUMA node, and
 * setting them. The kernel may grant fewer pages than asked (memory too
 * fragmented for contiguous huge pages: Documentation/admin-guide/mm/
 * hugetlbpage.rst, "nr_hugepages"), so every change is read back and
 * reported with the time it took.
 */
#include "hpctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIZES 16
#define MAX_NODES 64

static const char *const pool_files[] = {"nr_hugepages", "free_hugepages", "resv_hugepages",
                                         "surplus_hugepages", "nr_overcommit_hugepages"};
static const char *const json_names[] = {"total", "free", "reserved", "surplus", "overcommit"};

static void print_value(int ok, uint64_t v, int json, int width)
{
    if (json)
        ok ? printf("%llu", (unsigned long long)v) : printf("null");
    else
        ok ? printf(" %*llu", width, (unsigned long long)v) : printf(" %*s", width, "?");
}

/* "HugePages_Total:   64" and friends from /proc/meminfo; -1 if absent. */
static long long meminfo(const char *name)
{
    char full[512], line[256];
    FILE *f = fopen(hpctl_path("/proc/meminfo", full, sizeof(full)), "re");
    long long v = -1;
    size_t len = strlen(name);
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, name, len) && line[len] == ':') {
            v = strtoll(line + len + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

void pool_nodes_print(unsigned long kb, int json)
{
    int nodes[MAX_NODES];
    int nn = hpctl_list_nodes(nodes, MAX_NODES, "hugepages");
    char path[256];
    if (json)
        printf(", \"nodes\": [");
    for (int j = 0; j < nn; j++) {
        uint64_t t, f, s;
        snprintf(path, sizeof(path), NODE_DIR "/node%d/hugepages/hugepages-%lukB/nr_hugepages",
                 nodes[j], kb);
        int okt = read_u64(path, &t) == 0;
        snprintf(path, sizeof(path), NODE_DIR "/node%d/hugepages/hugepages-%lukB/free_hugepages",
                 nodes[j], kb);
        int okf = read_u64(path, &f) == 0;
        snprintf(path, sizeof(path),
                 NODE_DIR "/node%d/hugepages/hugepages-%lukB/surplus_hugepages", nodes[j], kb);
        int oks = read_u64(path, &s) == 0;
        if (json) {
            printf("%s{\"node\": %d, \"total\": ", j ? ", " : "", nodes[j]);
            print_value(okt, t, 1, 0);
            printf(", \"free\": ");
            print_value(okf, f, 1, 0);
            printf(", \"surplus\": ");
            print_value(oks, s, 1, 0);
            printf("}");
        } else {
            printf(" node%d=", nodes[j]);
            okt ? printf("%llu", (unsigned long long)t) : printf("?");
            okf ? printf("/%llu", (unsigned long long)f) : printf("/?");
        }
    }
    if (json)
        printf("]");
}

static int pool_show(int json)
{
    unsigned long kb[MAX_SIZES];
    int n = size_dirs(POOL_DIR, kb, MAX_SIZES);
    if (n == 0) {  /* under --json too: main prints the error document */
        fprintf(stderr, "hpctl: no hugetlb pools on this machine (%s is missing)\n", POOL_DIR);
        return HPCTL_ENOENT;
    }
    if (json)
        printf("{\"schema\": %d, \"command\": \"pool\", \"pools\": [", HPCTL_SCHEMA);
    else
        printf("%-8s %8s %8s %8s %8s %10s  %s\n", "SIZE", "TOTAL", "FREE", "RSVD", "SURPLUS",
               "OVERCOMMIT", "PER NODE (total/free)");
    for (int i = 0; i < n; i++) {
        char path[256], hs[32];
        human_size((uint64_t)kb[i] << 10, hs, sizeof(hs));
        if (json)
            printf("%s\n  {\"page_size\": %llu", i ? "," : "", (unsigned long long)kb[i] << 10);
        else
            printf("%-8s", hs);
        for (int k = 0; k < 5; k++) {
            uint64_t v;
            snprintf(path, sizeof(path), POOL_DIR "/hugepages-%lukB/%s", kb[i], pool_files[k]);
            int ok = read_u64(path, &v) == 0;
            if (json)
                printf(", \"%s\": ", json_names[k]);
            print_value(ok, v, json, k == 4 ? 10 : 8);
        }
        if (!json)
            printf(" ");
        pool_nodes_print(kb[i], json);
        printf(json ? "}" : "\n");
    }
    long long total = meminfo("HugePages_Total"), free_pages = meminfo("HugePages_Free"),
              size_kb = meminfo("Hugepagesize"), hugetlb_kb = meminfo("Hugetlb");
    if (json) {
        printf("\n], \"meminfo\": {\"HugePages_Total\": %lld, \"HugePages_Free\": %lld, "
               "\"Hugepagesize_kb\": %lld, \"Hugetlb_kb\": %lld}}\n",
               total, free_pages, size_kb, hugetlb_kb);
    } else {
        printf("\n/proc/meminfo: HugePages_Total %lld, HugePages_Free %lld (default size %lld kB), "
               "Hugetlb %lld kB in all pools\n", total, free_pages, size_kb, hugetlb_kb);
    }
    return HPCTL_OK;
}

/* SIZE of an existing pool -> its KiB; else a message naming the sizes. */
static int pool_size_kb(const char *arg, unsigned long *out)
{
    uint64_t bytes;
    unsigned long kb[MAX_SIZES];
    int n = size_dirs(POOL_DIR, kb, MAX_SIZES);
    if (parse_size(arg, &bytes) != 0 || bytes < 1024) {
        fprintf(stderr, "hpctl: SIZE \"%s\" is not a page size (such as 2M or 1G)\n", arg);
        return HPCTL_USAGE;
    }
    for (int i = 0; i < n; i++)
        if ((uint64_t)kb[i] << 10 == bytes) {
            *out = kb[i];
            return HPCTL_OK;
        }
    fprintf(stderr, "hpctl: this machine has no hugetlb pool of %s pages; it has:", arg);
    for (int i = 0; i < n; i++) {
        char hs[32];
        human_size((uint64_t)kb[i] << 10, hs, sizeof(hs));
        fprintf(stderr, " %s", hs);
    }
    fprintf(stderr, "%s\n", n ? "" : " none");
    return HPCTL_ENOENT;
}

struct change {
    const char *what;     /* "nr_hugepages" or "nr_overcommit_hugepages" */
    char path[256];
    uint64_t asked, before, after;
    int have_before, have_after;
    uint64_t elapsed_ns;
    int rc;               /* HPCTL_* */
};

/* Write c->asked to c->path and read it back; dry_run only checks. */
static void apply(struct change *c, int dry_run)
{
    char full[512], value[32];
    c->have_before = read_u64(c->path, &c->before) == 0;
    c->rc = HPCTL_OK;
    if (!c->have_before) {
        fprintf(stderr, "hpctl: cannot read %s\n", c->path);
        c->rc = HPCTL_ENOENT;
        return;
    }
    if (dry_run) {
        if (access(hpctl_path(c->path, full, sizeof(full)), W_OK) != 0)
            c->rc = knob_error(c->path, "", -errno);
        return;
    }
    snprintf(value, sizeof(value), "%llu", (unsigned long long)c->asked);
    uint64_t t0 = now_ns();
    int err = write_knob(c->path, value);
    c->elapsed_ns = now_ns() - t0;
    c->have_after = read_u64(c->path, &c->after) == 0;
    if (err) {
        c->rc = knob_error(c->path, value, err);
        return;
    }
    char before[32];
    snprintf(before, sizeof(before), "%llu", (unsigned long long)c->before);
    undo_record(c->path, before);
    if (!c->have_after) {
        fprintf(stderr, "hpctl: cannot read %s back\n", c->path);
        c->rc = HPCTL_FAIL;
    } else if (c->after < c->asked) {
        c->rc = HPCTL_PARTIAL;
    }
}

static void report(const struct change *c, unsigned long kb, int node, int dry_run, int json,
                   int first)
{
    char hs[32];
    human_size((uint64_t)kb << 10, hs, sizeof(hs));
    if (json) {
        printf("%s{\"knob\": \"%s\", \"path\": ", first ? "" : ", ", c->what);
        json_string(c->path);
        printf(", \"asked\": %llu, \"before\": ", (unsigned long long)c->asked);
        print_value(c->have_before, c->before, 1, 0);
        printf(", \"granted\": ");
        print_value(c->have_after && !dry_run, c->after, 1, 0);
        printf(", \"elapsed_ns\": ");
        print_value(!dry_run, c->elapsed_ns, 1, 0);
        printf(", \"status\": %d}", c->rc);
        return;
    }
    char where[32] = "";
    if (node >= 0)
        snprintf(where, sizeof(where), " on node %d", node);
    if (dry_run) {
        printf("%s pool%s: would write %llu to %s (now %llu)%s\n", hs, where,
               (unsigned long long)c->asked, c->path, (unsigned long long)c->before,
               c->rc == HPCTL_OK ? "" : "; the write would fail");
        return;
    }
    if (c->rc != HPCTL_OK && c->rc != HPCTL_PARTIAL)
        return;  /* knob_error said why */
    double ms = (double)c->elapsed_ns / 1e6;
    if (!strcmp(c->what, "nr_overcommit_hugepages")) {
        printf("%s pool: overcommit %llu -> %llu (asked %llu) in %.1f ms\n", hs,
               (unsigned long long)c->before, (unsigned long long)c->after,
               (unsigned long long)c->asked, ms);
    } else if (c->rc == HPCTL_PARTIAL) {
        printf("%s pool%s: asked for %llu pages, the kernel granted %llu (was %llu) in %.1f ms: "
               "not enough free contiguous memory for more\n", hs, where,
               (unsigned long long)c->asked, (unsigned long long)c->after,
               (unsigned long long)c->before, ms);
    } else {
        printf("%s pool%s: %llu pages (was %llu; asked %llu) in %.1f ms\n", hs, where,
               (unsigned long long)c->after, (unsigned long long)c->before,
               (unsigned long long)c->asked, ms);
    }
}

static int pool_usage(void)
{
    fprintf(stderr, "usage: hpctl pool [--json]\n"
                    "       hpctl pool set SIZE [COUNT] [--node N] [--overcommit N] [--persist [--root DIR]]\n"
                    "                      [--dry-run] [--json]\n"
                    "       hpctl pool release [SIZE] [--node N] [--persist [--root DIR]] [--dry-run] [--json]\n");
    return HPCTL_USAGE;
}

static void knob_path(char *buf, size_t cap, unsigned long kb, int node, const char *file)
{
    if (node >= 0)
        snprintf(buf, cap, NODE_DIR "/node%d/hugepages/hugepages-%lukB/%s", node, kb, file);
    else
        snprintf(buf, cap, POOL_DIR "/hugepages-%lukB/%s", kb, file);
}

/* set (release = 0) or release: every change in order, one report. */
static int pool_change(int argc, char **argv, int release)
{
    const char *size_arg = NULL, *count_arg = NULL, *root = "";
    int json = 0, dry_run = 0, node = -1, have_over = 0, persist = 0, have_root = 0;
    uint64_t over = 0, count = 0, v;
    const char *cmd = release ? "pool release" : "pool set";
    static const char *const valued[] = {"--root", "--node", "--overcommit", NULL};
    for (int i = 0; i < argc; i++) {
        int number = argv[i][0] == '-' && argv[i][1] >= '0' && argv[i][1] <= '9';
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--dry-run"))
            dry_run = 1;
        else if (!strcmp(argv[i], "--persist"))
            persist = 1;
        else if (!strcmp(argv[i], "--root") && i + 1 < argc) {
            if (persist_root(argv[++i], &root) != HPCTL_OK)
                return pool_usage();
            have_root = 1;
        } else if (!strcmp(argv[i], "--node") && i + 1 < argc) {
            if (parse_u64(argv[++i], &v) != 0 || v >= 4096)
                return hpctl_bad(cmd, "--node \"%s\" is not a NUMA node number", argv[i]),
                       pool_usage();
            node = (int)v;
        } else if (!strcmp(argv[i], "--overcommit") && !release && i + 1 < argc) {
            if (parse_u64(argv[++i], &over) != 0)
                return hpctl_bad(cmd, "--overcommit \"%s\" is not a page count (a whole "
                                 "number from 0)", argv[i]), pool_usage();
            have_over = 1;
        } else if (argv[i][0] == '-' && !number)
            return hpctl_unexpected(cmd, argv, i, argc, valued), pool_usage();
        else if (!size_arg)
            size_arg = argv[i];
        else if (!count_arg && !release)
            count_arg = argv[i];
        else
            return hpctl_unexpected(cmd, argv, i, argc, valued), pool_usage();
    }
    if (!release && !size_arg)
        return hpctl_bad(cmd, "a pool SIZE is required (such as 2M or 1G)"), pool_usage();
    if (!release && !count_arg && !have_over)
        return hpctl_bad(cmd, "a page COUNT or --overcommit N is required"), pool_usage();
    if (have_over && node >= 0)
        return hpctl_bad(cmd, "--overcommit is for the whole pool, not for one --node"),
               pool_usage();
    if (have_root && !persist)
        return hpctl_bad(cmd, "--root is the root of /etc for --persist, which is missing"),
               pool_usage();
    if (count_arg && parse_u64(count_arg, &count) != 0)
        return hpctl_bad(cmd, "COUNT \"%s\" is not a page count (a whole number from 0)",
                         count_arg), pool_usage();
    unsigned long kbs[MAX_SIZES];
    int nk = 0;
    if (size_arg) {
        int rc = pool_size_kb(size_arg, &kbs[0]);
        if (rc != HPCTL_OK)
            return rc;
        nk = 1;
    } else {
        nk = size_dirs(POOL_DIR, kbs, MAX_SIZES);
    }
    if (node >= 0) {
        char path[256];
        knob_path(path, sizeof(path), kbs[0], node, "nr_hugepages");
        if (!path_exists(path)) {
            fprintf(stderr, "hpctl: NUMA node %d has no hugetlb pool (%s is missing)\n", node, path);
            return HPCTL_ENOENT;
        }
    }
    struct change ch[MAX_SIZES + 1];
    unsigned long ch_kb[MAX_SIZES + 1];
    int n = 0;
    for (int i = 0; i < nk; i++) {
        if (!release && !count_arg)
            break;
        memset(&ch[n], 0, sizeof(ch[n]));
        ch[n].what = "nr_hugepages";
        ch[n].asked = release ? 0 : count;
        knob_path(ch[n].path, sizeof(ch[n].path), kbs[i], node, "nr_hugepages");
        ch_kb[n++] = kbs[i];
    }
    if (have_over) {
        memset(&ch[n], 0, sizeof(ch[n]));
        ch[n].what = "nr_overcommit_hugepages";
        ch[n].asked = over;
        knob_path(ch[n].path, sizeof(ch[n].path), kbs[0], -1, "nr_overcommit_hugepages");
        ch_kb[n++] = kbs[0];
    }
    int rc = HPCTL_OK;
    if (json)
        printf("{\"schema\": %d, \"command\": \"pool %s\", \"dry_run\": %s, \"node\": ",
               HPCTL_SCHEMA, release ? "release" : "set", dry_run ? "true" : "false");
    if (json)
        node >= 0 ? printf("%d", node) : printf("null");
    if (json)
        printf(", \"changes\": [");
    for (int i = 0; i < n; i++) {
        apply(&ch[i], dry_run);
        report(&ch[i], ch_kb[i], node, dry_run, json, i == 0);
        /* The first hard failure wins; a short grant is reported last. */
        if (ch[i].rc != HPCTL_OK && (rc == HPCTL_OK || rc == HPCTL_PARTIAL))
            rc = ch[i].rc;
        if (ch[i].rc != HPCTL_OK && ch[i].rc != HPCTL_PARTIAL)
            break;
    }
    if (json)
        printf("]");
    if (persist) {
        /* What was granted now, or a short grant, is kept for boot: the
         * pool is asked for again before memory fragments. */
        struct persist_item items[MAX_SIZES + 1];
        char values[MAX_SIZES + 1][32];
        int np = 0;
        for (int i = 0; i < n; i++) {
            if (ch[i].rc != HPCTL_OK && ch[i].rc != HPCTL_PARTIAL)
                break;
            snprintf(values[np], sizeof(values[np]), "%llu", (unsigned long long)ch[i].asked);
            items[np].knob = ch[i].path;
            items[np].value = values[np];
            np++;
        }
        int prc = persist_apply(root, items, np, dry_run, json);
        if (prc != HPCTL_OK && (rc == HPCTL_OK || rc == HPCTL_PARTIAL))
            rc = prc;
    } else if (json) {
        printf(", \"persisted\": null");
    }
    if (json)
        printf(", \"status\": %d}\n", rc);
    return rc;
}

int hpctl_pool(int argc, char **argv)
{
    if (argc == 0)
        return pool_show(0);
    if (argc == 1 && !strcmp(argv[0], "--json"))
        return pool_show(1);
    if (!strcmp(argv[0], "set"))
        return pool_change(argc - 1, argv + 1, 0);
    if (!strcmp(argv[0], "release"))
        return pool_change(argc - 1, argv + 1, 1);
    int bad = !strcmp(argv[0], "--json") ? 1 : 0;  /* pool --json EXTRA */
    return hpctl_unexpected("pool", argv, bad, argc, NULL), pool_usage();
}
