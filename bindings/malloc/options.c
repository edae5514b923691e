/* The HP_MALLOC_* environment, from one table. A bad value is never fatal:
 * the program runs on with the default and one warning naming the variable
 * and the accepted values (a malloc that aborts a program over an
 * environment typo would be worse than no malloc). */
#include "hpm.h"

#include <hp.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct hpm_options hpm_opt = {
    .large_min = (size_t)8 << 20,
    .arena_min = (size_t)32 << 20,
    .ahead = 1,
};

void hpm_warn(const char *fmt, ...)
{
    char buf[512];
    int n = snprintf(buf, sizeof(buf), "libhp-malloc: ");
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(buf) - 2)
        n = (int)sizeof(buf) - 2;
    buf[n++] = '\n';
    ssize_t w = write(2, buf, (size_t)n);
    (void)w;
}

/* "123", "64K", "4M", "1G" (powers of 1024). */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    if (!*s || *s == '-' || *s == ' ')
        return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: return -1;
    }
    if (*end || v > (UINT64_C(1) << 46) >> shift)
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

static int set_large(const char *s)
{
    size_t v;
    /* Below 64 KiB every hp_alloc would be a syscall for a few pages; above
     * 16 MiB mimalloc's own large objects end (MI_LARGE_OBJ_SIZE_MAX). */
    if (parse_size(s, &v) || v < ((size_t)64 << 10) || v > ((size_t)16 << 20))
        return -1;
    hpm_opt.large_min = v;
    return 0;
}

static int set_arena(const char *s)
{
    size_t v;
    if (parse_size(s, &v) || v < HPM_SEGMENT || v > ((size_t)64 << 30) || v % HPM_SEGMENT)
        return -1;
    hpm_opt.arena_min = v;
    return 0;
}

/* "0"/"off" is 0, "1"/"on" is 1, anything else -1. */
static int parse_switch(const char *s)
{
    if (!strcmp(s, "0") || !strcmp(s, "off"))
        return 0;
    if (!strcmp(s, "1") || !strcmp(s, "on"))
        return 1;
    return -1;
}

static int set_stats(const char *s)
{
    int v = strcmp(s, "line") ? parse_switch(s) : 2;
    if (v < 0)
        return -1;
    hpm_opt.stats = v;
    return 0;
}

static int set_page_size(const char *s)
{
    size_t v;
    if (parse_size(s, &v) || !hp_page_size_flag(v))
        return -1;
    hpm_opt.large_flags = hpm_opt.arena_flags = hp_page_size_flag(v);
    return 0;
}

static int set_pool(const char *s)
{
    int v = strcmp(s, "all") ? parse_switch(s) : HPM_POOL_ALL;
    if (v < 0)
        return -1;
    hpm_opt.pool = v;
    return 0;
}

static int set_ahead(const char *s)
{
    int v = parse_switch(s);
    if (v < 0)
        return -1;
    hpm_opt.ahead = v;
    return 0;
}

static int set_stats_file(const char *s)
{
    if (s[0] != '/')
        return -1;
    hpm_opt.stats_path = s;
    return 0;
}

static const struct {
    const char *name;
    int (*set)(const char *);
    const char *accepted;
} table[] = {
    {"HP_MALLOC_LARGE", set_large, "a size from 64K to 16M (K/M suffix); default 8M"},
    {"HP_MALLOC_ARENA", set_arena, "a multiple of 32M up to 64G; default 32M"},
    {"HP_MALLOC_STATS", set_stats, "0, 1 (table at exit) or line (one line at exit)"},
    {"HP_MALLOC_STATS_FILE", set_stats_file, "an absolute path the stats are appended to"},
    {"HP_MALLOC_PAGE_SIZE", set_page_size, "a power of two from 4K (K/M/G suffix)"},
    {"HP_MALLOC_AHEAD", set_ahead,
     "1 or on (map the next arena on a helper thread once arenas grow; default), 0 or off"},
    {"HP_MALLOC_POOL", set_pool,
     "0 or off (never the hugetlb pool; default), 1 or on (large blocks), all (arenas too)"},
};

void hpm_options_init(void)
{
    for (size_t i = 0; i < sizeof(table) / sizeof(*table); i++) {
        const char *v = secure_getenv(table[i].name);
        if (v && table[i].set(v))
            hpm_warn("%s=\"%.64s\" is invalid (accepted: %s); using the default",
                     table[i].name, v, table[i].accepted);
    }
    /* A private hugetlb page that exists at fork() needs a free pool page
     * when either process writes it, or the write is SIGBUS (hp/alloc.h;
     * Documentation/mm/hugetlbfs_reserv.rst). Unmodified programs fork
     * without knowing that, so the pool serves them only when asked. A
     * child writes the arenas before it execs (malloc's own page lists, a
     * shell's variables), so asking for the pool gives it large blocks
     * only; arenas too only when asked for all. */
    if (hpm_opt.pool == HPM_POOL_OFF)
        hpm_opt.large_flags |= HP_F_NOPOOL;
    if (hpm_opt.pool != HPM_POOL_ALL)
        hpm_opt.arena_flags |= HP_F_NOPOOL;
}
