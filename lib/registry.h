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

/* Start resizing the block at p: it stays registered (hp_info keeps
 * describing it as it was) but is marked busy, and a second hp_realloc or
 * an hp_free of p meanwhile fails with HP_EINVAL instead of racing. Returns
 * the record and fills *copy (taken under the lock: the caller works on it)
 * or NULL with *code as for
 * hp_registry_take, or HP_EINVAL when busy. */
struct hp_block *hp_registry_begin(const void *p, int32_t *code, struct hp_block *copy);

/* Finish a resize begun on b: b takes work's contents and is keyed by its
 * new address. Returns HP_OK, or HP_ENOMEM if b had to move to a shard
 * that cannot grow (b is then unregistered and the caller's). */
int32_t hp_registry_end(struct hp_block *b, const struct hp_block *work);

/* Finish a resize begun on b by forgetting b: it is unregistered and the
 * caller's (the copy path of hp_realloc). */
void hp_registry_drop(struct hp_block *b);

/* Copy the block starting at p into *out. Returns HP_OK or an error code as
 * for hp_registry_take. */
int32_t hp_registry_peek(const void *p, struct hp_block *out);

/* 1 if a live block's mapping ([map_addr, map_addr + map_len)) overlaps
 * [addr, addr + len), else 0. The record of a block being resized that
 * still stands at resizing (busy, lib/registry.h) is not counted, nor, with
 * skip_busy, that of any block being resized (its record may still name a
 * range that mremap has already vacated). Scans every shard: for error
 * paths and plugins' results only. */
int hp_registry_overlaps(const void *addr, uint64_t len, const void *resizing, int skip_busy);

/* Number of live blocks (tests). */
uint64_t hp_registry_count(void);

#endif
