#include "abi_sizes.h"
#include "cache.h"
#include "hp/cache.h"
#include "hp/errors.h"
#include "error.h"
#include "fork.h"
#include "loader.h"
#include "options.h"
#include "os.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define SHARD_RANGES 64
#define MAX_VICTIMS (SHARD_RANGES + 1)

struct range {
    uintptr_t start;
    uint64_t committed;   /* usable bytes from start */
    uint64_t cap;         /* committed + PROT_NONE reservation after it */
    uint64_t page_size;
    uint64_t origin;
    uint64_t stamp_ms;    /* last freed into or merged */
    uint64_t gen;         /* fork generation of its pages (hp_fork_gen) */
    uint64_t cookie;      /* the backend's, copied to every piece */
    uint32_t flags;       /* HP_MAP_* of the mapping it came from */
};

/* One shard per backend: allocations only look at their candidates'. */
struct shard {
    pthread_mutex_t lock;
    _Atomic unsigned n;
    struct range r[SHARD_RANGES];
};

struct victim {
    struct hp_backend *be;
    struct range r;
};

static struct shard shards[HP_MAX_BACKENDS];
static _Atomic uint64_t total, limit, idle_ms, pool_idle_ms, last_sweep_ms;
static _Atomic uint64_t hits, misses, adopted_bytes, released_bytes, releases;
/* Bytes taken out of a shard and not yet unmapped (another thread's release
 * in progress): a flush waits for them. */
static _Atomic uint64_t in_flight;
static pthread_once_t once = PTHREAD_ONCE_INIT;
/* Private hugetlb pages that existed at a fork are shared copy-on-write
 * with the child, and their reservations stay with the parent's VMAs
 * (the kernel's hugetlb reservation document in Documentation/mm/; mm/hugetlb.c
 * hugetlb_dup_vma_private clears the child's). A write to such a page by
 * anyone needs a fresh pool page: the child (no reservation) gets SIGBUS
 * when there is none, and the parent as the owner takes the page away from
 * the child instead (hugetlb_wp -> unmap_ref_private), whose next access,
 * a read included, is SIGBUS. Zeroing a reused range is such a write, so a
 * hugetlb range is only reused by the process and fork generation that
 * mapped it: older ones are released, never handed out.
 *
 * The generation is read before a mapping is made and moves on in the
 * atfork parent and child handlers, before the cache's locks are released:
 * a mapping that raced with a fork is labelled stale (never the other way
 * round), and no take can see a pre-fork range as current. The alternative,
 * MADV_DONTFORK on cached hugetlb ranges (children never inherit them, so
 * the parent could keep reusing them), would cost one more madvise per put
 * and take; the generation costs nothing until the process forks, and then
 * the parent's cached hugetlb ranges are released (their pages are shared
 * with the child until it lets them go). */
static int stale(uint32_t flags, uint64_t gen)
{
    return (flags & HP_MAP_POOL) && gen != hp_fork_gen();
}

/* The release thread (reap): started by a put when the cache holds memory
 * and none runs, gone when the cache is empty. */
static pthread_mutex_t reaper_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reaper_wake;
static pthread_t reaper;
static int reaper_joinable, reaper_quit;
static uint64_t reaper_failed_ms;
static _Atomic int reaper_running;

static void lock_all(void)
{
    for (int i = 0; i < HP_MAX_BACKENDS; i++)
        pthread_mutex_lock(&shards[i].lock);
    pthread_mutex_lock(&reaper_lock);
}

static void unlock_all(void)
{
    pthread_mutex_unlock(&reaper_lock);
    for (int i = HP_MAX_BACKENDS - 1; i >= 0; i--)
        pthread_mutex_unlock(&shards[i].lock);
}

static void init_wake(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&reaper_wake, &a);
    pthread_condattr_destroy(&a);
}

/* The generation moves on before any lock is released, so no take after
 * the fork can see a range from before it as current. */
static void parent_after_fork(void)
{
    hp_fork_gen_bump();
    unlock_all();
}

/* The child starts with an empty cache. What it inherited is the parent's
 * memory, shared copy-on-write: hugetlb ranges cannot be written without
 * unreserved pool pages (stale, above), and reusing the others would copy
 * every page anyway. Unmapping drops only the child's view. The parent's
 * release thread does not exist here; the next put starts one. */
