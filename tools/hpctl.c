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

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
            /* A file refused before its name was read has none: "-", as
             * for page sizes it does not have. */
            printf("%-12s %-5s %-8s %-18s %s\n", bi.name[0] ? bi.name : "-",
                   bi.available ? "yes" : "no", kind_name(bi.kind), sizes[0] ? sizes : "-",
                   bi.reason);
            /* The path is the file's name as the directory lists it: any
             * byte, ESC and LF included; shown printable (--json escapes). */
            char path[sizeof(bi.path)];
            size_t k = 0;
            for (; bi.path[k] && k < sizeof(path) - 1; k++)
                path[k] = (unsigned char)bi.path[k] < 0x20 || (unsigned char)bi.path[k] >= 0x7f
                              ? '?' : bi.path[k];
            path[k] = '\0';
            printf("%-12s %s%s%s\n", "", path, bi.description[0] ? ": " : "", bi.description);
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
        printf("\nhugetlb pools:\n%-10s %8s %8s %8s %8s %10s  %s\n", "SIZE", "TOTAL", "FREE",
               "RSVD", "SURPLUS", "OVERCOMMIT", "PER NODE (total/free)");
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
                   "\"surplus\": %s, \"overcommit\": %s",
                   i ? "," : "", kb[i], v[0], v[1], v[2], v[3], v[4]);
        else
            printf("%-10lu %8s %8s %8s %8s %10s ", kb[i], v[0], v[1], v[2], v[3], v[4]);
        pool_nodes_print(kb[i], json);
        printf(json ? "}" : "\n");
    }
    printf(json ? "\n  ]" : "");
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

/* The values hpctl made persistent (hpctl_persist.c). */
static void print_persistent(const char *root, int json)
{
    if (json) {
        printf(",\n  \"persistent\": ");
        persist_list(root, 1);
        printf("\n");
        return;
    }
    printf("\npersistent (applied at every boot):\n");
    persist_list(root, 0);
}

static int cmd_status(int json, const char *root)
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
    print_persistent(root, json);
    if (json)
        printf("}\n");
    return rc == HP_OK ? HPCTL_OK : HPCTL_FAIL;
}

static int usage(void);
static int usage_of(const char *name);

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
    static const char *const valued[] = {"--backend", "--exclude", "--page-size", NULL};
    if (argc < 1 || (argv[0][0] == '-' && (argv[0][1] < '0' || argv[0][1] > '9')))
        return hpctl_bad("alloc", "a SIZE is required first"), usage_of("alloc");
    if (hpctl_size_arg("alloc", "SIZE", argv[0], &size) != HPCTL_OK)
        return usage_of("alloc");
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
        else if (!strcmp(argv[i], "--page-size") && i + 1 < argc) {
            if (hpctl_page_size_arg("alloc", argv[++i], &ps) != HPCTL_OK)
                return usage_of("alloc");
            opts.flags |= ps;
        } else
            return hpctl_unexpected("alloc", argv, i, argc, valued), usage_of("alloc");
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
    int json = 0;
    const char *root = "";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--root") && i + 1 < argc) {
            if (persist_root(argv[++i], &root) != HPCTL_OK)
                return usage_of("status");
        } else
            return hpctl_unexpected("status", argv, i, argc, (const char *const[]){"--root", NULL}),
                   usage_of("status");
    }
    return cmd_status(json, root);
}

static int cmd_version(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--json"))
            return hpctl_unexpected("version", argv, i, argc, NULL), usage_of("version");
    if (argc >= 1)
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
    {"status", cmd_status_args, "status [--root DIR] [--json]"},
    {"alloc", cmd_alloc, "alloc SIZE [--page-size SIZE] [--backend NAME] [--exclude LIST] "
                         "[--require-huge] [--no-pool] [--populate] [--json]"},
    {"explain", hpctl_explain, "explain SIZE [--page-size SIZE] [--backend NAME] [--exclude LIST] "
                               "[--require-huge] [--no-pool] [--node LIST] "
                               "[--numa-mode MODE] [--json]"},
    {"pool", hpctl_pool, "pool [--json] | pool set SIZE [COUNT] [--node N] [--overcommit N] "
                         "[--persist [--root DIR]] [--dry-run] [--json] | pool release [SIZE] "
                         "[--node N] [--persist [--root DIR]] [--dry-run] [--json]"},
    {"thp", hpctl_thp, "thp [--json] | thp set enabled|defrag VALUE [--persist [--root DIR]] "
                       "[--dry-run] [--json]"},
    {"mthp", hpctl_mthp, "mthp [--json] | mthp set SIZE|all enabled|shmem_enabled VALUE "
                         "[--persist [--root DIR]] [--dry-run] [--json]"},
    {"undo", hpctl_undo, "undo [--all] [--dry-run] [--json]"},
    {"persist", hpctl_persist, "persist [--root DIR] [--json] | persist remove KNOB...|all "
                               "[--root DIR] [--dry-run] [--json]"},
    {"why", hpctl_why, "why PID [--mappings] [--json]"},
    {"watch", hpctl_watch, "watch [PID] [--interval SECONDS] [--count N] [--json]"},
    {"run", hpctl_run, "run [--backend NAME] [--page-size SIZE] [--pool[=all]] [--stacks lean|huge] "
                       "[--report] [--report-json FILE] [--] CMD [ARGS...]"},
    {"version", cmd_version, "version [--json]"},
};

