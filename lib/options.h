/*
 * Every HP_* environment variable, declared once in options.c with its
 * parser, default and help. Parsed once, on first use, with secure_getenv.
 */
#ifndef HP_LIB_OPTIONS_H
#define HP_LIB_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#define HP_OPT_MAX_NAMES 16
#define HP_OPT_NAME_LEN 32

struct hp_options {
    int debug;                          /* HP_DEBUG */
    /* HP_BACKEND_PATH: n_backend_path absolute directories separated by
     * ':', searched first; NULL (0) if unset. */
    const char *backend_path;
    unsigned n_backend_path;
    /* HP_BACKEND_DIR or the compiled-in directory of the built-ins, searched
     * last; the only directory that may provide a built-in's name. */
    const char *backend_dir;
    const char *sysfs_root;             /* HP_SYSFS_ROOT (test root), NULL if unset */
    /* HP_BACKENDS: names to use, in order (n_only == 0: policy order), and
     * names never to use. */
    unsigned n_only, n_never;
    char only[HP_OPT_MAX_NAMES][HP_OPT_NAME_LEN];
    char never[HP_OPT_MAX_NAMES][HP_OPT_NAME_LEN];
    /* The cache of freed huge-page ranges (lib/cache.h). */
    uint64_t cache_max;                 /* HP_CACHE_MAX: bytes kept, 0 = no cache */
    uint64_t cache_idle_ms;             /* HP_CACHE_IDLE_MS: 0 = no idle release */
    uint64_t cache_pool_idle_ms;        /* HP_CACHE_POOL_IDLE_MS: the same for hugetlb pages */
    int32_t error;                      /* HP_OK or HP_EENV */
    char error_detail[320];
};

const struct hp_options *hp_options(void);

/* Parse every variable into *o from get (secure_getenv for the process;
 * the fuzzers pass their own). o keeps pointers into get's strings. */
void hp_options_parse_into(struct hp_options *o, char *(*get)(const char *name));

/* Write every variable, its value and its help text (hpctl env). */
void hp_options_dump(FILE *out);

/* Parse a comma-separated backend list into names[]; returns the count or
 * -1 with detail filled. Shared with hp_alloc_opts.exclude. */
int hp_parse_name_list(const char *spec, char names[][HP_OPT_NAME_LEN], unsigned max,
                       char *detail, size_t detail_cap);

/* 1 if name is a well-formed backend name: 1 to 31 characters of
 * [a-z0-9_-], not starting with '-' (HP_BACKENDS' "-name" means "never"). */
int hp_valid_backend_name(const char *name);

#endif