static void child_after_fork(void)
{
    hp_fork_gen_bump();
    in_flight = 0;  /* another parent thread's release: not ours to wait for */
    reaper_running = 0;
    reaper_joinable = 0;
    reaper_quit = 0;
    init_wake();
    unlock_all();
    for (unsigned i = 0; i < HP_MAX_BACKENDS; i++) {
        struct shard *s = &shards[i];
        unsigned n = atomic_load(&s->n);
        for (unsigned k = 0; k < n; k++) {
            hp_os_unmap((void *)s->r[k].start, s->r[k].cap);
            atomic_fetch_sub(&total, s->r[k].committed);
        }
        atomic_store(&s->n, 0);
    }
}

static void init(void)
{
    for (int i = 0; i < HP_MAX_BACKENDS; i++)
        pthread_mutex_init(&shards[i].lock, NULL);
    const struct hp_options *o = hp_options();
    atomic_store(&limit, o->error == 0 ? o->cache_max : 0);
    atomic_store(&idle_ms, o->cache_idle_ms);
    atomic_store(&pool_idle_ms, o->cache_pool_idle_ms);
    init_wake();
    hp_fork_gen();  /* the fence's fork handlers first: they run after ours */
    pthread_atfork(lock_all, parent_after_fork, child_after_fork);
}

static uint64_t now_ms(void)
{
    return hp_os_clock_ns(CLOCK_MONOTONIC_COARSE) / 1000000;
}

/* The time ms from now on clock, for the pthread calls that wait until. */
static struct timespec deadline(int clock, uint64_t ms)
{
    uint64_t ns = hp_os_clock_ns(clock) + ms * 1000000;
    return (struct timespec){.tv_sec = (time_t)(ns / 1000000000u),
                             .tv_nsec = (long)(ns % 1000000000u)};
}

static struct hp_backend *backend_at(unsigned i)
{
    return &hp_core()->backends[i];
}

static struct shard *shard_of(const struct hp_backend *be, unsigned *index)
{
    pthread_once(&once, init);
    unsigned i = (unsigned)(be - hp_core()->backends);
    if (index)
        *index = i;
    return i < HP_MAX_BACKENDS ? &shards[i] : NULL;
}

int hp_cache_accepts(const struct hp_backend *be, const struct hp_mapping *m)
{
    if (!be->ops || (m->flags & (HP_MAP_CARVABLE | HP_MAP_SHARED)) != HP_MAP_CARVABLE ||
        m->page_size <= hp_os_page_size() || m->addr != m->map_addr ||
        ((uintptr_t)m->map_addr & (m->page_size - 1)) || hp_committed(m) > m->map_len)
        return 0;
    pthread_once(&once, init);
    return atomic_load_explicit(&limit, memory_order_relaxed) != 0;
}

/* Bytes a block of len takes from range e: whole pool pages (a hugetlb
 * page is the smallest piece its mapping can be cut into), else base pages. */
static uint64_t round_len(uint64_t len, const struct range *e, uint64_t base)
{
    uint64_t unit = (e->flags & HP_MAP_POOL) ? e->page_size : base;
    return (len + unit - 1) / unit * unit;
}

static void release(const struct victim *v)
{
    struct hp_mapping m = {sizeof(m), v->r.flags, (void *)v->r.start, v->r.committed,
                           (void *)v->r.start, v->r.cap, v->r.page_size, v->r.committed,
                           v->r.cookie};
    /* munmap can fail once (ENOMEM when splitting would pass
     * vm.max_map_count) and succeed on retry; a range that still will not
     * go is logged, since nobody can use it again. */
    if (hp_backend_unmap(v->be, &m) != HP_OK &&
        hp_backend_unmap(v->be, &m) != HP_OK)
        hp_log("cache: backend %s could not unmap %p (%llu bytes); the range is lost",
               v->be->name, (void *)v->r.start, (unsigned long long)v->r.cap);
    if (v->r.flags & HP_MAP_POOL)
        hp_backend_mark_stale(v->be);  /* pool pages came back */
    atomic_fetch_add(&released_bytes, v->r.committed);
    atomic_fetch_add(&releases, 1);
    atomic_fetch_sub(&in_flight, v->r.committed);
}

static void release_all(const struct victim *v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        release(&v[i]);
}

/* Remove range k of s into victims (lock held). */
static void drop(struct shard *s, unsigned k, struct hp_backend *be, struct victim *v,
                 unsigned *nv)
{
    unsigned n = atomic_load(&s->n);
    v[*nv].be = be;
    v[(*nv)++].r = s->r[k];
    atomic_fetch_add(&in_flight, s->r[k].committed);
    atomic_fetch_sub(&total, s->r[k].committed);
    s->r[k] = s->r[n - 1];
    atomic_store(&s->n, n - 1);
}

