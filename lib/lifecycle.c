/*
 * Teardown and trimming across the layers: the one place that knows the
 * order in which libhp's parts give their memory back, so that no lower
 * part calls up to shut a higher one down (docs/architecture.md).
 */
#include "abi_sizes.h"
#include "cache.h"
#include "error.h"
#include "loader.h"
#include "registry.h"
#include "stack.h"

#include "hp/cache.h"
#include "hp/errors.h"

/* Every cached range and every cached stack back to the kernel. */
HP_EXTERN(int32_t) hp_cache_trim(void)
{
    hp_cache_flush(NULL, 0);
    return hp_stack_cache_trim();
}

/* libhp's destructor. Cached ranges go back through their backends' unmap
 * first; then each backend's fini, unless blocks are still live: a later
 * destructor of the program may still free them through that backend, so
 * its state must stay (the process is ending anyway). */
__attribute__((destructor)) static void lifecycle_fini(void)
{
    hp_cache_shutdown();
    uint64_t live = hp_registry_count();
    if (live)
        hp_log("unloading with %llu live blocks: the backends' fini is not called",
               (unsigned long long)live);
    hp_loader_fini(!live);
}
