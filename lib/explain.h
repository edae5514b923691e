/*
 * What hp_alloc_ex would do, without allocating: for hpctl explain, which
 * links the core statically. Not exported from libhp.so.
 */
#ifndef HP_LIB_EXPLAIN_H
#define HP_LIB_EXPLAIN_H

#include "hp/alloc.h"
#include "loader.h"
#include "select.h"

#define HP_EXPLAIN_MAX_NOTES 128

struct hp_explain {
    /* HP_OK, or the error hp_alloc_ex would return before mapping anything
     * (bad size, flags or options, HP_EENV, an unavailable named backend,
     * no candidate), with its detail. */
    int32_t status;
    char detail[320];
    /* The backends as selection saw them: name, kind and the caps it was
     * given (fresh for this request, cached pool pages credited). */
    unsigned n_backends;
    struct hp_explain_backend {
        char name[32];
        uint32_t kind;
        int loaded;                       /* 0: rejected by the loader */
        char reason[256];                 /* rejection reason if !loaded */
        struct hp_backend_caps caps;
    } backends[HP_MAX_BACKENDS];
    /* The candidates hp_alloc_ex tries, in order: the first one that maps
     * serves the request. */
    unsigned n_cand;
    struct hp_candidate cand[HP_SELECT_MAX];
    unsigned n_notes;
    struct hp_select_note notes[HP_EXPLAIN_MAX_NOTES];
};

/* Fill *out for hp_alloc_ex(size, opts); returns out->status. Runs the same
 * validation, named-backend check, candidate list and selection as
 * hp_alloc_ex; maps nothing and leaves the last error of this thread set as
 * hp_alloc_ex would. Thread-safe. */
int32_t hp_alloc_explain(size_t size, const struct hp_alloc_opts *opts, struct hp_explain *out);

#endif
