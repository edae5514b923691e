/*
 * Backend selection: a pure function of the request, the capability records
 * and the overrides. No I/O, no globals, so tests drive it with fabricated
 * records. The policy is written down in README.md ("Selection").
 */
#ifndef HP_LIB_SELECT_H
#define HP_LIB_SELECT_H

#include "hp/backend.h"
#include "options.h"

#define HP_SELECT_MAX 16

/* One backend as selection sees it. */
struct hp_select_backend {
    const char *name;
    uint32_t kind;                        /* enum hp_backend_kind */
    const struct hp_backend_caps *caps;   /* NULL or !available: skipped */
};

struct hp_select_request {
    uint64_t len;                 /* bytes asked for, > 0 */
    uint64_t flags;               /* HP_F_* */
    uint64_t base_page_size;
    const char *backend;          /* NULL, or the only backend allowed */
    unsigned n_exclude;
    const char (*exclude)[HP_OPT_NAME_LEN];   /* names never to use */
    unsigned n_only;              /* HP_BACKENDS: use only these, in this order */
    const char (*only)[HP_OPT_NAME_LEN];
};

/* A (backend, page size) pair to try, best first. */
struct hp_candidate {
    unsigned backend;             /* index into the backends array */
    uint64_t page_size;
};

/* Fill out[] with the candidates to try in order; returns their count
 * (0: nothing can serve this request). */
unsigned hp_select(const struct hp_select_request *req, const struct hp_select_backend *bk,
                   unsigned n_backends, struct hp_candidate *out, unsigned max);

/* Requested page size encoded in flags, 0 if none. */
uint64_t hp_flags_page_size(uint64_t flags);

#endif
