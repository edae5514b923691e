/*
 * A hostile or buggy plugin: broken.c breaks one rule of hp/backend.h per
 * case (broken_cases.h). Each case runs in a forked child of this program,
 * which never calls libhp itself, so libhp loads afresh in the child
 * (HP_BACKEND_PATH holds the plugin, HP_DEBUG=1 logs to a file that stands
 * for the child's stderr), under an alarm, and
 * the case passes when:
 *   - the process survives: no crash, no hang (the alarm is a failure);
 *   - the caller learns about it: the call fails with a detail, or (when
 *     libhp could still serve, by a copy) a debug line names the plugin and
 *     the rule it broke;
 *   - no data is lost: a block that hp_realloc failed to resize has its
 *     old bytes (checksum before and after), one it resized has them too;
 *   - nothing leaks: after hp_free and hp_cache_trim, /proc/self/maps has
 *     no anonymous range that was not there before (valgrind's own memory
 *     apart, maps_line_is_valgrinds), unless the case is one where the
 *     plugin itself loses track of memory it mapped.
 */
#include <hp.h>

#include "broken_cases.h"
#include "support.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

enum scenario {
    SC_ALLOC,          /* hp_alloc_ex naming the plugin must fail */
    SC_GROW,           /* hp_realloc of a 64 KiB block to 1 MiB */
    SC_SHRINK,         /* hp_realloc of a 1 MiB block to 64 KiB */
    SC_WORKS,          /* everything works (the control) */
    SC_PROBE_HANG,     /* a thread hangs in the plugin's first probe: others go on */
    SC_POPULATE,       /* a populated block and stack of the plugin's must fail */
    SC_INFO,           /* hp_info of a block of the plugin's gives sane figures */
    SC_ALIAS,          /* a second block of the plugin's must not alias the first */
    SC_FREE_FAILS,     /* hp_free fails cleanly, the block stays the caller's */
    SC_TEXT,           /* the plugin's texts reach the caller and the log printable */
    SC_CLAIM,          /* a plugin claiming kind THP ranks below thp-madvise until shown */
    SC_REJECTED,       /* the plugin is refused at load, the reason listed */
    SC_UNAVAILABLE,    /* named, the plugin shows as unavailable with the reason */
    SC_ALLOC_1G,       /* hp_alloc_ex naming the plugin, HP_F_PAGE_1G, must fail */
    SC_FREE_GONE,      /* hp_free fails, the block is gone and no longer libhp's */
    SC_FREE_LOGGED,    /* hp_free succeeds, and a debug line says what the plugin did */
    SC_GROW_WORKS,     /* hp_realloc grows a block, its bytes intact, nothing said */
    SC_REFUSED_NAMED,  /* refused at load; a request naming it gets the reason */
    SC_REFUSED_NAMELESS, /* refused before its name was read; HP_BACKENDS naming it */
    SC_BUILTINS_LOADED, /* every built-in backend loaded, whatever the plugin did */
    SC_RECORD_KEPT,    /* an op wrote its const mapping: libhp's records are unchanged */
    SC_REFUSED_FILE,   /* refused at load, the file listed with the reason */
    SC_STACK_FAILS,    /* hp_stack_destroy says the plugin could not unmap the stack */
    SC_CANCEL_INIT,    /* a thread cancelled in libhp's start-up: the next call sets up once */
    SC_STACK_BROKEN,   /* a huge stack the plugin maps wrongly: HP_EBACKEND, not HP_ENOHUGE */
};

#define F_LOST 0x1         /* the plugin destroys the block: hp_realloc must fail cleanly */
#define F_PLUGIN_LEAKS 0x2 /* the plugin loses track of a mapping of its own */
#define F_NEIGHBOUR 0x4    /* another block of the plugin's is live (and must stay intact) */
#define F_ELSEWHERE 0x8    /* the resized block must be served by another backend */

struct bcase {
    enum broken_case id;
    enum scenario sc;
    const char *rule;      /* in the error detail or a debug line naming the plugin */
    unsigned flags;
};

