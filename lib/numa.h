/*
 * The NUMA facts the selection needs, gathered through the OS layer: which
 * nodes have memory, and which of them the calling thread's memory policy
 * and cpuset let serve the faults of a new hugetlb mapping (the rule itself
 * is lib/select.c, hp_select_pool_nodes). Thread-safe.
 */
#ifndef HP_LIB_NUMA_H
#define HP_LIB_NUMA_H

#include "nodes.h"

/* The nodes with memory (/sys/devices/system/node/has_memory, read once per
 * process); empty when the file is missing or unreadable (no NUMA support,
 * or a test root without it). */
const struct hp_nodes *hp_numa_with_memory(void);

/* 1, with *out, when the calling thread's policy and cpuset leave only some
 * of the nodes with memory to serve its hugetlb faults; 0 when any of them
 * may (the global pool figures hold): one node or none known (then no
 * system call is made), or get_mempolicy(2) failed. */
int hp_numa_pool_nodes(struct hp_nodes *out);

struct hp_backend;
struct hp_backend_caps;

/* Cap the pool figures of b's caps at what the pools of nodes hold, asking
 * b's node_pool op (hp/backend.h; nothing changes without one), by
 * hp_select_limit_pool. For the caps of a thread for which
 * hp_numa_pool_nodes returned 1. */
void hp_numa_limit_caps(struct hp_backend *b, const struct hp_nodes *nodes,
                        struct hp_backend_caps *caps);

#endif
