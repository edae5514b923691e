/*
 * hpctl thp / hpctl mthp: the system-wide THP switches (enabled, defrag)
 * and the per-size mTHP switches (enabled, shmem_enabled) with their
 * counters (Documentation/admin-guide/mm/transhuge.rst, "sysfs" and
 * "Monitoring usage"). A value is checked against the choices the file
 * itself lists before it is written.
 */
#include "hpctl.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SIZES 32

/* Is value one of the words of "always [madvise] never"? */
static int accepted(const char *path, const char *value, char *choices, size_t cap)
{
    char raw[256];
    read_line(path, raw, sizeof(raw));
    size_t used = 0;
    int ok = 0;
    choices[0] = '\0';
    for (char *save = NULL, *w = strtok_r(raw, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        size_t len = strlen(w);
        if (w[0] == '[' && len >= 2 && w[len - 1] == ']')
            w[len - 1] = '\0', w++;
        ok |= !strcmp(w, value);
        int n = snprintf(choices + used, cap - used, "%s%s", used ? ", " : "", w);
        if (n > 0 && (size_t)n < cap - used)
            used += (size_t)n;
    }
    return ok;
}

/* Set one choice knob: validate, write, read back. */
static int set_choice(const char *path, const char *value, int dry_run, int json, int *first)
{
    char choices[256], before[64], after[64] = "";
    if (!path_exists(path)) {
        fprintf(stderr, "hpctl: %s does not exist on this machine\n", path);
        return HPCTL_ENOENT;
    }
    selected(path, before, sizeof(before));
    if (!accepted(path, value, choices, sizeof(choices))) {
        fprintf(stderr, "hpctl: \"%s\" is not a value of %s; it accepts: %s\n", value, path,
                choices);
        return HPCTL_USAGE;
    }
    int rc = HPCTL_OK;
    if (dry_run) {
        char full[512];
        if (access(hpctl_path(path, full, sizeof(full)), W_OK) != 0)
            rc = knob_error(path, value, -errno);
    } else {
        int err = write_knob(path, value);
        if (err)
            rc = knob_error(path, value, err);
        selected(path, after, sizeof(after));
        if (rc == HPCTL_OK && strcmp(after, value)) {
            fprintf(stderr, "hpctl: wrote \"%s\" to %s but it reads back \"%s\"\n", value, path,
                    after);
            rc = HPCTL_FAIL;
        }
    }
    if (json) {
        printf("%s{\"path\": ", *first ? "" : ", ");
        json_string(path);
        printf(", \"before\": ");
        json_string(before);
        printf(", \"asked\": ");
        json_string(value);
        printf(", \"after\": ");
        if (dry_run)
            printf("null");
        else
            json_string(after);
        printf(", \"status\": %d}", rc);
    } else if (dry_run) {
        printf("%s: would write %s (now %s)%s\n", path, value, before,
               rc == HPCTL_OK ? "" : "; the write would fail");
    } else if (rc == HPCTL_OK) {
        printf("%s: %s -> %s\n", path, before, after);
    }
    *first = 0;
    return rc;
}

static int thp_usage(void)
{
    fprintf(stderr, "usage: hpctl thp [--json]\n"
                    "       hpctl thp set enabled|defrag VALUE [--dry-run] [--json]\n");
    return HPCTL_USAGE;
}

static int mthp_usage(void)
{
    fprintf(stderr, "usage: hpctl mthp [--json]\n"
                    "       hpctl mthp set SIZE|all enabled|shmem_enabled VALUE [--dry-run] [--json]\n");
    return HPCTL_USAGE;
}

/* Split "set A B C [--dry-run] [--json]" into words and options. */
static int set_args(int argc, char **argv, const char *words[], int n_words, int *dry_run,
                    int *json)
{
    int got = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--dry-run"))
            *dry_run = 1;
        else if (!strcmp(argv[i], "--json"))
            *json = 1;
        else if (argv[i][0] == '-' || got == n_words)
            return -1;
        else
            words[got++] = argv[i];
    }
    return got == n_words ? 0 : -1;
}

