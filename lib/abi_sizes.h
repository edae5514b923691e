/*
 * The sizes of the public sized structs as the release that introduced them
 * shipped them: the smallest `size` field each function accepts. A struct
 * only grows at its end (docs/abi-policy.md), so a caller built against
 * that release passes exactly this size, and these numbers never change
 * when a field is added. x86-64 and every LP64 target; pinned against the
 * structs by the assertions below and against abi/layout.txt by
 * tests/abi/test_layout.c; tests/abi/test_sizes.c calls every function
 * with them.
 */
#ifndef HP_LIB_ABI_SIZES_H
#define HP_LIB_ABI_SIZES_H

#include "hp/alloc.h"
#include "hp/cache.h"
#include "hp/introspect.h"
#include "hp/stack.h"

#include <stddef.h>

/* libhp 1.0 (node HP_1.0 of abi/libhp.map). */
#define HP_ALLOC_OPTS_SIZE_V1_0 32u          /* ... exclude */
#define HP_BLOCK_INFO_SIZE_V1_0 88u          /* ... flags */
#define HP_BACKEND_INFO_SIZE_V1_0 816u       /* ... pool_free */
#define HP_STACK_OPTS_SIZE_V1_0 24u          /* ... guard_size */
#define HP_STACK_INFO_SIZE_V1_0 112u         /* ... huge_bytes */
#define HP_STACK_CACHE_CONFIG_SIZE_V1_0 32u  /* ... keep_bytes */
#define HP_STACK_CACHE_STATS_SIZE_V1_0 88u   /* ... evictions */
/* libhp 1.1 (node HP_1.1: the cache API). */
#define HP_CACHE_CONFIG_SIZE_V1_1 32u        /* ... pool_idle_ms */
#define HP_CACHE_STATS_SIZE_V1_1 96u         /* ... reaper_running; entries optional */
#define HP_BLOCK_INFO_SIZE_V1_1 104u         /* ... fd_offset (the backend's query) */
/* libhp 1.4 (node HP_1.4: NUMA placement, hp_block_nodes). Not minimums:
 * the sizes from which the placement fields are read or filled. */
#define HP_ALLOC_OPTS_SIZE_V1_4 48u          /* ... numa_nodes */
#define HP_BLOCK_INFO_SIZE_V1_4 128u         /* ... numa_mask */
#define HP_STACK_OPTS_SIZE_V1_4 40u          /* ... numa_nodes */

#define HP_SIZE_ENDS_AT(type, field, size) \
    _Static_assert(offsetof(type, field) + sizeof(((type *)0)->field) <= (size) && \
                   (size) <= sizeof(type), #type " of that release ends with " #field)

HP_SIZE_ENDS_AT(struct hp_alloc_opts, exclude, HP_ALLOC_OPTS_SIZE_V1_0);
HP_SIZE_ENDS_AT(struct hp_block_info, flags, HP_BLOCK_INFO_SIZE_V1_0);
HP_SIZE_ENDS_AT(struct hp_backend_info, pool_free, HP_BACKEND_INFO_SIZE_V1_0);
HP_SIZE_ENDS_AT(struct hp_stack_opts, guard_size, HP_STACK_OPTS_SIZE_V1_0);
HP_SIZE_ENDS_AT(struct hp_stack_info, huge_bytes, HP_STACK_INFO_SIZE_V1_0);
HP_SIZE_ENDS_AT(struct hp_stack_cache_config, keep_bytes, HP_STACK_CACHE_CONFIG_SIZE_V1_0);
HP_SIZE_ENDS_AT(struct hp_stack_cache_stats, evictions, HP_STACK_CACHE_STATS_SIZE_V1_0);
HP_SIZE_ENDS_AT(struct hp_cache_config, pool_idle_ms, HP_CACHE_CONFIG_SIZE_V1_1);
HP_SIZE_ENDS_AT(struct hp_cache_stats, reaper_running, HP_CACHE_STATS_SIZE_V1_1);
HP_SIZE_ENDS_AT(struct hp_block_info, fd_offset, HP_BLOCK_INFO_SIZE_V1_1);
HP_SIZE_ENDS_AT(struct hp_alloc_opts, numa_nodes, HP_ALLOC_OPTS_SIZE_V1_4);
HP_SIZE_ENDS_AT(struct hp_block_info, numa_mask, HP_BLOCK_INFO_SIZE_V1_4);
HP_SIZE_ENDS_AT(struct hp_stack_opts, numa_nodes, HP_STACK_OPTS_SIZE_V1_4);

#endif
