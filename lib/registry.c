#include "registry.h"
#include "hp/errors.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#define NSHARDS 64
#define FREED_RING 64
#define INITIAL_BUCKETS 64

struct shard {
    pthread_mutex_t lock;
    struct hp_block **buckets;
    size_t nbuckets;
    size_t count;
    const void *freed[FREED_RING];  /* recently freed addresses */
    unsigned freed_next;
};

static struct shard shards[NSHARDS];
static _Atomic uint64_t live;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void grow(struct shard *s);

static void lock_all(void)
{
    for (int i = 0; i < NSHARDS; i++)
        pthread_mutex_lock(&shards[i].lock);
}

static void unlock_all(void)
{
    for (int i = NSHARDS - 1; i >= 0; i--)
        pthread_mutex_unlock(&shards[i].lock);
}

static void init_shards(void)
{
    for (int i = 0; i < NSHARDS; i++) {
        pthread_mutex_init(&shards[i].lock, NULL);
        grow(&shards[i]);
    }
    /* A fork while another thread holds a shard lock would leave the child's
     * copy locked forever; holding all of them across fork prevents that. */
    pthread_atfork(lock_all, unlock_all, unlock_all);
}

static uint64_t mix(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p >> 12;
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return x;
}

static struct shard *shard_of(const void *p)
{
    pthread_once(&atfork_once, init_shards);
    return &shards[mix(p) % NSHARDS];
}

static size_t bucket_of(const struct shard *s, const void *p)
{
    return (size_t)((mix(p) / NSHARDS) & (s->nbuckets - 1));
}

/* Double the table; on allocation failure keep the old one (longer chains). */
static void grow(struct shard *s)
{
    size_t n = s->nbuckets ? s->nbuckets * 2 : INITIAL_BUCKETS;
    struct hp_block **nb = calloc(n, sizeof(*nb));
    if (!nb)
        return;
    struct shard tmp = {.buckets = nb, .nbuckets = n};
    for (size_t i = 0; i < s->nbuckets; i++) {
        struct hp_block *b = s->buckets[i];
        while (b) {
            struct hp_block *next = b->next;
            size_t k = bucket_of(&tmp, b->m.addr);
            b->next = nb[k];
            nb[k] = b;
            b = next;
        }
    }
    free(s->buckets);
    s->buckets = nb;
    s->nbuckets = n;
}

static void forget_freed(struct shard *s, const void *p)
{
    for (unsigned i = 0; i < FREED_RING; i++)
        if (s->freed[i] == p)
            s->freed[i] = NULL;
}

int32_t hp_registry_insert(struct hp_block *b)
{
    struct shard *s = shard_of(b->m.addr);
    pthread_mutex_lock(&s->lock);
    if (s->count >= s->nbuckets * 2)
        grow(s);
    if (!s->nbuckets) {
        pthread_mutex_unlock(&s->lock);
        return HP_ENOMEM;
    }
    size_t k = bucket_of(s, b->m.addr);
    b->next = s->buckets[k];
    s->buckets[k] = b;
    s->count++;
    forget_freed(s, b->m.addr);
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_add(&live, 1);
    return HP_OK;
}

/* Classify a pointer that is not the start of a live block. Interior
 * pointers need a scan of every shard; this is the error path only. The
 * live blocks are asked first: a freed address that a newer, larger block
 * now covers is inside that block, and says so. */
static int32_t classify_miss(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < NSHARDS; i++) {
        struct shard *s = &shards[i];
        pthread_mutex_lock(&s->lock);
        for (size_t k = 0; k < s->nbuckets; k++) {
            for (struct hp_block *b = s->buckets[k]; b; b = b->next) {
                uintptr_t start = (uintptr_t)b->m.addr;
                if (a > start && a - start < b->m.len) {
                    pthread_mutex_unlock(&s->lock);
                    return HP_EINTERIOR;
                }
            }
        }
        pthread_mutex_unlock(&s->lock);
    }
    struct shard *own = shard_of(p);
    int32_t code = HP_EFOREIGN;
    pthread_mutex_lock(&own->lock);
    for (unsigned i = 0; i < FREED_RING; i++)
        if (own->freed[i] == p)
            code = HP_EDOUBLEFREE;
    pthread_mutex_unlock(&own->lock);
    return code;
}

/* The link to the record of the block at p. Two records can share p: a
 * block being moved by hp_realloc stays registered under its old address
 * (busy) until the move is published, and once the old range is unmapped
 * the kernel may hand the same address to a new block. The new block is
 * the one p names, so a record that is not busy wins. */
static struct hp_block **find(struct shard *s, const void *p)
{
    if (!s->nbuckets)
        return NULL;
    struct hp_block **busy = NULL;
    for (struct hp_block **link = &s->buckets[bucket_of(s, p)]; *link; link = &(*link)->next) {
        if ((*link)->m.addr != p)
            continue;
        if (!(*link)->busy)
            return link;
        busy = link;
    }
    return busy;
}

