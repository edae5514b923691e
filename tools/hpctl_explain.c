/*
 * hpctl explain SIZE: what hp_alloc would do with this request, and why.
 * hp_alloc_explain (lib/explain.h) runs hp_alloc_ex's own validation,
 * candidate list and selection (lib/select.c) on this process's probe of
 * the machine, and maps nothing; this file only prints its answer.
 */
#include <hp.h>

#include "explain.h"
#include "nodes.h"
#include "hpctl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *kind_name(uint32_t kind)
{
    static const char *names[] = {"other", "hugetlb", "thp", "mthp", "base"};
    return kind < sizeof(names) / sizeof(*names) ? names[kind] : "?";
}

/* Free pool pages of page size ps in caps, UINT64_MAX if not pooled. */
static uint64_t pool_of(const struct hp_backend_caps *caps, uint64_t ps)
{
    for (unsigned k = 0; k < caps->n_page_sizes && k < HP_MAX_PAGE_SIZES; k++)
        if (caps->page_sizes[k] == ps)
            return caps->pool_free[k];
    return UINT64_MAX;
}

static void why_text(const struct hp_explain *ex, const struct hp_select_note *n,
                     const struct hp_alloc_opts *opts, uint64_t size, char *buf, size_t cap)
{
    const struct hp_explain_backend *b = &ex->backends[n->backend];
    char ps[32];
    human_size(n->page_size, ps, sizeof(ps));
    switch (n->why) {
    case HP_WHY_UNAVAILABLE:
        snprintf(buf, cap, "unavailable: %s", b->caps.reason);
        break;
    case HP_WHY_NOT_NAMED:
        snprintf(buf, cap, "another backend was named (--backend %s)", opts->backend);
        break;
    case HP_WHY_EXCLUDED:
        snprintf(buf, cap, "excluded by --exclude");
        break;
    case HP_WHY_EXCLUDED_ENV:
    case HP_WHY_NOT_LISTED:
        snprintf(buf, cap, "%s", hp_select_list_text(n->why));
        break;
    case HP_WHY_THIRD_PARTY:
        snprintf(buf, cap, "third-party backend: used only when named (--backend, HP_BACKENDS)");
        break;
    case HP_WHY_BASE_PAGE:
        snprintf(buf, cap, "base pages, and huge pages are required (--require-huge)");
        break;
    case HP_WHY_POOL_SHORT: {
        uint64_t need = (size + n->page_size - 1) / n->page_size;
        snprintf(buf, cap, "pool short by %llu page%s (needs %llu, %llu free)",
                 (unsigned long long)n->short_pages, n->short_pages == 1 ? "" : "s",
                 (unsigned long long)need, (unsigned long long)(need - n->short_pages));
        break;
    }
    case HP_WHY_OTHER_SIZE:
        snprintf(buf, cap, "not the page size asked for (--page-size)");
        break;
    case HP_WHY_LARGER:
        snprintf(buf, cap, "a %s page is larger than the block; used only when asked for "
                           "(--page-size %s)", ps, ps);
        break;
    case HP_WHY_BEATEN:
        snprintf(buf, cap, "another page size of this backend serves the block better "
                           "(it offers its best size only)");
        break;
    case HP_WHY_NO_ROOM:
        snprintf(buf, cap, "candidate list full");
        break;
    case HP_WHY_POOLED:
        snprintf(buf, cap, "pool pages, and the block must not come from a pool (--no-pool)");
        break;
    default:
        snprintf(buf, cap, "?");
    }
}

/* mTHP sizes switched off: the backend leaves them out of its record, so
 * selection never sees them; say so from the switches themselves. */
static int mthp_off(const struct hp_backend_caps *caps, unsigned long kb_out[], int max)
{
    unsigned long kb[32];
    char top[32], mode[32], path[256], pmd[32];
    int n = size_dirs(THP_DIR, kb, 32), got = 0;
    uint64_t pmd_size = 0;
    read_line(THP_DIR "/hpage_pmd_size", pmd, sizeof(pmd));
    if (parse_u64(pmd, &pmd_size) != 0)
        return 0;
    selected(THP_DIR "/enabled", top, sizeof(top));
    for (int i = 0; i < n && got < max; i++) {
        uint64_t ps = (uint64_t)kb[i] << 10;
        snprintf(path, sizeof(path), THP_DIR "/hugepages-%lukB/enabled", kb[i]);
        if (ps >= pmd_size || !path_exists(path) || pool_of(caps, ps) != UINT64_MAX ||
            caps->n_page_sizes == 0)
            continue;
        int listed = 0;
        for (unsigned k = 0; k < caps->n_page_sizes; k++)
            listed |= caps->page_sizes[k] == ps;
        selected(path, mode, sizeof(mode));
        if (!strcmp(mode, "inherit"))
            snprintf(mode, sizeof(mode), "%s", top);
        if (!listed && !strcmp(mode, "never"))
            kb_out[got++] = kb[i];
    }
    return got;
}

