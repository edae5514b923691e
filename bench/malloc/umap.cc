// bench/malloc: std::unordered_map<uint64_t, uint64_t> with N inserts and N
// lookups (default 10 million), whole process; the allocator is whatever
// LD_PRELOAD (or its absence) makes malloc. Prints a checksum so every
// configuration can be checked for the same result. With a second argument
// "phases", also prints to stderr the user and sys CPU seconds (getrusage)
// of each phase: start-up before main, reserve + inserts, lookups, and the
// destructor (N operator delete); and a second line with the wall seconds
// of the inserts, the lookups, the destructor and the inner loop (inserts +
// lookups: the figure the seed benchmark's own timing covers).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sys/resource.h>
#include <unordered_map>

static void cpu(double *user, double *sys)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6;
    *sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

static double wall()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    std::uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10000000;
    bool phases = argc > 2 && std::strcmp(argv[2], "phases") == 0;
    double u[4], s[4], w[4];
    cpu(&u[0], &s[0]);
    w[0] = wall();
    std::uint64_t sum = 0;
    {
        std::unordered_map<std::uint64_t, std::uint64_t> ht;
        ht.reserve(n);
        for (std::uint64_t i = 0; i < n; ++i)
            ht.try_emplace(i, i);
        cpu(&u[1], &s[1]);
        w[1] = wall();
        // Lookups in a scattered order (an odd multiplier modulo n).
        for (std::uint64_t i = 0; i < n; ++i)
            sum += ht.find(i * 2654435761u % n)->second;
        cpu(&u[2], &s[2]);
        w[2] = wall();
    }
    cpu(&u[3], &s[3]);
    w[3] = wall();
    if (phases) {
        std::fprintf(stderr, "start-up %.4f %.4f inserts %.4f %.4f lookups %.4f %.4f "
                     "destructor %.4f %.4f (user sys, s)\n", u[0], s[0], u[1] - u[0],
                     s[1] - s[0], u[2] - u[1], s[2] - s[1], u[3] - u[2], s[3] - s[2]);
        std::fprintf(stderr, "wall inserts %.4f lookups %.4f destructor %.4f loop %.4f\n",
                     w[1] - w[0], w[2] - w[1], w[3] - w[2], w[2] - w[0]);
    }
    std::printf("%llu\n", (unsigned long long)sum);
    return 0;
}