static const struct bcase cases[] = {
    {BC_NONE, SC_WORKS, NULL, 0},
    {BC_REMAP_SHORT, SC_GROW, "len shorter than requested", 0},
    {BC_REMAP_MISALIGNED, SC_GROW, "not aligned", 0},
    {BC_REMAP_ADDR_NULL, SC_GROW, "no address", 0},
    {BC_REMAP_PAGE_SIZE, SC_GROW, "page_size is not the one requested", 0},
    {BC_REMAP_COMMITTED, SC_GROW, "committed below len or past the mapping", 0},
    {BC_REMAP_MAP_SHORT, SC_GROW, "not inside map_addr and map_len", 0},
    {BC_REMAP_SHRINK_SHORT, SC_SHRINK, "len shorter than requested", 0},
    {BC_REMAP_GROW_SHORT, SC_GROW, "len shorter than requested", 0},
    {BC_REMAP_STALE, SC_GROW, "the block is lost", F_LOST | F_PLUGIN_LEAKS},
    {BC_REMAP_FAIL_MOVED, SC_GROW, "no longer where it was", 0},
    {BC_REMAP_FAIL_UNMAPPED, SC_GROW, "the block is lost", F_LOST},
    {BC_REMAP_MOVED_BLOCKED, SC_GROW, "cannot move back", F_PLUGIN_LEAKS},
    {BC_REMAP_MOVED_NOMEM, SC_GROW, "cannot move back", F_PLUGIN_LEAKS | F_ELSEWHERE},
    {BC_REMAP_OTHER_BLOCK, SC_GROW, "memory of another block", F_LOST | F_PLUGIN_LEAKS | F_NEIGHBOUR},
    {BC_REMAP_POSITIVE, SC_GROW, "unknown status 5", 0},
    {BC_REMAP_NEGATIVE, SC_GROW, "unknown status -999", 0},
    {BC_MAP_POSITIVE, SC_ALLOC, "unknown status 5", 0},
    {BC_MAP_NEGATIVE, SC_ALLOC, "unknown status -999", 0},
    {BC_PROBE_HANGS, SC_PROBE_HANG, NULL, 0},
    {BC_ADVISE_NEGATIVE, SC_POPULATE, "unknown status -999", 0},
    {BC_HUGE_BYTES_OVER, SC_INFO, NULL, 0},
    {BC_QUERY_GARBAGE, SC_INFO, NULL, 0},
    {BC_MAP_ALIAS, SC_ALIAS, "memory of another block", 0},
    {BC_MAP_READONLY, SC_ALLOC, "not readable and writable", 0},
    {BC_REMAP_READONLY, SC_GROW, "not readable and writable", 0},
    {BC_REMAP_FAIL_READONLY, SC_GROW, "no longer readable and writable", 0},
    {BC_UNMAP_FAILS, SC_FREE_FAILS, "could not unmap", F_PLUGIN_LEAKS},
    {BC_TEXT_ESCAPES, SC_TEXT, "no memory", 0},
    {BC_CLAIMS_THP, SC_CLAIM, "huge bytes measured", 0},
    {BC_CLAIMS_THP_FAKE, SC_CLAIM, NULL, 0},
    {BC_NAME_DASH, SC_REJECTED, "starts with '-'", 0},
    {BC_AVAILABLE_7, SC_UNAVAILABLE, "available is 7", 0},
    {BC_MAP_FAKE_1G, SC_ALLOC_1G, "KernelPageSize", 0},
    {BC_MAP_LEN_WRAP, SC_ALLOC, "wraps past the end", F_PLUGIN_LEAKS},
    {BC_MAP_LEN_TOP, SC_ALLOC, "unmapped address space", F_PLUGIN_LEAKS},
    {BC_UNMAP_GONE, SC_FREE_GONE, "the block is gone", 0},
    {BC_OPS_REWRITE, SC_WORKS, NULL, 0},
    {BC_ADVISE_READONLY, SC_POPULATE, "not readable and writable", 0},
    {BC_PROBE_NAMES_SELF, SC_WORKS, NULL, 0},
    {BC_MAP_LEN_DOUBLE, SC_ALLOC, "accessible memory outside", F_PLUGIN_LEAKS},
    {BC_REMAP_MAP_DOUBLE, SC_GROW, "accessible memory outside", F_PLUGIN_LEAKS},
    {BC_REMAP_MAP_TOP, SC_GROW, "unmapped address space", 0},
    {BC_REMAP_INPLACE_TOP, SC_GROW, "len shorter than requested", 0},
    {BC_HUGE_BYTES_LIE, SC_INFO, NULL, 0},
    {BC_QUERY_READONLY, SC_INFO, "query left the block's pages", 0},
    {BC_MAP_ALIAS_SIZE, SC_ALIAS, "page_size is not the one requested", 0},
    {BC_UNMAP_PARTIAL, SC_FREE_GONE, "after unmapping part", F_PLUGIN_LEAKS},
    {BC_UNMAP_POSITIVE, SC_FREE_GONE, "unmap returned unknown status 3", 0},
    {BC_UNMAP_NOOP, SC_FREE_LOGGED, "still mapped", F_PLUGIN_LEAKS},
    {BC_REMAP_FORK_POOL, SC_GROW_WORKS, NULL, 0},
    {BC_AVAILABLE_NO_SIZES, SC_UNAVAILABLE, "available with no page size", 0},
    {BC_UPCALLS_WILD, SC_WORKS, NULL, 0},
    {BC_INIT_FAILS, SC_REFUSED_NAMED, "init refuses", 0},
    {BC_ENTRY_NULL, SC_REFUSED_NAMELESS, "refused before their name was read", 0},
    {BC_INIT_CLOSES_FDS, SC_BUILTINS_LOADED, NULL, 0},
    {BC_ADVISE_WRITES, SC_RECORD_KEPT, NULL, 0},
    {BC_UNMAP_WRITES_FAILS, SC_FREE_FAILS, "could not unmap", F_PLUGIN_LEAKS},
    {BC_NAME_UNTERMINATED, SC_REFUSED_FILE, "not terminated", 0},
    {BC_STACK_UNMAP_FAILS, SC_STACK_FAILS, "could not unmap the stack", F_PLUGIN_LEAKS},
    {BC_MAP_RECURSES, SC_WORKS, NULL, 0},
    {BC_DESC_UNMAPPED, SC_WORKS, NULL, 0},
    {BC_INIT_SLOW, SC_CANCEL_INIT, NULL, 0},
    {BC_MAP_READONLY_STACK, SC_STACK_BROKEN, "not readable and writable", 0},
};