static void json_head(const char *command, int dry_run)
{
    printf("{\"schema\": %d, \"command\": \"%s\", \"dry_run\": %s, \"changes\": [", HPCTL_SCHEMA,
           command, dry_run ? "true" : "false");
}

static int thp_show(int json)
{
    static const char *const knobs[] = {"enabled", "defrag", "shmem_enabled", "khugepaged/defrag"};
    char path[256], v[64], pmd[32];
    if (!path_exists(THP_DIR)) {
        if (json)
            printf("{\"schema\": %d, \"command\": \"thp\", \"present\": false}\n", HPCTL_SCHEMA);
        else
            printf("THP: not supported by this kernel (%s is missing)\n", THP_DIR);
        return json ? HPCTL_OK : HPCTL_ENOENT;
    }
    read_line(THP_DIR "/hpage_pmd_size", pmd, sizeof(pmd));
    if (json)
        printf("{\"schema\": %d, \"command\": \"thp\", \"present\": true, \"pmd_size\": %s",
               HPCTL_SCHEMA, pmd[0] ? pmd : "null");
    else
        printf("THP (pmd size %s bytes)\n", pmd[0] ? pmd : "?");
    for (size_t i = 0; i < sizeof(knobs) / sizeof(*knobs); i++) {
        snprintf(path, sizeof(path), THP_DIR "/%s", knobs[i]);
        int present = path_exists(path);
        selected(path, v, sizeof(v));
        if (json) {
            printf(", \"%s\": ", i == 3 ? "khugepaged_defrag" : knobs[i]);
            present ? json_string(v) : (void)printf("null");
        } else if (present) {
            printf("  %-18s %s\n", knobs[i], v);
        }
    }
    printf(json ? "}\n" : "");
    return HPCTL_OK;
}

int hpctl_thp(int argc, char **argv)
{
    if (argc == 0 || (argc == 1 && !strcmp(argv[0], "--json")))
        return thp_show(argc == 1);
    if (strcmp(argv[0], "set"))
        return thp_usage();
    const char *w[2];
    int dry_run = 0, json = 0, first = 1;
    if (set_args(argc - 1, argv + 1, w, 2, &dry_run, &json) != 0 ||
        (strcmp(w[0], "enabled") && strcmp(w[0], "defrag")))
        return thp_usage();
    char path[256];
    snprintf(path, sizeof(path), THP_DIR "/%s", w[0]);
    if (json)
        json_head("thp set", dry_run);
    int rc = set_choice(path, w[1], dry_run, json, &first);
    if (json)
        printf("], \"status\": %d}\n", rc);
    return rc;
}

/* The counters of one mTHP size, in name order. */
static int stat_names(unsigned long kb, char names[][40], int max)
{
    char dir[256], full[512];
    snprintf(dir, sizeof(dir), THP_DIR "/hugepages-%lukB/stats", kb);
    DIR *d = opendir(hpctl_path(dir, full, sizeof(full)));
    int n = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= 40)
            continue;
        snprintf(names[n++], 40, "%s", e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, 40, (int (*)(const void *, const void *))strcmp);
    return n;
}

