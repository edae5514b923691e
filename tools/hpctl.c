/*
 * hpctl — see what libhp sees on this machine, and run it. Each subcommand
 * lives in its own file (tools/hpctl_<name>.c) and has one row in the
 * table at the end of this file; hpctl(1) documents them all, and
 * docs/hpctl-json.md their --json output.
 *
 * SIZE accepts a K, M or G suffix (powers of 1024).
 */
#include <hp.h>

#include "hpctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *kind_name(uint32_t kind)
{
    static const char *names[] = {"other", "hugetlb", "thp", "mthp", "base"};
    return kind < sizeof(names) / sizeof(*names) ? names[kind] : "?";
}

static void print_backends(int json)
{
    int32_t n = hp_backend_count();
    if (json)
        printf("  \"backends\": [\n");
    else
        printf("%-12s %-5s %-8s %-18s %s\n", "BACKEND", "AVAIL", "KIND", "PAGE SIZES", "REASON");
    for (int32_t i = 0; i < n; i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) != HP_OK)
            continue;
        char sizes[160] = "";
        size_t used = 0;
        for (uint32_t k = 0; k < bi.n_page_sizes && used < sizeof(sizes) - 16; k++) {
            char one[32];
            human_size(bi.page_sizes[k], one, sizeof(one));
            used += (size_t)snprintf(sizes + used, sizeof(sizes) - used, "%s%s", k ? "," : "", one);
        }
        if (!json) {
            printf("%-12s %-5s %-8s %-18s %s\n", bi.name[0] ? bi.name : "?",
                   bi.available ? "yes" : "no", kind_name(bi.kind), sizes[0] ? sizes : "-",
                   bi.reason);
            printf("%-12s %s%s%s\n", "", bi.path, bi.description[0] ? ": " : "", bi.description);
            continue;
        }
        printf("    {\"name\": ");
        json_string(bi.name);
        printf(", \"available\": %s, \"kind\": \"%s\", \"path\": ", bi.available ? "true" : "false",
               kind_name(bi.kind));
        json_string(bi.path);
        printf(", \"description\": ");
        json_string(bi.description);
        printf(", \"reason\": ");
        json_string(bi.reason);
        printf(", \"page_sizes\": [");
        for (uint32_t k = 0; k < bi.n_page_sizes; k++)
            printf("%s%llu", k ? ", " : "", (unsigned long long)bi.page_sizes[k]);
        printf("], \"pool_free\": [");
        for (uint32_t k = 0; k < bi.n_page_sizes; k++) {
            if (bi.pool_free[k] == UINT64_MAX)
                printf("%snull", k ? ", " : "");
            else
                printf("%s%llu", k ? ", " : "", (unsigned long long)bi.pool_free[k]);
        }
        printf("]}%s\n", i + 1 < n ? "," : "");
    }
    if (json)
        printf("  ],\n");
}

static void print_thp(int json)
{
    char enabled[32], defrag[32], pmd[32], path[200];
    selected(THP_DIR "/enabled", enabled, sizeof(enabled));
    selected(THP_DIR "/defrag", defrag, sizeof(defrag));
    read_line(THP_DIR "/hpage_pmd_size", pmd, sizeof(pmd));
    unsigned long kb[32];
    int n = size_dirs(THP_DIR, kb, 32);
    if (json) {
        printf("  \"thp\": {\"enabled\": \"%s\", \"defrag\": \"%s\", \"pmd_size\": %s, \"sizes\": {",
               enabled, defrag, pmd[0] ? pmd : "null");
    } else {
        printf("\nTHP: enabled=%s defrag=%s pmd_size=%s\nmTHP:", enabled, defrag,
               pmd[0] ? pmd : "?");
    }
    for (int i = 0; i < n; i++) {
        char mode[32];
        snprintf(path, sizeof(path), THP_DIR "/hugepages-%lukB/enabled", kb[i]);
        selected(path, mode, sizeof(mode));
        if (json)
            printf("%s\"%lukB\": \"%s\"", i ? ", " : "", kb[i], mode);
        else
            printf(" %luK=%s", kb[i], mode);
    }
    printf(json ? "}},\n" : "\n");
}