/* ---- in the child: one case ---- */

#define CHECK(cond)                                                                         \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            fprintf(stderr, "# case check failed at line %d: %s (%s: %s)\n", __LINE__, #cond, \
                    hp_error_name(hp_last_error()), hp_last_error_detail());                \
            return 1;                                                                       \
        }                                                                                   \
    } while (0)

struct ranges {
    unsigned n;
    uintptr_t lo[4096], hi[4096];
};

/* Anonymous ranges of /proc/self/maps: no path ([heap] and [stack] apart),
 * not valgrind's own memory (maps_line_is_valgrinds), and not this
 * thread's stack, which under valgrind is anonymous and grows by new
 * ranges right below the one that holds the stack pointer. */
static void anon_ranges(struct ranges *r)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[512];
    uintptr_t sp = (uintptr_t)&line, stack_lo = 0;
    r->n = 0;
    while (f && fgets(line, sizeof(line), f) && r->n < 4096) {
        unsigned long lo, hi;
        int path = 0;
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &path) < 2)
            continue;
        if ((path && line[path] && line[path] != '\n') || maps_line_is_valgrinds(line))
            continue;
        if (sp >= lo && sp < hi)
            stack_lo = lo;
        r->lo[r->n] = lo;
        r->hi[r->n++] = hi;
    }
    if (f)
        fclose(f);
    /* Drop the stack's range and those adjacent below it (ascending, so
     * walk down from the stack's). */
    for (unsigned i = r->n; stack_lo && i-- > 0;) {
        if (r->lo[i] == stack_lo || r->hi[i] == stack_lo) {
            stack_lo = r->lo[i];
            r->lo[i] = r->hi[i] = 0;
        }
    }
}

/* Bytes of after's ranges that none of before's covers (range arithmetic:
 * a sanitizer's shadow ranges span terabytes). */
static uint64_t new_bytes(const struct ranges *before, const struct ranges *after)
{
    uint64_t sum = 0;
    for (unsigned i = 0; i < after->n; i++) {
        uintptr_t a = after->lo[i], hi = after->hi[i];
        while (a < hi) {
            uintptr_t next = hi;  /* where the next covered stretch starts */
            int covered = 0;
            for (unsigned k = 0; k < before->n && !covered; k++) {
                if (a >= before->lo[k] && a < before->hi[k]) {
                    covered = 1;
                    a = before->hi[k];
                } else if (before->lo[k] > a && before->lo[k] < next) {
                    next = before->lo[k];
                }
            }
            if (covered)
                continue;
            fprintf(stderr, "# new anonymous range %#lx-%#lx (in %#lx-%#lx)\n",
                    (unsigned long)a, (unsigned long)next, (unsigned long)after->lo[i],
                    (unsigned long)hi);
            sum += next - a;
            a = next;
        }
    }
    return sum;
}

static uint64_t checksum(const unsigned char *p, size_t len)
{
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211u;
    return h;
}

static void fill(unsigned char *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (unsigned char)(i * 31 + seed + (i >> 12));
}

/* Does this process's stderr (a file) have a line naming the plugin and
 * the rule? */
static int logged(const char *rule)
{
    static char buf[1 << 20];
    ssize_t n = pread(2, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    for (char *line = buf; line && *line;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = '\0';
        int hit = strstr(line, "broken") && strstr(line, rule);
        if (end)
            *end = '\n';
        if (hit)
            return 1;
        line = end ? end + 1 : NULL;
    }
    return 0;
}

static int told(const char *rule)
{
    const char *d = hp_last_error_detail();
    return (hp_last_error() != HP_OK && strstr(d, "broken") && strstr(d, rule)) || logged(rule);
}

static void *alloc_named(size_t len)
{
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "broken";
    return hp_alloc_ex(len, &o);
}

static int resize_one(const struct bcase *c, size_t from, size_t to)
{
    unsigned char *p = alloc_named(from);
    CHECK(p);
    fill(p, from, 7);
    uint64_t sum = checksum(p, from);
    size_t kept = from < to ? from : to;
    uint64_t kept_sum = checksum(p, kept);
    unsigned char *q = hp_realloc(p, to, 0);
    if (c->flags & F_LOST) {
        /* The plugin destroyed the block: no copy from it (a crash), a
         * clean error, and p is no block of libhp's any more. */
        CHECK(!q && hp_last_error() == HP_EBACKEND && told(c->rule));
        CHECK(hp_free(p) != HP_OK);
        return 0;
    }
    if (c->flags & F_ELSEWHERE) {
        /* The block left its address and the plugin cannot map a copy:
         * the bytes go to another backend rather than be lost. */
        struct hp_block_info info = HP_BLOCK_INFO_INIT;
        CHECK(q && hp_info(q, &info) == HP_OK && strcmp(info.backend, "broken") != 0);
    }
    /* The block the caller has now takes a write at each end (a block
     * left read-only dies here, of SIGSEGV). */
    if (q) {
        CHECK(checksum(q, kept) == kept_sum);
        for (size_t i = kept; i < to; i++)
            CHECK(q[i] == 0);
        CHECK(told(c->rule));
        q[0] ^= 1;
        q[to - 1] ^= 1;
        CHECK(hp_free(q) == HP_OK);
    } else {
        CHECK(told(c->rule));
        CHECK(checksum(p, from) == sum);
        p[0] ^= 1;
        p[from - 1] ^= 1;
        CHECK(hp_free(p) == HP_OK);
    }
    return 0;
}

static void *hang_in_probe(void *arg)
{
    (void)arg;
    alloc_named(64 << 10);  /* never returns */
    return NULL;
}

/* A thread names the plugin and hangs in its first probe. Requests for
 * other backends, the backend list, hp_reprobe and a fork (whose child
 * allocates) all go on; only requests naming the plugin wait. Ends the
 * process itself (_exit): the hung thread never returns. */
static int probe_hang(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, hang_in_probe, NULL) == 0);
    for (int i = 0; i < 500 && !logged("probing"); i++)
        usleep(10000);
    CHECK(logged("probing"));
    usleep(50000);  /* well inside the probe */
    void *p = hp_alloc(1 << 20, 0);
    CHECK(p && hp_free(p) == HP_OK);
    int32_t n = hp_backend_count();
    for (int32_t i = 0; i < n; i++) {
        struct hp_backend_info info = HP_BACKEND_INFO_INIT;
        CHECK(hp_backend_get((uint32_t)i, &info) == HP_OK);
    }
    CHECK(hp_reprobe() == HP_OK);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        void *q = hp_alloc(64 << 10, 0);
        _exit(q && hp_free(q) == HP_OK ? 0 : 1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    fflush(NULL);
    _exit(0);
}

