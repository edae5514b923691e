#include "options.h"
#include "hp/errors.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#ifndef HP_BACKEND_DIR
#error "HP_BACKEND_DIR must be defined by the build"
#endif

static struct hp_options opts;
static pthread_once_t opts_once = PTHREAD_ONCE_INIT;

typedef int (*parse_fn)(const char *name, const char *value, struct hp_options *o);

struct option_def {
    const char *name;
    parse_fn parse;
    const char *accepted;
    const char *help;
};

static int bad_value(struct hp_options *o, const char *name, const char *value,
                     const char *accepted)
{
    o->error = HP_EENV;
    snprintf(o->error_detail, sizeof(o->error_detail), "%s=\"%.80s\" is invalid; accepted: %s",
             name, value, accepted);
    return -1;
}

static int parse_debug(const char *name, const char *v, struct hp_options *o)
{
    static const char *yes[] = {"1", "yes", "true", "on"};
    static const char *no[] = {"0", "no", "false", "off", ""};
    for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++)
        if (!strcasecmp(v, yes[i]))
            return o->debug = 1, 0;
    for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
        if (!strcasecmp(v, no[i]))
            return o->debug = 0, 0;
    return bad_value(o, name, v, "0, 1, yes, no, true, false, on, off");
}

static int parse_abs_dir(const char *name, const char *v, const char **slot, size_t max,
                         struct hp_options *o)
{
    char accepted[64];
    snprintf(accepted, sizeof(accepted), "an absolute directory path up to %zu bytes", max);
    if (v[0] != '/' || strlen(v) > max || strstr(v, "/../") || strchr(v, '\n'))
        return bad_value(o, name, v, accepted);
    *slot = v;
    return 0;
}

/* The loader builds file names on the heap and opens each directory one
 * component at a time, so any path the kernel accepts will do. */
static int parse_backend_dir(const char *name, const char *v, struct hp_options *o)
{
    return parse_abs_dir(name, v, &o->backend_dir, PATH_MAX - 1, o);
}

/* 1 if the path p[0..len) has a ".." component. */
static int has_dotdot(const char *p, size_t len)
{
    for (size_t i = 0; i < len;) {
        size_t c = 0;
        while (i + c < len && p[i + c] != '/')
            c++;
        if (c == 2 && p[i] == '.' && p[i + 1] == '.')
            return 1;
        i += c + 1;
    }
    return 0;
}

/* A colon-separated list of absolute directories. An empty or relative
 * entry is an error, not ignored: a program that silently lost its plugin
 * directory would fall back to other backends without saying why. */
static int parse_backend_path(const char *name, const char *v, struct hp_options *o)
{
    static const char accepted[] = "colon-separated absolute directory paths, each up to 4095 "
                                   "bytes, no empty entry";
    unsigned n = 0;
    for (const char *p = v;; n++) {
        size_t len = strcspn(p, ":");
        const char *why = NULL;
        if (len == 0)
            why = "is empty";
        else if (p[0] != '/')
            why = "is not an absolute path";
        else if (len > PATH_MAX - 1)
            why = "is longer than 4095 bytes";
        else if (memchr(p, '\n', len))
            why = "holds a newline";
        else if (has_dotdot(p, len))
            why = "has a \"..\" component";
        if (why) {
            o->error = HP_EENV;
            snprintf(o->error_detail, sizeof(o->error_detail),
                     "%s=\"%.80s\" is invalid: entry %u (\"%.*s\") %s; accepted: %s", name, v,
                     n + 1, (int)(len < 60 ? len : 60), p, why, accepted);
            return -1;
        }
        if (!p[len])
            break;
        p += len + 1;
    }
    o->backend_path = v;
    o->n_backend_path = n + 1;
    return 0;
}

static int parse_sysfs_root(const char *name, const char *v, struct hp_options *o)
{
    return parse_abs_dir(name, v, &o->sysfs_root, 200, o);
}

int hp_valid_backend_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n >= HP_OPT_NAME_LEN || name[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return 0;
    }
    return 1;
}

int hp_parse_name_list(const char *spec, char names[][HP_OPT_NAME_LEN], unsigned max,
                       char *detail, size_t detail_cap)
{
    unsigned n = 0;
    const char *p = spec;
    while (*p) {
        size_t len = strcspn(p, ",");
        char name[HP_OPT_NAME_LEN + 1];
        if (len == 0 || len >= HP_OPT_NAME_LEN) {
            snprintf(detail, detail_cap, "empty or over-long name in list \"%.80s\"", spec);
            return -1;
        }
        memcpy(name, p, len);
        name[len] = '\0';
        if (!hp_valid_backend_name(name)) {
            snprintf(detail, detail_cap, "\"%s\" is not a backend name ([a-z0-9_-])", name);
            return -1;
        }
        if (n == max) {
            snprintf(detail, detail_cap, "more than %u names in list", max);
            return -1;
        }
        memcpy(names[n++], name, len + 1);
        p += len;
        if (*p == ',' && *++p == '\0') {
            snprintf(detail, detail_cap, "trailing comma in list \"%.80s\"", spec);
            return -1;
        }
    }
    return (int)n;
}

