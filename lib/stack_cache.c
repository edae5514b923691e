/* The stack handle table and the cache of released stacks (lib/stack.h). */
#include "abi_sizes.h"
#include "stack.h"
#include "hp/errors.h"
#include "error.h"
#include "fork.h"
#include "os.h"

#include <errno.h>
#include <string.h>

/* Records live in chunks of libhp's own mappings, mapped as needed and never
 * unmapped, so validating a handle is arithmetic on the pointer (it never
 * dereferences foreign memory) and a stale handle still points at a readable
 * record. */
#define CHUNK_RECORDS 4096u
#define MAX_CHUNKS (HP_STACK_MAX_HANDLES / CHUNK_RECORDS)

static struct {
    pthread_mutex_t lock;
    struct hp_stack *chunks[MAX_CHUNKS];
    uint32_t n_chunks;
    uint32_t high_water;             /* records ever used */
    uint32_t free_head, free_tail;   /* quarantine FIFO of FREE records (index + 1) */
    uint32_t n_free;
    uint32_t cache_head, cache_tail; /* CACHED records, most recently used first */
    uint64_t live;
    uint64_t swept_gen;              /* no stale hugetlb stack cached since this fork generation */
    struct hp_stack_cache_stats stats;
} T = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .stats = {sizeof(struct hp_stack_cache_stats), 0, HP_STACK_CACHE_DEFAULT_STACKS,
              HP_STACK_CACHE_DEFAULT_BYTES, HP_STACK_CACHE_DEFAULT_KEEP_BYTES, 0, 0, 0, 0, 0, 0,
              0},
};

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void lock_table(void)
{
    pthread_mutex_lock(&T.lock);
}

static void unlock_table(void)
{
    pthread_mutex_unlock(&T.lock);
}

/* The fork generation moves on before the lock is released on either
 * side, so no take can see a hugetlb stack from before the fork as
 * current (lib/fork.h). */
static void after_fork(void)
{
    hp_fork_gen_bump();
    unlock_table();
}

static void init_once(void)
{
    /* A fork while another thread holds the lock would leave the child's
     * copy locked forever. */
    hp_fork_gen();
    pthread_atfork(lock_table, after_fork, after_fork);
}

/* A cached stack of pool pages (hugetlb) from before a fork may share its
 * pages with the other process: writing them needs pool pages that nobody
 * reserved (mm/hugetlb.c hugetlb_wp), so it is never handed out again, in
 * the child or in the parent; it is unmapped instead. */
static int stale(const struct hp_stack_map *m)
{
    return (m->m.flags & HP_MAP_POOL) && m->gen != hp_fork_gen();
}

static void lock(void)
{
    pthread_once(&atfork_once, init_once);
    lock_table();
}

static struct hp_stack *at(uint32_t link)
{
    if (!link)
        return NULL;
    uint32_t i = link - 1;
    return &T.chunks[i / CHUNK_RECORDS][i % CHUNK_RECORDS];
}

static struct hp_stack *pop_free(void)
{
    struct hp_stack *r = at(T.free_head);
    T.free_head = r->next;
    if (!T.free_head)
        T.free_tail = 0;
    T.n_free--;
    return r;
}

/* Lock held. A never-used record, mapping a new chunk when needed (a syscall
 * under the lock, once per CHUNK_RECORDS records). */
static struct hp_stack *new_record(const char **why)
{
    if (T.high_water == HP_STACK_MAX_HANDLES) {
        *why = "too many stacks alive or cached at once (HP_STACK_MAX_HANDLES)";
        return NULL;
    }
    if (T.high_water == T.n_chunks * CHUNK_RECORDS) {
        size_t len = (size_t)CHUNK_RECORDS * sizeof(struct hp_stack);
        void *p;
        if (hp_os_map_records(len, &p) != 0) {
            *why = "cannot map the stack handle table (out of memory)";
            return NULL;
        }
        T.chunks[T.n_chunks++] = p;
    }
    struct hp_stack *r = at(++T.high_water);
    r->index = T.high_water;
    return r;
}

/* Lock held. A record for a new handle or cache entry: the oldest FREE one
 * once the quarantine is full, else a never-used one, else (table full) the
 * oldest FREE one anyway. NULL with *why set; never sets the thread's error
 * (a destroy that fails to cache still succeeds). */