/* --page-size P that nothing on this kernel has: no backend record lists
 * it, there is no hugetlb pool of that size, and it is neither the PMD
 * size nor an mTHP size. Then that is the reason, not whatever else an
 * unavailable backend says (its pool of another size, say). */
static int size_missing(const struct hp_explain *ex, uint64_t ps, char *buf, size_t cap)
{
    char path[256], hs[32], pmd[32];
    uint64_t pmd_size = 0;
    buf[0] = '\0';
    if (!ps)
        return 0;
    for (unsigned i = 0; i < ex->n_backends; i++)
        for (unsigned k = 0; k < ex->backends[i].caps.n_page_sizes && k < HP_MAX_PAGE_SIZES; k++)
            if (ex->backends[i].caps.page_sizes[k] == ps)
                return 0;
    snprintf(path, sizeof(path), POOL_DIR "/hugepages-%llukB", (unsigned long long)(ps >> 10));
    if (path_exists(path))
        return 0;
    read_line(THP_DIR "/hpage_pmd_size", pmd, sizeof(pmd));
    if (parse_u64(pmd, &pmd_size) == 0 && pmd_size == ps)
        return 0;
    snprintf(path, sizeof(path), THP_DIR "/hugepages-%llukB", (unsigned long long)(ps >> 10));
    if (path_exists(path))
        return 0;
    human_size(ps, hs, sizeof(hs));
    snprintf(buf, cap, "this kernel has no %s pages: no hugetlb pool of that size "
             "(" POOL_DIR "/hugepages-%llukB is missing) and no THP size of it", hs,
             (unsigned long long)(ps >> 10));
    return 1;
}

static int explain_usage(void)
{
    fprintf(stderr, "usage: hpctl explain SIZE [--page-size SIZE] [--backend NAME] "
                    "[--exclude LIST] [--require-huge] [--no-pool] [--node LIST] "
                    "[--numa-mode MODE] [--json]\n");
    return HPCTL_USAGE;
}

static void print_json(const struct hp_explain *ex, const struct hp_alloc_opts *opts, uint64_t size,
                       const char *missing)
{
    char why[400];
    printf("{\"schema\": %d, \"command\": \"explain\", \"size\": %llu, \"flags\": %llu, "
           "\"backend_option\": ", HPCTL_SCHEMA, (unsigned long long)size,
           (unsigned long long)opts->flags);
    opts->backend ? json_string(opts->backend) : (void)printf("null");
    printf(", \"status\": \"%s\", \"detail\": ", hp_error_name(ex->status));
    json_string(ex->status == HP_OK ? "" : ex->detail);
    printf(", \"page_size_missing\": ");
    missing[0] ? json_string(missing) : (void)printf("null");
    printf(", \"result\": ");
    if (ex->n_cand) {
        printf("{\"backend\": ");
        json_string(ex->backends[ex->cand[0].backend].name);
        printf(", \"page_size\": %llu}", (unsigned long long)ex->cand[0].page_size);
    } else {
        printf("null");
    }
    printf(", \"candidates\": [");
    for (unsigned i = 0; i < ex->n_cand; i++) {
        const struct hp_explain_backend *b = &ex->backends[ex->cand[i].backend];
        uint64_t pool = pool_of(&b->caps, ex->cand[i].page_size);
        int fallback = 0;
        for (unsigned k = 0; k < ex->n_notes; k++)
            if (ex->notes[k].why == HP_WHY_CANDIDATE && ex->notes[k].rank == (int)i)
                fallback = ex->notes[k].named_smallest;
        printf("%s{\"rank\": %u, \"backend\": ", i ? ", " : "", i + 1);
        json_string(b->name);
        printf(", \"kind\": \"%s\", \"page_size\": %llu, \"pool_free\": ", kind_name(b->kind),
               (unsigned long long)ex->cand[i].page_size);
        pool == UINT64_MAX ? printf("null") : printf("%llu", (unsigned long long)pool);
        printf(", \"named_fallback\": %s}", fallback ? "true" : "false");
    }
    printf("], \"passed_over\": [");
    int first = 1;
    for (unsigned k = 0; k < ex->n_notes; k++) {
        const struct hp_select_note *n = &ex->notes[k];
        if (n->why == HP_WHY_CANDIDATE)
            continue;
        why_text(ex, n, opts, size, why, sizeof(why));
        printf("%s{\"backend\": ", first ? "" : ", ");
        json_string(ex->backends[n->backend].name);
        printf(", \"page_size\": ");
        n->page_size ? printf("%llu", (unsigned long long)n->page_size) : printf("null");
        printf(", \"why\": \"%s\", \"short_pages\": ", hp_select_why_name(n->why));
        n->why == HP_WHY_POOL_SHORT ? printf("%llu", (unsigned long long)n->short_pages)
                                    : printf("null");
        printf(", \"text\": ");
        json_string(why);
        printf("}");
        first = 0;
    }
    for (unsigned i = 0; i < ex->n_backends; i++) {
        const struct hp_explain_backend *b = &ex->backends[i];
        unsigned long kb[32];
        int off = b->loaded && b->kind == HP_KIND_MTHP ? mthp_off(&b->caps, kb, 32) : 0;
        for (int k = 0; k < off; k++) {
            printf("%s{\"backend\": ", first ? "" : ", ");
            json_string(b->name);
            printf(", \"page_size\": %llu, \"why\": \"mthp-never\", \"short_pages\": null, "
                   "\"text\": \"mTHP size set to never\"}", (unsigned long long)kb[k] << 10);
            first = 0;
        }
        if (!b->loaded) {
            printf("%s{\"backend\": ", first ? "" : ", ");
            json_string(b->name);
            printf(", \"page_size\": null, \"why\": \"rejected\", \"short_pages\": null, "
                   "\"text\": ");
            json_string(b->reason);
            printf("}");
            first = 0;
        }
    }
    printf("]}\n");
}

