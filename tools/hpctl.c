/*
 * hpctl — see what libhp sees on this machine, and try it.
 *
 *   hpctl status [--json]     backends, THP/mTHP switches, hugetlb pools
 *   hpctl alloc SIZE [--page-size SIZE] [--backend NAME] [--require-huge]
 *                    [--populate] [--json]
 *                             allocate, touch every page, report what the
 *                             kernel really gave, free
 *   hpctl run [--backend NAME] [--page-size SIZE] [--report] -- CMD [ARGS]
 *                             CMD with libhp-malloc.so (hpctl_run.c)
 *   hpctl version
 *
 * SIZE accepts a K, M or G suffix (powers of 1024).
 */
#include <hp.h>

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define POOL_DIR "/sys/kernel/mm/hugepages"

static const char *kind_name(uint32_t kind)
{
    static const char *names[] = {"other", "hugetlb", "thp", "mthp", "base"};
    return kind < sizeof(names) / sizeof(*names) ? names[kind] : "?";
}

/* Read a one-line sysfs file; "" if unreadable. */
static void read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    buf[0] = '\0';
    if (!f)
        return;
    if (!fgets(buf, (int)cap, f))
        buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}

static void selected(const char *path, char *buf, size_t cap)
{
    char raw[256];
    read_line(path, raw, sizeof(raw));
    const char *open_br = strchr(raw, '['), *close_br = open_br ? strchr(open_br, ']') : NULL;
    if (open_br && close_br)
        snprintf(buf, cap, "%.*s", (int)(close_br - open_br - 1), open_br + 1);
    else
        snprintf(buf, cap, "%.*s", (int)(cap - 1), raw[0] ? raw : "unavailable");
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void human_size(uint64_t bytes, char *buf, size_t cap)
{
    static const char *units[] = {"B", "K", "M", "G", "T"};
    unsigned u = 0;
    while (bytes >= 1024 && bytes % 1024 == 0 && u < 4)
        bytes /= 1024, u++;
    snprintf(buf, cap, "%llu%s", (unsigned long long)bytes, units[u]);
}

/* Sorted list of "hugepages-<n>kB" entries in dir; returns the count. */
static int size_dirs(const char *dir, unsigned long kb[], int max)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        unsigned long v;
        if (sscanf(e->d_name, "hugepages-%lukB", &v) == 1)
            kb[n++] = v;
    }
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && kb[j] < kb[j - 1]; j--) {
            unsigned long t = kb[j];
            kb[j] = kb[j - 1];
            kb[j - 1] = t;
        }
    return n;
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
            continue;
        }
        printf("    {\"name\": ");
        json_string(bi.name);
        printf(", \"available\": %s, \"kind\": \"%s\", \"path\": ", bi.available ? "true" : "false",
               kind_name(bi.kind));
        json_string(bi.path);
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

static int cmd_status(int json)
{
    if (json)
        printf("{\n  \"version\": \"%s\",\n", hp_version_string());
    else
        printf("libhp %s\n\n", hp_version_string());
    print_backends(json);
    print_thp(json);
    print_pools(json);
    if (json)
        printf("}\n");
    return 0;
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    if (s[0] < '0' || s[0] > '9')  /* strtoull would skip blanks and take a sign */
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'B')
        end += (*end == 'i') + (end[*end == 'i'] == 'B');
    if (*end || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: hpctl status [--json]\n"
                    "       hpctl alloc SIZE [--page-size SIZE] [--backend NAME] "
                    "[--require-huge] [--populate] [--json]\n"
                    "       hpctl run [--backend NAME] [--page-size SIZE] [--report] -- CMD [ARGS]\n"
                    "       hpctl version\n");
    return 2;
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
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc)
            opts.backend = argv[++i];
        else if (!strcmp(argv[i], "--page-size") && i + 1 < argc &&
                 parse_size(argv[i + 1], &ps) == 0 && hp_page_size_flag(ps))
            opts.flags |= hp_page_size_flag(ps), i++;
        else
            return usage();
    }
    unsigned char *p = hp_alloc_ex((size_t)size, &opts);
    if (!p) {
        fprintf(stderr, "hpctl: hp_alloc failed: %s: %s\n", hp_error_name(hp_last_error()),
                hp_last_error_detail());
        return 1;
    }
    for (uint64_t off = 0; off < size; off += 4096)
        p[off] = 1;
    p[size - 1] = 1;
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    int32_t rc = hp_info(p, &info);
    if (rc != HP_OK) {
        fprintf(stderr, "hpctl: hp_info failed: %s\n", hp_last_error_detail());
        hp_free(p);
        return 1;
    }
    char ps[32], usable[32], huge[32];
    human_size(info.page_size, ps, sizeof(ps));
    human_size(info.usable_size, usable, sizeof(usable));
    human_size(info.huge_bytes, huge, sizeof(huge));
    if (json)
        printf("{\"backend\": \"%s\", \"page_size\": %llu, \"usable_size\": %llu, "
               "\"mapped_size\": %llu, \"huge_bytes\": %llu}\n",
               info.backend, (unsigned long long)info.page_size,
               (unsigned long long)info.usable_size, (unsigned long long)info.mapped_size,
               (unsigned long long)info.huge_bytes);
    else
        printf("allocated %s at %p: backend %s, page size %s, huge-backed %s of %s after touch\n",
               argv[0], (void *)p, info.backend, ps, huge, usable);
    rc = hp_free(p);
    if (rc != HP_OK) {
        fprintf(stderr, "hpctl: hp_free failed: %s\n", hp_last_error_detail());
        return 1;
    }
    return 0;
}

/* hpctl_run.c; weak, so programs that include this file alone (the fuzz
 * test of the SIZE parser) still link. */
int hpctl_run(int argc, char **argv) __attribute__((weak));

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage();
    if (!strcmp(argv[1], "status")) {
        if (argc > 3 || (argc == 3 && strcmp(argv[2], "--json")))
            return usage();
        return cmd_status(argc == 3);
    }
    if (!strcmp(argv[1], "alloc"))
        return cmd_alloc(argc - 2, argv + 2);
    if (!strcmp(argv[1], "run") && hpctl_run)
        return hpctl_run(argc - 2, argv + 2);
    if (!strcmp(argv[1], "version")) {
        printf("%s\n", hp_version_string());
        return 0;
    }
    return usage();
}