/* Cut the first n bytes off range e for a block (lock held). An
 * HP_MAP_POOL piece is split off as VMAs of its own first, so no two blocks
 * share a hugetlb VMA: moving part of a private hugetlb VMA (mremap, which
 * the hugetlbfs backend uses to grow) takes the reservation owner mark off
 * all of it (mm/mremap.c move_vma, through fixup_hugetlb_reservations on
 * recent kernels, calls mm/hugetlb.c clear_vma_resv_huge_pages on the
 * source VMA before it unmaps the moved range). The block left behind would
 * then no longer own its pages, and after a fork, with the pool empty, its
 * own copy-on-write would be SIGBUS instead of taking the page back from
 * the child (hugetlb_wp). On failure (-errno) e is unchanged, but may be
 * partly split: the caller drops it. */
static int cut_front(struct range *e, uint64_t n)
{
    if (e->flags & HP_MAP_POOL) {
        int rc = hp_os_split((void *)e->start, n);
        if (rc < 0) {
            hp_log("cache: cannot split a cached pool range (%s); releasing it", strerror(-rc));
            return rc;
        }
    }
    e->start += n;
    e->committed -= n;
    e->cap -= n;
    return 0;
}

static void remove_range(struct shard *s, unsigned k)
{
    unsigned n = atomic_load(&s->n);
    s->r[k] = s->r[n - 1];
    atomic_store(&s->n, n - 1);
}

/* How long a range may stay idle; 0: as long as the limit allows. */
static uint64_t bound_of(const struct range *r)
{
    return atomic_load((r->flags & HP_MAP_POOL) ? &pool_idle_ms : &idle_ms);
}

/* Ranges idle for too long, and hugetlb ranges from before a fork, leave
 * (lock held). */
static void drop_idle(struct shard *s, struct hp_backend *be, uint64_t now, struct victim *v,
                      unsigned *nv)
{
    for (unsigned k = 0; k < atomic_load(&s->n);) {
        uint64_t idle = bound_of(&s->r[k]);
        /* A put after this caller read the clock may stamp later than now. */
        if (*nv < MAX_VICTIMS && (stale(s->r[k].flags, s->r[k].gen) ||
                                  (idle && s->r[k].stamp_ms + idle <= now)))
            drop(s, k, be, v, nv);
        else
            k++;
    }
}

static int oldest(const struct shard *s)
{
    int best = -1;
    for (unsigned k = 0; k < atomic_load(&s->n); k++)
        if (best < 0 || s->r[k].stamp_ms < s->r[best].stamp_ms)
            best = (int)k;
    return best;
}

/* Bring the cache under max: least recently freed ranges of every shard go
 * first. One lock at a time; ranges are released unlocked. */
static void trim_to(uint64_t max)
{
    while (atomic_load(&total) > max) {
        int which = -1, k = -1;
        uint64_t stamp = UINT64_MAX;
        for (int i = 0; i < HP_MAX_BACKENDS; i++) {
            struct shard *s = &shards[i];
            if (!atomic_load(&s->n))
                continue;
            pthread_mutex_lock(&s->lock);
            int o = oldest(s);
            if (o >= 0 && s->r[o].stamp_ms < stamp)
                stamp = s->r[o].stamp_ms, which = i;
            pthread_mutex_unlock(&s->lock);
        }
        if (which < 0)
            return;
        struct shard *s = &shards[which];
        struct victim v[1];
        unsigned nv = 0;
        pthread_mutex_lock(&s->lock);
        k = oldest(s);
        if (k >= 0)
            drop(s, (unsigned)k, backend_at((unsigned)which), v, &nv);
        pthread_mutex_unlock(&s->lock);
        release_all(v, nv);
    }
}

/* Release every expired range (drop_idle) of every shard, one lock at a
 * time. Returns when the next one expires (UINT64_MAX: none will). */
static uint64_t release_expired(uint64_t now)
{
    uint64_t next = UINT64_MAX;
    for (int i = 0; i < HP_MAX_BACKENDS; i++) {
        struct shard *s = &shards[i];
        if (!atomic_load(&s->n))
            continue;
        struct hp_backend *be = backend_at((unsigned)i);
        struct victim v[MAX_VICTIMS];
        unsigned nv = 0;
        pthread_mutex_lock(&s->lock);
        drop_idle(s, be, now, v, &nv);
        for (unsigned k = 0; k < atomic_load(&s->n); k++) {
            uint64_t idle = bound_of(&s->r[k]);
            if (idle && s->r[k].stamp_ms + idle < next)
                next = s->r[k].stamp_ms + idle;
        }
        pthread_mutex_unlock(&s->lock);
        release_all(v, nv);
    }
    return next;
}