/* HP_F_POPULATE on a block, and HP_STACK_POPULATE on a stack
 * (HP_BACKENDS=broken, set for this case by one_case), go through the
 * plugin's advise: its status must come back as a clear error. */
static int populate_fails(const struct bcase *c)
{
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "broken";
    void *p = hp_alloc_ex(64 << 10, &o);
    CHECK(p);
    CHECK(hp_free(p) == HP_OK);
    o.flags = HP_F_POPULATE;
    p = hp_alloc_ex(64 << 10, &o);
    CHECK(!p && hp_last_error() == HP_EBACKEND && told(c->rule));
    struct hp_stack_opts so = HP_STACK_OPTS_INIT;
    so.flags = HP_STACK_POPULATE;
    struct hp_stack *s = hp_stack_create_ex(256 << 10, &so);
    CHECK(!s && hp_last_error() == HP_EBACKEND && told(c->rule));
    return 0;
}

/* hp_info of a block of the plugin's: huge_bytes within the mapping, a
 * node and a descriptor that can be real. */
static int info_sane(const struct bcase *c)
{
    unsigned char *p = alloc_named(1 << 20);
    CHECK(p);
    memset(p, 1, 1 << 20);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHECK(hp_info(p, &info) == HP_OK);
    CHECK(info.huge_bytes <= info.mapped_size);
    /* The kernel's figure, never the plugin's claim: base pages have no
     * huge bytes, whatever huge_bytes says. */
    if (info.page_size <= (uint64_t)sysconf(_SC_PAGESIZE))
        CHECK(info.huge_bytes == 0);
    CHECK(info.numa_node >= -1 && info.numa_node < 1024);
    CHECK(info.fd == -1 && info.fd_offset == 0);
    if (c->rule)
        CHECK(logged(c->rule));
    p[0] ^= 1;  /* a block left read-only dies here, of SIGSEGV */
    p[(1 << 20) - 1] ^= 1;
    CHECK(hp_free(p) == HP_OK);
    return 0;
}

/* The plugin hands the first block's memory out again: the second request
 * fails, and the first block keeps its bytes and stays the caller's. */
static int alias_refused(const struct bcase *c)
{
    unsigned char *a = alloc_named(64 << 10);
    CHECK(a);
    fill(a, 64 << 10, 5);
    uint64_t sum = checksum(a, 64 << 10);
    unsigned char *b = alloc_named(64 << 10);
    CHECK(!b && hp_last_error() == HP_EBACKEND && told(c->rule));
    CHECK(checksum(a, 64 << 10) == sum);
    a[0] ^= 1;
    CHECK(hp_free(a) == HP_OK);
    return 0;
}

/* The plugin's unmap refuses: hp_free says so, and the block is still the
 * caller's, bytes and all (a later hp_free may succeed). */
static int free_fails(const struct bcase *c)
{
    unsigned char *p = alloc_named(64 << 10);
    CHECK(p);
    fill(p, 64 << 10, 9);
    uint64_t sum = checksum(p, 64 << 10);
    CHECK(hp_free(p) != HP_OK && told(c->rule));
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHECK(hp_info(p, &info) == HP_OK && !strcmp(info.backend, "broken"));
    CHECK(checksum(p, 64 << 10) == sum);
    p[0] ^= 1;
    CHECK(hp_free(p) != HP_OK && told(c->rule));
    return 0;
}

/* The plugin's unmap takes the block's memory and then fails: hp_free
 * says the block is gone, and the address is no block of libhp's any more
 * (a second hp_free must not reach whatever is mapped there next). */
static int free_gone(const struct bcase *c)
{
    unsigned char *p = alloc_named(64 << 10);
    CHECK(p);
    p[0] = 1;
    CHECK(hp_free(p) == HP_EBACKEND && told(c->rule));
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHECK(hp_info(p, &info) != HP_OK);
    CHECK(hp_free(p) != HP_OK);
    return 0;
}

