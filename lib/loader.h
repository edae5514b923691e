/*
 * The backend table: the built-in fallback plus every plugin found in the
 * backend directory, loaded once (pthread_once) on first use. Rejected
 * plugins stay in the table with their reason, for introspection.
 */
#ifndef HP_LIB_LOADER_H
#define HP_LIB_LOADER_H

#include "hp/backend.h"

#include <pthread.h>

#define HP_MAX_BACKENDS 32

struct hp_backend {
    char name[32];
    char path[256];
    const struct hp_backend_ops *ops;   /* NULL if rejected */
    void *dl;                           /* dlopen handle, NULL if built in */
    uint32_t kind;
    pthread_mutex_t caps_lock;          /* guards caps during re-probe */
    struct hp_backend_caps caps;
    char reason[256];                   /* rejection reason, if ops == NULL */
};

struct hp_core {
    int32_t init_error;                 /* HP_OK, or HP_EENV for a bad variable */
    char init_detail[320];
    unsigned n;
    struct hp_backend backends[HP_MAX_BACKENDS];
    struct hp_host host;
};

/* The loaded table (loads on first call). Never NULL. */
struct hp_core *hp_core(void);

/* Optional ops, read only if the plugin's descriptor is long enough. */
#define HP_OP(ops, field) \
    ((ops)->size >= offsetof(struct hp_backend_ops, field) + sizeof((ops)->field) ? (ops)->field : NULL)

/* Copy b's caps, re-probing first if the backend asked for it. */
void hp_backend_caps_now(struct hp_backend *b, struct hp_backend_caps *out);

/* Look a backend up by name; NULL if unknown. */
struct hp_backend *hp_backend_by_name(struct hp_core *core, const char *name);

/* The fallback backend compiled into the core. */
const struct hp_backend_ops *hp_builtin_fallback(const struct hp_host *host);

#endif
