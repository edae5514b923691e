// A multi-threaded C++ program that knows nothing of libhp: THREADS threads
// each fill and churn std containers (operator new/delete, hence malloc),
// hand strings to the next thread through a queue (frees cross threads),
// and one large vector grows by push_back (realloc-like growth through new).
// Prints totals that do not depend on the allocator or on scheduling.
//
//     mt_cxx THREADS OPS
//     mt_cxx new-fails     operator new's failure semantics: a new_handler
//                          runs, then std::bad_alloc; nothrow new gives
//                          nullptr; aligned new honours its alignment
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <new>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

struct Mailbox {
    std::mutex m;
    std::deque<std::unique_ptr<std::string>> q;
};

static int handler_calls;

static int new_fails()
{
    std::set_new_handler([] {
        if (++handler_calls >= 3)
            std::set_new_handler(nullptr);  // the next failure throws
    });
    volatile std::size_t huge = std::size_t(1) << 62;
    bool threw = false;
    try {
        char *p = new char[huge];
        p[0] = 1;
    } catch (const std::bad_alloc &) {
        threw = true;
    }
    char *q = new (std::nothrow) char[huge];
    struct alignas(4096) Page {
        char b[4096];
    };
    Page *pg = new Page;
    bool aligned = reinterpret_cast<std::uintptr_t>(pg) % 4096 == 0;
    delete pg;
    std::printf("handler %d, bad_alloc %d, nothrow %s, aligned %d\n", handler_calls, threw,
                q ? "non-null" : "null", aligned);
    return threw && !q && aligned && handler_calls == 3 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 2 && std::string(argv[1]) == "new-fails")
        return new_fails();
    if (argc != 3)
        return 2;
    int nt = std::atoi(argv[1]);
    long ops = std::atol(argv[2]);
    if (nt < 1 || nt > 64 || ops < 1)
        return 2;
    std::vector<Mailbox> box(nt);
    std::vector<std::uint64_t> sums(nt), received(nt);
    std::vector<std::thread> ts;
    for (int t = 0; t < nt; t++)
        ts.emplace_back([t, nt, ops, &box, &sums, &received] {
            std::map<int, std::string> m;
            std::unordered_map<std::uint64_t, std::vector<int>> u;
            std::uint64_t s = 0, got = 0;
            for (long i = 0; i < ops; i++) {
                int k = (int)((i * 7919 + t) % 4096);
                m[k] = std::to_string(i) + std::string((size_t)(i % 200), 'x');
                u[(std::uint64_t)(i % 1000)].push_back((int)i);
                if (i % 3 == 0)
                    m.erase((int)((i * 31) % 4096));
                if (i % 10 == 0) {
                    std::lock_guard<std::mutex> g(box[(t + 1) % nt].m);
                    box[(t + 1) % nt].q.push_back(std::make_unique<std::string>(64 + i % 500, 'y'));
                }
                if (i % 50 == 0) {
                    std::lock_guard<std::mutex> g(box[t].m);
                    while (!box[t].q.empty()) {
                        got += box[t].q.front()->size();
                        box[t].q.pop_front();
                    }
                }
            }
            for (auto &kv : m)
                s += kv.second.size();
            for (auto &kv : u)
                s += kv.second.size();
            std::vector<std::uint64_t> big;
            for (long i = 0; i < ops * 8; i++)
                big.push_back((std::uint64_t)i);
            s += big.size();
            sums[t] = s;
            received[t] = got;
        });
    for (auto &t : ts)
        t.join();
    std::uint64_t s = 0, sent = 0;
    for (int t = 0; t < nt; t++) {
        s += sums[t];
        for (auto &p : box[t].q)
            received[t] += p->size();
        sent += received[t];
    }
    std::printf("%llu %llu\n", (unsigned long long)s, (unsigned long long)sent);
    return 0;
}
