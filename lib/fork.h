/*
 * Fork, as every part of libhp sees it: a generation that each fork moves
 * on, and a fence that holds a fork back across a remap.
 *
 * Private hugetlb pages that exist at a fork are shared copy-on-write with
 * the child, and their reservations stay with the parent's VMAs
 * (Documentation/mm/hugetlbfs_reserv.rst; mm/hugetlb.c, unmap_ref_private):
 * such memory is never cached or reused (lib/cache.c, lib/stack_cache.c),
 * and a block that grows after a fork copies instead of moving pages
 * (lib/alloc.c).
 */
#ifndef HP_LIB_FORK_H
#define HP_LIB_FORK_H

#include <stdint.h>

/* The fork generation: a counter that every fork moves on, in the parent
 * and in the child (pthread_atfork; the block and stack caches also move it
 * in their own handlers, before their locks are released; they call
 * hp_fork_gen before registering their handlers, so that the fence's are
 * registered first: pthread_atfork(3) runs prepare handlers in the reverse
 * order of registration, parent and child handlers in that order). Read it before
 * mapping hugetlb memory and keep it with the mapping: memory whose
 * generation is not the current one may be shared copy-on-write with
 * another process, and is never cached or reused. */
uint64_t hp_fork_gen(void);
void hp_fork_gen_bump(void);

/* Hold fork() back (pthread_atfork waits) across a remap that must not race
 * one: hp_fork_fence_enter returns the generation, which cannot change
 * until hp_fork_fence_leave. Many threads may be inside at once. Nothing
 * inside may take another lock that libhp's atfork handlers take. */
uint64_t hp_fork_fence_enter(void);
void hp_fork_fence_leave(void);

#endif
