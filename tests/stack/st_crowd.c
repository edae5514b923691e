#include "st_crowd.h"

#include <alloca.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define MIB (UINT64_C(1) << 20)

static void *crowd_thread(void *arg)
{
    struct st_crowd *c = arg;
    volatile char *sp = alloca(c->touch);
    for (size_t off = c->touch; off >= 4096; off -= 4096)
        sp[off - 1] = 1;
    pthread_barrier_wait(&c->touched);
    pthread_barrier_wait(&c->release);
    return NULL;
}

void *st_trap_stack(void)
{
    size_t len = 2 * MIB;
    char *raw = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)raw + len - 1) & ~(uintptr_t)(len - 1));
    p[len - 1] = 1;
    mprotect(p, 4096, PROT_NONE);
    return p;
}

static int start_one(struct st_crowd *c, int i, size_t stack_size)
{
    if (c->kind == ST_GLIBC)
        return pthread_create(&c->t[i], NULL, crowd_thread, c);
    if (c->kind == ST_TRAP) {
        char *p = st_trap_stack();
        if (!p)
            return -1;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstack(&attr, p + 4096, 2 * MIB - 4096);
        int rc = pthread_create(&c->t[i], &attr, crowd_thread, c);
        pthread_attr_destroy(&attr);
        return rc;
    }
    struct hp_stack_opts o = HP_STACK_OPTS_INIT;
    o.flags = c->kind == ST_THP ? HP_STACK_THP : c->kind == ST_HUGETLB ? HP_STACK_HUGETLB : 0;
    int rc = hp_stack_thread_create(&c->s[i], stack_size, &o, crowd_thread, c);
    if (rc)
        fprintf(stderr, "# thread %d: hp_stack_thread_create: %s\n", i, hp_last_error_detail());
    return rc;
}

int st_crowd_start(struct st_crowd *c, enum st_kind kind, size_t stack_size, size_t touch)
{
    memset(c, 0, sizeof(*c));
    c->kind = kind;
    c->touch = touch;
    pthread_barrier_init(&c->touched, NULL, ST_CROWD + 1);
    pthread_barrier_init(&c->release, NULL, ST_CROWD + 1);
    for (int i = 0; i < ST_CROWD; i++)
        if (start_one(c, i, stack_size) != 0)
            return -1;
    pthread_barrier_wait(&c->touched);
    return 0;
}

void st_crowd_stop(struct st_crowd *c)
{
    pthread_barrier_wait(&c->release);
    for (int i = 0; i < ST_CROWD; i++) {
        if (c->kind >= ST_LEAN)
            hp_stack_thread_join(c->s[i], NULL);
        else
            pthread_join(c->t[i], NULL);
    }
    pthread_barrier_destroy(&c->touched);
    pthread_barrier_destroy(&c->release);
}
