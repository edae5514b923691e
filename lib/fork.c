#include "fork.h"

#include <pthread.h>
#include <stdatomic.h>

static _Atomic uint64_t fork_gen = 1;
static pthread_once_t gen_once = PTHREAD_ONCE_INIT;

/* Readers: remaps that must not race a fork; the writer: fork itself. */
static pthread_rwlock_t fence;
/* This thread holds the fence as a reader: a fork it makes (a plugin's
 * remap that forks) must not wait for itself. */
static _Thread_local unsigned in_fence;
static int fork_in_fence;  /* the forking thread's in_fence, for the other handlers */

static void bump_gen(void)
{
    atomic_fetch_add(&fork_gen, 1);
}

static void fence_fork(void)
{
    /* A fork from inside the fence cannot wait for it (it would wait for
     * itself for ever): it goes on, and the remap it interrupts runs on in
     * both processes, as a remap racing a fork would without the fence. */
    fork_in_fence = in_fence != 0;
    if (!fork_in_fence)
        pthread_rwlock_wrlock(&fence);
}

static void fence_init(void)
{
    /* Writer first: a stream of remaps must not hold a fork back forever. */
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&fence, &a);
    pthread_rwlockattr_destroy(&a);
}

static void fence_parent(void)
{
    bump_gen();
    if (!fork_in_fence)
        pthread_rwlock_unlock(&fence);
}

/* glibc's unlock tells a writer by its thread id, which the child's one
 * thread does not share with the parent's forking thread: start afresh
 * (held as a reader again where the fork came from inside the fence, so
 * that the remap's hp_fork_fence_leave finds it held). */
static void fence_child(void)
{
    bump_gen();
    fence_init();
    if (fork_in_fence)
        pthread_rwlock_rdlock(&fence);
}

static void gen_init(void)
{
    fence_init();
    pthread_atfork(fence_fork, fence_parent, fence_child);
}

uint64_t hp_fork_gen(void)
{
    pthread_once(&gen_once, gen_init);
    return atomic_load(&fork_gen);
}

uint64_t hp_fork_fence_enter(void)
{
    pthread_once(&gen_once, gen_init);
    pthread_rwlock_rdlock(&fence);
    in_fence++;
    return atomic_load(&fork_gen);
}

void hp_fork_fence_leave(void)
{
    in_fence--;
    pthread_rwlock_unlock(&fence);
}

void hp_fork_gen_bump(void)
{
    bump_gen();
}

