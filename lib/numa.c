#include "numa.h"
#include "loader.h"
#include "os.h"
#include "select.h"
#include "error.h"
#include "hp/alloc.h"
#include "hp/errors.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

static struct hp_nodes with_memory;
static pthread_once_t with_memory_once = PTHREAD_ONCE_INIT;

static void read_with_memory(void)
{
    if (hp_os_read_nodelist("/sys/devices/system/node/has_memory", &with_memory) != 0)
        hp_nodes_clear(&with_memory);
}

const struct hp_nodes *hp_numa_with_memory(void)
{
    pthread_once(&with_memory_once, read_with_memory);
    return &with_memory;
}

int hp_numa_pool_nodes(struct hp_nodes *out)
{
    const struct hp_nodes *mem = hp_numa_with_memory();
    if (hp_nodes_count(mem) < 2)
        return 0;
    int mode;
    struct hp_nodes policy, mems;
    if (hp_os_mempolicy(&mode, &policy) != 0 || hp_os_mems_allowed(&mems) != 0)
        return 0;
    return hp_select_pool_nodes(mode, &policy, &mems, mem, out);
}

const char *hp_numa_who(int placed)
{
    return placed ? "the block's placement allows" : "the thread's memory policy and cpuset allow";
}

void hp_numa_limit_caps(struct hp_backend *b, const struct hp_nodes *nodes, int placed,
                        struct hp_backend_caps *caps)
{
    int (*op)(void *, uint64_t, const uint64_t *, uint32_t, uint64_t *) =
        b->ops ? HP_OP(b->ops, node_pool) : NULL;
    if (!op)
        return;
    uint64_t node_free[HP_MAX_PAGE_SIZES];
    int pooled = 0;
    for (unsigned k = 0; k < HP_MAX_PAGE_SIZES; k++) {
        node_free[k] = UINT64_MAX;
        if (k >= caps->n_page_sizes || caps->pool_free[k] == UINT64_MAX)
            continue;
        uint64_t pages = UINT64_MAX;
        if (op(b->self, caps->page_sizes[k], nodes->w, HP_NODES_MAX, &pages) == HP_OK)
            node_free[k] = pages;
        pooled = 1;
    }
    if (!pooled)
        return;
    char text[64];
    hp_nodes_format(nodes, text, sizeof(text));
    hp_select_limit_pool(caps, node_free, hp_numa_who(placed), text);
}

int32_t hp_numa_placement(uint32_t mode, uint32_t max_node, const uint64_t *nodes,
                          const char *what, struct hp_placement *out)
{
    memset(out, 0, sizeof(*out));
    if (mode == HP_NUMA_DEFAULT) {
        if (nodes)
            return hp_fail(HP_EINVAL, "%s->numa_nodes is set but numa_mode is HP_NUMA_DEFAULT",
                           what);
        return HP_OK;
    }
    if (mode > HP_NUMA_INTERLEAVE)
        return hp_fail(HP_EINVAL, "%s->numa_mode %u is not an HP_NUMA_* mode", what, mode);
    if (!nodes || max_node == 0 || max_node > HP_NODES_MAX)
        return hp_fail(HP_EINVAL, "%s->numa_nodes must be set, with numa_max_node from 1 to %u "
                       "(it is %u)", what, HP_NODES_MAX, max_node);
    for (uint32_t n = 0; n < max_node; n++)
        if (nodes[n / 64] >> (n % 64) & 1u)
            hp_nodes_set(&out->nodes, n);
    if (!hp_nodes_count(&out->nodes))
        return hp_fail(HP_EINVAL, "%s->numa_nodes names no node", what);
    struct hp_nodes mem = *hp_numa_with_memory(), mems;
    if (!hp_nodes_count(&mem))
        hp_nodes_set(&mem, 0);  /* no NUMA information: one node, 0 */
    for (unsigned n = 0; n < HP_NODES_MAX; n++)
        if (hp_nodes_has(&out->nodes, n) && !hp_nodes_has(&mem, n))
            return hp_fail(HP_EINVAL, "%s->numa_nodes: node %u has no memory", what, n);
    if (hp_nodes_count(hp_numa_with_memory()) >= 2 && hp_os_mems_allowed(&mems) == 0 &&
        hp_nodes_count(&mems)) {
        for (unsigned n = 0; n < HP_NODES_MAX; n++)
            if (hp_nodes_has(&out->nodes, n) && !hp_nodes_has(&mems, n))
                return hp_fail(HP_EINVAL, "%s->numa_nodes: node %u is outside the thread's "
                               "cpuset", what, n);
    }
    out->mode = mode;
    return HP_OK;
}

