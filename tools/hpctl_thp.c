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
        else
            undo_record(path, before);
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
                    "       hpctl thp set enabled|defrag VALUE [--persist [--root DIR]] [--dry-run] [--json]\n");
    return HPCTL_USAGE;
}

static int mthp_usage(void)
{
    fprintf(stderr, "usage: hpctl mthp [--json]\n"
                    "       hpctl mthp set SIZE|all enabled|shmem_enabled VALUE [--persist [--root DIR]]\n"
                    "                      [--dry-run] [--json]\n");
    return HPCTL_USAGE;
}

struct set_opts {
    int dry_run, json, persist;
    const char *root;             /* --root: of /etc for --persist */
};

/* Split "set A B C [--dry-run] [--json] [--persist [--root DIR]]" into
 * words and options; a message naming what is wrong otherwise. */
static int set_args(const char *cmd, int argc, char **argv, const char *words[], int n_words,
                    struct set_opts *o)
{
    static const char *const valued[] = {"--root", NULL};
    int got = 0, have_root = 0;
    o->root = "";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--dry-run"))
            o->dry_run = 1;
        else if (!strcmp(argv[i], "--json"))
            o->json = 1;
        else if (!strcmp(argv[i], "--persist"))
            o->persist = 1;
        else if (!strcmp(argv[i], "--root") && i + 1 < argc) {
            if (persist_root(argv[++i], &o->root) != HPCTL_OK)
                return -1;
            have_root = 1;
        } else if (argv[i][0] == '-' || got == n_words)
            return hpctl_unexpected(cmd, argv, i, argc, valued), -1;
        else
            words[got++] = argv[i];
    }
    if (got < n_words) {
        if (n_words == 2)
            hpctl_bad(cmd, "needs a KNOB and a VALUE");
        else
            hpctl_bad(cmd, "needs a SIZE (or all), a KNOB and a VALUE");
        return -1;
    }
    if (have_root && !o->persist) {
        hpctl_bad(cmd, "--root is the root of /etc for --persist, which is missing");
        return -1;
    }
    return 0;
}

/* After the changes: --persist's lines for the knobs that were set, or
 * "persisted": null. */
static int set_persist(const struct set_opts *o, const struct persist_item *items, int n, int rc)
{
    if (!o->persist) {
        if (o->json)
            printf(", \"persisted\": null");
        return rc;
    }
    int prc = persist_apply(o->root, items, n, o->dry_run, o->json);
    return rc == HPCTL_OK ? prc : rc;
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
        return hpctl_unexpected("thp", argv, !strcmp(argv[0], "--json"), argc, NULL), thp_usage();
    const char *w[2];
    struct set_opts o = {0};
    int first = 1;
    if (set_args("thp set", argc - 1, argv + 1, w, 2, &o) != 0)
        return thp_usage();
    if (strcmp(w[0], "enabled") && strcmp(w[0], "defrag"))
        return hpctl_bad("thp set", "\"%s\" is not a knob hpctl sets (enabled or defrag)", w[0]),
               thp_usage();
    char path[256];
    snprintf(path, sizeof(path), THP_DIR "/%s", w[0]);
    if (o.json)
        json_head("thp set", o.dry_run);
    int rc = set_choice(path, w[1], o.dry_run, o.json, &first);
    if (o.json)
        printf("]");
    struct persist_item item = {path, w[1]};
    rc = set_persist(&o, &item, rc == HPCTL_OK, rc);
    if (o.json)
        printf(", \"status\": %d}\n", rc);
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
        return hpctl_unexpected("mthp", argv, !strcmp(argv[0], "--json"), argc, NULL),
               mthp_usage();
    const char *w[3];
    struct set_opts o = {0};
    int first = 1, dry_run, json;
    if (set_args("mthp set", argc - 1, argv + 1, w, 3, &o) != 0)
        return mthp_usage();
    if (strcmp(w[1], "enabled") && strcmp(w[1], "shmem_enabled"))
        return hpctl_bad("mthp set", "\"%s\" is not a knob hpctl sets (enabled or "
                         "shmem_enabled)", w[1]), mthp_usage();
    dry_run = o.dry_run, json = o.json;
    unsigned long kb[MAX_SIZES];
    char paths[MAX_SIZES][256];
    struct persist_item items[MAX_SIZES];
    int np = 0;
    int n = size_dirs(THP_DIR, kb, MAX_SIZES), all = !strcmp(w[0], "all");
    uint64_t bytes = 0;
    if (!all && parse_size(w[0], &bytes) != 0) {
        return hpctl_bad("mthp set", "SIZE \"%s\" is not a size (such as 64K) or all", w[0]),
               mthp_usage();
    }
    /* "all" is every mTHP size below the PMD size: the PMD size is THP
     * itself (its switch inherits "enabled" by default), and switching it
     * off with the rest would take THP away from every program. */
    uint64_t pmd = 0;
    char pmd_line[32];
    read_line(THP_DIR "/hpage_pmd_size", pmd_line, sizeof(pmd_line));
    if (parse_u64(pmd_line, &pmd) != 0)
        pmd = 0;
    int found = 0, rc = HPCTL_OK, left_out = -1;
    if (json)
        json_head("mthp set", dry_run);
    for (int i = 0; i < n; i++) {
        if (!all && (uint64_t)kb[i] << 10 != bytes)
            continue;
        if (all && pmd && (uint64_t)kb[i] << 10 == pmd) {
            left_out = i;
            found = 1;
            continue;
        }
        char *path = paths[np];
        snprintf(path, sizeof(paths[np]), THP_DIR "/hugepages-%lukB/%s", kb[i], w[1]);
        found = 1;
        if (all && !path_exists(path))
            continue;  /* shmem_enabled is not offered for every size */
        int one = set_choice(path, w[2], dry_run, json, &first);
        if (one != HPCTL_OK) {
            rc = one;
            break;
        }
        items[np].knob = path;
        items[np].value = w[2];
        np++;
    }
    if (json)
        printf("]");
    char hs[32] = "";
    if (left_out >= 0)
        human_size((uint64_t)kb[left_out] << 10, hs, sizeof(hs));
    if (json) {
        printf(", \"left_out\": [");
        if (left_out >= 0) {
            printf("{\"page_size\": %llu, \"why\": ", (unsigned long long)kb[left_out] << 10);
            json_string("the PMD size: THP itself; name it to change it");
            printf("}");
        }
        printf("]");
    } else if (left_out >= 0) {
        printf("%s (the PMD size: THP itself) is left out of \"all\" and stays as it was; "
               "\"hpctl mthp set %s %s %s\" changes it\n", hs, hs, w[1], w[2]);
    }
    if (found)
        rc = set_persist(&o, items, np, rc);
    else if (json)
        printf(", \"persisted\": null");
    if (json)
        printf(", \"status\": %d}\n", found ? rc : HPCTL_ENOENT);
    if (!found) {
        fprintf(stderr, "hpctl: this kernel has no mTHP size %s\n", w[0]);
        return HPCTL_ENOENT;
    }
    return rc;
}
