/*
 * The registry of live blocks: the only authority on whether a pointer is a
 * libhp block. Sharded by address so concurrent frees of different blocks do
 * not contend; each shard remembers recently freed addresses to tell a double
 * free from a foreign pointer. Fork-safe: pthread_atfork holds every shard
 * lock across fork.
 */
#ifndef HP_LIB_REGISTRY_H
#define HP_LIB_REGISTRY_H

#include "block.h"

/* Add b (keyed by b->m.addr). Returns HP_OK or HP_ENOMEM. */
int32_t hp_registry_insert(struct hp_block *b);

/* Remove the block starting at p and hand it to the caller. On failure
 * returns NULL and *code is HP_EFOREIGN, HP_EINTERIOR or HP_EDOUBLEFREE.
 * as_free: remember p as freed (a later free of p is a double free). */
struct hp_block *hp_registry_take(const void *p, int as_free, int32_t *code);

/* Copy the block starting at p into *out. Returns HP_OK or an error code as
 * for hp_registry_take. */
int32_t hp_registry_peek(const void *p, struct hp_block *out);

/* Number of live blocks (tests). */
uint64_t hp_registry_count(void);

#endif