/* Idle release runs while idle bounds are set and memory is cached. */
static int want_reaper(void)
{
    return atomic_load(&total) && (atomic_load(&idle_ms) || atomic_load(&pool_idle_ms));
}

/* The release thread. It sleeps until the next range expires, but at most
 * half the shortest bound, so a range cached meanwhile waits at most that
 * much past its own bound; puts never wake it (no lock on their path). */
static void *reap(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&reaper_lock);
    for (;;) {
        if (reaper_quit)
            break;
        pthread_mutex_unlock(&reaper_lock);
        uint64_t now = now_ms(), next = release_expired(now);
        pthread_mutex_lock(&reaper_lock);
        if (reaper_quit)
            break;
        if (!want_reaper()) {
            /* A put that added memory meanwhile either sees running == 0
             * and starts a thread, or is seen here (both are seq_cst). */
            atomic_store(&reaper_running, 0);
            if (!want_reaper())
                break;
            atomic_store(&reaper_running, 1);
            continue;
        }
        uint64_t a = atomic_load(&idle_ms), b = atomic_load(&pool_idle_ms);
        uint64_t nap = (a && b ? (a < b ? a : b) : a + b) / 2 + 1;
        uint64_t due = next <= now ? now : next - now < nap ? next : now + nap;
        struct timespec ts = deadline(CLOCK_MONOTONIC, due > now ? due - now : 0);
        pthread_cond_timedwait(&reaper_wake, &reaper_lock, &ts);
    }
    atomic_store(&reaper_running, 0);
    pthread_mutex_unlock(&reaper_lock);
    return NULL;
}

/* Start the release thread if the cache needs one and none runs. It blocks
 * every signal (the process's handlers never run on it) and is joinable
 * only so that unloading libhp can wait for it (cache_fini). */
