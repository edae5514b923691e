/*
 * The backend table: every backend that loaded (plugins found in the
 * directories of HP_BACKEND_PATH, then in HP_BACKEND_DIR, and last the
 * fallback built into the core), in load order; loaded once (pthread_once)
 * on first use. Files the loader refused are kept apart, with their reason,
 * for introspection: they never take a slot of the table.
 */
#ifndef HP_LIB_LOADER_H
#define HP_LIB_LOADER_H

#include "hp/backend.h"

#include <pthread.h>
#include <stdatomic.h>

/* Loaded backends at most. The last slot is kept for the built-in backend,
 * so at most HP_MAX_BACKENDS - 1 plugins load; a loadable file found after
 * that is refused with a reason and a log line, never skipped silently. */
#define HP_MAX_BACKENDS 32

/* Longest backend name (hp/backend.h: 1 to 31 characters of [a-z0-9_-]). */
#define HP_BACKEND_NAME_MAX 31

/* The shortest descriptor of backend ABI 2: up to and including unmap, the
 * last mandatory op (x86-64 and every LP64 target). Optional ops past
 * ops->size read as NULL (HP_OP). */
#define HP_BACKEND_OPS_SIZE_V2_MIN 72u

struct hp_backend {
    char name[32];
    char *path;                         /* the file as the directory lists it, or "builtin" */
    const struct hp_backend_ops *ops;   /* never NULL in the table: &ops_copy for a
                                           loaded plugin */
    struct hp_backend_ops ops_copy;     /* the plugin's descriptor as it was at load
                                           (ops->size bytes of it, the rest zero): a
                                           plugin that writes to its table later
                                           changes nothing */
    void *self;                         /* the plugin's context from init, passed to
                                           every op */
    void *dl;                           /* dlopen handle, NULL if built in */
    int fd;                             /* the plugin file while dlopen loads it (its
                                           dlopen name is /proc/self/fd/N), closed
                                           right after: -1 in the table */
    uint32_t kind;
    int own;                            /* one of libhp's own backends (a built-in name
                                           from HP_BACKEND_DIR, or the in-core
                                           fallback): its mappings come straight from
                                           the kernel, so the core skips the checks
                                           that only a plugin's results need */
    char description[128];              /* ops->description, printable ASCII, "" if NULL */
    int deferred;                       /* HP_KIND_OTHER not named yet: probe never
                                           called (guarded by caps_lock) */
    int probing;                        /* a thread is in ops->probe (guarded by
                                           caps_lock, which a probe never holds) */
    int stale_in_probe;                 /* marked stale while probing: that probe may
                                           have read the figures before the change */
    pthread_mutex_t caps_lock;          /* guards caps, deferred, probing,
                                           stale_in_probe, probed_ns;
                                           held for copies only, never across a
                                           plugin call */
    pthread_cond_t probed;              /* broadcast when probing drops to 0 */
    struct hp_backend_caps caps;
    uint64_t probed_ns;                 /* CLOCK_MONOTONIC of the last probe; 0 = stale */
    _Atomic int delivered;              /* a plugin claiming HP_KIND_HUGETLB or THP: a
                                           block of its was measured with huge bytes
                                           (hp_backend_unproven) */
    _Atomic unsigned measured;          /* its blocks measured without any, so far */
};

/* Blocks of an unproven backend measured at most (hp_backend_check_claim):
 * one that showed no huge bytes in so many stays unproven, and its later
 * blocks cost nothing to free. */
#define HP_CLAIM_MEASURES 16

/* 1 while b claims a huge kind (HP_KIND_HUGETLB or HP_KIND_THP) that it has
 * not shown: not one of libhp's own backends (own), and no block of its
 * measured with huge bytes yet. The selection ranks it below libhp's
 * backend of that kind (lib/select.c). Thread-safe. */
int hp_backend_unproven(const struct hp_backend *b);

/* A file or directory the loader refused. */
struct hp_rejected {
    char name[32];                      /* "" unless its descriptor was read */
    char *path;
    char reason[256];
};

struct hp_core {
    int32_t init_error;                 /* HP_OK, or HP_EENV for a bad variable (HP_ENOTSUP:
                                           the core a call made inside the start-up gets) */
    char init_detail[320];
    unsigned n;
    struct hp_backend backends[HP_MAX_BACKENDS];
    unsigned n_rejected;                /* no limit */
    struct hp_rejected *rejected;
    struct hp_host host;
};

/* The loaded table (loads on first call). Never NULL. */
struct hp_core *hp_core(void);

/* Optional ops, read only if the plugin's descriptor is long enough. */
#define HP_OP(ops, field) \
    ((ops)->size >= offsetof(struct hp_backend_ops, field) + sizeof((ops)->field) ? (ops)->field : NULL)

/* The ops that take a const mapping, called on a copy: const is a promise
 * a plugin can break, and the core's own records (a block's, a stack's, a
 * cached range's) must not change under it. */
static inline int hp_backend_unmap(const struct hp_backend *b, const struct hp_mapping *m)
{
    struct hp_mapping copy = *m;
    return b->ops->unmap(b->self, &copy);
}

static inline int hp_backend_advise(const struct hp_backend *b, const struct hp_mapping *m,
                                    uint64_t flags)
{
    int (*op)(void *, const struct hp_mapping *, uint64_t) = HP_OP(b->ops, advise);
    struct hp_mapping copy = *m;
    return op ? op(b->self, &copy, flags) : HP_OK;
}

/* Copy b's caps. A backend that asked for it (HP_CAPS_REPROBE) is probed
 * again first when its figures are older than HP_REPROBE_NS or were marked
 * stale, and only when the request could use it: a page size it lists was
 * asked for (wanted), or len reaches its smallest page size. Small requests
 * never pay for sysfs reads. len = UINT64_MAX re-probes whenever stale,
 * len = 0 with wanted = 0 never. The re-probe runs in the calling thread
 * (others meanwhile copy the last figures). */
void hp_backend_caps_now(struct hp_backend *b, uint64_t len, uint64_t wanted,
                         struct hp_backend_caps *out);

/* Pool figures are hints (the kernel's reservation at mmap time is the
 * truth), so they may be this old before a large request re-reads them. */
#define HP_REPROBE_NS (100ull * 1000 * 1000)

/* Mark b's figures stale: a map failed, so the next request re-reads them. */
void hp_backend_mark_stale(struct hp_backend *b);

/* A request names backend `name` (hp_alloc_opts.backend): a plugin of kind
 * HP_KIND_OTHER, whose probe is not called until it is named, is probed
 * now (once). Unknown names are ignored. */
void hp_backend_use_named(struct hp_core *core, const char *name);

/* Probe every loaded backend now (hp_reprobe); backends whose probe is
 * deferred (HP_KIND_OTHER not named yet) stay unprobed. */
int32_t hp_backends_reprobe(struct hp_core *core);

/* Look a backend up by name; NULL if unknown. */
struct hp_backend *hp_backend_by_name(struct hp_core *core, const char *name);

/* The backend compiled into the core (base pages, always available; the
 * build lists its sources in builtin_backend_sources). */
const struct hp_backend_ops *hp_builtin_backend(const struct hp_host *host);

/* Teardown, for lib/lifecycle.c alone: each backend's fini (when
 * call_fini: no block is live), then the table's strings. */
void hp_loader_fini(int call_fini);

#endif