static void print_text(const struct hp_explain *ex, const struct hp_alloc_opts *opts,
                       const char *size_arg, uint64_t size, const char *missing)
{
    char ps[32], why[400];
    if (ex->n_cand) {
        human_size(ex->cand[0].page_size, ps, sizeof(ps));
        printf("hp_alloc(%s) would use: %s, %s pages\n", size_arg,
               ex->backends[ex->cand[0].backend].name, ps);
    } else {
        printf("hp_alloc(%s) would fail: %s: %s\n", size_arg, hp_error_name(ex->status),
               ex->detail);
    }
    if (missing[0])
        printf("because %s (--page-size)\n", missing);
    if (ex->n_cand)
        printf("\ncandidates, in the order hp_alloc tries them (the next one serves if a map "
               "fails):\n");
    for (unsigned i = 0; i < ex->n_cand; i++) {
        const struct hp_explain_backend *b = &ex->backends[ex->cand[i].backend];
        uint64_t pool = pool_of(&b->caps, ex->cand[i].page_size);
        human_size(ex->cand[i].page_size, ps, sizeof(ps));
        printf("  %u. %-12s %-5s", i + 1, b->name, ps);
        if (pool != UINT64_MAX)
            printf(" pool: %llu free, needs %llu", (unsigned long long)pool,
                   (unsigned long long)((size + ex->cand[i].page_size - 1) /
                                        ex->cand[i].page_size));
        for (unsigned k = 0; k < ex->n_notes; k++)
            if (ex->notes[k].why == HP_WHY_CANDIDATE && ex->notes[k].rank == (int)i &&
                ex->notes[k].named_smallest)
                printf(" (named; fits nothing better, so its smallest size)");
        printf("\n");
    }
    printf("\npassed over:\n");
    int any = 0;
    for (unsigned k = 0; k < ex->n_notes; k++) {
        const struct hp_select_note *n = &ex->notes[k];
        if (n->why == HP_WHY_CANDIDATE)
            continue;
        why_text(ex, n, opts, size, why, sizeof(why));
        if (n->page_size)
            human_size(n->page_size, ps, sizeof(ps));
        printf("  %-12s %-5s %s\n", ex->backends[n->backend].name, n->page_size ? ps : "-", why);
        any = 1;
    }
    for (unsigned i = 0; i < ex->n_backends; i++) {
        const struct hp_explain_backend *b = &ex->backends[i];
        unsigned long kb[32];
        int off = b->loaded && b->kind == HP_KIND_MTHP ? mthp_off(&b->caps, kb, 32) : 0;
        for (int k = 0; k < off; k++) {
            human_size((uint64_t)kb[k] << 10, ps, sizeof(ps));
            printf("  %-12s %-5s mTHP size set to never\n", b->name, ps);
            any = 1;
        }
        if (!b->loaded) {
            printf("  %-12s %-5s rejected by the loader: %s\n", b->name, "-", b->reason);
            any = 1;
        }
    }
    if (!any)
        printf("  (nothing)\n");
}