static void print_pools(int json)
{
    static const char *files[] = {"nr_hugepages", "free_hugepages", "resv_hugepages",
                                  "surplus_hugepages", "nr_overcommit_hugepages"};
    unsigned long kb[32];
    int n = size_dirs(POOL_DIR, kb, 32);
    if (json)
        printf("  \"hugetlb_pools\": [");
    else
        printf("\nhugetlb pools:\n%-10s %8s %8s %8s %8s %10s\n", "SIZE", "TOTAL", "FREE", "RSVD",
               "SURPLUS", "OVERCOMMIT");
    for (int i = 0; i < n; i++) {
        char v[5][32], path[200];
        for (int k = 0; k < 5; k++) {
            snprintf(path, sizeof(path), POOL_DIR "/hugepages-%lukB/%s", kb[i], files[k]);
            read_line(path, v[k], sizeof(v[k]));
            if (!v[k][0])
                snprintf(v[k], sizeof(v[k]), json ? "null" : "?");
        }
        if (json)
            printf("%s\n    {\"size_kb\": %lu, \"total\": %s, \"free\": %s, \"reserved\": %s, "
                   "\"surplus\": %s, \"overcommit\": %s}",
                   i ? "," : "", kb[i], v[0], v[1], v[2], v[3], v[4]);
        else
            printf("%-10lu %8s %8s %8s %8s %10s\n", kb[i], v[0], v[1], v[2], v[3], v[4]);
    }
    printf(json ? "\n  ]\n" : "");
}

/* A bad HP_* variable makes every libhp call fail (HP_EENV) and no plugin
 * loads: say so first, so that the list below is not mistaken for what an
 * allocation would use. */
static int32_t print_init_error(int json)
{
    int32_t rc = hp_reprobe();
    if (json) {
        printf("  \"error\": ");
        if (rc == HP_OK) {
            printf("null,\n");
        } else {
            printf("{\"code\": \"%s\", \"detail\": ", hp_error_name(rc));
            json_string(hp_last_error_detail());
            printf("},\n");
        }
    } else if (rc != HP_OK) {
        printf("error: %s: %s\nEvery libhp call fails until this is fixed.\n\n",
               hp_error_name(rc), hp_last_error_detail());
    }
    return rc;
}

static int cmd_status(int json)
{
    if (json)
        printf("{\n  \"schema\": %d,\n  \"command\": \"status\",\n  \"version\": \"%s\",\n",
               HPCTL_SCHEMA, hp_version_string());
    else
        printf("libhp %s\n\n", hp_version_string());
    int32_t rc = print_init_error(json);
    print_backends(json);
    print_thp(json);
    print_pools(json);
    if (json)
        printf("}\n");
    return rc == HP_OK ? HPCTL_OK : HPCTL_FAIL;
}

static int usage(void);

/* alloc's failure: the error on stderr and, under --json, the document
 * with status, error and no block. */
static int alloc_failed(int json, const char *call)
{
    fprintf(stderr, "hpctl: %s failed: %s: %s\n", call, hp_error_name(hp_last_error()),
            hp_last_error_detail());
    if (json) {
        printf("{\"schema\": %d, \"command\": \"alloc\", \"status\": %d, "
               "\"error\": {\"code\": \"%s\", \"detail\": ", HPCTL_SCHEMA, HPCTL_FAIL,
               hp_error_name(hp_last_error()));
        json_string(hp_last_error_detail());
        printf("}, \"backend\": null, \"page_size\": null, \"usable_size\": null, "
               "\"mapped_size\": null, \"huge_bytes\": null}\n");
    }
    return HPCTL_FAIL;
}

