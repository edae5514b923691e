/*
 * Pin every public struct's size and field offsets, every enum value and
 * flag: the running header must match abi/layout.txt exactly. Bindings
 * (Python, Rust) check themselves against the same file.
 * usage: test_layout LAYOUT_FILE   |   test_layout --dump
 */
#include <hp.h>
#include <hp/backend.h>

#include "abi_sizes.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct pin {
    const char *name;
    long long value;
};

#define SIZE(s) {"sizeof:" #s, (long long)sizeof(struct s)}
/* A field's offset and its size: a type change hidden by padding still shows. */
#define OFF(s, f) {#s "." #f, (long long)offsetof(struct s, f)}, \
                  {#s "." #f ":size", (long long)sizeof(((struct s *)0)->f)}
#define VAL(v) {#v, (long long)(v)}

static const struct pin pins[] = {
    SIZE(hp_alloc_opts), OFF(hp_alloc_opts, size), OFF(hp_alloc_opts, reserved),
    OFF(hp_alloc_opts, flags), OFF(hp_alloc_opts, backend), OFF(hp_alloc_opts, exclude),
    OFF(hp_alloc_opts, numa_mode), OFF(hp_alloc_opts, numa_max_node),
    OFF(hp_alloc_opts, numa_nodes),
    SIZE(hp_block_info), OFF(hp_block_info, size), OFF(hp_block_info, backend),
    OFF(hp_block_info, requested_page_size), OFF(hp_block_info, page_size),
    OFF(hp_block_info, usable_size), OFF(hp_block_info, mapped_size),
    OFF(hp_block_info, huge_bytes), OFF(hp_block_info, flags),
    OFF(hp_block_info, numa_node), OFF(hp_block_info, fd), OFF(hp_block_info, fd_offset),
    OFF(hp_block_info, pin), OFF(hp_block_info, reserved2), OFF(hp_block_info, numa_mode),
    OFF(hp_block_info, numa_count), OFF(hp_block_info, numa_mask),
    SIZE(hp_backend_info), OFF(hp_backend_info, size), OFF(hp_backend_info, available),
    OFF(hp_backend_info, kind), OFF(hp_backend_info, n_page_sizes), OFF(hp_backend_info, name),
    OFF(hp_backend_info, path), OFF(hp_backend_info, reason), OFF(hp_backend_info, page_sizes),
    OFF(hp_backend_info, pool_free), OFF(hp_backend_info, description),
    /* the plugin contract */
    SIZE(hp_host), OFF(hp_host, abi_version), OFF(hp_host, size), OFF(hp_host, log),
    OFF(hp_host, set_detail), OFF(hp_host, os_map), OFF(hp_host, os_unmap),
    OFF(hp_host, os_remap), OFF(hp_host, os_advise), OFF(hp_host, os_protect),
    OFF(hp_host, read_text), OFF(hp_host, measure_huge_bytes), OFF(hp_host, base_page_size),
    OFF(hp_host, os_memfd), OFF(hp_host, os_ftruncate), OFF(hp_host, os_close),
    OFF(hp_host, os_mbind), OFF(hp_host, os_getcpu), OFF(hp_host, os_page_node),
    SIZE(hp_backend_caps), OFF(hp_backend_caps, available), OFF(hp_backend_caps, flags),
    OFF(hp_backend_caps, n_page_sizes), OFF(hp_backend_caps, page_sizes),
    OFF(hp_backend_caps, pool_free), OFF(hp_backend_caps, page_flags),
    OFF(hp_backend_caps, reason),
    SIZE(hp_map_request), OFF(hp_map_request, flags), OFF(hp_map_request, len),
    OFF(hp_map_request, page_size), OFF(hp_map_request, align), OFF(hp_map_request, guard),
    SIZE(hp_mapping), OFF(hp_mapping, addr), OFF(hp_mapping, len), OFF(hp_mapping, map_addr),
    OFF(hp_mapping, map_len), OFF(hp_mapping, page_size), OFF(hp_mapping, cookie),
    OFF(hp_mapping, flags), OFF(hp_mapping, committed),
    SIZE(hp_block_query), OFF(hp_block_query, size), OFF(hp_block_query, flags),
    OFF(hp_block_query, numa_node), OFF(hp_block_query, fd), OFF(hp_block_query, fd_offset),
    SIZE(hp_backend_ops), OFF(hp_backend_ops, abi_version), OFF(hp_backend_ops, size),
    OFF(hp_backend_ops, name), OFF(hp_backend_ops, description), OFF(hp_backend_ops, kind),
    OFF(hp_backend_ops, init), OFF(hp_backend_ops, fini),
    OFF(hp_backend_ops, probe), OFF(hp_backend_ops, map), OFF(hp_backend_ops, unmap),
    OFF(hp_backend_ops, remap), OFF(hp_backend_ops, advise), OFF(hp_backend_ops, huge_bytes),
    OFF(hp_backend_ops, query),
    SIZE(hp_stack_opts), OFF(hp_stack_opts, size), OFF(hp_stack_opts, reserved),
    OFF(hp_stack_opts, flags), OFF(hp_stack_opts, guard_size), OFF(hp_stack_opts, numa_mode),
    OFF(hp_stack_opts, numa_max_node), OFF(hp_stack_opts, numa_nodes),
    SIZE(hp_stack_info), OFF(hp_stack_info, size), OFF(hp_stack_info, mode),
    OFF(hp_stack_info, kind), OFF(hp_stack_info, from_cache), OFF(hp_stack_info, source),
    OFF(hp_stack_info, flags), OFF(hp_stack_info, base_addr), OFF(hp_stack_info, usable_size),
    OFF(hp_stack_info, guard_addr), OFF(hp_stack_info, guard_size), OFF(hp_stack_info, page_size),
    OFF(hp_stack_info, resident_bytes), OFF(hp_stack_info, huge_bytes),
    SIZE(hp_stack_cache_config), OFF(hp_stack_cache_config, max_stacks),
    OFF(hp_stack_cache_config, max_bytes), OFF(hp_stack_cache_config, keep_bytes),
    SIZE(hp_stack_cache_stats), OFF(hp_stack_cache_stats, max_stacks),
    OFF(hp_stack_cache_stats, cached_stacks), OFF(hp_stack_cache_stats, hits),
    OFF(hp_stack_cache_stats, evictions),
    SIZE(hp_cache_config), OFF(hp_cache_config, size), OFF(hp_cache_config, reserved),
    OFF(hp_cache_config, max_bytes), OFF(hp_cache_config, idle_ms),
    OFF(hp_cache_config, pool_idle_ms),
    SIZE(hp_cache_stats_entry), OFF(hp_cache_stats_entry, backend),
    OFF(hp_cache_stats_entry, page_size), OFF(hp_cache_stats_entry, bytes),
    OFF(hp_cache_stats_entry, ranges),
    SIZE(hp_cache_stats), OFF(hp_cache_stats, size), OFF(hp_cache_stats, n_entries),
    OFF(hp_cache_stats, bytes), OFF(hp_cache_stats, ranges), OFF(hp_cache_stats, hits),
    OFF(hp_cache_stats, misses), OFF(hp_cache_stats, releases),
    OFF(hp_cache_stats, released_bytes), OFF(hp_cache_stats, adopted_bytes),
    OFF(hp_cache_stats, max_bytes), OFF(hp_cache_stats, idle_ms),
    OFF(hp_cache_stats, pool_idle_ms), OFF(hp_cache_stats, reaper_running),
    OFF(hp_cache_stats, entries),
    VAL(HP_CACHE_STATS_MAX_ENTRIES), VAL(HP_CACHE_MAX_BYTES), VAL(HP_CACHE_MAX_IDLE_MS),
    VAL(HP_STACK_LEAN), VAL(HP_STACK_HUGE), VAL(HP_STACK_HUGETLB), VAL(HP_STACK_THP),
    VAL(HP_STACK_ALLOW_LEAN), VAL(HP_STACK_POPULATE), VAL(HP_STACK_NOCACHE),
    VAL(HP_STACK_MODE_LEAN), VAL(HP_STACK_MODE_HUGE),
    /* values */
    VAL(HP_OK), VAL(HP_EINVAL), VAL(HP_ENOMEM), VAL(HP_ESIZE), VAL(HP_EFLAGS),
    VAL(HP_EFOREIGN), VAL(HP_EINTERIOR), VAL(HP_EDOUBLEFREE), VAL(HP_ENOHUGE),
    VAL(HP_ENOBACKEND), VAL(HP_EBACKEND), VAL(HP_EENV), VAL(HP_ENOTSUP), VAL(HP_ERANGE),
    VAL(HP_EOS),
    VAL(HP_KIND_OTHER), VAL(HP_KIND_HUGETLB), VAL(HP_KIND_THP), VAL(HP_KIND_MTHP),
    VAL(HP_KIND_BASE),
    VAL(HP_F_REQUIRE_HUGE), VAL(HP_F_POPULATE), VAL(HP_F_COLLAPSE), VAL(HP_F_NOZERO), VAL(HP_F_NOPOOL),
    VAL(HP_BLOCK_PIN_NONE), VAL(HP_BLOCK_PIN_NAMED), VAL(HP_BLOCK_PIN_ENV),
    VAL(HP_NUMA_DEFAULT), VAL(HP_NUMA_PREFER), VAL(HP_NUMA_BIND), VAL(HP_NUMA_INTERLEAVE),
    VAL(HP_F_PAGE_SHIFT_POS), VAL(HP_F_PAGE_SHIFT_MASK), VAL(HP_F_PAGE_4K), VAL(HP_F_PAGE_64K),
    VAL(HP_F_PAGE_2M), VAL(HP_F_PAGE_1G), VAL(HP_MAX_PAGE_SIZES), VAL(HP_VERSION_MAJOR),
    VAL(HP_BACKEND_ABI_VERSION), VAL(HP_PAGE_GUARANTEED), VAL(HP_PAGE_ADVISED),
    VAL(HP_CAPS_REPROBE), VAL(HP_MAP_CARVABLE), VAL(HP_MAP_SHARED), VAL(HP_MAP_POOL),
    /* The smallest size each function accepts: what the release that
     * introduced the struct passes (lib/abi_sizes.h). Raising one turns
     * that release's callers away with HP_EINVAL. */
    VAL(HP_ALLOC_OPTS_SIZE_V1_0), VAL(HP_BLOCK_INFO_SIZE_V1_0), VAL(HP_BACKEND_INFO_SIZE_V1_0),
    VAL(HP_STACK_OPTS_SIZE_V1_0), VAL(HP_STACK_INFO_SIZE_V1_0),
    VAL(HP_STACK_CACHE_CONFIG_SIZE_V1_0), VAL(HP_STACK_CACHE_STATS_SIZE_V1_0),
    VAL(HP_CACHE_CONFIG_SIZE_V1_1), VAL(HP_CACHE_STATS_SIZE_V1_1), VAL(HP_BLOCK_INFO_SIZE_V1_1),
    VAL(HP_ALLOC_OPTS_SIZE_V1_4), VAL(HP_BLOCK_INFO_SIZE_V1_4), VAL(HP_STACK_OPTS_SIZE_V1_4),
};

#define NPINS (sizeof(pins) / sizeof(*pins))

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--dump")) {
        for (size_t i = 0; i < NPINS; i++)
            printf("%s = %lld\n", pins[i].name, pins[i].value);
        return 0;
    }
    FILE *f = argc == 2 ? fopen(argv[1], "r") : NULL;
    if (!f) {
        fprintf(stderr, "usage: %s LAYOUT_FILE | --dump\n", argv[0]);
        return 2;
    }
    int seen[NPINS] = {0}, fail = 0, test = 0;
    char line[256];
    printf("1..%zu\n", NPINS + 1);
    unsigned unknown = 0;
    while (fgets(line, sizeof(line), f)) {
        char name[128];
        long long want;
        if (line[0] == '#' || sscanf(line, "%127s = %lld", name, &want) != 2)
            continue;
        size_t i = 0;
        while (i < NPINS && strcmp(pins[i].name, name))
            i++;
        if (i == NPINS) {
            printf("# %s is pinned in the file but unknown here\n", name);
            unknown++;
            continue;
        }
        seen[i] = 1;
        int ok = pins[i].value == want;
        fail |= !ok;
        printf("%s %d - %s = %lld%s\n", ok ? "ok" : "not ok", ++test, name, pins[i].value,
               ok ? "" : " (layout.txt pins another value: an ABI break)");
    }
    fclose(f);
    for (size_t i = 0; i < NPINS; i++)
        if (!seen[i]) {
            printf("not ok %d - %s is not pinned in layout.txt\n", ++test, pins[i].name);
            fail = 1;
        }
    printf("%s %d - nothing pinned is missing from the header (%u unknown)\n",
           unknown ? "not ok" : "ok", ++test, unknown);
    return fail || unknown;
}