/* The usage line of one subcommand. */
static int usage_of(const char *name)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
        if (!strcmp(commands[i].name, name))
            fprintf(stderr, "usage: hpctl %s\n", commands[i].usage);
    return HPCTL_USAGE;
}

static int usage(void)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
        fprintf(stderr, "%s hpctl %s\n", i ? "      " : "usage:", commands[i].usage);
    return HPCTL_USAGE;
}

/* Under --json every run prints one document. When a subcommand fails
 * before it printed its own (a bad command line, a pool size or process
 * that does not exist), main prints {schema, command, status, error} with
 * the first message hpctl wrote to stderr. To know, stdout and stderr are
 * replaced by streams that count and keep what passes through them
 * (fopencookie(3); glibc lets a program assign stdout and stderr). */
static size_t out_bytes;
static char err_text[1024];
static size_t err_len;
static int out_fd = 1, err_fd = 2;

static ssize_t pass_write(void *cookie, const char *buf, size_t n)
{
    int fd = *(int *)cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, buf + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return done ? (ssize_t)done : -1;
        done += (size_t)w;
    }
    if (fd == out_fd) {
        out_bytes += n;
    } else {
        size_t room = sizeof(err_text) - 1 - err_len, take = n < room ? n : room;
        memcpy(err_text + err_len, buf, take);
        err_len += take;
        err_text[err_len] = '\0';
    }
    return (ssize_t)n;
}

static int wrap_streams(void)
{
    cookie_io_functions_t io = {.write = pass_write};
    FILE *out = fopencookie(&out_fd, "w", io), *err = fopencookie(&err_fd, "w", io);
    if (!out || !err) {
        if (out)
            fclose(out);
        if (err)
            fclose(err);
        return -1;
    }
    setvbuf(out, NULL, _IOLBF, 0);
    setvbuf(err, NULL, _IONBF, 0);
    stdout = out;
    stderr = err;
    return 0;
}

/* --json before any "--" (run passes what follows to its command). */
static int wants_json(int argc, char **argv)
{
    for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--json"))
            return 1;
    return 0;
}

static void error_document(const char *command, const char *verb, int rc)
{
    static const char *const codes[] = {"ok", "failed", "usage", "permission", "not-found",
                                        "partial"};
    char detail[512] = "";
    /* The first "hpctl..." line, without its "hpctl: " prefix. */
    for (char *line = err_text; *line && !detail[0];) {
        size_t len = strcspn(line, "\n");
        if (!strncmp(line, "hpctl", 5)) {
            const char *colon = memchr(line, ':', len);
            const char *text = colon ? colon + 1 + (colon[1] == ' ') : line;
            snprintf(detail, sizeof(detail), "%.*s", (int)(len - (size_t)(text - line)), text);
        }
        line += len + (line[len] == '\n');
    }
    if (!detail[0])
        snprintf(detail, sizeof(detail), "bad command line");
    printf("{\"schema\": %d, \"command\": ", HPCTL_SCHEMA);
    if (command) {
        char name[96];
        snprintf(name, sizeof(name), "%s%s%s", command, verb ? " " : "", verb ? verb : "");
        json_string(name);
    } else {
        printf("null");
    }
    /* explain's own status is the error hp_alloc would return, a name. */
    if (command && !strcmp(command, "explain"))
        printf(", \"status\": null");
    else
        printf(", \"status\": %d", rc);
    printf(", \"exit_code\": %d, \"error\": {\"code\": \"%s\", \"detail\": ", rc,
           rc >= 0 && rc <= HPCTL_PARTIAL ? codes[rc] : "failed");
    json_string(detail);
    printf("}}\n");
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage();
        return HPCTL_OK;
    }
    int json = wants_json(argc, argv) && strcmp(argv[1], "run") && wrap_streams() == 0;
    const char *command = NULL, *verb = NULL;
    int rc = -1;
    for (size_t i = 0; i < sizeof(commands) / sizeof(*commands); i++)
        if (!strcmp(argv[1], commands[i].name)) {
            command = commands[i].name;
            if (argc > 2 && (!strcmp(argv[2], "set") || !strcmp(argv[2], "release") ||
                             !strcmp(argv[2], "remove")))
                verb = argv[2];
            rc = commands[i].run(argc - 2, argv + 2);
            break;
        }
    if (!command) {
        fprintf(stderr, "hpctl: unknown command \"%s\"\n", argv[1]);
        rc = usage();
    }
    if (json) {
        fflush(stdout);
        if (out_bytes == 0 && rc != HPCTL_OK)
            error_document(command, verb, rc);
        fflush(stdout);
    }
    return rc;
}
