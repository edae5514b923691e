#include "abi_sizes.h"
#include "hp/introspect.h"
#include "hp/errors.h"
#include "error.h"
#include "loader.h"

#include <stdio.h>
#include <string.h>

HP_EXTERN(int32_t) hp_backend_count(void)
{
    struct hp_core *c = hp_core();
    return (int32_t)(c->n + c->n_rejected);
}

HP_EXTERN(int32_t) hp_backend_get(uint32_t index, struct hp_backend_info *info)
{
    const size_t min_info = HP_BACKEND_INFO_SIZE_V1_0;
    if (!info)
        return hp_fail(HP_EINVAL, "hp_backend_get: info is NULL");
    if (info->size < min_info)
        return hp_fail(HP_EINVAL, "hp_backend_get: info->size is %u, expected at least %zu",
                       info->size, min_info);
    struct hp_core *c = hp_core();
    if (index >= c->n + c->n_rejected)
        return hp_fail(HP_ERANGE, "hp_backend_get: index %u, only %u backends", index,
                       c->n + c->n_rejected);
    uint32_t size = info->size;
    struct hp_backend_info full = {.size = size};
    if (index >= c->n) {
        /* Display only: a path longer than the field is cut, never used. */
        const struct hp_rejected *r = &c->rejected[index - c->n];
        snprintf(full.name, sizeof(full.name), "%s", r->name);
        snprintf(full.path, sizeof(full.path), "%s", r->path ? r->path : "");
        snprintf(full.reason, sizeof(full.reason), "rejected: %.245s", r->reason);
    } else {
        struct hp_backend *b = &c->backends[index];
        struct hp_backend_caps caps;
        hp_backend_caps_now(b, UINT64_MAX, 0, &caps);
        snprintf(full.name, sizeof(full.name), "%s", b->name);
        snprintf(full.path, sizeof(full.path), "%s", b->path ? b->path : "");
        full.available = caps.available ? 1 : 0;
        full.kind = b->kind;
        full.n_page_sizes = caps.n_page_sizes;
        memcpy(full.page_sizes, caps.page_sizes, sizeof(full.page_sizes));
        memcpy(full.pool_free, caps.pool_free, sizeof(full.pool_free));
        snprintf(full.reason, sizeof(full.reason), "%s", caps.reason);
        snprintf(full.description, sizeof(full.description), "%s", b->description);
    }
    memcpy(info, &full, size < sizeof(full) ? size : sizeof(full));
    return HP_OK;
}
