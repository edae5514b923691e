/*
 * hpctl undo: every pool, thp and mthp set or release records the value
 * each knob had before it wrote it; undo writes the values of the last
 * such command back (--all: of every recorded command, newest first, so
 * each knob ends at the value it had before the first). The record lives
 * in /run/hpctl/undo (below HP_SYSFS_ROOT, with the knobs it names): /run
 * is emptied at boot, as the knobs are reset, so a record never outlives
 * the values it describes. One line per knob: "GROUP\tKNOB\tVALUE", GROUP
 * shared by the knobs of one command.
 */
#include "hpctl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UNDO_DIR "/run/hpctl"
#define UNDO_FILE UNDO_DIR "/undo"

struct record {
    char group[40];
    char knob[256];
    char value[64];
};

static char group_id[40];

/* The record's path: below HP_SYSFS_ROOT when it is set. */
static const char *undo_path(const char *path, char *buf, size_t cap)
{
    const char *root = secure_getenv("HP_SYSFS_ROOT");
    if (!root || !root[0])
        return path;
    int n = snprintf(buf, cap, "%s%s", root, path);
    return n > 0 && (size_t)n < cap ? buf : path;
}

void undo_record(const char *knob, const char *before)
{
    char dir[512], file[512], line[400];
    if (!group_id[0])
        snprintf(group_id, sizeof(group_id), "%llu.%d", (unsigned long long)now_ns(),
                 (int)getpid());
    if (mkdir(undo_path("/run", dir, sizeof(dir)), 0755) != 0 && errno != EEXIST)
        return;
    if (mkdir(undo_path(UNDO_DIR, dir, sizeof(dir)), 0700) != 0 && errno != EEXIST)
        return;
    int fd = open(undo_path(UNDO_FILE, file, sizeof(file)),
                  O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return;  /* the change itself stands; only its undo is lost */
    int n = snprintf(line, sizeof(line), "%s\t%s\t%s\n", group_id, knob, before);
    if (n > 0 && (size_t)n < sizeof(line)) {
        ssize_t w = write(fd, line, (size_t)n);
        (void)w;
    }
    close(fd);
}

/* Every record, oldest first, in *r (malloc'd; the caller frees it).
 * -errno if the file exists and cannot be read or the records do not fit
 * in memory. */
static int load(struct record **r, int *n)
{
    char file[512], line[512];
    int cap = 0;
    *r = NULL;
    *n = 0;
    FILE *f = fopen(undo_path(UNDO_FILE, file, sizeof(file)), "re");
    if (!f)
        return errno == ENOENT ? 0 : -errno;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t2 || (size_t)(t1 - line) >= sizeof((*r)->group) ||
            (size_t)(t2 - t1 - 1) >= sizeof((*r)->knob) || strlen(t2 + 1) >= sizeof((*r)->value))
            continue;
        if (*n == cap) {
            struct record *grown = cap < INT_MAX / 2 ?
                realloc(*r, (size_t)(cap ? cap * 2 : 64) * sizeof(**r)) : NULL;
            if (!grown) {
                fclose(f);
                free(*r);
                *r = NULL;
                *n = 0;
                return -ENOMEM;
            }
            *r = grown;
            cap = cap ? cap * 2 : 64;
        }
        struct record *x = &(*r)[(*n)++];
        snprintf(x->group, sizeof(x->group), "%.*s", (int)(t1 - line), line);
        snprintf(x->knob, sizeof(x->knob), "%.*s", (int)(t2 - t1 - 1), t1 + 1);
        snprintf(x->value, sizeof(x->value), "%s", t2 + 1);
    }
    int err = ferror(f) ? -(errno ? errno : EIO) : 0;
    fclose(f);
    return err;
}

/* Keep the first n records: rewrite the file, or remove it when none is left. */
static int keep_first(const struct record *r, int n)
{
    char file[512], tmp[540];
    const char *path = undo_path(UNDO_FILE, file, sizeof(file));
    if (n == 0)
        return unlink(path) == 0 || errno == ENOENT ? 0 : -errno;
    snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        int err = -errno;
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return err;
    }
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\t%s\t%s\n", r[i].group, r[i].knob, r[i].value);
    int err = fclose(f) != 0 ? -errno : 0;
    if (!err && rename(tmp, path) != 0)
        err = -errno;
    if (err)
        unlink(tmp);
    return err;
}

