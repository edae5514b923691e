// bench/malloc: std::unordered_map<uint64_t, uint64_t> with N inserts and N
// lookups (default 10 million), whole process; the allocator is whatever
// LD_PRELOAD (or its absence) makes malloc. Prints a checksum so every
// configuration can be checked for the same result.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

int main(int argc, char **argv)
{
    std::uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10000000;
    std::unordered_map<std::uint64_t, std::uint64_t> ht;
    ht.reserve(n);
    for (std::uint64_t i = 0; i < n; ++i)
        ht.try_emplace(i, i);
    std::uint64_t sum = 0;
    // Lookups in a scattered order (an odd multiplier modulo n).
    for (std::uint64_t i = 0; i < n; ++i)
        sum += ht.find(i * 2654435761u % n)->second;
    std::printf("%llu\n", (unsigned long long)sum);
    return 0;
}
