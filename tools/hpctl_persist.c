/*
 * hpctl ... --persist, hpctl persist: huge page settings that survive a
 * reboot, kept the way Debian applies settings at boot:
 *   - the pool of the default huge page size (Hugepagesize in /proc/meminfo)
 *     as vm.nr_hugepages / vm.nr_overcommit_hugepages in
 *     /etc/sysctl.d/80-hpctl.conf, applied by systemd-sysctl (sysctl.d(5));
 *   - every other /sys knob (other pool sizes, per-node pools, THP and mTHP
 *     switches) as a "w" line of /etc/tmpfiles.d/80-hpctl.conf, written by
 *     systemd-tmpfiles-setup (tmpfiles.d(5): "w" writes to a file that exists).
 * Both run early in boot, before services start. What only the kernel
 * command line does well is printed as advice and never written: 1 GiB
 * pools (Documentation/admin-guide/mm/hugetlbpage.rst: gigantic pages are
 * reliably found only at boot) and THP modes from the first process on
 * (Documentation/admin-guide/kernel-parameters.txt: transparent_hugepage=,
 * thp_anon=, thp_shmem=).
 * sysctl.d: of two files setting a key, the later name wins; tmpfiles.d: of
 * two files writing a path, the earlier name wins. Both are checked, so
 * hpctl says when another file overrides its line.
 * The root (--root DIR) prefixes /etc, /run and /usr/lib, nothing else.
 */
#include "hpctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_ENTRIES 128
#define FILE_NAME "80-hpctl.conf"

enum { PF_SYSCTL, PF_TMPFILES, PF_N };

static const char *const pf_dir[PF_N] = {"/etc/sysctl.d", "/etc/tmpfiles.d"};
static const char *const pf_tool[PF_N] = {"systemd-sysctl", "systemd-tmpfiles"};
static const char *const pf_header[PF_N] = {
    "# Written by hpctl(1): huge page pools applied at boot by systemd-sysctl.\n"
    "# \"hpctl persist\" lists these lines, \"hpctl persist remove\" removes them.\n",
    "# Written by hpctl(1): huge page knobs written at boot by systemd-tmpfiles.\n"
    "# \"hpctl persist\" lists these lines, \"hpctl persist remove\" removes them.\n",
};

struct entry {
    int file;             /* PF_* */
    char knob[256];       /* /sys path */
    char key[64];         /* sysctl key, or "" */
    char value[64];
};

struct state {
    const char *root;
    struct entry e[MAX_ENTRIES];
    int n;
    char *kept[PF_N];     /* lines hpctl did not write, kept as they are */
    size_t kept_len[PF_N];
    int bad_file;         /* load: the PF_* file that could not be read */
};

/* ------------------------------------------------------------- paths */

