/*
 * hpctl internals shared by its subcommands (one file per subcommand,
 * dispatched from the table in hpctl.c).
 *
 * Exit codes (docs/hpctl-json.md, hpctl(1)):
 */
#ifndef HPCTL_H
#define HPCTL_H

#include <stddef.h>
#include <stdint.h>

enum {
    HPCTL_OK = 0,         /* done */
    HPCTL_FAIL = 1,       /* the operation failed (kernel refused, allocation failed) */
    HPCTL_USAGE = 2,      /* bad command line */
    HPCTL_EPERM = 3,      /* permission denied: a knob (not root), another user's process */
    HPCTL_ENOENT = 4,     /* this machine has no such pool, size, knob or process */
    HPCTL_PARTIAL = 5,    /* the kernel granted fewer pool pages than asked */
};

/* Version of every --json document (docs/hpctl-json.md). */
#define HPCTL_SCHEMA 1

#define THP_DIR "/sys/kernel/mm/transparent_hugepage"
#define POOL_DIR "/sys/kernel/mm/hugepages"
#define NODE_DIR "/sys/devices/system/node"

/* Subcommands: argv[0] is the subcommand's first argument (after its name). */
int hpctl_pool(int argc, char **argv);
int hpctl_thp(int argc, char **argv);
int hpctl_mthp(int argc, char **argv);
int hpctl_explain(int argc, char **argv);
int hpctl_watch(int argc, char **argv);
int hpctl_why(int argc, char **argv);   /* hpctl_why.c: any process's huge pages, and why */
int hpctl_run(int argc, char **argv);   /* hpctl_run.c: CMD under libhp-malloc.so */
int hpctl_persist(int argc, char **argv);   /* hpctl_persist.c: settings kept across reboots */
int hpctl_undo(int argc, char **argv);      /* hpctl_undo.c: the values before the last set */

/* hpctl_undo.c: knob held before (as it read) when this command wrote it;
 * the knobs of one hpctl run form one group for hpctl undo. A record that
 * cannot be written is lost silently: the change itself stands. */
void undo_record(const char *knob, const char *before);

/* hpctl_persist.c. A knob (its /sys path) and the value to apply at boot. */
struct persist_item {
    const char *knob;
    const char *value;
};
/* --root DIR: an absolute directory, stored as "" for "/". HPCTL_OK, or
 * HPCTL_USAGE with a message. */
int persist_root(const char *arg, const char **root);
/* Record items in the boot-time files below root (sysctl.d for the default
 * pool, tmpfiles.d for the rest), print each line, override and boot
 * parameter advice; under json, print ', "persisted": [...]' instead.
 * dry_run prints only. Returns HPCTL_*. */
int persist_apply(const char *root, const struct persist_item *items, int n, int dry_run,
                  int json);
/* What hpctl made persistent below root: text lines, or under json a list.
 * HPCTL_OK, or HPCTL_EPERM / HPCTL_FAIL when one of its files exists and
 * cannot be read (the message on stderr; what could be read is listed). */
int persist_list(const char *root, int json);

/* /proc or /sys path as hpctl reads and writes it: below HP_SYSFS_ROOT when
 * that is set (fabricated trees in tests), else path itself. */
const char *hpctl_path(const char *path, char *buf, size_t cap);

/* Read a one-line file (test root applies); "" if unreadable. */
void read_line(const char *path, char *buf, size_t cap);
/* The bracketed choice of a "always [madvise] never" file, or the raw
 * line, or "unavailable". */
void selected(const char *path, char *buf, size_t cap);
/* Read an unsigned decimal file; 0 on success, -1 otherwise. */
int read_u64(const char *path, uint64_t *out);
/* 1 if path exists (test root applies). */
int path_exists(const char *path);
/* The NUMA nodes of NODE_DIR (its nodeN directories, N below 1024), sorted;
 * with sub, only the nodes that have NODE_DIR/nodeN/sub. At most max; 0
 * without NUMA. */
int hpctl_list_nodes(int nodes[], int max, const char *sub);

/* Write value to a knob (test root applies). Returns 0 or -errno. */
int write_knob(const char *path, const char *value);
/* Exit code and message for a failed knob write. */
int knob_error(const char *path, const char *value, int err);

void json_string(const char *s);
void human_size(uint64_t bytes, char *buf, size_t cap);
/* "64M", "2MiB", "1G", "4096" -> bytes. 0 or -1. */
int parse_size(const char *s, uint64_t *out);
/* Plain unsigned decimal; 0 or -1. */
int parse_u64(const char *s, uint64_t *out);

/* Sorted "hugepages-<n>kB" entries of dir (test root applies); returns the count. */
int size_dirs(const char *dir, unsigned long kb[], int max);
/* hpctl_pool.c: the pool of kb-KiB pages on each NUMA node that has one:
 * text " node0=TOTAL/FREE node1=..." or, under json, ', "nodes": [{"node":
 * N, "total": T, "free": F, "surplus": S}, ...]'. */
void pool_nodes_print(unsigned long kb, int json);

/* A bad command line: "hpctl CMD: MESSAGE" on stderr, naming the argument
 * and what was wrong with it. Returns HPCTL_USAGE. */
int hpctl_bad(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* parse_size, or hpctl_bad naming what ("SIZE", "--page-size") and arg. */
int hpctl_size_arg(const char *cmd, const char *what, const char *arg, uint64_t *out);
/* --page-size SIZE -> its HP_F_PAGE_* flag, or hpctl_bad. */
int hpctl_page_size_arg(const char *cmd, const char *arg, uint64_t *flag);
/* argv[i] was not understood: "X needs a value" (X is one of valued, the
 * options that take one, and is last), "unknown option", or "unexpected
 * argument". Returns HPCTL_USAGE. */
int hpctl_unexpected(const char *cmd, char **argv, int i, int argc, const char *const valued[]);

/* Nanoseconds of CLOCK_MONOTONIC. */
uint64_t now_ns(void);

#endif