/* A choice knob reads "always [madvise] never"; a count reads "64". */
static void current(const char *knob, char *buf, size_t cap)
{
    char raw[256];
    read_line(knob, raw, sizeof(raw));
    if (strchr(raw, '['))
        selected(knob, buf, cap);
    else
        snprintf(buf, cap, "%.*s", (int)(cap - 1), raw[0] ? raw : "unavailable");
}

static int undo_one(const struct record *r, int dry_run, int json, int first)
{
    char before[64], after[64] = "", full[512];
    int rc = HPCTL_OK;
    current(r->knob, before, sizeof(before));
    if (!path_exists(r->knob)) {
        fprintf(stderr, "hpctl undo: %s does not exist on this machine\n", r->knob);
        rc = HPCTL_ENOENT;
    } else if (dry_run) {
        if (access(hpctl_path(r->knob, full, sizeof(full)), W_OK) != 0)
            rc = knob_error(r->knob, r->value, -errno);
    } else {
        int err = write_knob(r->knob, r->value);
        if (err)
            rc = knob_error(r->knob, r->value, err);
        current(r->knob, after, sizeof(after));
        uint64_t want, got;
        if (rc == HPCTL_OK && strcmp(after, r->value))
            rc = parse_u64(r->value, &want) == 0 && parse_u64(after, &got) == 0 && got < want
                     ? HPCTL_PARTIAL : HPCTL_FAIL;
    }
    if (json) {
        printf("%s{\"path\": ", first ? "" : ", ");
        json_string(r->knob);
        printf(", \"before\": ");
        json_string(before);
        printf(", \"asked\": ");
        json_string(r->value);
        printf(", \"after\": ");
        dry_run ? (void)printf("null") : json_string(after);
        printf(", \"status\": %d}", rc);
    } else if (dry_run) {
        printf("%s: would write %s back (now %s)%s\n", r->knob, r->value, before,
               rc == HPCTL_OK ? "" : "; the write would fail");
    } else if (rc == HPCTL_OK || rc == HPCTL_PARTIAL) {
        printf("%s: %s -> %s%s\n", r->knob, before, after,
               rc == HPCTL_PARTIAL ? " (fewer than recorded: the kernel granted no more)" : "");
    } else if (rc == HPCTL_FAIL) {
        fprintf(stderr, "hpctl undo: wrote \"%s\" to %s but it reads back \"%s\"\n", r->value,
                r->knob, after);
    }
    return rc;
}

static int undo_usage(void)
{
    fprintf(stderr, "usage: hpctl undo [--all] [--dry-run] [--json]\n");
    return HPCTL_USAGE;
}

int hpctl_undo(int argc, char **argv)
{
    int all = 0, dry_run = 0, json = 0, n;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--all"))
            all = 1;
        else if (!strcmp(argv[i], "--dry-run"))
            dry_run = 1;
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else
            return hpctl_unexpected("undo", argv, i, argc, NULL), undo_usage();
    }
    struct record *r;
    int err = load(&r, &n);
    if (err) {
        char file[512];
        fprintf(stderr, "hpctl undo: cannot read %s: %s\n", undo_path(UNDO_FILE, file,
                sizeof(file)), strerror(-err));
        return err == -EACCES || err == -EPERM ? HPCTL_EPERM : HPCTL_FAIL;
    }
    /* The last command's records, or all; undone newest first. */
    int from = n;
    while (from > 0 && (all || !strcmp(r[from - 1].group, r[n - 1].group)))
        from--;
    if (json)
        printf("{\"schema\": %d, \"command\": \"undo\", \"dry_run\": %s, \"all\": %s, "
               "\"changes\": [", HPCTL_SCHEMA, dry_run ? "true" : "false", all ? "true" : "false");
    else if (from == n)
        printf("nothing to undo: no set or release of pool, thp or mthp is recorded since boot\n");
    int rc = HPCTL_OK, done = n;
    for (int i = n - 1; i >= from; i--) {
        int one = undo_one(&r[i], dry_run, json, i == n - 1);
        if (one == HPCTL_OK || one == HPCTL_PARTIAL) {
            done = i;
            if (rc == HPCTL_OK)
                rc = one;
            continue;
        }
        rc = one;  /* stop: what is older must not be written over this */
        break;
    }
    if (!dry_run && done < n) {
        /* Undone records go; a command undone in part keeps the rest. */
        err = keep_first(r, done);
        if (err) {
            fprintf(stderr, "hpctl undo: cannot update the record: %s\n", strerror(-err));
            if (rc == HPCTL_OK)
                rc = HPCTL_FAIL;
        }
    }
    if (json)
        printf("], \"status\": %d}\n", rc);
    free(r);
    return rc;
}
