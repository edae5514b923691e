/*
 * The plugin ABI as a binary, for abidiff (tools/ci/stages/30-abi.sh against
 * abi/backend.abi): a minimal plugin whose exported functions reach every
 * type of include/hp/backend.h — the descriptor and, through its op
 * pointers, the capability record, request, mapping and block query; the
 * upcall table through the entry point. abidw records their layouts and the
 * op signatures from the debug info; a change in any of them changes the
 * dump. Never loaded by libhp (it is not in a backend directory).
 */
#include <hp/backend.h>

static const struct hp_backend_ops anchor_ops = {
    .abi_version = HP_BACKEND_ABI_VERSION,
    .size = sizeof(struct hp_backend_ops),
    .name = "abi-anchor",
};

HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *host);
HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *host)
{
    (void)host;
    return &anchor_ops;
}

/* Every struct by pointer, and the entry type, so none depends on being
 * reachable through another. */
HP_BACKEND_EXPORT uint64_t hp_backend_abi_anchor(const struct hp_host *host,
                                                  const struct hp_backend_caps *caps,
                                                  const struct hp_map_request *req,
                                                  const struct hp_mapping *m,
                                                  const struct hp_block_query *q,
                                                  const struct hp_backend_ops *ops,
                                                  hp_backend_entry_fn entry);
HP_BACKEND_EXPORT uint64_t hp_backend_abi_anchor(const struct hp_host *host,
                                                  const struct hp_backend_caps *caps,
                                                  const struct hp_map_request *req,
                                                  const struct hp_mapping *m,
                                                  const struct hp_block_query *q,
                                                  const struct hp_backend_ops *ops,
                                                  hp_backend_entry_fn entry)
{
    return host->size + caps->size + req->size + m->size + q->size + ops->size +
           (entry != NULL);
}
