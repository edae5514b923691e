/*
 * A set of NUMA nodes: bit n of the words is node n, the layout of the
 * kernel's nodemask_t and of the node masks mbind(2) and get_mempolicy(2)
 * take on LP64. 1024 nodes is the largest MAX_NUMNODES the kernel builds
 * with (NODES_SHIFT 10), so every node id the kernel reports fits.
 * Plain data, no I/O: lib/os.c fills them, lib/select.c reasons about them.
 */
#ifndef HP_LIB_NODES_H
#define HP_LIB_NODES_H

#include <stdint.h>

#define HP_NODES_MAX 1024u
#define HP_NODES_WORDS (HP_NODES_MAX / 64u)

struct hp_nodes {
    uint64_t w[HP_NODES_WORDS];
};

/* The memory policy modes of get_mempolicy(2) and mbind(2)
 * (linux/mempolicy.h), for the callers that reason about them. */
enum {
    HP_MPOL_DEFAULT = 0,
    HP_MPOL_PREFERRED = 1,
    HP_MPOL_BIND = 2,
    HP_MPOL_INTERLEAVE = 3,
    HP_MPOL_LOCAL = 4,
    HP_MPOL_PREFERRED_MANY = 5,
    HP_MPOL_WEIGHTED_INTERLEAVE = 6
};

static inline void hp_nodes_clear(struct hp_nodes *s)
{
    for (unsigned i = 0; i < HP_NODES_WORDS; i++)
        s->w[i] = 0;
}

static inline void hp_nodes_set(struct hp_nodes *s, unsigned node)
{
    if (node < HP_NODES_MAX)
        s->w[node / 64] |= UINT64_C(1) << (node % 64);
}

static inline int hp_nodes_has(const struct hp_nodes *s, unsigned node)
{
    return node < HP_NODES_MAX && ((s->w[node / 64] >> (node % 64)) & 1u);
}

static inline unsigned hp_nodes_count(const struct hp_nodes *s)
{
    unsigned n = 0;
    for (unsigned i = 0; i < HP_NODES_WORDS; i++)
        n += (unsigned)__builtin_popcountll(s->w[i]);
    return n;
}

/* out = a & b (out may be a or b). */
static inline void hp_nodes_and(struct hp_nodes *out, const struct hp_nodes *a,
                                const struct hp_nodes *b)
{
    for (unsigned i = 0; i < HP_NODES_WORDS; i++)
        out->w[i] = a->w[i] & b->w[i];
}

static inline int hp_nodes_equal(const struct hp_nodes *a, const struct hp_nodes *b)
{
    for (unsigned i = 0; i < HP_NODES_WORDS; i++)
        if (a->w[i] != b->w[i])
            return 0;
    return 1;
}

/* "0-1,3" into buf (cut to cap - 1 bytes, with "..." when cut). */
void hp_nodes_format(const struct hp_nodes *s, char *buf, unsigned long cap);
/* The reverse: a node list as sysfs prints it and cpuset.mems takes it
 * (comma-separated node ids and ranges "a-b", Documentation/admin-guide/
 * cgroup-v1/cpusets.rst; one final newline allowed; "" is the empty set)
 * into *s. 0, or -EINVAL for anything else (*s then undefined): a sign,
 * a space, an empty item inside the list, a range whose end is below its
 * start, a node id of HP_NODES_MAX or more. */
int hp_nodes_parse(const char *text, struct hp_nodes *s);

#endif
