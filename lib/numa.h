/*
 * The NUMA facts the selection needs, gathered through the OS layer: which
 * nodes have memory, and which of them the calling thread's memory policy
 * and cpuset let serve the faults of a new hugetlb mapping (the rule itself
 * is lib/select.c, hp_select_pool_nodes). Thread-safe.
 */
#ifndef HP_LIB_NUMA_H
#define HP_LIB_NUMA_H

#include "nodes.h"
#include "os.h"

#include <stdint.h>

/* The nodes with memory (/sys/devices/system/node/has_memory, read once per
 * process); empty when the file is missing or unreadable (no NUMA support,
 * or a test root without it). */
const struct hp_nodes *hp_numa_with_memory(void);

/* 1, with *out, when the calling thread's policy and cpuset leave only some
 * of the nodes with memory to serve its hugetlb faults; 0 when any of them
 * may (the global pool figures hold): one node or none known (then no
 * system call is made), or get_mempolicy(2) failed. */
int hp_numa_pool_nodes(struct hp_nodes *out);

/* A request's placement (hp_alloc_opts, hp_stack_opts: numa_*). */
struct hp_placement {
    uint32_t mode;             /* HP_NUMA_*; HP_NUMA_DEFAULT: none */
    struct hp_nodes nodes;
};

/* Check a caller's placement fields and fill *out (mode 0 when none).
 * HP_OK, or HP_EINVAL with the detail set (what names the struct, for it):
 * an unknown mode, nodes NULL or empty with a mode or given without one,
 * max_node 0 or above HP_NODES_MAX, a node without memory (with no NUMA
 * information, every node but 0) or outside the thread's cpuset. */
int32_t hp_numa_placement(uint32_t mode, uint32_t max_node, const uint64_t *nodes,
                          const char *what, struct hp_placement *out);

/* hp_numa_pool_nodes for a placed request: the request's nodes and mode
 * replace the thread's policy (libhp gives the thread that policy while the
 * backend maps). */
int hp_numa_placed_pool_nodes(const struct hp_placement *pl, struct hp_nodes *out);

/* The kernel policy of a placement: *mode (HP_MPOL_*) and nodes. */
void hp_numa_policy_of(const struct hp_placement *pl, int *mode);

/* Where [addr, addr + len) lies now, at one address per stride bytes
 * (move_pages(2), nothing faulted in): *seen gets the nodes holding
 * resident pages, bytes[n] (if bytes is not NULL, for n < n_nodes) stride
 * bytes per resident sample on node n. Returns the number of nodes in
 * *seen, or -errno (-ENOSYS without NUMA support). */
int hp_numa_measure(const void *addr, uint64_t len, uint64_t stride, struct hp_nodes *seen,
                    uint64_t *bytes, uint32_t n_nodes);

/* Set the placement's policy on [addr, addr + len) with mbind(2) (no
 * pages moved). 0 or -errno. */
int hp_numa_bind_range(void *addr, uint64_t len, const struct hp_placement *pl);

/* Give the calling thread the placement's policy (hp_os_policy_swap); a
 * kernel without MPOL_PREFERRED_MANY (before 5.15) gets MPOL_PREFERRED of
 * the first node instead. 0 or -errno. */
int hp_numa_thread_swap(const struct hp_placement *pl, struct hp_os_policy *saved);

struct hp_backend;
struct hp_backend_caps;

/* Cap the pool figures of b's caps at what the pools of nodes hold, asking
 * b's node_pool op (hp/backend.h; nothing changes without one), by
 * hp_select_limit_pool. For the caps of a request for which
 * hp_numa_pool_nodes (placed 0) or hp_numa_placed_pool_nodes (placed 1)
 * returned 1. */
void hp_numa_limit_caps(struct hp_backend *b, const struct hp_nodes *nodes, int placed,
                        struct hp_backend_caps *caps);

/* Who allows the nodes, with the verb, for details: "the block's placement
 * allows" (placed), else "the thread's memory policy and cpuset allow". */
const char *hp_numa_who(int placed);

#endif