static int under_root(const char *root, const char *path, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s%s", root, path);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

static void file_path(const char *root, int file, char *buf, size_t cap)
{
    char rel[128];
    snprintf(rel, sizeof(rel), "%s/" FILE_NAME, pf_dir[file]);
    if (under_root(root, rel, buf, cap) != 0)
        snprintf(buf, cap, "%s", rel);
}

/* The default huge page size in KiB (Hugepagesize in /proc/meminfo), or 0. */
static unsigned long default_kb(void)
{
    char full[512], line[256];
    unsigned long kb = 0;
    FILE *f = fopen(hpctl_path("/proc/meminfo", full, sizeof(full)), "re");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "Hugepagesize: %lu kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static const char *const sysctl_files[2] = {"nr_hugepages", "nr_overcommit_hugepages"};
static const char *const sysctl_keys[2] = {"vm.nr_hugepages", "vm.nr_overcommit_hugepages"};

/* The sysctl key of a pool knob of the default size, or NULL. */
static const char *knob_key(const char *knob)
{
    unsigned long kb = default_kb();
    char path[256];
    for (int i = 0; kb && i < 2; i++) {
        snprintf(path, sizeof(path), POOL_DIR "/hugepages-%lukB/%s", kb, sysctl_files[i]);
        if (!strcmp(path, knob))
            return sysctl_keys[i];
    }
    return NULL;
}

/* vm.nr_hugepages or vm/nr_hugepages -> its knob; -1 if not a pool key. */
static int key_knob(const char *key, char *knob, size_t cap)
{
    char k[64];
    snprintf(k, sizeof(k), "%s", key);
    for (char *c = k; *c; c++)
        if (*c == '/')
            *c = '.';
    unsigned long kb = default_kb();
    for (int i = 0; kb && i < 2; i++)
        if (!strcmp(k, sysctl_keys[i])) {
            snprintf(knob, cap, POOL_DIR "/hugepages-%lukB/%s", kb, sysctl_files[i]);
            return 0;
        }
    return -1;
}

static int is_hp_knob(const char *path)
{
    return !strncmp(path, "/sys/kernel/mm/", 15) || !strncmp(path, NODE_DIR "/node", 29);
}

/* ---------------------------------------------------------- parsing */

static char *trim(char *s)
{
    s += strspn(s, " \t");
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* "key = value" (sysctl.d; a leading '-' ignores errors). 0 if it is one. */
static int parse_sysctl(char *line, char **key, char **value)
{
    char *eq = strchr(line, '=');
    if (!eq || line[0] == '#' || line[0] == ';')
        return -1;
    *eq = '\0';
    *key = trim(line);
    if (**key == '-')
        (*key)++;
    *value = trim(eq + 1);
    return **key ? 0 : -1;
}

/* "w PATH - - - - VALUE" (tmpfiles.d). 0 if it is a w line. */
static int parse_tmpfiles(char *line, char **path, char **value)
{
    char *save = NULL, *type = strtok_r(line, " \t", &save);
    if (!type || (strcmp(type, "w") && strcmp(type, "w-")))
        return -1;
    *path = strtok_r(NULL, " \t", &save);
    for (int i = 0; i < 4; i++)
        if (!strtok_r(NULL, " \t", &save))
            return -1;
    *value = save ? trim(save) : NULL;
    return *path && *value && **value ? 0 : -1;
}

/* One of the lines of hpctl's header, exactly. */
static int is_header(int file, const char *line)
{
    size_t len = strlen(line);
    for (const char *h = pf_header[file]; *h; h += strcspn(h, "\n") + 1)
        if (strcspn(h, "\n") == len && !strncmp(h, line, len))
            return 1;
    return 0;
}

static void keep(struct state *st, int file, const char *line)
{
    size_t len = strlen(line);
    char *n = realloc(st->kept[file], st->kept_len[file] + len + 2);
    if (!n)
        return;
    memcpy(n + st->kept_len[file], line, len);
    n[st->kept_len[file] + len] = '\n';
    st->kept_len[file] += len + 1;
    n[st->kept_len[file]] = '\0';
    st->kept[file] = n;
}

static struct entry *find(struct state *st, const char *knob)
{
    for (int i = 0; i < st->n; i++)
        if (!strcmp(st->e[i].knob, knob))
            return &st->e[i];
    return NULL;
}

/* Read hpctl's two files under root. 0, or -errno of a file that exists
 * and cannot be read. */
static int load(struct state *st, const char *root)
{
    memset(st, 0, sizeof(*st));
    st->root = root;
    for (int file = 0; file < PF_N; file++) {
        char path[512], *line = NULL;
        size_t cap = 0;
        file_path(root, file, path, sizeof(path));
        FILE *f = fopen(path, "re");
        if (!f) {
            if (errno == ENOENT)
                continue;
            st->bad_file = file;
            return -errno;
        }
        while (getline(&line, &cap, f) > 0) {
            line[strcspn(line, "\n")] = '\0';
            if (is_header(file, line))
                continue;  /* the header is written again */
            char copy[1024], *a, *b, knob[256];
            snprintf(copy, sizeof(copy), "%s", line);
            int ok = file == PF_SYSCTL
                         ? parse_sysctl(copy, &a, &b) == 0 && key_knob(a, knob, sizeof(knob)) == 0
                         : parse_tmpfiles(copy, &a, &b) == 0 && is_hp_knob(a) &&
                               snprintf(knob, sizeof(knob), "%s", a) > 0;
            if (!ok || st->n == MAX_ENTRIES || strlen(b) >= sizeof(st->e[0].value) ||
                find(st, knob)) {
                keep(st, file, line);
                continue;
            }
            struct entry *e = &st->e[st->n++];
            e->file = file;
            snprintf(e->knob, sizeof(e->knob), "%s", knob);
            snprintf(e->key, sizeof(e->key), "%s", file == PF_SYSCTL ? knob_key(knob) : "");
            snprintf(e->value, sizeof(e->value), "%s", b);
        }
        int err = ferror(f) ? -(errno ? errno : EIO) : 0;
        free(line);
        fclose(f);
        if (err) {
            st->bad_file = file;
            return err;
        }
    }
    return 0;
}

static void release(struct state *st)
{
    for (int file = 0; file < PF_N; file++)
        free(st->kept[file]);
}

/* ---------------------------------------------------------- writing */

static void entry_line(const struct entry *e, char *buf, size_t cap)
{
    if (e->file == PF_SYSCTL)
        snprintf(buf, cap, "%s = %s", e->key, e->value);
    else
        snprintf(buf, cap, "w %s - - - - %s", e->knob, e->value);
}

/* mkdir -p of dir below root (root itself must exist). */
static int make_dirs(const char *root, const char *dir)
{
    char path[512];
    if (under_root(root, dir, path, sizeof(path)) != 0)
        return -ENAMETOOLONG;
    for (char *c = path + strlen(root) + 1; ; c++) {
        if (*c != '/' && *c)
            continue;
        char was = *c;
        *c = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return -errno;
        *c = was;
        if (!was)
            return 0;
    }
}

/* Write one file whole (temporary file, fsync, rename), or remove it when
 * nothing is left in it. 0 or -errno. */
static int save(const struct state *st, int file)
{
    char path[512], tmp[560], line[400];
    int used = 0;
    file_path(st->root, file, path, sizeof(path));
    for (int i = 0; i < st->n; i++)
        used |= st->e[i].file == file;
    if (!used && !st->kept_len[file])
        return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
    int err = make_dirs(st->root, pf_dir[file]);
    if (err)
        return err;
    snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return -errno;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        err = -errno;
        close(fd);
        unlink(tmp);
        return err;
    }
    fputs(pf_header[file], f);
    if (st->kept[file])
        fputs(st->kept[file], f);
    for (int i = 0; i < st->n; i++)
        if (st->e[i].file == file) {
            entry_line(&st->e[i], line, sizeof(line));
            fprintf(f, "%s\n", line);
        }
    err = fflush(f) != 0 || fchmod(fd, 0644) != 0 || fsync(fd) != 0 ? -errno : 0;
    if (fclose(f) != 0 && !err)
        err = -errno;
    if (!err && rename(tmp, path) != 0)
        err = -errno;
    if (err)
        unlink(tmp);
    return err;
}

static int file_error(const char *root, int file, int err)
{
    char path[512];
    file_path(root, file, path, sizeof(path));
    if (err == -EACCES || err == -EPERM || err == -EROFS) {
        fprintf(stderr, "hpctl: cannot write %s: %s; --persist needs root and a writable /etc\n",
                path, strerror(-err));
        return HPCTL_EPERM;
    }
    fprintf(stderr, "hpctl: cannot write %s: %s\n", path, strerror(-err));
    return HPCTL_FAIL;
}

/* One of hpctl's files exists and cannot be read (load): nothing is
 * written over what could not be read. */
static int read_error(const struct state *st, int err)
{
    char path[512];
    file_path(st->root, st->bad_file, path, sizeof(path));
    fprintf(stderr, "hpctl: cannot read %s: %s\n", path, strerror(-err));
    return err == -EACCES || err == -EPERM ? HPCTL_EPERM : HPCTL_FAIL;
}

/* ------------------------------------------------------- overrides */

/* Another configuration file that wins over hpctl's line for this key or
 * path: sysctl.d, a later name that sets the key; tmpfiles.d, an earlier
 * name that writes the path. Directories as the tools read them; a name
 * in /etc hides the same name in /run and /usr/lib. */
static void overridden_by(const char *root, const struct entry *e, char *out, size_t cap)
{
    static const char *const dirs[PF_N][3] = {
        {"/etc/sysctl.d", "/run/sysctl.d", "/usr/lib/sysctl.d"},
        {"/etc/tmpfiles.d", "/run/tmpfiles.d", "/usr/lib/tmpfiles.d"},
    };
    char best_name[256] = "";
    out[0] = '\0';
    for (int d = 0; d < 3; d++) {
        char dir[512];
        if (under_root(root, dirs[e->file][d], dir, sizeof(dir)) != 0)
            continue;
        DIR *dh = opendir(dir);
        if (!dh)
            continue;
        struct dirent *de;
        while ((de = readdir(dh))) {
            size_t len = strlen(de->d_name);
            if (len < 6 || strcmp(de->d_name + len - 5, ".conf") || !strcmp(de->d_name, FILE_NAME))
                continue;
            int after = strcmp(de->d_name, FILE_NAME) > 0;
            if (e->file == PF_SYSCTL ? !after : after)
                continue;
            int hidden = 0;  /* the same name in an earlier directory */
            for (int h = 0; h < d && !hidden; h++) {
                char other[800];
                snprintf(other, sizeof(other), "%s%s/%s", root, dirs[e->file][h], de->d_name);
                hidden = access(other, F_OK) == 0;
            }
            char path[800], *line = NULL;
            size_t lcap = 0;
            snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
            FILE *f = hidden ? NULL : fopen(path, "re");
            int hit = 0;
            while (f && getline(&line, &lcap, f) > 0) {
                char *a, *b, knob[256];
                line[strcspn(line, "\n")] = '\0';
                if (e->file == PF_SYSCTL)
                    hit |= parse_sysctl(line, &a, &b) == 0 &&
                           key_knob(a, knob, sizeof(knob)) == 0 && !strcmp(knob, e->knob);
                else
                    hit |= parse_tmpfiles(line, &a, &b) == 0 && !strcmp(a, e->knob);
            }
            free(line);
            if (f)
                fclose(f);
            if (!hit)
                continue;
            /* sysctl.d: the last name wins; tmpfiles.d: the first. */
            int better = !best_name[0] || (e->file == PF_SYSCTL
                                               ? strcmp(de->d_name, best_name) > 0
                                               : strcmp(de->d_name, best_name) < 0);
            if (better) {
                snprintf(best_name, sizeof(best_name), "%s", de->d_name);
                snprintf(out, cap, "%s%s/%s", root, dirs[e->file][d], de->d_name);
            }
        }
        closedir(dh);
    }
}

/* ----------------------------------------------------------- advice */

/* The kernel command line parameter that does this at boot, or "". */
static void boot_param(const char *knob, const char *value, char *buf, size_t cap)
{
    unsigned long kb;
    int node;
    char file[64], hs[32];
    buf[0] = '\0';
    if (!strcmp(value, "0") && strstr(knob, "/nr_hugepages"))
        return;  /* an empty pool needs no parameter */
    if (sscanf(knob, POOL_DIR "/hugepages-%lukB/%63s", &kb, file) == 2 && kb >= (1ul << 20) &&
        !strcmp(file, "nr_hugepages")) {
        human_size((uint64_t)kb << 10, hs, sizeof(hs));
        snprintf(buf, cap, "hugepagesz=%s hugepages=%s", hs, value);
    } else if (sscanf(knob, NODE_DIR "/node%d/hugepages/hugepages-%lukB/%63s", &node, &kb,
                      file) == 3 && kb >= (1ul << 20) && !strcmp(file, "nr_hugepages")) {
        human_size((uint64_t)kb << 10, hs, sizeof(hs));
        snprintf(buf, cap, "hugepagesz=%s hugepages=%d:%s", hs, node, value);
    } else if (!strcmp(knob, THP_DIR "/enabled")) {
        snprintf(buf, cap, "transparent_hugepage=%s", value);
    } else if (sscanf(knob, THP_DIR "/hugepages-%lukB/%63s", &kb, file) == 2) {
        human_size((uint64_t)kb << 10, hs, sizeof(hs));
        if (!strcmp(file, "enabled"))
            snprintf(buf, cap, "thp_anon=%s:%s", hs, value);
        else if (!strcmp(file, "shmem_enabled"))
            snprintf(buf, cap, "thp_shmem=%s:%s", hs, value);
    }
}

static void print_advice(const char *param)
{
    if (!param[0])
        return;
    if (strstr(param, "hugepagesz="))
        printf("  gigantic pages are reliably found only at boot, before memory fragments: "
               "add \"%s\" to the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, "
               "then update-grub); the line above tries again at every boot\n", param);
    else
        printf("  the line above applies early in boot; for this value from the kernel's own "
               "start on, add \"%s\" to the kernel command line (GRUB_CMDLINE_LINUX in "
               "/etc/default/grub, then update-grub)%s\n", param,
               strncmp(param, "thp_", 4) ? "" : " if this kernel's Documentation/admin-guide/"
               "kernel-parameters.txt lists it");
}

static void json_entry(const char *root, const struct entry *e, int first, int with_now)
{
    char path[512], line[400], param[128], over[800];
    file_path(root, e->file, path, sizeof(path));
    entry_line(e, line, sizeof(line));
    boot_param(e->knob, e->value, param, sizeof(param));
    printf("%s{\"knob\": ", first ? "" : ", ");
    json_string(e->knob);
    printf(", \"value\": ");
    json_string(e->value);
    printf(", \"file\": ");
    json_string(path);
    printf(", \"line\": ");
    json_string(line);
    printf(", \"boot_param\": ");
    param[0] ? json_string(param) : (void)printf("null");
    if (with_now) {
        char now[64];
        selected(e->knob, now, sizeof(now));
        overridden_by(root, e, over, sizeof(over));
        printf(", \"now\": ");
        path_exists(e->knob) ? json_string(now) : (void)printf("null");
        printf(", \"overridden_by\": ");
        over[0] ? json_string(over) : (void)printf("null");
    }
    printf("}");
}

/* ---------------------------------------------------------- the API */

int persist_root(const char *arg, const char **root)
{
    struct stat sb;
    if (arg[0] != '/' || stat(arg, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "hpctl: --root \"%s\": not an absolute path to a directory\n", arg);
        return HPCTL_USAGE;
    }
    *root = strcmp(arg, "/") ? arg : "";
    return HPCTL_OK;
}

int persist_apply(const char *root, const struct persist_item *items, int n, int dry_run,
                  int json)
{
    struct state st;
    int rc = HPCTL_OK, err = load(&st, root), touched[PF_N] = {0};
    char path[512], line[400], param[128], over[800];
    if (err) {
        rc = read_error(&st, err);
        n = 0;
    }
    int first = 1;
    if (json)
        printf(", \"persisted\": [");
    for (int i = 0; i < n; i++) {
        struct entry *e = find(&st, items[i].knob);
        if (!e && st.n == MAX_ENTRIES) {
            fprintf(stderr, "hpctl: %s is not made persistent: hpctl's files hold %d lines "
                            "already\n", items[i].knob, MAX_ENTRIES);
            rc = HPCTL_FAIL;
            break;
        }
        if (!e) {
            e = &st.e[st.n++];
            snprintf(e->knob, sizeof(e->knob), "%s", items[i].knob);
        }
        const char *key = knob_key(items[i].knob);
        e->file = key ? PF_SYSCTL : PF_TMPFILES;
        snprintf(e->key, sizeof(e->key), "%s", key ? key : "");
        snprintf(e->value, sizeof(e->value), "%s", items[i].value);
        touched[e->file] = 1;
        if (json) {
            json_entry(root, e, first, 0);
            first = 0;
            continue;
        }
        file_path(root, e->file, path, sizeof(path));
        entry_line(e, line, sizeof(line));
        boot_param(e->knob, e->value, param, sizeof(param));
        printf("%s%s: %s (at boot, by %s)\n", dry_run ? "would write to " : "", path, line,
               pf_tool[e->file]);
        overridden_by(root, e, over, sizeof(over));
        if (over[0])
            printf("  warning: %s also sets this and wins over hpctl's line at boot\n", over);
        print_advice(param);
    }
    if (json)
        printf("]");
    for (int file = 0; file < PF_N && !dry_run && rc == HPCTL_OK; file++) {
        if (!touched[file])
            continue;
        err = save(&st, file);
        if (err)
            rc = file_error(root, file, err);
    }
    release(&st);
    return rc;
}

static int persist_usage(void)
{
    fprintf(stderr, "usage: hpctl persist [--root DIR] [--json]\n"
                    "       hpctl persist remove KNOB...|all [--root DIR] [--dry-run] [--json]\n");
    return HPCTL_USAGE;
}

int persist_list(const char *root, int json)
{
    struct state st;
    char path[512], over[800], now[64];
    int err = load(&st, root), rc = err ? read_error(&st, err) : HPCTL_OK;
    if (json) {
        printf("[");
        for (int i = 0; i < st.n; i++)
            json_entry(root, &st.e[i], i == 0, 1);
        printf("]");
        release(&st);
        return rc;
    }
    if (!st.n)
        printf("no huge page setting is made persistent by hpctl (%s%s/%s, %s%s/%s)\n", root,
               pf_dir[0], FILE_NAME, root, pf_dir[1], FILE_NAME);
    for (int i = 0; i < st.n; i++) {
        const struct entry *e = &st.e[i];
        file_path(root, e->file, path, sizeof(path));
        selected(e->knob, now, sizeof(now));
        overridden_by(root, e, over, sizeof(over));
        printf("  %s = %s at boot (now %s; %s%s%s)%s%s\n", e->knob, e->value,
               path_exists(e->knob) ? now : "missing", path, e->key[0] ? ": " : "", e->key,
               over[0] ? "; overridden at boot by " : "", over);
    }
    release(&st);
    return rc;
}

static int persist_remove(int argc, char **argv, const char *root, int dry_run, int json)
{
    struct state st;
    int err = load(&st, root), rc = HPCTL_OK, touched[PF_N] = {0}, first = 1;
    if (err) {
        rc = read_error(&st, err);
        if (json)
            printf("{\"schema\": %d, \"command\": \"persist remove\", \"dry_run\": %s, "
                   "\"removed\": [], \"status\": %d}\n", HPCTL_SCHEMA,
                   dry_run ? "true" : "false", rc);
        release(&st);
        return rc;
    }
    /* Every name must match before anything is removed. */
    for (int a = 0; a < argc; a++) {
        char knob[256];
        if (!strcmp(argv[a], "all"))
            continue;
        if (key_knob(argv[a], knob, sizeof(knob)) != 0)
            snprintf(knob, sizeof(knob), "%s", argv[a]);
        if (!find(&st, knob)) {
            fprintf(stderr, "hpctl: \"%s\" is not made persistent by hpctl; \"hpctl persist\" "
                            "lists what is\n", argv[a]);
            rc = HPCTL_ENOENT;
        }
    }
    if (json)
        printf("{\"schema\": %d, \"command\": \"persist remove\", \"dry_run\": %s, "
               "\"removed\": [", HPCTL_SCHEMA, dry_run ? "true" : "false");
    for (int i = 0; rc == HPCTL_OK && i < st.n; i++) {
        int hit = 0;
        for (int a = 0; a < argc && !hit; a++) {
            char knob[256];
            if (key_knob(argv[a], knob, sizeof(knob)) != 0)
                snprintf(knob, sizeof(knob), "%s", argv[a]);
            hit = !strcmp(argv[a], "all") || !strcmp(knob, st.e[i].knob);
        }
        if (!hit)
            continue;
        if (json) {
            json_entry(root, &st.e[i], first, 0);
        } else {
            char path[512], line[400];
            file_path(root, st.e[i].file, path, sizeof(path));
            entry_line(&st.e[i], line, sizeof(line));
            printf("%s%s: %s\n", dry_run ? "would remove from " : "removed from ", path, line);
        }
        first = 0;
        touched[st.e[i].file] = 1;
        memmove(&st.e[i], &st.e[i + 1], (size_t)(st.n - i - 1) * sizeof(st.e[0]));
        st.n--, i--;
    }
    for (int file = 0; file < PF_N && !dry_run && rc == HPCTL_OK; file++)
        if (touched[file] && (err = save(&st, file)) != 0)
            rc = file_error(root, file, err);
    if (!json && rc == HPCTL_OK && first)
        printf("nothing to remove: no huge page setting is made persistent by hpctl\n");
    if (!json && rc == HPCTL_OK && !first && !dry_run)
        printf("the running kernel keeps its values until they are set again or the machine "
               "reboots\n");
    if (json)
        printf("], \"status\": %d}\n", rc);
    release(&st);
    return rc;
}

int hpctl_persist(int argc, char **argv)
{
    const char *root = "";
    int json = 0, dry_run = 0, remove = 0, nargs = 0;
    char **args = calloc((size_t)argc + 1, sizeof(*args));
    if (!args)
        return HPCTL_FAIL;
    int rc = HPCTL_OK;
    for (int i = 0; i < argc && rc == HPCTL_OK; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--dry-run"))
            dry_run = 1;
        else if (!strcmp(argv[i], "--root") && i + 1 < argc)
            rc = persist_root(argv[++i], &root);
        else if (i == 0 && !strcmp(argv[i], "remove"))
            remove = 1;
        else if (argv[i][0] == '-' || !remove) {
            fprintf(stderr, "hpctl: persist: unexpected \"%s\"\n", argv[i]);
            rc = persist_usage();
        } else
            args[nargs++] = argv[i];
    }
    if (rc == HPCTL_OK && (remove ? nargs == 0 : dry_run)) {
        if (remove)
            fprintf(stderr, "hpctl: persist remove: name a KNOB (as \"hpctl persist\" lists it) "
                            "or all\n");
        else
            fprintf(stderr, "hpctl: persist: --dry-run is for remove\n");
        rc = persist_usage();
    }
    if (rc == HPCTL_OK && remove) {
        rc = persist_remove(nargs, args, root, dry_run, json);
    } else if (rc == HPCTL_OK) {
        if (json) {
            printf("{\"schema\": %d, \"command\": \"persist\", \"root\": ", HPCTL_SCHEMA);
            json_string(root[0] ? root : "/");
            printf(", \"entries\": ");
        }
        rc = persist_list(root, json);
        if (json)
            printf(", \"status\": %d}\n", rc);
    }
    free(args);
    return rc;
}
