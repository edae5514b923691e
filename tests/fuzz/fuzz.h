/* The libFuzzer entry points every target defines (and replay.c calls). */
#ifndef HP_FUZZ_H
#define HP_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Stop with a message: an invariant broke (the fuzzer records the input). */
#define FUZZ_CHECK(cond)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                     \
            abort();                                                            \
        }                                                                       \
    } while (0)

#endif
