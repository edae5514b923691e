/*
 * The cases of the broken plugin (broken.c), one rule of hp/backend.h
 * broken each, picked by HP_BROKEN_CASE. Shared by the plugin and by the
 * suite that runs them (test_broken.c), which says what each case does to
 * the host and what the host must do about it.
 */
#ifndef HP_BROKEN_CASES_H
#define HP_BROKEN_CASES_H

#define BROKEN_CASES(X)                                                                    \
    X(BC_NONE, "none")                     /* keeps every rule: the control */            \
    /* remap returns HP_OK after moving the block, with a result that breaks a rule */   \
    X(BC_REMAP_SHORT, "remap-short")       /* len shorter than asked */                   \
    X(BC_REMAP_MISALIGNED, "remap-misaligned") /* addr 8 bytes past the block */          \
    X(BC_REMAP_ADDR_NULL, "remap-addr-null")   /* addr NULL, map_addr right */            \
    X(BC_REMAP_PAGE_SIZE, "remap-page-size")   /* page_size changed */                    \
    X(BC_REMAP_COMMITTED, "remap-committed")   /* committed past the mapping */           \
    X(BC_REMAP_MAP_SHORT, "remap-map-short")   /* map_len below the block */              \
    X(BC_REMAP_SHRINK_SHORT, "remap-shrink-short") /* a shrink, len below new_len */      \
    X(BC_REMAP_GROW_SHORT, "remap-grow-short") /* grown where mremap could, len short */  \
    X(BC_REMAP_STALE, "remap-stale")       /* moved, m left at the old address */         \
    X(BC_REMAP_FAIL_MOVED, "remap-fail-moved") /* moved, then an error (m updated) */     \
    X(BC_REMAP_FAIL_UNMAPPED, "remap-fail-unmapped") /* unmapped, then an error */        \
    X(BC_REMAP_MOVED_BLOCKED, "remap-moved-blocked") /* short, old address taken */     \
    X(BC_REMAP_MOVED_NOMEM, "remap-moved-nomem") /* the same, and no map works after */   \
    X(BC_REMAP_OTHER_BLOCK, "remap-other-block") /* moved, returns the first block mapped */ \
    X(BC_REMAP_POSITIVE, "remap-positive") /* status +5, nothing done */                  \
    X(BC_REMAP_NEGATIVE, "remap-negative") /* status -999, nothing done */                \
    X(BC_MAP_POSITIVE, "map-positive")     /* map: status +5 */                           \
    X(BC_MAP_NEGATIVE, "map-negative")     /* map: status -999 */                         \
    X(BC_PROBE_HANGS, "probe-hangs")       /* probe never returns */                      \
    X(BC_ADVISE_NEGATIVE, "advise-negative") /* advise: status -999 */                    \
    X(BC_HUGE_BYTES_OVER, "huge-bytes-over") /* huge_bytes: twice the mapping */          \
    X(BC_QUERY_GARBAGE, "query-garbage")   /* query: node 5000, fd 9999 (not open) */ \
    X(BC_MAP_ALIAS, "map-alias")           /* map: the first block's mapping, again */    \
    X(BC_MAP_READONLY, "map-readonly")     /* map: PROT_READ memory */                    \
    X(BC_REMAP_READONLY, "remap-readonly") /* moved, the result made PROT_READ */         \
    X(BC_REMAP_FAIL_READONLY, "remap-fail-readonly") /* block made PROT_NONE, fails */   \
    X(BC_UNMAP_FAILS, "unmap-fails")       /* unmap: HP_EINVAL, nothing unmapped */       \
    X(BC_TEXT_ESCAPES, "text-escapes")     /* reason, detail, log: ESC, CR, LF, BEL */   \
    X(BC_CLAIMS_THP, "claims-thp")         /* kind THP, and its blocks get THP */         \
    X(BC_CLAIMS_THP_FAKE, "claims-thp-fake") /* kind THP, its blocks MADV_NOHUGEPAGE */   \
    X(BC_NAME_DASH, "name-dash")           /* name "-broken" */                           \
    X(BC_AVAILABLE_7, "available-7")       /* probe: available = 7 */                     \
    X(BC_MAP_FAKE_1G, "map-fake-1g")       /* claims 1 GiB pages, maps base pages */ \
    X(BC_MAP_LEN_WRAP, "map-len-wrap")     /* map_len wraps past 2^64 */                  \
    X(BC_MAP_LEN_TOP, "map-len-top")       /* map_len up to the top of user space */      \
    X(BC_UNMAP_GONE, "unmap-gone")         /* unmap: unmaps, then HP_EINVAL */             \
    X(BC_OPS_REWRITE, "ops-rewrite")       /* its ops table: map NULL after load */      \
    X(BC_ADVISE_READONLY, "advise-readonly") /* advise: makes the block PROT_READ */ \
    X(BC_PROBE_NAMES_SELF, "probe-names-self") /* probe: hp_alloc_ex naming itself */ \
    X(BC_MAP_LEN_DOUBLE, "map-len-double") /* map_len twice the mapping, over rw memory */ \
    X(BC_REMAP_MAP_DOUBLE, "remap-map-double") /* moved into twice the room, all rw, */    \
                                               /* committed right, map_len all of it */   \
    X(BC_REMAP_MAP_TOP, "remap-map-top")   /* moved, map_len up to the top of user space */ \
    X(BC_REMAP_INPLACE_TOP, "remap-inplace-top") /* grown in place, len short, map_len */ \
                                                 /* up to the top of user space */        \
    X(BC_HUGE_BYTES_LIE, "huge-bytes-lie") /* huge_bytes: the whole mapping, base pages */ \
    X(BC_QUERY_READONLY, "query-readonly") /* query makes the block PROT_READ */          \
    X(BC_MAP_ALIAS_SIZE, "map-alias-size") /* map: the first block's mapping, page size */ \
                                           /* wrong too */                                \
    X(BC_UNMAP_PARTIAL, "unmap-partial")   /* unmap: the first half, then HP_EOS */        \
    X(BC_UNMAP_POSITIVE, "unmap-positive") /* unmap: unmaps, then status 3 */              \
    X(BC_UNMAP_NOOP, "unmap-noop")         /* unmap: HP_OK, nothing unmapped */            \
    X(BC_REMAP_FORK_POOL, "remap-fork-pool") /* blocks HP_MAP_POOL; remap forks first */   \
    X(BC_AVAILABLE_NO_SIZES, "available-no-sizes") /* probe: available, no page size */   \
    X(BC_UPCALLS_WILD, "upcalls-wild")     /* probe: measure 2^47 bytes, read /proc/.., */ \
                                           /* os_page_node with node NULL */               \
    X(BC_INIT_FAILS, "init-fails")         /* init: HP_EINVAL with a detail */             \
    X(BC_ENTRY_NULL, "entry-null")         /* the entry point returns NULL */               \
    X(BC_INIT_CLOSES_FDS, "init-closes-fds") /* init: closes every descriptor from 3 */  \
    X(BC_ADVISE_WRITES, "advise-writes")   /* advise: adds 1 GiB to its const mapping */   \
    X(BC_UNMAP_WRITES_FAILS, "unmap-writes-fails") /* unmap: writes its mapping, then */  \
                                                   /* fails, nothing unmapped */          \
    X(BC_NAME_UNTERMINATED, "name-unterminated") /* name: 20 letters, then unreadable */ \
    X(BC_STACK_UNMAP_FAILS, "stack-unmap-fails") /* unmap fails for stacks */           \
    X(BC_MAP_RECURSES, "map-recurses")     /* map: hp_alloc_ex naming itself, first */    \
    X(BC_DESC_UNMAPPED, "desc-unmapped")   /* description: 8 letters, then unreadable */  \
    X(BC_INIT_SLOW, "init-slow")           /* init: 300 ms (a thread cancelled in it) */    \
    X(BC_MAP_READONLY_STACK, "map-readonly-stack") /* map: PROT_READ memory, for a huge stack */

enum broken_case {
#define BROKEN_ENUM_(e, s) e,
    BROKEN_CASES(BROKEN_ENUM_)
#undef BROKEN_ENUM_
    BC_COUNT
};

static const char *const broken_case_names[] = {
#define BROKEN_NAME_(e, s) s,
    BROKEN_CASES(BROKEN_NAME_)
#undef BROKEN_NAME_
};

#endif