static int mthp_show(int json)
{
    static const char *const shown[] = {"nr_anon", "anon_fault_alloc", "anon_fault_fallback",
                                        "split", "shmem_alloc"};
    unsigned long kb[MAX_SIZES];
    int n = size_dirs(THP_DIR, kb, MAX_SIZES);
    if (json)
        printf("{\"schema\": %d, \"command\": \"mthp\", \"sizes\": [", HPCTL_SCHEMA);
    else if (n == 0) {
        printf("mTHP: this kernel has no per-size switches (%s/hugepages-*kB)\n", THP_DIR);
        return HPCTL_ENOENT;
    } else {
        printf("%-6s %-8s %-12s", "SIZE", "ENABLED", "SHMEM");
        for (size_t k = 0; k < sizeof(shown) / sizeof(*shown); k++)
            printf(" %*s", (int)strlen(shown[k]) > 8 ? (int)strlen(shown[k]) : 8, shown[k]);
        printf("\n");
    }
    for (int i = 0; i < n; i++) {
        char path[256], en[32], sh[32], hs[32];
        snprintf(path, sizeof(path), THP_DIR "/hugepages-%lukB/enabled", kb[i]);
        int has_enabled = path_exists(path);
        selected(path, en, sizeof(en));
        snprintf(path, sizeof(path), THP_DIR "/hugepages-%lukB/shmem_enabled", kb[i]);
        int has_shmem = path_exists(path);
        selected(path, sh, sizeof(sh));
        human_size((uint64_t)kb[i] << 10, hs, sizeof(hs));
        char names[64][40];
        int ns = stat_names(kb[i], names, 64);
        if (json) {
            printf("%s\n  {\"page_size\": %llu, \"enabled\": ", i ? "," : "",
                   (unsigned long long)kb[i] << 10);
            has_enabled ? json_string(en) : (void)printf("null");
            printf(", \"shmem_enabled\": ");
            has_shmem ? json_string(sh) : (void)printf("null");
            printf(", \"stats\": {");
            for (int k = 0; k < ns; k++) {
                uint64_t v;
                snprintf(path, sizeof(path), THP_DIR "/hugepages-%lukB/stats/%.39s", kb[i], names[k]);
                printf("%s\"%s\": ", k ? ", " : "", names[k]);
                read_u64(path, &v) == 0 ? printf("%llu", (unsigned long long)v) : printf("null");
            }
            printf("}}");
            continue;
        }
        printf("%-6s %-8s %-12s", hs, has_enabled ? en : "-", has_shmem ? sh : "-");
        for (size_t k = 0; k < sizeof(shown) / sizeof(*shown); k++) {
            uint64_t v;
            int w = (int)strlen(shown[k]) > 8 ? (int)strlen(shown[k]) : 8;
            snprintf(path, sizeof(path), THP_DIR "/hugepages-%lukB/stats/%s", kb[i], shown[k]);
            read_u64(path, &v) == 0 ? printf(" %*llu", w, (unsigned long long)v)
                                    : printf(" %*s", w, "-");
        }
        printf("\n");
    }
    if (json)
        printf("\n]}\n");
    return HPCTL_OK;
}

int hpctl_mthp(int argc, char **argv)
{
    if (argc == 0 || (argc == 1 && !strcmp(argv[0], "--json")))
        return mthp_show(argc == 1);
    if (strcmp(argv[0], "set"))
        return mthp_usage();
    const char *w[3];
    int dry_run = 0, json = 0, first = 1;
    if (set_args(argc - 1, argv + 1, w, 3, &dry_run, &json) != 0 ||
        (strcmp(w[1], "enabled") && strcmp(w[1], "shmem_enabled")))
        return mthp_usage();
    unsigned long kb[MAX_SIZES];
    int n = size_dirs(THP_DIR, kb, MAX_SIZES), all = !strcmp(w[0], "all");
    uint64_t bytes = 0;
    if (!all && parse_size(w[0], &bytes) != 0) {
        fprintf(stderr, "hpctl: \"%s\" is not a size (try 64K or all)\n", w[0]);
        return HPCTL_USAGE;
    }
    int found = 0, rc = HPCTL_OK;
    if (json)
        json_head("mthp set", dry_run);
    for (int i = 0; i < n; i++) {
        if (!all && (uint64_t)kb[i] << 10 != bytes)
            continue;
        char path[256];
        snprintf(path, sizeof(path), THP_DIR "/hugepages-%lukB/%s", kb[i], w[1]);
        found = 1;
        if (all && !path_exists(path))
            continue;  /* shmem_enabled is not offered for every size */
        int one = set_choice(path, w[2], dry_run, json, &first);
        if (one != HPCTL_OK) {
            rc = one;
            break;
        }
    }
    if (json)
        printf("], \"status\": %d}\n", found ? rc : HPCTL_ENOENT);
    if (!found) {
        fprintf(stderr, "hpctl: this kernel has no mTHP size %s\n", w[0]);
        return HPCTL_ENOENT;
    }
    return rc;
}
