/* libhp-malloc's OS layer: the only mmap/munmap calls of libhp-malloc.so.
 * It is a DSO of its own and reaches libhp only through the public API, so
 * it cannot call libhp's (hidden) lib/os.c; these are the few raw mappings
 * it needs besides what hp_alloc serves: the placement reservation of the
 * arenas, base-page arenas when hp_alloc refuses, and the bootstrap chunks.
 * None of them allocates (they run inside malloc). */
#include "hpm.h"

#include <sys/mman.h>

void *hpm_os_map_rw(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void *hpm_os_reserve(size_t len)
{
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void hpm_os_unmap(void *addr, size_t len)
{
    /* Once more on failure: only a transient refusal (a VMA split that
     * could not allocate) can fail here, and a leaked range is only
     * address space. */
    if (munmap(addr, len) != 0)
        munmap(addr, len);
}
