//! The cache of freed huge pages (`hp/cache.h`).
//!
//! What dropping a [`Block`](crate::Block) (`hp_free`) does with its memory:
//! a block that libhp's own hugetlbfs, thp-madvise or anon-orders backend
//! served with huge pages goes to this cache, pages still faulted in, for the
//! next allocation or growth of the same backend and page size. The cache
//! gives it back to the kernel by itself, with no further call: hugetlb pool
//! pages after `pool_idle_ms` idle (default 1 s), other memory after
//! `idle_ms` (default 10 s), from a background thread that exists only while
//! the cache holds memory; at once when it would hold more than `max_bytes`;
//! and at once on [`trim_cache`]. Every other block is unmapped by the drop
//! itself. Hugetlb memory from before a `fork` is never reused.

use hp_sys as sys;

use crate::block::c_chars;
use crate::error::{check, Result};

/// Cache limits (`struct hp_cache_config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Bytes the cache may hold; 0 turns it off.
    pub max_bytes: u64,
    /// Non-hugetlb memory idle this long is released (ms; 0: only the limit).
    pub idle_ms: u64,
    /// Hugetlb pool pages idle this long go back to the pool (ms).
    pub pool_idle_ms: u64,
}

impl Default for CacheConfig {
    /// The built-in defaults: 1 GiB, 10 s, 1 s.
    fn default() -> Self {
        let c = sys::hp_cache_config::init();
        CacheConfig { max_bytes: c.max_bytes, idle_ms: c.idle_ms, pool_idle_ms: c.pool_idle_ms }
    }
}

/// Bytes cached for one backend and page size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    /// Backend name.
    pub backend: String,
    /// Page size in bytes.
    pub page_size: u64,
    /// Usable bytes cached now.
    pub bytes: u64,
    /// Separate ranges they form.
    pub ranges: u64,
}

/// The block cache now and its counters (`struct hp_cache_stats`).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheStats {
    /// Usable bytes cached now, every backend.
    pub bytes: u64,
    /// Ranges cached now.
    pub ranges: u64,
    /// Allocations served from the cache.
    pub hits: u64,
    /// Allocations of a cacheable backend that mapped fresh memory.
    pub misses: u64,
    /// Ranges given back to the kernel.
    pub releases: u64,
    /// Their usable bytes.
    pub released_bytes: u64,
    /// Bytes taken over by a resize growing in place.
    pub adopted_bytes: u64,
    /// The limits in force.
    pub config: CacheConfig,
    /// Whether the background release thread exists now.
    pub reaper_running: bool,
    /// Bytes per backend and page size.
    pub entries: Vec<CacheEntry>,
}

/// Contents, limits and counters of the block cache.
pub fn cache_stats() -> Result<CacheStats> {
    let mut s = sys::hp_cache_stats::init();
    // SAFETY: a valid, sized out-parameter.
    check(unsafe { sys::hp_cache_get_stats(&mut s) })?;
    let n = (s.n_entries as usize).min(s.entries.len());
    Ok(CacheStats {
        bytes: s.bytes,
        ranges: s.ranges,
        hits: s.hits,
        misses: s.misses,
        releases: s.releases,
        released_bytes: s.released_bytes,
        adopted_bytes: s.adopted_bytes,
        config: CacheConfig {
            max_bytes: s.max_bytes,
            idle_ms: s.idle_ms,
            pool_idle_ms: s.pool_idle_ms,
        },
        reaper_running: s.reaper_running != 0,
        entries: s.entries[..n]
            .iter()
            .map(|e| CacheEntry {
                backend: c_chars(&e.backend),
                page_size: e.page_size,
                bytes: e.bytes,
                ranges: e.ranges,
            })
            .collect(),
    })
}

/// Give every cached range (and every cached stack) back to the kernel now.
pub fn trim_cache() -> Result<()> {
    // SAFETY: no arguments, thread-safe.
    check(unsafe { sys::hp_cache_trim() })
}

/// Replace the cache limits and apply them at once.
pub fn configure_cache(config: &CacheConfig) -> Result<()> {
    let mut c = sys::hp_cache_config::init();
    c.max_bytes = config.max_bytes;
    c.idle_ms = config.idle_ms;
    c.pool_idle_ms = config.pool_idle_ms;
    // SAFETY: a valid, sized config.
    check(unsafe { sys::hp_cache_configure(&c) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_empties_the_cache_and_stats_say_so() {
        let b = crate::alloc(4 << 20).unwrap();
        drop(b);
        trim_cache().unwrap();
        let s = cache_stats().unwrap();
        assert_eq!(s.bytes, 0);
        assert!(s.entries.is_empty());
    }

    #[test]
    fn configure_rejects_out_of_range() {
        let bad = CacheConfig { max_bytes: sys::HP_CACHE_MAX_BYTES + 1, ..CacheConfig::default() };
        assert!(configure_cache(&bad).is_err());
    }
}
