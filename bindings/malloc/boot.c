/* The bootstrap allocator: serves the allocations libhp and the loader make
 * while an arena is being set up (hp_alloc's first call loads plugins with
 * dlopen, which allocates). Bump allocation from mmap'd chunks; freeing is
 * a no-op, so it must stay off every path a program drives. */
#include "hpm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define CHUNK ((size_t)1 << 20)
#define MAX_CHUNKS 256
#define HDR 16  /* size of the block, kept before it */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uintptr_t start, end; } chunks[MAX_CHUNKS];
static _Atomic unsigned nchunks;
static uintptr_t cur, lim;

static int add_chunk(size_t len)
{
    unsigned n = atomic_load(&nchunks);
    if (n == MAX_CHUNKS)
        return -1;
    void *p = hpm_os_map_rw(len);
    if (!p)
        return -1;
    chunks[n].start = (uintptr_t)p;
    chunks[n].end = (uintptr_t)p + len;
    atomic_store(&nchunks, n + 1);
    cur = (uintptr_t)p;
    lim = cur + len;
    return 0;
}

void *hpm_boot_alloc(size_t size, size_t align)
{
    if (align < HDR)
        align = HDR;
    if (size > ((size_t)1 << 40) || align > CHUNK / 4)
        return NULL;
    pthread_mutex_lock(&lock);
    uintptr_t at = (cur + HDR + align - 1) & ~(uintptr_t)(align - 1);
    if (!cur || at + size > lim) {
        size_t need = size + HDR + align;
        if (add_chunk(need > CHUNK ? (need + 4095) & ~(size_t)4095 : CHUNK)) {
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        at = (cur + HDR + align - 1) & ~(uintptr_t)(align - 1);
    }
    memcpy((void *)(at - sizeof(size_t)), &size, sizeof(size));
    cur = at + size;
    pthread_mutex_unlock(&lock);
    atomic_fetch_add(&hpm_ctr.boot_bytes, size);
    return (void *)at;
}

int hpm_boot_owns(const void *p)
{
    unsigned n = atomic_load(&nchunks);
    for (unsigned i = 0; i < n; i++)
        if ((uintptr_t)p >= chunks[i].start && (uintptr_t)p < chunks[i].end)
            return 1;
    return 0;
}

size_t hpm_boot_usable(const void *p)
{
    size_t size;
    memcpy(&size, (const char *)p - sizeof(size_t), sizeof(size));
    return size;
}

void hpm_boot_atfork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

void hpm_boot_atfork_release(void)
{
    pthread_mutex_unlock(&lock);
}