static int cmd_alloc(int argc, char **argv)
{
    struct hp_alloc_opts opts = HP_ALLOC_OPTS_INIT;
    uint64_t size = 0;
    int json = 0;
    if (argc < 1 || parse_size(argv[0], &size) != 0)
        return usage();
    for (int i = 1; i < argc; i++) {
        uint64_t ps;
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--require-huge"))
            opts.flags |= HP_F_REQUIRE_HUGE;
        else if (!strcmp(argv[i], "--populate"))
            opts.flags |= HP_F_POPULATE;
        else if (!strcmp(argv[i], "--no-pool"))
            opts.flags |= HP_F_NOPOOL;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            opts.backend = argv[++i];
        else if (!strcmp(argv[i], "--exclude") && i + 1 < argc)
            opts.exclude = argv[++i];
        else if (!strcmp(argv[i], "--page-size") && i + 1 < argc &&
                 parse_size(argv[i + 1], &ps) == 0 && hp_page_size_flag(ps))
            opts.flags |= hp_page_size_flag(ps), i++;
        else
            return usage();
    }
    unsigned char *p = hp_alloc_ex((size_t)size, &opts);
    if (!p)
        return alloc_failed(json, "hp_alloc");
    for (uint64_t off = 0; off < size; off += 4096)
        p[off] = 1;
    p[size - 1] = 1;
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    if (hp_info(p, &info) != HP_OK) {
        int rc = alloc_failed(json, "hp_info");
        hp_free(p);
        return rc;
    }
    if (hp_free(p) != HP_OK)
        return alloc_failed(json, "hp_free");
    char ps[32], usable[32], huge[32];
    human_size(info.page_size, ps, sizeof(ps));
    human_size(info.usable_size, usable, sizeof(usable));
    human_size(info.huge_bytes, huge, sizeof(huge));
    if (json)
        printf("{\"schema\": %d, \"command\": \"alloc\", \"status\": 0, \"error\": null, "
               "\"backend\": \"%s\", \"page_size\": %llu, \"usable_size\": %llu, "
               "\"mapped_size\": %llu, \"huge_bytes\": %llu}\n",
               HPCTL_SCHEMA, info.backend, (unsigned long long)info.page_size,
               (unsigned long long)info.usable_size, (unsigned long long)info.mapped_size,
               (unsigned long long)info.huge_bytes);
    else
        printf("allocated %s at %p: backend %s, page size %s, huge-backed %s of %s after touch\n",
               argv[0], (void *)p, info.backend, ps, huge, usable);
    return 0;
}

static int cmd_status_args(int argc, char **argv)
{
    if (argc > 1 || (argc == 1 && strcmp(argv[0], "--json")))
        return usage();
    return cmd_status(argc == 1);
}

static int cmd_version(int argc, char **argv)
{
    if (argc > 1 || (argc == 1 && strcmp(argv[0], "--json")))
        return usage();
    if (argc == 1)
        printf("{\"schema\": %d, \"command\": \"version\", \"version\": \"%s\", "
               "\"version_number\": %u}\n", HPCTL_SCHEMA, hp_version_string(), hp_version());
    else
        printf("%s\n", hp_version_string());
    return HPCTL_OK;
}

/* One row per subcommand; run gets the arguments after the name. */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} commands[] = {
    {"status", cmd_status_args, "status [--json]"},
    {"alloc", cmd_alloc, "alloc SIZE [--page-size SIZE] [--backend NAME] [--exclude LIST] "
                         "[--require-huge] [--no-pool] [--populate] [--json]"},
    {"explain", hpctl_explain, "explain SIZE [--page-size SIZE] [--backend NAME] [--exclude LIST] "
                               "[--require-huge] [--no-pool] [--json]"},
    {"pool", hpctl_pool, "pool [--json] | pool set SIZE [COUNT] [--node N] [--overcommit N] "
                         "[--dry-run] [--json] | pool release [SIZE] [--node N] [--dry-run] [--json]"},
    {"thp", hpctl_thp, "thp [--json] | thp set enabled|defrag VALUE [--dry-run] [--json]"},
    {"mthp", hpctl_mthp, "mthp [--json] | mthp set SIZE|all enabled|shmem_enabled VALUE "
                         "[--dry-run] [--json]"},
    {"why", hpctl_why, "why PID [--mappings] [--json]"},
    {"watch", hpctl_watch, "watch [PID] [--interval SECONDS] [--count N] [--json]"},
    {"run", hpctl_run, "run [--backend NAME] [--page-size SIZE] [--pool] [--stacks lean|huge] "
                       "[--report] -- CMD [ARGS]"},
    {"version", cmd_version, "version [--json]"},
};

static int usage(void)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
        fprintf(stderr, "%s hpctl %s\n", i ? "      " : "usage:", commands[i].usage);
    return HPCTL_USAGE;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage();
        return HPCTL_OK;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "hpctl: unknown command \"%s\"\n", argv[1]);
    return usage();
}
