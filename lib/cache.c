#include "cache.h"
#include "backend_util.h"
#include "loader.h"
#include "options.h"
#include "os.h"

#include <pthread.h>
#include <stdatomic.h>
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
static _Atomic uint64_t total, limit, idle_ms, last_sweep_ms;
static _Atomic uint64_t hits, misses, adopted_bytes, released_bytes;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void lock_all(void)
{
    for (int i = 0; i < HP_MAX_BACKENDS; i++)
        pthread_mutex_lock(&shards[i].lock);
}

static void unlock_all(void)
{
    for (int i = HP_MAX_BACKENDS - 1; i >= 0; i--)
        pthread_mutex_unlock(&shards[i].lock);
}

/* After fork the cached hugetlb pages are shared copy-on-write with the
 * parent, and the parent owns their reservations: a write in the child needs
 * a fresh pool page and raises SIGBUS when the pool is empty. The child gives
 * them up (unmapping only its own view) rather than hand them out. */
static void child_after_fork(void)
{
    unlock_all();
    for (unsigned i = 0; i < HP_MAX_BACKENDS; i++) {
        struct shard *s = &shards[i];
        unsigned n = atomic_load(&s->n);
        if (!n || hp_core()->backends[i].kind != HP_KIND_HUGETLB)
            continue;
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
    pthread_atfork(lock_all, unlock_all, child_after_fork);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
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
    static const char *const ours[] = {"hugetlbfs", "thp-madvise", "anon-orders"};
    if (!be->ops || m->page_size <= hp_os_page_size() || m->addr != m->map_addr ||
        ((uintptr_t)m->map_addr & (m->page_size - 1)))
        return 0;
    pthread_once(&once, init);
    if (!atomic_load_explicit(&limit, memory_order_relaxed))
        return 0;
    for (size_t i = 0; i < sizeof(ours) / sizeof(*ours); i++)
        if (!strcmp(be->name, ours[i]))
            return 1;
    return 0;
}

static void release(const struct victim *v)
{
    struct hp_mapping m = {sizeof(m), 0, (void *)v->r.start, v->r.cap, (void *)v->r.start,
                           v->r.cap, v->r.page_size, 0};
    v->be->ops->unmap(&m);
    if (v->be->kind == HP_KIND_HUGETLB)
        hp_backend_mark_stale(v->be);  /* pool pages came back */
    atomic_fetch_add(&released_bytes, v->r.committed);
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
    atomic_fetch_sub(&total, s->r[k].committed);
    s->r[k] = s->r[n - 1];
    atomic_store(&s->n, n - 1);
}

static void remove_range(struct shard *s, unsigned k)
{
    unsigned n = atomic_load(&s->n);
    s->r[k] = s->r[n - 1];
    atomic_store(&s->n, n - 1);
}

/* Ranges idle for too long leave (lock held). */
static void drop_idle(struct shard *s, struct hp_backend *be, uint64_t now, struct victim *v,
                      unsigned *nv)
{
    uint64_t idle = atomic_load(&idle_ms);
    if (!idle)
        return;
    for (unsigned k = 0; k < atomic_load(&s->n);) {
        if (now - s->r[k].stamp_ms >= idle && *nv < MAX_VICTIMS)
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

/* Every shard's idle ranges, at most four times per idle period. */
static void sweep(uint64_t now)
{
    uint64_t idle = atomic_load(&idle_ms), last = atomic_load(&last_sweep_ms);
    if (!idle || now - last < idle / 4 + 1 ||
        !atomic_compare_exchange_strong(&last_sweep_ms, &last, now))
        return;
    for (int i = 0; i < HP_MAX_BACKENDS; i++) {
        struct shard *s = &shards[i];
        if (!atomic_load(&s->n))
            continue;
        struct victim v[MAX_VICTIMS];
        unsigned nv = 0;
        pthread_mutex_lock(&s->lock);
        drop_idle(s, backend_at((unsigned)i), now, v, &nv);
        pthread_mutex_unlock(&s->lock);
        release_all(v, nv);
    }
}

/* Join r with its neighbours of the same lineage (lock held): the ranges of
 * one VMA lineage come back together as their blocks are freed. */
static int merge(struct shard *s, const struct range *r, uint64_t now)
{
    int into = -1;
    for (unsigned k = 0; k < atomic_load(&s->n); k++) {
        struct range *e = &s->r[k];
        if (e->origin != r->origin || e->page_size != r->page_size)
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
    uint64_t max = atomic_load(&limit), committed = hpb_committed(&b->m);
    if (!s || committed > max)
        return 0;
    uint64_t now = now_ms();
    struct range r = {(uintptr_t)b->m.map_addr, committed, b->m.map_len, b->m.page_size, b->origin,
                      now};
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
    return 1;
}

int32_t hp_cache_take(struct hp_backend *be, uint64_t page_size, uint64_t len,
                      struct hp_block *b, uint64_t *dirty)
{
    struct shard *s = shard_of(be, NULL);
    if (!s || !atomic_load_explicit(&s->n, memory_order_relaxed))
        return HP_ENOMEM;
    uint64_t unit = be->kind == HP_KIND_HUGETLB ? page_size : hp_os_page_size();
    uint64_t need = (len + unit - 1) / unit * unit;
    uint64_t extent = (need + page_size - 1) / page_size * page_size;
    uint64_t now = now_ms();
    struct victim v[MAX_VICTIMS];
    unsigned nv = 0;
    pthread_mutex_lock(&s->lock);
    drop_idle(s, be, now, v, &nv);
    int best = -1;
    for (unsigned k = 0; k < atomic_load(&s->n); k++) {
        const struct range *e = &s->r[k];
        if (e->page_size != page_size || e->committed < need)
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
    memset(&b->m, 0, sizeof(b->m));
    b->m.size = sizeof(b->m);
    b->m.addr = b->m.map_addr = (void *)e->start;
    b->m.len = need;
    b->m.page_size = page_size;
    b->origin = e->origin;
    uint64_t taken;
    if (e->committed > extent) {
        taken = extent;
        b->m.map_len = extent;
        e->start += extent;
        e->committed -= extent;
        e->cap -= extent;
    } else {
        taken = e->committed;
        b->m.map_len = e->cap;
        hpb_set_committed(&b->m, e->committed);
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
    if (!hp_cache_accepts(b->backend, m) || hpb_committed(m) != m->map_len)
        return 0;
    struct shard *s = shard_of(b->backend, NULL);
    if (!s || !atomic_load_explicit(&s->n, memory_order_relaxed))
        return 0;
    uint64_t ps = m->page_size;
    uint64_t unit = b->backend->kind == HP_KIND_HUGETLB ? ps : hp_os_page_size();
    uint64_t need = (len + unit - 1) / unit * unit;
    uint64_t extent = (need + ps - 1) / ps * ps;
    if (extent <= m->map_len)
        return 0;
    uintptr_t end = (uintptr_t)m->map_addr + m->map_len;
    uint64_t want = extent - m->map_len, got = 0;
    pthread_mutex_lock(&s->lock);
    for (unsigned k = 0; k < atomic_load(&s->n); k++) {
        struct range *e = &s->r[k];
        if (e->start != end || e->origin != b->origin || e->page_size != ps)
            continue;
        if (e->committed > want) {
            got = want;
            m->map_len += want;
            e->start += want;
            e->committed -= want;
            e->cap -= want;
        } else {
            uint64_t committed = m->map_len + e->committed;
            got = e->committed;
            m->map_len += e->cap;
            hpb_set_committed(m, committed);
            remove_range(s, k);
        }
        atomic_fetch_sub(&total, got);
        break;
    }
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_add(&adopted_bytes, got);
    return got;
}

uint64_t hp_cache_flush(const struct hp_backend *be, uint64_t page_size)
{
    pthread_once(&once, init);
    uint64_t bytes = 0;
    for (unsigned i = 0; i < HP_MAX_BACKENDS; i++) {
        struct shard *s = &shards[i];
        if ((be && backend_at(i) != be) || !atomic_load(&s->n))
            continue;
        struct victim v[MAX_VICTIMS];
        unsigned nv = 0;
        pthread_mutex_lock(&s->lock);
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
    return bytes;
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

void hp_cache_get_stats(struct hp_cache_stats *out)
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

void hp_cache_set_limits(uint64_t max_bytes, uint64_t idle)
{
    pthread_once(&once, init);
    atomic_store(&limit, max_bytes);
    atomic_store(&idle_ms, idle);
    trim_to(max_bytes);
}

void hp_cache_count_miss(void)
{
    atomic_fetch_add_explicit(&misses, 1, memory_order_relaxed);
}