struct hp_block *hp_registry_take(const void *p, int as_free, int32_t *code)
{
    struct shard *s = shard_of(p);
    pthread_mutex_lock(&s->lock);
    struct hp_block **link = find(s, p);
    if (!link) {
        pthread_mutex_unlock(&s->lock);
        *code = classify_miss(p);
        return NULL;
    }
    struct hp_block *b = *link;
    if (b->busy) {
        pthread_mutex_unlock(&s->lock);
        *code = HP_EINVAL;
        return NULL;
    }
    *link = b->next;
    s->count--;
    if (as_free) {
        s->freed[s->freed_next] = p;
        s->freed_next = (s->freed_next + 1) % FREED_RING;
    }
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_sub(&live, 1);
    *code = HP_OK;
    return b;
}

struct hp_block *hp_registry_begin(const void *p, int32_t *code, struct hp_block *copy)
{
    struct shard *s = shard_of(p);
    pthread_mutex_lock(&s->lock);
    struct hp_block **link = find(s, p);
    struct hp_block *b = link ? *link : NULL;
    *code = !b ? HP_EFOREIGN : b->busy ? HP_EINVAL : HP_OK;
    if (*code == HP_OK) {
        b->busy = 1;
        *copy = *b;
    }
    pthread_mutex_unlock(&s->lock);
    if (!b)
        *code = classify_miss(p);
    return *code == HP_OK ? b : NULL;
}

/* Unlink b, which is registered under its current address (lock held). It
 * is looked up by identity, not by address: another block may share it. */
static void unlink_block(struct shard *s, struct hp_block *b)
{
    if (!s->nbuckets)
        return;
    for (struct hp_block **link = &s->buckets[bucket_of(s, b->m.addr)]; *link;
         link = &(*link)->next) {
        if (*link == b) {
            *link = b->next;
            s->count--;
            return;
        }
    }
}

int32_t hp_registry_end(struct hp_block *b, const struct hp_block *work)
{
    struct shard *s = shard_of(b->m.addr);
    pthread_mutex_lock(&s->lock);
    if (work->m.addr == b->m.addr) {
        struct hp_block *next = b->next;
        *b = *work;
        b->next = next;
        b->busy = 0;
        pthread_mutex_unlock(&s->lock);
        return HP_OK;
    }
    unlink_block(s, b);
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_sub(&live, 1);
    *b = *work;
    b->busy = 0;
    return hp_registry_insert(b);
}

void hp_registry_drop(struct hp_block *b)
{
    struct shard *s = shard_of(b->m.addr);
    pthread_mutex_lock(&s->lock);
    unlink_block(s, b);
    pthread_mutex_unlock(&s->lock);
    atomic_fetch_sub(&live, 1);
    b->busy = 0;
}

int32_t hp_registry_peek(const void *p, struct hp_block *out)
{
    struct shard *s = shard_of(p);
    pthread_mutex_lock(&s->lock);
    struct hp_block **link = find(s, p);
    if (link)
        *out = **link;
    pthread_mutex_unlock(&s->lock);
    return link ? HP_OK : classify_miss(p);
}

int hp_registry_overlaps(const void *addr, uint64_t len, const void *resizing, int skip_busy)
{
    uintptr_t lo = (uintptr_t)addr, hi = lo + len;
    int hit = 0;
    pthread_once(&atfork_once, init_shards);
    for (int i = 0; i < NSHARDS && !hit; i++) {
        struct shard *s = &shards[i];
        pthread_mutex_lock(&s->lock);
        for (size_t k = 0; k < s->nbuckets && !hit; k++) {
            for (struct hp_block *b = s->buckets[k]; b && !hit; b = b->next) {
                uintptr_t start = (uintptr_t)b->m.map_addr;
                if (b->busy && (skip_busy || b->m.addr == resizing))
                    continue;
                hit = start < hi && lo < start + b->m.map_len;
            }
        }
        pthread_mutex_unlock(&s->lock);
    }
    return hit;
}

uint64_t hp_registry_count(void)
{
    return atomic_load(&live);
}

/* Unloading libhp (dlclose) would leak the shards' bucket tables. The
 * tables of empty shards go (a later insert makes a new one: code that still
 * calls libhp from a destructor keeps working); a shard that still holds live
 * blocks keeps its table, since those blocks may still be freed. */
__attribute__((destructor)) static void registry_fini(void)
{
    for (int i = 0; i < NSHARDS; i++) {
        struct shard *s = &shards[i];
        /* exit() may run this while another thread, or the very thread
         * exiting (exit from a signal handler), holds the lock: never wait. */
        if (pthread_mutex_trylock(&s->lock) != 0)
            continue;
        if (s->nbuckets && !s->count) {
            free(s->buckets);
            s->buckets = NULL;
            s->nbuckets = 0;
        }
        pthread_mutex_unlock(&s->lock);
    }
}
