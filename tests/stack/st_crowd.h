/*
 * A crowd of threads on one kind of stack, for the stack tests and
 * bench/stacks: glibc's own stacks, the seed-002 trap, or hp stacks.
 * No cmocka here, so the benchmark can link it too.
 */
#ifndef HP_ST_CROWD_H
#define HP_ST_CROWD_H

#include <hp.h>

#include <pthread.h>
#include <stddef.h>

#define ST_CROWD 128

enum st_kind { ST_GLIBC, ST_TRAP, ST_LEAN, ST_THP, ST_HUGETLB, ST_NKINDS };

struct st_crowd {
    enum st_kind kind;
    size_t touch;                   /* bytes each thread touches on its stack */
    pthread_barrier_t touched, release;
    pthread_t t[ST_CROWD];          /* ST_GLIBC, ST_TRAP */
    struct hp_stack *s[ST_CROWD];   /* hp kinds */
};

/* The seed's trap: a 2 MiB-aligned stack written at its top (the thread
 * descriptor) before its lowest page becomes the guard. Under THP=always the
 * write faults in a huge page that the mprotect then splits, all of it
 * staying resident. Returns the 2 MiB block (guard at its start) or NULL. */
void *st_trap_stack(void);

/* Start ST_CROWD threads on stacks of `kind` (hp kinds: stack_size bytes),
 * each touching `touch` bytes of its stack downwards, as a growing stack
 * does; returns once every thread has touched and is parked. 0 or -1 (the
 * threads started so far stay parked: call st_crowd_stop). */
int st_crowd_start(struct st_crowd *c, enum st_kind kind, size_t stack_size, size_t touch);

/* Release and join every thread (hp stacks are freed at join). */
void st_crowd_stop(struct st_crowd *c);

#endif