static struct hp_stack *alloc_slot(const char **why)
{
    struct hp_stack *r = NULL;
    if (T.n_free > HP_STACK_HANDLE_QUARANTINE)
        r = pop_free();
    else if (!(r = new_record(why)) && T.n_free)
        r = pop_free();
    if (r) {
        uint32_t index = r->index;
        memset(r, 0, sizeof(*r));
        r->index = index;
    }
    return r;
}

static uint32_t index_of(const struct hp_stack *r)
{
    return r->index;
}

/* Lock held. Into the quarantine, at its young end. */
static void free_slot(struct hp_stack *r)
{
    r->state = HP_STACK_FREE;
    r->next = 0;
    if (T.free_tail)
        at(T.free_tail)->next = index_of(r);
    else
        T.free_head = index_of(r);
    T.free_tail = index_of(r);
    T.n_free++;
}

static void cache_unlink(struct hp_stack *r)
{
    if (r->prev)
        at(r->prev)->next = r->next;
    else
        T.cache_head = r->next;
    if (r->next)
        at(r->next)->prev = r->prev;
    else
        T.cache_tail = r->prev;
    r->next = r->prev = 0;
    T.stats.cached_stacks--;
    T.stats.cached_bytes -= r->m.usable;
    if (r->m.kept)
        T.stats.kept_bytes -= r->m.usable;
}

static void cache_push_head(struct hp_stack *r)
{
    r->prev = 0;
    r->next = T.cache_head;
    if (T.cache_head)
        at(T.cache_head)->prev = index_of(r);
    else
        T.cache_tail = index_of(r);
    T.cache_head = index_of(r);
    T.stats.cached_stacks++;
    T.stats.cached_bytes += r->m.usable;
    if (r->m.kept)
        T.stats.kept_bytes += r->m.usable;
}

/* Lock held. The record s points at, or an error for NULL, foreign and
 * destroyed handles. */
static int32_t validate(const struct hp_stack *s, const char *fn, struct hp_stack **out)
{
    if (!s)
        return hp_fail(HP_EINVAL, "%s: the stack handle is NULL", fn);
    uintptr_t p = (uintptr_t)s;
    const uintptr_t chunk_len = (uintptr_t)CHUNK_RECORDS * sizeof(struct hp_stack);
    for (uint32_t c = 0; c < T.n_chunks; c++) {
        uintptr_t lo = (uintptr_t)T.chunks[c];
        if (p < lo || p - lo >= chunk_len)
            continue;
        uintptr_t off = p - lo;
        uint32_t i = c * CHUNK_RECORDS + (uint32_t)(off / sizeof(struct hp_stack));
        if (off % sizeof(struct hp_stack) || i >= T.high_water)
            break;
        struct hp_stack *r = at(i + 1);
        if (r->state == HP_STACK_FREE || r->state == HP_STACK_CACHED)
            return hp_fail(HP_EDOUBLEFREE, "%s(%p): the stack was already destroyed", fn,
                           (const void *)s);
        *out = r;
        return HP_OK;
    }
    return hp_fail(HP_EFOREIGN, "%s(%p): not a stack handle returned by libhp", fn,
                   (const void *)s);
}

int32_t hp_stack_table_add(const struct hp_stack_map *m, uint64_t flags, uint32_t from_cache,
                           struct hp_stack **out)
{
    const char *why = "";
    lock();
    struct hp_stack *r = alloc_slot(&why);
    if (r) {
        r->state = HP_STACK_LIVE;
        r->flags = flags;
        r->from_cache = from_cache;
        r->m = *m;
        T.live++;
    }
    unlock_table();
    if (!r)
        return hp_fail(HP_ENOMEM, "no record for a new stack: %s", why);
    *out = r;
    return HP_OK;
}

int32_t hp_stack_table_get(const struct hp_stack *s, const char *fn, struct hp_stack *copy)
{
    struct hp_stack *r;
    lock();
    int32_t rc = validate(s, fn, &r);
    if (rc == HP_OK)
        *copy = *r;
    unlock_table();
    return rc;
}

static int32_t wrong_state(const struct hp_stack *r, const char *fn)
{
    switch (r->state) {
    case HP_STACK_THREAD:
        return hp_fail(HP_EINVAL, "%s(%p): a thread runs on this stack; release it with "
                       "hp_stack_thread_join", fn, (const void *)r);
    case HP_STACK_JOINING:
        return hp_fail(HP_EINVAL, "%s(%p): the thread on this stack is being joined", fn,
                       (const void *)r);
    default:
        return hp_fail(HP_EINVAL, "%s(%p): no thread of hp_stack_thread_create runs on this "
                       "stack", fn, (const void *)r);
    }
}