/* --node "1", "0,2" or "0-3,8": the placement's node bitmap
 * (hp_alloc_opts.numa_nodes), in the kernel's node list format. */
static int node_list_arg(const char *arg, uint64_t mask[16])
{
    struct hp_nodes nodes;
    _Static_assert(sizeof(nodes.w) == 16 * sizeof(*mask), "hp_alloc_opts.numa_nodes");
    if (hp_nodes_parse(arg, &nodes) != 0 || strchr(arg, '\n') || !hp_nodes_count(&nodes))
        return hpctl_bad("explain", "--node \"%s\" is not a node list: node numbers below %u "
                         "and ranges, comma-separated, such as 0-3,8", arg, HP_NODES_MAX),
               HPCTL_USAGE;
    memcpy(mask, nodes.w, sizeof(nodes.w));
    return HPCTL_OK;
}

static int numa_mode_arg(const char *arg, uint32_t *mode)
{
    static const char *const names[] = {"prefer", "bind", "interleave"};
    static const uint32_t modes[] = {HP_NUMA_PREFER, HP_NUMA_BIND, HP_NUMA_INTERLEAVE};
    for (unsigned i = 0; i < 3; i++)
        if (!strcmp(arg, names[i]))
            return *mode = modes[i], HPCTL_OK;
    return hpctl_bad("explain", "--numa-mode: expected prefer, bind or interleave"), HPCTL_USAGE;
}

int hpctl_explain(int argc, char **argv)
{
    struct hp_alloc_opts opts = HP_ALLOC_OPTS_INIT;
    uint64_t size = 0, ps, asked_ps = 0;
    int json = 0;
    static const char *const valued[] = {"--backend", "--exclude", "--page-size", "--node",
                                         "--numa-mode", NULL};
    static uint64_t nodes[16];
    uint32_t numa_mode = 0;
    int placed = 0;
    if (argc < 1 || (argv[0][0] == '-' && (argv[0][1] < '0' || argv[0][1] > '9')))
        return hpctl_bad("explain", "a SIZE is required first"), explain_usage();
    if (hpctl_size_arg("explain", "SIZE", argv[0], &size) != HPCTL_OK)
        return explain_usage();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--require-huge"))
            opts.flags |= HP_F_REQUIRE_HUGE;
        else if (!strcmp(argv[i], "--no-pool"))
            opts.flags |= HP_F_NOPOOL;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            opts.backend = argv[++i];
        else if (!strcmp(argv[i], "--exclude") && i + 1 < argc)
            opts.exclude = argv[++i];
        else if (!strcmp(argv[i], "--node") && i + 1 < argc) {
            if (node_list_arg(argv[++i], nodes) != HPCTL_OK)
                return explain_usage();
            placed = 1;
        } else if (!strcmp(argv[i], "--numa-mode") && i + 1 < argc) {
            if (numa_mode_arg(argv[++i], &numa_mode) != HPCTL_OK)
                return explain_usage();
        } else if (!strcmp(argv[i], "--page-size") && i + 1 < argc) {
            if (hpctl_page_size_arg("explain", argv[++i], &ps) != HPCTL_OK)
                return explain_usage();
            opts.flags |= ps;
            parse_size(argv[i], &asked_ps);
        } else
            return hpctl_unexpected("explain", argv, i, argc, valued), explain_usage();
    }
    /* As hp_alloc_ex with this placement: checked, then the pools of the
     * nodes it allows are the ones that count (docs/numa.md). */
    if (numa_mode && !placed)
        return hpctl_bad("explain", "--numa-mode needs --node"), explain_usage();
    if (placed) {
        opts.numa_mode = numa_mode ? numa_mode : HP_NUMA_PREFER;
        opts.numa_max_node = 1024;
        opts.numa_nodes = nodes;
    }
    struct hp_explain *ex = calloc(1, sizeof(*ex));
    if (!ex) {
        fprintf(stderr, "hpctl: out of memory\n");
        return HPCTL_FAIL;
    }
    hp_alloc_explain((size_t)size, &opts, ex);
    char missing[300];
    size_missing(ex, asked_ps, missing, sizeof(missing));
    if (json)
        print_json(ex, &opts, size, missing);
    else
        print_text(ex, &opts, argv[0], size, missing);
    int rc = ex->n_cand ? HPCTL_OK : HPCTL_FAIL;
    free(ex);
    return rc;
}
