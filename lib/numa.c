#include "numa.h"
#include "loader.h"
#include "os.h"
#include "select.h"

#include <pthread.h>

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

void hp_numa_limit_caps(struct hp_backend *b, const struct hp_nodes *nodes,
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
    hp_select_limit_pool(caps, node_free, text);
}