/* The plugin's unmap returns HP_OK and leaves the mapping: hp_free
 * believes it (the addresses may be another mapping's by the time it
 * could check) and says so in a debug line. */
static int free_logged(const struct bcase *c)
{
    unsigned char *p = alloc_named(64 << 10);
    CHECK(p);
    p[0] = 1;
    CHECK(hp_free(p) == HP_OK && logged(c->rule));
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHECK(hp_info(p, &info) != HP_OK);
    return 0;
}

/* A remap that does something legal but unusual (a fork from inside it,
 * with the fork fence held for its pool block): no hang, the block grows
 * with its bytes. */
static int grow_works(void)
{
    enum { FROM = 64 << 10, TO = 1 << 20 };
    unsigned char *p = alloc_named(FROM);
    CHECK(p);
    fill(p, FROM, 3);
    uint64_t sum = checksum(p, FROM);
    unsigned char *q = hp_realloc(p, TO, 0);
    CHECK(q && checksum(q, FROM) == sum);
    q[TO - 1] = 1;
    CHECK(hp_free(q) == HP_OK);
    return 0;
}

/* Printable ASCII only (no ESC, CR, LF, BEL). */
static int printable(const char *s)
{
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e)
            return 0;
    return 1;
}

/* The plugin puts terminal control characters in its caps reason, its
 * error detail and its log lines: each reaches the caller (hp_backend_get,
 * hp_last_error_detail) and the HP_DEBUG log as printable ASCII, its words
 * intact. */
static int text_printable(const struct bcase *c)
{
    CHECK(!alloc_named(64 << 10) && told(c->rule));
    fprintf(stderr, "# detail: %s\n", hp_last_error_detail());
    CHECK(printable(hp_last_error_detail()));
    int found = 0;
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info info = HP_BACKEND_INFO_INIT;
        CHECK(hp_backend_get((uint32_t)i, &info) == HP_OK);
        if (strcmp(info.name, "broken"))
            continue;
        found = 1;
        fprintf(stderr, "# reason: %s\n", info.reason);
        CHECK(strstr(info.reason, "case text-escapes") && printable(info.reason));
    }
    CHECK(found);
    static char buf[1 << 20];
    ssize_t n = pread(2, buf, sizeof(buf) - 1, 0);
    CHECK(n > 0);
    buf[n] = '\0';
    CHECK(strstr(buf, "log line"));
    for (ssize_t i = 0; i < n; i++)
        CHECK(buf[i] == '\n' || (buf[i] >= 0x20 && buf[i] <= 0x7e));
    CHECK(!strstr(buf, "\nlibhp: all fine"));
    return 0;
}

/* The backend of the block at p ("" if none). */
static const char *served_by(const void *p, struct hp_block_info *info)
{
    *info = (struct hp_block_info)HP_BLOCK_INFO_INIT;
    return p && hp_info(p, info) == HP_OK ? info->backend : "";
}

/* The plugin says it is a THP backend, and is loaded before thp-madvise
 * (HP_BACKEND_PATH comes first), so a tie in rank would go to it. Until
 * one of its blocks is measured with huge bytes, a request that names no
 * backend goes to thp-madvise; after that (claims-thp, whose blocks do get
 * THP) the plugin ranks with its kind. claims-thp-fake's blocks never get
 * THP (MADV_NOHUGEPAGE), so thp-madvise keeps serving. */
static int claim_ranked(const struct bcase *c)
{
    int thp = 0;
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        CHECK(hp_backend_get((uint32_t)i, &bi) == HP_OK);
        thp |= !strcmp(bi.name, "thp-madvise") && bi.available;
    }
    if (!thp) {
        fprintf(stderr, "# skipped: thp-madvise is unavailable, nothing to rank against\n");
        return 0;
    }
    /* hugetlbfs out: it ranks first whenever its pool has pages (another
     * test may be filling it), and it is not the kind in question. */
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.exclude = "hugetlbfs";
    const size_t len = 4 << 20;
    struct hp_block_info info;
    unsigned char *p = hp_alloc_ex(len, &o);
    fprintf(stderr, "# before any block of the plugin's: %s\n", served_by(p, &info));
    CHECK(!strcmp(served_by(p, &info), "thp-madvise"));
    CHECK(hp_free(p) == HP_OK);
    unsigned char *q = alloc_named(len);
    CHECK(q);
    memset(q, 1, len);
    CHECK(!strcmp(served_by(q, &info), "broken"));
    uint64_t huge = info.huge_bytes;
    fprintf(stderr, "# the plugin's block: %llu huge bytes\n", (unsigned long long)huge);
    CHECK(hp_free(q) == HP_OK);
    p = hp_alloc_ex(len, &o);
    fprintf(stderr, "# after it was freed: %s\n", served_by(p, &info));
    if (c->id == BC_CLAIMS_THP_FAKE) {
        CHECK(huge == 0);
        CHECK(!strcmp(served_by(p, &info), "thp-madvise"));
    } else if (huge == 0) {
        fprintf(stderr, "# skipped: the kernel gave the plugin's block no THP\n");
    } else {
        CHECK(!strcmp(served_by(p, &info), "broken") && logged(c->rule));
    }
    CHECK(hp_free(p) == HP_OK);
    return 0;
}

