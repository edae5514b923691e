/*
 * Per-block content patterns for the stress and fault tests.
 *
 * A block of size bytes holds an 8-byte stamp at every 4 KiB offset k*4096
 * with k*4096 + 8 <= size, plus one byte at size - 1 (when that byte is not
 * inside a stamp). Stamps depend on (seed, offset) only, so after a resize
 * the stamps of the kept prefix stay valid. Stamping touches every page once,
 * which is what a real user of the block would do.
 */
#ifndef HP_TEST_PATTERN_H
#define HP_TEST_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PATTERN_STRIDE 4096u

static inline uint64_t pattern_word(uint64_t seed, size_t off)
{
    uint64_t x = seed ^ ((uint64_t)off * UINT64_C(0x9e3779b97f4a7c15));
    x ^= x >> 31;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 29;
    return x | 1;  /* never 0, so a zero-filled page never passes */
}

static inline uint8_t pattern_tail(uint64_t seed, size_t size)
{
    return (uint8_t)(pattern_word(seed, size) | 0x80);
}

/* The tail byte exists when it does not fall inside the last stamp. */
static inline int pattern_has_tail(size_t size)
{
    size_t last = (size - 1) / PATTERN_STRIDE * PATTERN_STRIDE;
    return size > 0 && !(last + 8 <= size && size - 1 < last + 8);
}

static inline void pattern_stamp(void *p, size_t size, uint64_t seed)
{
    unsigned char *c = p;
    for (size_t off = 0; off + 8 <= size; off += PATTERN_STRIDE) {
        uint64_t w = pattern_word(seed, off);
        memcpy(c + off, &w, 8);
    }
    if (pattern_has_tail(size))
        c[size - 1] = pattern_tail(seed, size);
}

/* Check the stamps of a block stamped with (seed, stamped_size) that are
 * still inside its first keep bytes. Returns the first bad offset + 1, or 0. */
static inline size_t pattern_check(const void *p, size_t stamped_size, size_t keep, uint64_t seed)
{
    const unsigned char *c = p;
    size_t lim = stamped_size < keep ? stamped_size : keep;
    for (size_t off = 0; off + 8 <= lim; off += PATTERN_STRIDE) {
        uint64_t w;
        memcpy(&w, c + off, 8);
        if (w != pattern_word(seed, off))
            return off + 1;
    }
    if (pattern_has_tail(stamped_size) && stamped_size <= keep &&
        c[stamped_size - 1] != pattern_tail(seed, stamped_size))
        return stamped_size;
    return 0;
}

/* 1 if the first and last stamp positions and the one at off read zero.
 * A sample: reading every page first would map the zero page everywhere
 * and double the faults (each write then copies and flushes the TLB). */
static inline int pattern_zero_at(const void *p, size_t size, size_t off)
{
    const unsigned char *c = p;
    size_t last = size >= 8 ? (size - 8) / PATTERN_STRIDE * PATTERN_STRIDE : 0;
    off = off % size / PATTERN_STRIDE * PATTERN_STRIDE;
    size_t at[3] = {0, off, last};
    for (int i = 0; i < 3; i++) {
        uint64_t w = 0;
        if (at[i] + 8 <= size)
            memcpy(&w, c + at[i], 8);
        if (w)
            return 0;
    }
    return !pattern_has_tail(size) || c[size - 1] == 0;
}

/* 1 if every stamp position of a size-byte block reads zero. */
static inline int pattern_zero(const void *p, size_t size)
{
    const unsigned char *c = p;
    for (size_t off = 0; off + 8 <= size; off += PATTERN_STRIDE) {
        uint64_t w;
        memcpy(&w, c + off, 8);
        if (w)
            return 0;
    }
    return !pattern_has_tail(size) || c[size - 1] == 0;
}

#endif