void hp_numa_policy_of(const struct hp_placement *pl, int *mode)
{
    switch (pl->mode) {
    case HP_NUMA_BIND:
        *mode = HP_MPOL_BIND;
        break;
    case HP_NUMA_INTERLEAVE:
        *mode = HP_MPOL_INTERLEAVE;
        break;
    default:
        *mode = hp_nodes_count(&pl->nodes) > 1 ? HP_MPOL_PREFERRED_MANY : HP_MPOL_PREFERRED;
        break;
    }
}

int hp_numa_placed_pool_nodes(const struct hp_placement *pl, struct hp_nodes *out)
{
    const struct hp_nodes *mem = hp_numa_with_memory();
    if (hp_nodes_count(mem) < 2)
        return 0;
    struct hp_nodes mems;
    if (hp_os_mems_allowed(&mems) != 0)
        return 0;
    int mode;
    hp_numa_policy_of(pl, &mode);
    return hp_select_pool_nodes(mode, &pl->nodes, &mems, mem, out);
}

/* The first node of a set. */
static unsigned first_node(const struct hp_nodes *s)
{
    for (unsigned n = 0; n < HP_NODES_MAX; n++)
        if (hp_nodes_has(s, n))
            return n;
    return 0;
}

int hp_numa_thread_swap(const struct hp_placement *pl, struct hp_os_policy *saved)
{
    int mode;
    hp_numa_policy_of(pl, &mode);
    int rc = hp_os_policy_swap(mode, &pl->nodes, saved);
    if (rc == -EINVAL && mode == HP_MPOL_PREFERRED_MANY) {
        struct hp_nodes one;
        hp_nodes_clear(&one);
        hp_nodes_set(&one, first_node(&pl->nodes));
        rc = hp_os_policy_swap(HP_MPOL_PREFERRED, &one, saved);
    }
    return rc;
}

int hp_numa_bind_range(void *addr, uint64_t len, const struct hp_placement *pl)
{
    int mode;
    hp_numa_policy_of(pl, &mode);
    /* mbind reads maxnode - 1 bits (mm/mempolicy.c get_nodes). */
    int rc = hp_os_mbind(addr, len, mode, (const unsigned long *)pl->nodes.w, HP_NODES_MAX + 1,
                         0);
    if (rc == -EINVAL && mode == HP_MPOL_PREFERRED_MANY) {
        struct hp_nodes one;
        hp_nodes_clear(&one);
        hp_nodes_set(&one, first_node(&pl->nodes));
        rc = hp_os_mbind(addr, len, HP_MPOL_PREFERRED, (const unsigned long *)one.w,
                         HP_NODES_MAX + 1, 0);
    }
    return rc;
}

int hp_numa_measure(const void *addr, uint64_t len, uint64_t stride, struct hp_nodes *seen,
                    uint64_t *bytes, uint32_t n_nodes)
{
    enum { BATCH = 512 };
    void *pages[BATCH];
    int status[BATCH];
    hp_nodes_clear(seen);
    if (bytes)
        memset(bytes, 0, sizeof(*bytes) * n_nodes);
    if (!stride)
        return -EINVAL;
    uint64_t n = (len + stride - 1) / stride;
    for (uint64_t done = 0; done < n;) {
        unsigned k = n - done < BATCH ? (unsigned)(n - done) : BATCH;
        for (unsigned i = 0; i < k; i++)
            pages[i] = (char *)addr + (done + i) * stride;
        int rc = hp_os_pages_nodes(pages, k, status);
        if (rc)
            return rc;
        for (unsigned i = 0; i < k; i++) {
            if (status[i] < 0 || (unsigned)status[i] >= HP_NODES_MAX)
                continue;  /* not resident (-ENOENT), or not mapped */
            hp_nodes_set(seen, (unsigned)status[i]);
            uint64_t at = (done + i) * stride;
            if (bytes && (uint32_t)status[i] < n_nodes)
                bytes[status[i]] += len - at < stride ? len - at : stride;
        }
        done += k;
    }
    return (int)hp_nodes_count(seen);
}