/* The entry of the backend list whose path is the plugin's file (a loaded
 * backend or a refused file), in *out; 1 if there is one. */
static int plugin_entry(struct hp_backend_info *out)
{
    for (int32_t i = 0; i < hp_backend_count(); i++) {
        struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
        if (hp_backend_get((uint32_t)i, &bi) != HP_OK)
            return 0;
        if (strstr(bi.path, "/broken.so")) {
            *out = bi;
            return 1;
        }
    }
    return 0;
}

/* A descriptor that breaks a rule (a name HP_BACKENDS could never name):
 * the file is listed as refused, with a reason that says which rule, and
 * no backend takes its place. */
static int rejected(const struct bcase *c)
{
    struct hp_backend_info bi;
    CHECK(plugin_entry(&bi));
    fprintf(stderr, "# entry: name \"%s\", reason: %s\n", bi.name, bi.reason);
    CHECK(!bi.available && strstr(bi.reason, c->rule) && strstr(bi.reason, "-broken"));
    void *p = hp_alloc(64 << 10, 0);
    CHECK(p && hp_free(p) == HP_OK);
    return 0;
}

/* A plugin that closed every descriptor while the loader walked the
 * directories (the built-ins' among them): every built-in is loaded all
 * the same, and no directory is listed as unreadable. */
static int builtins_loaded(const struct bcase *c)
{
    static const char *const builtin[] = {"anon-orders", "fallback", "hugetlbfs", "thp-madvise"};
    int32_t n = hp_backend_count();
    for (size_t k = 0; k < sizeof(builtin) / sizeof(*builtin); k++) {
        int found = 0;
        for (int32_t i = 0; i < n; i++) {
            struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
            CHECK(hp_backend_get((uint32_t)i, &bi) == HP_OK);
            CHECK(bi.name[0] || !strstr(bi.reason, "cannot read the backend directory"));
            found |= !strcmp(bi.name, builtin[k]);
        }
        CHECK(found);
    }
    (void)c;
    void *p = alloc_named(64 << 10);
    CHECK(p && hp_free(p) == HP_OK);
    p = hp_alloc(64 << 10, 0);
    CHECK(p && hp_free(p) == HP_OK);
    return 0;
}

/* advise writes through its const mapping (the map_len and committed of
 * a block 1 GiB longer): the core passed a copy, so the block, a grown
 * one and a populated stack keep their real extent, and freeing and
 * trimming unmap nothing else. */
static int record_kept(void)
{
    struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
    o.backend = "broken";
    o.flags = HP_F_POPULATE;
    unsigned char *p = hp_alloc_ex(64 << 10, &o);
    CHECK(p);
    struct hp_block_info info = HP_BLOCK_INFO_INIT;
    CHECK(hp_info(p, &info) == HP_OK && info.mapped_size < (1u << 20));
    p[0] = 7;
    unsigned char *q = hp_realloc(p, 1 << 20, HP_F_POPULATE);
    CHECK(q && q[0] == 7);
    CHECK(hp_info(q, &info) == HP_OK && info.mapped_size < (4u << 20));
    CHECK(hp_free(q) == HP_OK);
    struct hp_stack_opts so = HP_STACK_OPTS_INIT;
    so.flags = HP_STACK_POPULATE;
    struct hp_stack *s = hp_stack_create_ex(256 << 10, &so);
    if (s)
        CHECK(hp_stack_destroy(s) == HP_OK);
    CHECK(hp_stack_cache_trim() == HP_OK && hp_cache_trim() == HP_OK);
    return 0;
}

static void *first_call(void *arg)
{
    (void)arg;
    hp_backend_count();  /* libhp's start-up, with the plugin's slow init */
    return NULL;
}

/* A thread cancelled while libhp starts up (inside the plugin's init): the
 * start-up runs to its end all the same, so the next call finds every
 * backend loaded once (before: start-up ran again on top of the half-done
 * one, and refused every built-in as a duplicate). */
static int cancel_init(void)
{
    pthread_t t;
    CHECK(pthread_create(&t, NULL, first_call, NULL) == 0);
    usleep(100000);  /* inside the 300 ms init */
    pthread_cancel(t);
    pthread_join(t, NULL);
    static const char *const builtin[] = {"anon-orders", "fallback", "hugetlbfs", "thp-madvise",
                                         "broken"};
    int32_t n = hp_backend_count();
    for (size_t k = 0; k < sizeof(builtin) / sizeof(*builtin); k++) {
        int found = 0;
        for (int32_t i = 0; i < n; i++) {
            struct hp_backend_info bi = HP_BACKEND_INFO_INIT;
            CHECK(hp_backend_get((uint32_t)i, &bi) == HP_OK);
            CHECK(!strstr(bi.reason, "duplicate"));
            found += !strcmp(bi.name, builtin[k]);
        }
        CHECK(found == 1);
    }
    void *p = alloc_named(64 << 10);
    CHECK(p && hp_free(p) == HP_OK);
    return 0;
}

/* Huge and lean stacks alike: a plugin that broke the rules of its
 * mapping is HP_EBACKEND (hp/stack.h), naming the plugin and the rule. */