/* "a,b" uses only a then b; "-c" never uses c; they may be mixed. */
static int parse_backends(const char *name, const char *v, struct hp_options *o)
{
    char names[HP_OPT_MAX_NAMES][HP_OPT_NAME_LEN];
    char spec[HP_OPT_MAX_NAMES * HP_OPT_NAME_LEN];
    const char *accepted = "comma-separated backend names, a leading '-' excludes one";
    size_t out = 0;
    /* Split off the '-' markers so the shared list parser sees plain names. */
    unsigned char excluded[HP_OPT_MAX_NAMES] = {0};
    unsigned k = 0;
    if (strlen(v) >= sizeof(spec))
        return bad_value(o, name, v, accepted);
    for (const char *p = v; *p; p++) {
        if (*p == '-' && (p == v || p[-1] == ',')) {
            if (k < HP_OPT_MAX_NAMES)
                excluded[k] = 1;
            continue;
        }
        if (*p == ',')
            k++;
        spec[out++] = *p;
    }
    spec[out] = '\0';
    char why[160];
    int n = hp_parse_name_list(spec, names, HP_OPT_MAX_NAMES, why, sizeof(why));
    if (n <= 0)
        return bad_value(o, name, v, accepted);
    for (int i = 0; i < n; i++) {
        if (excluded[i])
            memcpy(o->never[o->n_never++], names[i], HP_OPT_NAME_LEN);
        else
            memcpy(o->only[o->n_only++], names[i], HP_OPT_NAME_LEN);
    }
    return 0;
}

/* "0", "512M", "1G", "1073741824": bytes, with an optional binary suffix. */
static int parse_bytes(const char *v, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    if (v[0] < '0' || v[0] > '9')
        return -1;
    unsigned long long n = strtoull(v, &end, 10);
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    if (errno || *end || n > (max >> shift))
        return -1;
    *out = (uint64_t)n << shift;
    return 0;
}

static int parse_cache_max(const char *name, const char *v, struct hp_options *o)
{
    if (parse_bytes(v, UINT64_C(1) << 46, &o->cache_max) != 0)
        return bad_value(o, name, v, "bytes up to 64T with an optional K, M, G or T suffix; 0 "
                         "disables the cache");
    return 0;
}

/* Milliseconds from 0 to a day. */
static int parse_ms(const char *name, const char *v, uint64_t *out, struct hp_options *o)
{
    char *end;
    errno = 0;
    unsigned long long ms = strtoull(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || errno || *end || ms > 86400000ull)
        return bad_value(o, name, v, "milliseconds from 0 (never idle-release) to 86400000");
    *out = ms;
    return 0;
}

static int parse_cache_idle(const char *name, const char *v, struct hp_options *o)
{
    return parse_ms(name, v, &o->cache_idle_ms, o);
}

static int parse_cache_pool_idle(const char *name, const char *v, struct hp_options *o)
{
    return parse_ms(name, v, &o->cache_pool_idle_ms, o);
}

/* The cache keeps at most 1 GiB, and at most an eighth of the RAM. */
static uint64_t default_cache_max(void)
{
    uint64_t max = UINT64_C(1) << 30;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && (uint64_t)pages * (uint64_t)page / 8 < max)
        max = (uint64_t)pages * (uint64_t)page / 8;
    return max;
}

static const struct option_def defs[] = {
    {"HP_DEBUG", parse_debug, "0/1", "log loader decisions and errors to stderr"},
    {"HP_BACKEND_PATH", parse_backend_path, "dir:dir:...",
     "directories of backend plugins, searched in order before HP_BACKEND_DIR (ignored in "
     "setuid programs)"},
    {"HP_BACKENDS", parse_backends, "list",
     "backends to use, in order (names as hpctl status lists them, comma-separated); "
     "\"-name\" excludes one"},
    {"HP_SYSFS_ROOT", parse_sysfs_root, "absolute dir",
     "read /proc and /sys below this directory (tests only)"},
    {"HP_CACHE_MAX", parse_cache_max, "bytes",
     "freed huge-page memory kept for reuse (K/M/G suffix; 0 disables; default 1G, at most "
     "RAM/8)"},
    {"HP_CACHE_IDLE_MS", parse_cache_idle, "ms",
     "cached memory idle this long goes back to the kernel (default 10000; 0 = only the "
     "limit)"},
    {"HP_CACHE_POOL_IDLE_MS", parse_cache_pool_idle, "ms",
     "cached hugetlb pool pages idle this long go back to the pool (default 1000; 0 = only "
     "the limit)"},
    {"HP_BACKEND_DIR", parse_backend_dir, "absolute dir",
     "directory of the built-in backends, searched last (default " HP_BACKEND_DIR "; set it "
     "only to run an uninstalled build; ignored in setuid programs)"},
};

void hp_options_parse_into(struct hp_options *o, char *(*get)(const char *name))
{
    memset(o, 0, sizeof(*o));
    o->backend_dir = HP_BACKEND_DIR;
    o->cache_max = default_cache_max();
    o->cache_idle_ms = 10000;
    o->cache_pool_idle_ms = 1000;
    for (size_t i = 0; i < sizeof(defs) / sizeof(*defs); i++) {
        const char *v = get(defs[i].name);
        if (v && defs[i].parse(defs[i].name, v, o) != 0)
            return;  /* the first bad value is the one reported */
    }
}

static void parse_all(void)
{
    hp_options_parse_into(&opts, secure_getenv);
}

const struct hp_options *hp_options(void)
{
    pthread_once(&opts_once, parse_all);
    return &opts;
}

void hp_options_dump(FILE *out)
{
    for (size_t i = 0; i < sizeof(defs) / sizeof(*defs); i++) {
        const char *v = secure_getenv(defs[i].name);
        fprintf(out, "%-16s %-24s %s\n", defs[i].name, v ? v : "(unset)", defs[i].help);
    }
}
