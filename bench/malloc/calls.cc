// bench/malloc: the cost of one call of each entry point of the malloc
// family, whatever LD_PRELOAD makes it. Each loop runs REPS times in one
// process; the fastest repetition is kept (a preempted one is only slower),
// and printed to stderr as "calls NAME NS" (nanoseconds per operation,
// an operation being the pair or sequence the name says). Every loop works
// on small blocks that stay in the allocator's thread cache, so the figures
// are the call paths themselves: wrappers, ownership tests, indirect calls.
//
//     bench_calls [N] [REPS] [NAME]     (default 2,000,000 and 7; NAME: that loop only)
//
// With NAME, under valgrind --tool=callgrind at two values of N, the
// difference of the instruction counts divided by the difference of N is
// the instructions per operation (calls-instr.sh).
// stdout: N, so that every allocator prints the same (the usable sizes
// differ between allocators and are only kept alive).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <malloc.h>
#include <new>

static double now()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// Keeps the compiler from dropping a block it could prove unused.
static void use(void *p)
{
    asm volatile("" : : "r"(p) : "memory");
}

static void *slots[256];
static const char *only;

template <class F> static double best(const char *name, long n, int reps, long per, F body)
{
    if (only && std::strcmp(only, name) != 0)
        return 0;
    double t_min = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        body(n);
        double t = now() - t0;
        if (t < t_min)
            t_min = t;
    }
    double ns = t_min / (double)(n * per) * 1e9;
    std::fprintf(stderr, "calls %s %.2f\n", name, ns);
    return ns;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 2000000;
    int reps = argc > 2 ? std::atoi(argv[2]) : 7;
    only = argc > 3 ? argv[3] : nullptr;
    std::uint64_t sum = 0;
    best("malloc+free", n, reps, 1, [](long k) {
        for (long i = 0; i < k; i++) {
            void *p = std::malloc(32);
            use(p);
            std::free(p);
        }
    });
    // 256 live blocks of 16-527 bytes, one replaced per operation.
    best("malloc+free-churn", n, reps, 1, [](long k) {
        for (long i = 0; i < k; i++) {
            long s = i & 255;
            std::free(slots[s]);
            slots[s] = std::malloc(16 + (size_t)(i * 7 & 511));
        }
    });
    best("calloc+free", n, reps, 1, [](long k) {
        for (long i = 0; i < k; i++) {
            void *p = std::calloc(1, 64);
            use(p);
            std::free(p);
        }
    });
    // 16 B grown to 2 KiB in 7 steps: per realloc (the malloc and free of
    // each sequence included).
    best("realloc", n / 8, reps, 7, [](long k) {
        for (long i = 0; i < k; i++) {
            void *p = std::malloc(16);
            for (int j = 1; j < 8; j++)
                p = std::realloc(p, (size_t)16 << j);
            std::free(p);
        }
    });
    best("memalign+free", n, reps, 1, [](long k) {
        for (long i = 0; i < k; i++) {
            void *p = memalign(64, 48);
            use(p);
            std::free(p);
        }
    });
    best("posix_memalign+free", n, reps, 1, [](long k) {
        for (long i = 0; i < k; i++) {
            void *p;
            if (posix_memalign(&p, 32, 100) == 0)
                std::free(p);
        }
    });
    best("aligned_alloc+free", n, reps, 1, [](long k) {
        for (long i = 0; i < k; i++) {
            void *p = std::aligned_alloc(128, 256);
            use(p);
            std::free(p);
        }
    });
    best("malloc_usable_size", n, reps, 1, [&sum](long k) {
        void *p = std::malloc(100);
        for (long i = 0; i < k; i++) {
            use(p);
            sum += malloc_usable_size(p);
        }
        std::free(p);
    });
    best("new+delete", n, reps, 1, [](long k) {
        for (long i = 0; i < k; i++) {
            auto *p = new std::uint64_t[4];
            use(p);
            delete[] p;
        }
    });
    best("new+sized-delete", n, reps, 1, [](long k) {
        struct node {
            std::uint64_t a, b, c, d;
        };
        for (long i = 0; i < k; i++) {
            node *p = new node;
            use(p);
            delete p;  // C++14 sized deallocation: operator delete(void*, size_t)
        }
    });
    for (void *p : slots)
        std::free(p);
    use((void *)(std::uintptr_t)sum);
    std::printf("%ld\n", n);
    return 0;
}