static int stack_broken(const struct bcase *c)
{
    struct hp_stack_opts so = HP_STACK_OPTS_INIT;
    so.flags = HP_STACK_HUGE;
    struct hp_stack *s = hp_stack_create_ex(2 << 20, &so);
    CHECK(!s && hp_last_error() == HP_EBACKEND && told(c->rule));
    so.flags = 0;
    s = hp_stack_create_ex(256 << 10, &so);
    CHECK(!s && hp_last_error() == HP_EBACKEND && told(c->rule));
    return 0;
}

/* The plugin's file refused at load, listed with the rule it broke. */
static int refused_file(const struct bcase *c)
{
    struct hp_backend_info bi;
    CHECK(plugin_entry(&bi));
    fprintf(stderr, "# entry: name \"%s\", reason: %s\n", bi.name, bi.reason);
    CHECK(!bi.available && strstr(bi.reason, c->rule));
    void *p = hp_alloc(64 << 10, 0);
    CHECK(p && hp_free(p) == HP_OK);
    return 0;
}

/* A stack the plugin cannot unmap: hp_stack_destroy (not cached: NOCACHE)
 * says so, naming the plugin, instead of HP_OK. */
static int stack_fails(const struct bcase *c)
{
    struct hp_stack_opts so = HP_STACK_OPTS_INIT;
    so.flags = HP_STACK_NOCACHE;
    struct hp_stack *s = hp_stack_create_ex(256 << 10, &so);
    CHECK(s);
    CHECK(hp_stack_destroy(s) == HP_EOS && told(c->rule));
    return 0;
}

/* A plugin refused at load by name: a request that names it is told why,
 * not that no such backend exists. */
static int refused_named(const struct bcase *c)
{
    CHECK(!alloc_named(64 << 10) && hp_last_error() == HP_ENOBACKEND);
    const char *d = hp_last_error_detail();
    fprintf(stderr, "# detail: %s\n", d);
    CHECK(strstr(d, "was refused at load") && strstr(d, c->rule));
    return 0;
}

/* A plugin refused before its name could be read, and HP_BACKENDS naming
 * it: every call fails with HP_EENV, the list of names has no empty
 * entries, and the refused file is named with its reason. */
static int refused_nameless(const struct bcase *c)
{
    CHECK(!hp_alloc(64 << 10, 0) && hp_last_error() == HP_EENV);
    const char *d = hp_last_error_detail();
    fprintf(stderr, "# detail: %s\n", d);
    CHECK(strstr(d, c->rule) && strstr(d, "broken.so") && !strstr(d, ", ,") &&
          !strstr(d, ", ;") && !strstr(d, "known:,"));
    return 0;
}

/* A probe whose record breaks a rule: once named, the plugin is
 * unavailable, the reason says which rule, and naming it fails cleanly. */
static int unavailable(const struct bcase *c)
{
    CHECK(!alloc_named(64 << 10));
    struct hp_backend_info bi;
    CHECK(plugin_entry(&bi));
    fprintf(stderr, "# entry: available %u, reason: %s\n", bi.available, bi.reason);
    CHECK(bi.available == 0 && strstr(bi.reason, c->rule));
    return 0;
}

/* resize_one, with another block of the plugin's live around it when the
 * case says so: that block keeps its bytes. */
static int resize(const struct bcase *c, size_t from, size_t to)
{
    unsigned char *other = NULL;
    uint64_t other_sum = 0;
    if (c->flags & F_NEIGHBOUR) {
        other = alloc_named(from);
        CHECK(other);
        fill(other, from, 11);
        other_sum = checksum(other, from);
    }
    int rc = resize_one(c, from, to);
    if (other) {
        CHECK(checksum(other, from) == other_sum);
        CHECK(hp_free(other) == HP_OK);
    }
    return rc;
}