static void ensure_reaper(void)
{
    if (atomic_load(&reaper_running) || !want_reaper())
        return;
    pthread_mutex_lock(&reaper_lock);
    uint64_t now = now_ms();
    if (!atomic_load(&reaper_running) && !reaper_quit && want_reaper() &&
        (!reaper_failed_ms || now - reaper_failed_ms >= 1000)) {
        if (reaper_joinable)
            pthread_join(reaper, NULL);  /* it has left its loop: returns at once */
        reaper_joinable = 0;
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        atomic_store(&reaper_running, 1);
        if (pthread_create(&reaper, NULL, reap, NULL) == 0) {
            reaper_joinable = 1;
            reaper_failed_ms = 0;
        } else {
            atomic_store(&reaper_running, 0);
            reaper_failed_ms = now;  /* retried at most once a second */
            hp_log("cache: cannot start the release thread; idle memory is released by "
                   "later cache operations");
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    pthread_mutex_unlock(&reaper_lock);
}

/* Every shard's idle ranges, at most four times per shortest idle period:
 * the release thread's work, done by cache operations too (in case it
 * could not be started). */
static void sweep(uint64_t now)
{
    uint64_t a = atomic_load(&idle_ms), b = atomic_load(&pool_idle_ms);
    uint64_t idle = a && b ? (a < b ? a : b) : a + b, last = atomic_load(&last_sweep_ms);
    if (!idle || now - last < idle / 4 + 1 ||
        !atomic_compare_exchange_strong(&last_sweep_ms, &last, now))
        return;
    release_expired(now);
}

/* Join r with its neighbours of the same lineage (lock held): the ranges of
 * one VMA lineage come back together as their blocks are freed. */
static int merge(struct shard *s, const struct range *r, uint64_t now)
{
    int into = -1;
    for (unsigned k = 0; k < atomic_load(&s->n); k++) {
        struct range *e = &s->r[k];
        if (e->origin != r->origin || e->page_size != r->page_size || e->gen != r->gen ||
            e->flags != r->flags || e->cookie != r->cookie)
            continue;
        if (e->start + e->cap == r->start && e->cap == e->committed) {
            e->committed += r->committed;
            e->cap += r->cap;
            e->stamp_ms = now;
            into = (int)k;
            break;
        }
    }
    struct range joined = into >= 0 ? s->r[into] : *r;
    if (joined.cap != joined.committed)
        return into >= 0;
    for (unsigned k = 0; k < atomic_load(&s->n); k++) {
        struct range *e = &s->r[k];
        if ((int)k == into || e->origin != r->origin || e->page_size != r->page_size ||
            e->gen != r->gen || e->flags != r->flags || e->cookie != r->cookie ||
            e->start != joined.start + joined.cap)
            continue;
        if (into < 0) {
            e->start = joined.start;
            e->committed += joined.committed;
            e->cap += joined.cap;
            e->stamp_ms = now;
            return 1;
        }
        s->r[into].committed += e->committed;
        s->r[into].cap += e->cap;
        remove_range(s, k);
        return 1;
    }
    return into >= 0;
}

int hp_cache_put(struct hp_block *b)
{
    if (!hp_cache_accepts(b->backend, &b->m))
        return 0;
    unsigned index;
    struct shard *s = shard_of(b->backend, &index);
    uint64_t max = atomic_load(&limit), committed = hp_committed(&b->m);
    if (!s || committed > max || stale(b->m.flags, b->gen))
        return 0;
    /* hp_free undoes the caller's mprotect and madvise(MADV_DONTFORK), so
     * the next owner gets the pages read-write and inherited by fork; other
     * advice stays (hp/alloc.h, hp_free). */
    if (hp_os_renew(b->m.map_addr, committed) < 0)
        return 0;
    uint64_t now = now_ms();
    struct range r = {(uintptr_t)b->m.map_addr, committed, b->m.map_len, b->m.page_size, b->origin,
                      now, b->gen, b->m.cookie, b->m.flags};
    struct victim v[MAX_VICTIMS];
    unsigned nv = 0;
    pthread_mutex_lock(&s->lock);
    drop_idle(s, b->backend, now, v, &nv);
    if (!merge(s, &r, now)) {
        if (atomic_load(&s->n) == SHARD_RANGES)
            drop(s, (unsigned)oldest(s), b->backend, v, &nv);
        unsigned n = atomic_load(&s->n);
        s->r[n] = r;
        atomic_store(&s->n, n + 1);
    }
    atomic_fetch_add(&total, committed);
    pthread_mutex_unlock(&s->lock);
    release_all(v, nv);
    free(b);
    trim_to(max);
    sweep(now);
    ensure_reaper();
    return 1;
}

int32_t hp_cache_take(struct hp_backend *be, uint64_t page_size, uint64_t len,
                      struct hp_block *b, uint64_t *dirty)
{
    struct shard *s = shard_of(be, NULL);
    if (!s || !atomic_load_explicit(&s->n, memory_order_relaxed))
        return HP_ENOMEM;
    uint64_t base = hp_os_page_size();
    uint64_t extent = (len + page_size - 1) / page_size * page_size;
    uint64_t now = now_ms();
    struct victim v[MAX_VICTIMS];
    unsigned nv = 0;
    pthread_mutex_lock(&s->lock);
    drop_idle(s, be, now, v, &nv);
    int best = -1;
    for (unsigned k = 0; k < atomic_load(&s->n); k++) {
        const struct range *e = &s->r[k];
        if (e->page_size != page_size || e->committed < round_len(len, e, base) ||
            stale(e->flags, e->gen))
            continue;
        if (best < 0 || e->committed < s->r[best].committed ||
            (e->committed == s->r[best].committed && e->stamp_ms > s->r[best].stamp_ms))
            best = (int)k;
    }
    if (best < 0) {
        pthread_mutex_unlock(&s->lock);
        release_all(v, nv);
        return HP_ENOMEM;
    }
    struct range *e = &s->r[best];
    uintptr_t start = e->start;
    int cut = e->committed > extent;
    if (cut && cut_front(e, extent) < 0) {
        drop(s, (unsigned)best, be, v, &nv);
        pthread_mutex_unlock(&s->lock);
        release_all(v, nv);
        return HP_ENOMEM;
    }
    memset(&b->m, 0, sizeof(b->m));
    b->m.size = sizeof(b->m);
    b->m.flags = e->flags;
    b->m.cookie = e->cookie;
    b->m.addr = b->m.map_addr = (void *)start;
    b->m.len = round_len(len, e, base);
    b->m.page_size = page_size;
    b->origin = e->origin;
    b->gen = e->gen;
    uint64_t taken;
    if (cut) {
        taken = extent;
        b->m.map_len = b->m.committed = extent;
    } else {
        taken = e->committed;
        b->m.map_len = e->cap;
        b->m.committed = e->committed;
        remove_range(s, (unsigned)best);
    }
    atomic_fetch_sub(&total, taken);
    pthread_mutex_unlock(&s->lock);
    release_all(v, nv);
    atomic_fetch_add(&hits, 1);
    *dirty = taken;
    sweep(now);
    return HP_OK;
}

uint64_t hp_cache_adopt(struct hp_block *b, uint64_t len)
{
    struct hp_mapping *m = &b->m;
    if (!hp_cache_accepts(b->backend, m) || hp_committed(m) != m->map_len)
        return 0;
    struct shard *s = shard_of(b->backend, NULL);
    if (!s || !atomic_load_explicit(&s->n, memory_order_relaxed))
        return 0;
    uint64_t ps = m->page_size;
    uint64_t extent = (len + ps - 1) / ps * ps;
    if (extent <= m->map_len)
        return 0;
    uintptr_t end = (uintptr_t)m->map_addr + m->map_len;
    uint64_t want = extent - m->map_len, got = 0;
    struct victim v[1];
    unsigned nv = 0;
    pthread_mutex_lock(&s->lock);
    for (unsigned k = 0; k < atomic_load(&s->n); k++) {
        struct range *e = &s->r[k];
        if (e->start != end || e->origin != b->origin || e->page_size != ps ||
            e->flags != m->flags || e->cookie != m->cookie || stale(e->flags, e->gen))
            continue;
        if (e->committed > want) {
            if (cut_front(e, want) < 0) {
                drop(s, k, b->backend, v, &nv);
                break;
            }
            got = want;
            m->map_len += want;
            m->committed = m->map_len;
        } else {
            uint64_t committed = m->map_len + e->committed;
            got = e->committed;
            m->map_len += e->cap;
            m->committed = committed;
            remove_range(s, k);
        }
        atomic_fetch_sub(&total, got);
        break;
    }
    pthread_mutex_unlock(&s->lock);
    release_all(v, nv);
    atomic_fetch_add(&adopted_bytes, got);
    return got;
}

/* Release the ranges of be (every backend if NULL) and page_size (every
 * size if 0). at_exit: never wait, neither for a shard lock (the exiting
 * thread may hold one: exit from a signal handler) nor for releases in
 * flight; what is skipped goes with the process. */
static uint64_t flush(const struct hp_backend *be, uint64_t page_size, int at_exit)
{
    pthread_once(&once, init);
    uint64_t bytes = 0;
    for (unsigned i = 0; i < HP_MAX_BACKENDS; i++) {
        struct shard *s = &shards[i];
        if ((be && backend_at(i) != be) || !atomic_load(&s->n))
            continue;
        struct victim v[MAX_VICTIMS];
        unsigned nv = 0;
        if (!at_exit)
            pthread_mutex_lock(&s->lock);
        else if (pthread_mutex_trylock(&s->lock) != 0)
            continue;
        for (unsigned k = 0; k < atomic_load(&s->n);) {
            if (!page_size || s->r[k].page_size == page_size) {
                bytes += s->r[k].committed;
                drop(s, k, backend_at(i), v, &nv);
            } else {
                k++;
            }
        }
        pthread_mutex_unlock(&s->lock);
        release_all(v, nv);
    }
    /* What the release thread (or another caller) took out before us is
     * gone only once it is unmapped: a caller that flushes to free pool
     * pages, or hp_cache_trim, must find them back. munmap is quick; wait. */
    uint64_t pending = atomic_load(&in_flight);
    for (unsigned spins = 0; !at_exit && atomic_load(&in_flight) && spins < 100000; spins++)
        hp_os_sleep_ns(20000);
    return bytes + pending;
}

uint64_t hp_cache_flush(const struct hp_backend *be, uint64_t page_size)
{
    uint64_t bytes = flush(be, page_size, 0);
    /* An emptied cache needs no release thread: wake it so it leaves now
     * rather than at the end of its nap. */
    if (!atomic_load(&total) && atomic_load(&reaper_running)) {
        pthread_mutex_lock(&reaper_lock);
        pthread_cond_broadcast(&reaper_wake);
        pthread_mutex_unlock(&reaper_lock);
    }
    return bytes;
}

int hp_cache_overlaps(const void *addr, uint64_t len)
{
    uintptr_t lo = (uintptr_t)addr, hi = lo + len;
    int hit = 0;
    pthread_once(&once, init);
    for (unsigned i = 0; i < HP_MAX_BACKENDS && !hit; i++) {
        struct shard *s = &shards[i];
        if (!atomic_load_explicit(&s->n, memory_order_relaxed))
            continue;
        pthread_mutex_lock(&s->lock);
        for (unsigned k = 0; k < atomic_load(&s->n) && !hit; k++)
            hit = s->r[k].start < hi && lo < s->r[k].start + s->r[k].cap;
        pthread_mutex_unlock(&s->lock);
    }
    return hit;
}

uint64_t hp_cache_bytes(const struct hp_backend *be, uint64_t page_size)
{
    struct shard *s = shard_of(be, NULL);
    if (!s || !atomic_load_explicit(&s->n, memory_order_relaxed))
        return 0;
    uint64_t bytes = 0;
    pthread_mutex_lock(&s->lock);
    for (unsigned k = 0; k < atomic_load(&s->n); k++)
        if (!page_size || s->r[k].page_size == page_size)
            bytes += s->r[k].committed;
    pthread_mutex_unlock(&s->lock);
    return bytes;
}

void hp_zero_reused(void *addr, uint64_t len, int hugetlb)
{
    const uint64_t small = UINT64_C(1) << 20, sparse = UINT64_C(2) << 20;
    char *p = addr;
    if (len <= small) {
        memset(p, 0, len);
        return;
    }
    size_t base = hp_os_page_size();
    unsigned char vec[4096];
    for (uint64_t off = 0; off < len;) {
        uint64_t chunk = len - off < sizeof(vec) * base ? len - off : sizeof(vec) * base;
        if (hp_os_resident(p + off, chunk, vec) != 0) {
            memset(p + off, 0, chunk);
            off += chunk;
            continue;
        }
        size_t n = (size_t)((chunk + base - 1) / base);
        for (size_t i = 0; i < n;) {
            size_t j = i;
            int in = vec[i] & 1;
            while (j < n && (vec[j] & 1) == in)
                j++;
            char *at = p + off + i * base;
            uint64_t bytes = (uint64_t)(j - i) * base;
            if (off + (uint64_t)j * base > len)
                bytes = len - off - (uint64_t)i * base;
            /* Small holes are cheaper to fill than to ask the kernel about. */
            if (in || (!hugetlb && bytes < sparse))
                memset(at, 0, bytes);
            else if (!hugetlb && hp_os_advise(at, bytes, MADV_DONTNEED) != 0)
                memset(at, 0, bytes);
            i = j;
        }
        off += chunk;
    }
}

void hp_cache_get_figures(struct hp_cache_figures *out)
{
    pthread_once(&once, init);
    uint64_t ranges = 0;
    for (int i = 0; i < HP_MAX_BACKENDS; i++)
        ranges += atomic_load(&shards[i].n);
    out->bytes = atomic_load(&total);
    out->ranges = ranges;
    out->hits = atomic_load(&hits);
    out->misses = atomic_load(&misses);
    out->adopted = atomic_load(&adopted_bytes);
    out->released = atomic_load(&released_bytes);
    out->limit = atomic_load(&limit);
    out->idle_ms = atomic_load(&idle_ms);
}

static void set_limits(uint64_t max_bytes, uint64_t idle, uint64_t pool_idle)
{
    pthread_once(&once, init);
    atomic_store(&limit, max_bytes);
    atomic_store(&idle_ms, idle);
    atomic_store(&pool_idle_ms, pool_idle);
    trim_to(max_bytes);
    release_expired(now_ms());
    ensure_reaper();
}

void hp_cache_set_limits(uint64_t max_bytes, uint64_t idle)
{
    set_limits(max_bytes, idle, idle);
}

void hp_cache_count_miss(void)
{
    atomic_fetch_add_explicit(&misses, 1, memory_order_relaxed);
}

HP_EXTERN(int32_t) hp_cache_configure(const struct hp_cache_config *cfg)
{
    const size_t min_cfg = HP_CACHE_CONFIG_SIZE_V1_1;
    if (!cfg)
        return hp_fail(HP_EINVAL, "hp_cache_configure: cfg is NULL");
    if (cfg->size < min_cfg)
        return hp_fail(HP_EINVAL, "hp_cache_configure: cfg->size is %u, expected at least %zu",
                       cfg->size, min_cfg);
    if (cfg->reserved)
        return hp_fail(HP_EINVAL, "hp_cache_configure: cfg->reserved must be 0");
    if (cfg->max_bytes > HP_CACHE_MAX_BYTES)
        return hp_fail(HP_ERANGE, "hp_cache_configure: max_bytes %llu is above %llu",
                       (unsigned long long)cfg->max_bytes,
                       (unsigned long long)HP_CACHE_MAX_BYTES);
    if (cfg->idle_ms > HP_CACHE_MAX_IDLE_MS || cfg->pool_idle_ms > HP_CACHE_MAX_IDLE_MS)
        return hp_fail(HP_ERANGE, "hp_cache_configure: idle_ms %llu / pool_idle_ms %llu: at "
                       "most %u", (unsigned long long)cfg->idle_ms,
                       (unsigned long long)cfg->pool_idle_ms, HP_CACHE_MAX_IDLE_MS);
    set_limits(cfg->max_bytes, cfg->idle_ms, cfg->pool_idle_ms);
    return HP_OK;
}

/* The entry of out for backend i and page size ps, added if there is room. */
static struct hp_cache_stats_entry *entry_for(struct hp_cache_stats *out, unsigned i,
                                              uint64_t ps)
{
    const char *name = backend_at(i)->name;
    for (uint32_t e = 0; e < out->n_entries; e++)
        if (out->entries[e].page_size == ps && !strcmp(out->entries[e].backend, name))
            return &out->entries[e];
    if (out->n_entries == HP_CACHE_STATS_MAX_ENTRIES)
        return NULL;
    struct hp_cache_stats_entry *e = &out->entries[out->n_entries++];
    snprintf(e->backend, sizeof(e->backend), "%s", name ? name : "");
    e->page_size = ps;
    return e;
}

HP_EXTERN(int32_t) hp_cache_get_stats(struct hp_cache_stats *stats)
{
    const size_t min_stats = HP_CACHE_STATS_SIZE_V1_1;
    if (!stats)
        return hp_fail(HP_EINVAL, "hp_cache_get_stats: stats is NULL");
    if (stats->size < min_stats)
        return hp_fail(HP_EINVAL, "hp_cache_get_stats: stats->size is %u, expected at least "
                       "%zu", stats->size, min_stats);
    pthread_once(&once, init);
    struct hp_cache_stats full;
    memset(&full, 0, sizeof(full));
    full.size = stats->size;
    for (unsigned i = 0; i < HP_MAX_BACKENDS; i++) {
        struct shard *s = &shards[i];
        if (!atomic_load(&s->n))
            continue;
        pthread_mutex_lock(&s->lock);
        for (unsigned k = 0; k < atomic_load(&s->n); k++) {
            struct hp_cache_stats_entry *e = entry_for(&full, i, s->r[k].page_size);
            full.bytes += s->r[k].committed;
            full.ranges++;
            if (e) {
                e->bytes += s->r[k].committed;
                e->ranges++;
            }
        }
        pthread_mutex_unlock(&s->lock);
    }
    full.hits = atomic_load(&hits);
    full.misses = atomic_load(&misses);
    full.releases = atomic_load(&releases);
    full.released_bytes = atomic_load(&released_bytes);
    full.adopted_bytes = atomic_load(&adopted_bytes);
    full.max_bytes = atomic_load(&limit);
    full.idle_ms = atomic_load(&idle_ms);
    full.pool_idle_ms = atomic_load(&pool_idle_ms);
    full.reaper_running = (uint32_t)atomic_load(&reaper_running);
    memcpy(stats, &full, stats->size < sizeof(full) ? stats->size : sizeof(full));
    return HP_OK;
}

/* Unloading libhp (dlclose) must not leave the release thread running code
 * that is about to be unmapped, nor the cached ranges mapped; the backends'
 * fini must come after the last unmap of a cached range, so libhp's one
 * destructor (lib/loader.c) calls this first. At exit the thread is
 * waiting on its condition variable and leaves at once; the wait is
 * bounded in any case, so exit is never held up. */
void hp_cache_shutdown(void)
{
    /* The exiting thread may hold the lock (exit from a signal handler
     * that interrupted ensure_reaper): then the thread is left alone. */
    int joinable = 0;
    if (pthread_mutex_trylock(&reaper_lock) == 0) {
        reaper_quit = 1;
        joinable = reaper_joinable;
        reaper_joinable = 0;
        pthread_cond_broadcast(&reaper_wake);
        pthread_mutex_unlock(&reaper_lock);
    }
    if (joinable) {
        struct timespec until = deadline(CLOCK_REALTIME, 200);
        pthread_timedjoin_np(reaper, NULL, &until);
    }
    if (atomic_load(&total))
        flush(NULL, 0, 1);
}