int32_t hp_stack_table_retire(struct hp_stack *s, uint32_t want, const char *fn,
                              struct hp_stack *copy)
{
    struct hp_stack *r;
    lock();
    int32_t rc = validate(s, fn, &r);
    if (rc == HP_OK && r->state != want)
        rc = wrong_state(r, fn);
    if (rc == HP_OK) {
        *copy = *r;
        free_slot(r);
        T.live--;
    }
    unlock_table();
    return rc;
}

int32_t hp_stack_table_set_thread(struct hp_stack *s, pthread_t thread)
{
    struct hp_stack *r;
    lock();
    int32_t rc = validate(s, "hp_stack_thread_create", &r);
    if (rc == HP_OK) {
        r->thread = thread;
        r->state = HP_STACK_THREAD;
    }
    unlock_table();
    return rc;
}

int32_t hp_stack_table_begin_join(struct hp_stack *s, const char *fn, pthread_t *thread)
{
    struct hp_stack *r;
    lock();
    int32_t rc = validate(s, fn, &r);
    if (rc == HP_OK && r->state != HP_STACK_THREAD)
        rc = wrong_state(r, fn);
    if (rc == HP_OK) {
        r->state = HP_STACK_JOINING;
        *thread = r->thread;
    }
    unlock_table();
    return rc;
}

void hp_stack_table_end_join(struct hp_stack *s)
{
    lock();
    s->state = HP_STACK_THREAD;
    unlock_table();
}

int hp_stack_table_overlaps(const void *addr, uint64_t len)
{
    uintptr_t lo = (uintptr_t)addr, hi = lo + len;
    int hit = 0;
    lock();
    for (uint32_t i = 0; i < T.high_water && !hit; i++) {
        const struct hp_stack *r = at(i + 1);
        uintptr_t start = (uintptr_t)r->m.m.map_addr;
        hit = r->state != HP_STACK_FREE && start < hi && lo < start + r->m.m.map_len;
    }
    unlock_table();
    return hit;
}

uint64_t hp_stack_table_live(void)
{
    lock();
    uint64_t n = T.live;
    unlock_table();
    return n;
}

static void evict(int everything);

int32_t hp_stack_cache_take(uint64_t page_size, uint32_t need, uint32_t refuse, uint64_t usable,
                            uint64_t guard, uint64_t flags, struct hp_stack **out)
{
    lock();
    struct hp_stack *r = at(T.cache_head), *found = NULL;
    for (; r; r = at(r->next)) {
        uint32_t mf = r->m.m.flags;
        if (r->m.m.page_size != page_size || (mf & need) != need || (mf & refuse) ||
            r->m.usable != usable || r->m.guard != guard || stale(&r->m))
            continue;
        if (!found || r->m.kept)
            found = r;
        if (r->m.kept)
            break;
    }
    if (found) {
        /* The cached record becomes the handle. It never was a handle in
         * its current life: it came from the quarantine like any new one. */
        cache_unlink(found);
        found->state = HP_STACK_LIVE;
        found->flags = flags;
        found->from_cache = 1;
        found->m.kept = 0;
        T.live++;
        T.stats.hits++;
        *out = found;
    } else {
        T.stats.misses++;
    }
    unlock_table();
    evict(0);
    return found ? 1 : 0;
}

/* Unmap the least recently used cached stack while the cache is over its
 * bounds (all of them if everything is set). One at a time, so the lock is
 * never held across munmap. */
static void evict(int everything)
{
    for (;;) {
        struct hp_stack_map m;
        lock();
        struct hp_stack *r = at(T.cache_tail);
        int over = r && (everything || T.stats.cached_stacks > T.stats.max_stacks ||
                         T.stats.cached_bytes > T.stats.max_bytes);
        /* After a fork, the stale hugetlb stacks go, one by one. */
        if (!over && T.swept_gen != hp_fork_gen()) {
            for (struct hp_stack *o = r; o && !over; o = at(o->prev))
                if (stale(&o->m))
                    r = o, over = 1;
            if (!over)
                T.swept_gen = hp_fork_gen();
        }
        /* Too much kept after the budget was lowered: the oldest kept goes. */
        if (r && !over && T.stats.kept_bytes > T.stats.keep_bytes) {
            while (r && !r->m.kept)
                r = at(r->prev);
            over = r != NULL;
        }
        if (over) {
            m = r->m;
            cache_unlink(r);
            free_slot(r);
            T.stats.evictions++;
        }
        unlock_table();
        if (!over)
            return;
        hp_stack_unmap(&m);
    }
}