static int run_case(const struct bcase *c)
{
    if (c->sc == SC_CANCEL_INIT)  /* before any other libhp call */
        return cancel_init();
    /* Every call fails there (HP_EENV): nothing to snapshot. */
    if (c->sc == SC_REFUSED_NAMELESS)
        return refused_nameless(c);
    /* Load, and make libhp's own one-time mappings, before the snapshot. */
    void *warm = hp_alloc(1 << 20, 0);
    CHECK(warm && hp_free(warm) == HP_OK && hp_cache_trim() == HP_OK);
    if (c->sc == SC_RECORD_KEPT) {  /* and the stack table's */
        struct hp_stack *s = hp_stack_create(256 << 10, 0);
        CHECK(s && hp_stack_destroy(s) == HP_OK && hp_stack_cache_trim() == HP_OK);
    }
    static struct ranges before, after;
    anon_ranges(&before);
    int rc = 0;
    switch (c->sc) {
    case SC_WORKS: {
        unsigned char *p = alloc_named(64 << 10);
        CHECK(p);
        fill(p, 64 << 10, 3);
        uint64_t sum = checksum(p, 64 << 10);
        unsigned char *q = hp_realloc(p, 1 << 20, 0);
        CHECK(q && checksum(q, 64 << 10) == sum);
        struct hp_block_info info = HP_BLOCK_INFO_INIT;
        CHECK(hp_info(q, &info) == HP_OK && !strcmp(info.backend, "broken"));
        CHECK(hp_free(q) == HP_OK);
        break;
    }
    case SC_ALLOC: {
        void *p = alloc_named(64 << 10);
        CHECK(!p && hp_last_error() == HP_EBACKEND && told(c->rule));
        break;
    }
    case SC_PROBE_HANG:
        return probe_hang();
    case SC_POPULATE:
        rc = populate_fails(c);
        break;
    case SC_INFO:
        rc = info_sane(c);
        break;
    case SC_ALIAS:
        rc = alias_refused(c);
        break;
    case SC_FREE_FAILS:
        rc = free_fails(c);
        break;
    case SC_TEXT:
        rc = text_printable(c);
        break;
    case SC_CLAIM:
        rc = claim_ranked(c);
        break;
    case SC_REJECTED:
        rc = rejected(c);
        break;
    case SC_UNAVAILABLE:
        rc = unavailable(c);
        break;
    case SC_ALLOC_1G: {
        struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
        o.backend = "broken";
        o.flags = HP_F_PAGE_1G;
        void *p = hp_alloc_ex(64 << 10, &o);
        CHECK(!p && hp_last_error() == HP_EBACKEND && told(c->rule));
        break;
    }
    case SC_FREE_GONE:
        rc = free_gone(c);
        break;
    case SC_FREE_LOGGED:
        rc = free_logged(c);
        break;
    case SC_GROW_WORKS:
        rc = grow_works();
        break;
    case SC_REFUSED_NAMED:
        rc = refused_named(c);
        break;
    case SC_REFUSED_NAMELESS:
        break;  /* above */
    case SC_BUILTINS_LOADED:
        rc = builtins_loaded(c);
        break;
    case SC_RECORD_KEPT:
        rc = record_kept();
        break;
    case SC_REFUSED_FILE:
        rc = refused_file(c);
        break;
    case SC_STACK_FAILS:
        rc = stack_fails(c);
        break;
    case SC_CANCEL_INIT:
        break;  /* above */
    case SC_STACK_BROKEN:
        rc = stack_broken(c);
        break;
    case SC_GROW:
        rc = resize(c, 64 << 10, 1 << 20);
        break;
    case SC_SHRINK:
        rc = resize(c, 1 << 20, 64 << 10);
        break;
    }
    if (rc)
        return rc;
    CHECK(hp_cache_trim() == HP_OK);
    anon_ranges(&after);
    uint64_t leaked = new_bytes(&before, &after);
    if (leaked && !(c->flags & F_PLUGIN_LEAKS)) {
        fprintf(stderr, "# %llu bytes of anonymous memory leaked\n", (unsigned long long)leaked);
        return 1;
    }
    return 0;
}

/* ---- in the test: each case in a child ---- */

static const char *plugin_dir;

static void one_case(void **state)
{
    const struct bcase *c = *state;
    const char *name = broken_case_names[c->id];
    char log[] = "/tmp/hp-broken-log-XXXXXX";
    int fd = mkstemp(log);
    assert_true(fd >= 0);
    unlink(log);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* This process never called libhp: the child loads it afresh, with
         * these variables. No exec, so memcheck follows the child. */
        dup2(fd, 2);
        /* cmocka's handlers would turn a crash into a longjmp back into its
         * runner, in this child: a crash must kill it, and be reported so. */
        static const int crashes[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
        for (size_t i = 0; i < sizeof(crashes) / sizeof(*crashes); i++)
            signal(crashes[i], SIG_DFL);
        setenv("HP_BACKEND_PATH", plugin_dir, 1);
        setenv("HP_BROKEN_CASE", name, 1);
        setenv("HP_DEBUG", "1", 1);
        if (c->sc == SC_POPULATE || c->sc == SC_REFUSED_NAMELESS || c->sc == SC_RECORD_KEPT ||
            c->sc == SC_STACK_FAILS || c->sc == SC_STACK_BROKEN)
            setenv("HP_BACKENDS", "broken", 1);  /* stacks name no backend */
        if (c->sc == SC_CLAIM)
            setenv("HP_CACHE_MAX", "0", 1);  /* no cache: every free unmaps, no reaper thread */
        alarm(getenv("HPTEST_VALGRIND") ? 120 : 30);  /* a hang is a SIGALRM death */
        exit(run_case(c));  /* exit: the sanitizers' and memcheck's leak checks run */
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        assert_int_equal(errno, EINTR);
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
        /* The case's own lines, and the last of libhp's. */
        char buf[1 << 16];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        const char *tail = n > 6000 ? buf + n - 6000 : buf;
        fprintf(stderr, "case %s: %s %d\n%s\n", name,
                WIFSIGNALED(status) ? (WTERMSIG(status) == SIGALRM ? "hung (alarm), signal"
                                                                   : "died of signal")
                                    : "exit status",
                WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), tail);
    }
    close(fd);
    assert_true(ok);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PLUGIN_DIR\n", argv[0]);
        return 2;
    }
    plugin_dir = argv[1];
    enum { N = sizeof(cases) / sizeof(*cases) };
    struct CMUnitTest tests[N];
    for (size_t i = 0; i < N; i++) {
        tests[i] = (struct CMUnitTest)cmocka_unit_test_prestate(one_case, (void *)&cases[i]);
        tests[i].name = broken_case_names[cases[i].id];
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
