/*
 * example — a complete libhp backend plugin in one file, built outside the
 * libhp tree with nothing but the installed header:
 *
 *   cc -std=c11 -shared -fPIC -fvisibility=hidden \
 *      $(pkg-config --cflags libhp) example_backend.c -o example.so
 *   cp example.so "$(pkg-config --variable=backenddir libhp)"   # or HP_BACKEND_PATH
 *
 * It serves base pages that are faulted in before hp_alloc returns (so the
 * first touch costs nothing). Being a third-party backend (HP_KIND_OTHER),
 * it is used only when asked for by name:
 *
 *   struct hp_alloc_opts o = HP_ALLOC_OPTS_INIT;
 *   o.backend = "example";
 *   void *p = hp_alloc_ex(size, &o);
 *
 * Note what it does not do: link libhp, call mmap itself (host->os_map keeps
 * libhp's fault injection and accounting in the loop), or keep global
 * mutable state (ops are called from many threads at once).
 */
#define _GNU_SOURCE  /* MAP_ANONYMOUS, MAP_POPULATE under -std=c11 */
#include <hp/backend.h>

#include <stdio.h>
#include <sys/mman.h>

static const struct hp_host *host;

static int example_probe(void *self, struct hp_backend_caps *caps)
{
    caps->available = 1;
    caps->n_page_sizes = 1;
    caps->page_sizes[0] = host->base_page_size;
    caps->pool_free[0] = UINT64_MAX;  /* not pool-limited */
    snprintf(caps->reason, sizeof(caps->reason), "prefaulted base pages (example plugin)");
    return HP_OK;
}

static int example_map(void *self, const struct hp_map_request *req, struct hp_mapping *out)
{
    uint64_t page = host->base_page_size;
    uint64_t len = (req->len + page - 1) / page * page;
    void *p;
    int rc = host->os_map(NULL, len, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0, &p);
    if (rc < 0) {
        host->set_detail("example: mmap failed");
        return HP_ENOMEM;
    }
    out->addr = out->map_addr = p;
    out->len = out->map_len = len;
    out->page_size = page;
    return HP_OK;
}

static int example_unmap(void *self, const struct hp_mapping *m)
{
    return host->os_unmap(m->map_addr, m->map_len) == 0 ? HP_OK : HP_EINVAL;
}

static const struct hp_backend_ops example_ops = {
    .abi_version = HP_BACKEND_ABI_VERSION,
    .size = sizeof(struct hp_backend_ops),
    .name = "example",
    .description = "prefaulted base pages",
    .kind = HP_KIND_OTHER,
    .probe = example_probe,
    .map = example_map,
    .unmap = example_unmap,
};

HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *h);
HP_BACKEND_EXPORT const struct hp_backend_ops *HP_BACKEND_ENTRY(const struct hp_host *h)
{
    host = h;
    return &example_ops;
}