int32_t hp_stack_cache_put(const struct hp_stack_map *m, uint64_t flags)
{
    struct hp_stack_map c = *m;
    lock();
    int wanted = !(flags & HP_STACK_NOCACHE) && T.stats.max_stacks > 0 &&
                 c.usable <= T.stats.max_bytes;
    /* Shared memory (a memfd, say) is another process's too: never reused. */
    wanted = wanted && !stale(&c) && !(c.m.flags & HP_MAP_SHARED);
    /* A placed stack's memory carries its mbind policy (lib/alloc.c retire). */
    wanted = wanted && !c.placed;
    c.kept = wanted && T.stats.kept_bytes + c.usable <= T.stats.keep_bytes;
    unlock_table();
    if (wanted && !c.kept) {
        /* Dropping hugetlb pages frees them but keeps them reserved for
         * this mapping (resv_hugepages, Linux 6.18): the pool gains
         * nothing, so pool memory is unmapped instead. */
        if (c.m.flags & HP_MAP_POOL) {
            wanted = 0;
        } else if (hp_os_drop_pages(c.m.addr, c.usable) < 0) {
            hp_log("stack %p: dropping its pages failed; unmapping instead of caching",
                   c.m.addr);
            wanted = 0;
        }
    }
    if (!wanted)
        return hp_stack_unmap(&c);
    lock();
    /* Other threads may have filled the keep budget meanwhile. */
    struct hp_stack *r = NULL;
    const char *why = "";
    if (!c.kept || T.stats.kept_bytes + c.usable <= T.stats.keep_bytes)
        r = alloc_slot(&why);
    if (r) {
        r->state = HP_STACK_CACHED;
        r->m = c;
        cache_push_head(r);
        T.stats.released += !c.kept;
    }
    unlock_table();
    if (!r)
        return hp_stack_unmap(&c);
    evict(0);
    return HP_OK;
}

HP_EXTERN(int32_t) hp_stack_cache_configure(const struct hp_stack_cache_config *cfg)
{
    const size_t min_cfg = HP_STACK_CACHE_CONFIG_SIZE_V1_0;
    if (!cfg)
        return hp_fail(HP_EINVAL, "hp_stack_cache_configure: cfg is NULL");
    if (cfg->size < min_cfg)
        return hp_fail(HP_EINVAL, "hp_stack_cache_configure: cfg->size is %u, expected at "
                       "least %zu", cfg->size, min_cfg);
    if (cfg->reserved)
        return hp_fail(HP_EINVAL, "hp_stack_cache_configure: cfg->reserved must be 0");
    if (cfg->max_stacks > HP_STACK_CACHE_MAX_STACKS)
        return hp_fail(HP_ERANGE, "hp_stack_cache_configure: max_stacks %llu is above %u",
                       (unsigned long long)cfg->max_stacks, HP_STACK_CACHE_MAX_STACKS);
    lock();
    T.stats.max_stacks = cfg->max_stacks;
    T.stats.max_bytes = cfg->max_bytes;
    T.stats.keep_bytes = cfg->keep_bytes;
    unlock_table();
    evict(0);
    return HP_OK;
}

HP_EXTERN(int32_t) hp_stack_cache_get_stats(struct hp_stack_cache_stats *stats)
{
    const size_t min_stats = HP_STACK_CACHE_STATS_SIZE_V1_0;
    if (!stats)
        return hp_fail(HP_EINVAL, "hp_stack_cache_get_stats: stats is NULL");
    if (stats->size < min_stats)
        return hp_fail(HP_EINVAL, "hp_stack_cache_get_stats: stats->size is %u, expected at "
                       "least %zu", stats->size, min_stats);
    uint32_t size = stats->size;
    lock();
    struct hp_stack_cache_stats full = T.stats;
    unlock_table();
    full.size = size;
    memcpy(stats, &full, size < sizeof(full) ? size : sizeof(full));
    return HP_OK;
}

HP_EXTERN(int32_t) hp_stack_cache_trim(void)
{
    evict(1);
    return HP_OK;
}
