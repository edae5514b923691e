//! Safe Rust API for libhp: Linux huge pages made easy.
//!
//! ```
//! // A 64 MiB zero-filled block, page aligned, on the best backend here.
//! let mut block = hp::alloc(64 << 20)?;
//! block[..4].copy_from_slice(b"huge");
//! block.resize(128 << 20)?;                  // hp_realloc: remaps, no copy
//! let info = block.info()?;
//! println!("{} KiB pages from {}, {} bytes huge now",
//!          info.page_size >> 10, info.backend, info.huge_bytes);
//! for b in hp::backends()? {
//!     println!("{:12} {:?} available={} {}", b.name, b.kind, b.available, b.reason);
//! }
//! println!("libhp {}", hp::version());
//! # Ok::<(), hp::Error>(())
//! ```
//!
//! - [`alloc`] / [`AllocOptions`] give an owned [`Block`] that derefs to
//!   `[u8]`; [`Block::resize`], [`Block::info`]; dropping it frees it.
//! - [`HpAlloc`] is a `#[global_allocator]` that sends large allocations
//!   (e.g. a growing `Vec`) to libhp and the rest to `System`.
//! - [`Stack`] / [`StackOptions`] make lean or huge thread and coroutine
//!   stacks; [`StackOptions::spawn`] runs a closure on a thread on one.
//! - [`backends`] lists what libhp found ([`reprobe`] refreshes it);
//!   [`version`] is the loaded library's.
//! - Every failure is an [`Error`]: the C code plus libhp's detail message.
//!
//! Threading: every libhp function is thread-safe, and a block may be freed
//! by another thread, so [`Block`] is `Send + Sync`. The raw API is
//! re-exported as [`sys`].

mod backend;
mod block;
mod cache;
mod error;
mod global;
mod stack;

pub use backend::{backends, reprobe, BackendInfo, BackendKind};
pub use block::{alloc, block_info, AllocOptions, Block, BlockInfo};
pub use cache::{cache_stats, configure_cache, trim_cache, CacheConfig, CacheEntry, CacheStats};
pub use error::{Error, ErrorKind, Result};
pub use global::{HpAlloc, DEFAULT_THRESHOLD, MAX_ALIGN};
pub use hp_sys as sys;
pub use stack::{
    configure_stack_cache, stack_cache_stats, trim_stack_cache, Stack, StackCacheConfig,
    StackCacheStats, StackInfo, StackMode, StackOptions, StackThread,
};

use std::fmt;

/// A libhp version, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// Incompatible changes (a new SONAME).
    pub major: u32,
    /// Compatible additions.
    pub minor: u32,
    /// Fixes.
    pub patch: u32,
}

impl Version {
    /// The version of the headers hp-sys was generated from.
    pub const HEADER: Version = Version::from_number(sys::HP_VERSION_NUMBER);

    /// Decode `major * 10000 + minor * 100 + patch` (`HP_VERSION_NUMBER`).
    pub const fn from_number(n: u32) -> Version {
        Version {
            major: n / 10000,
            minor: n / 100 % 100,
            patch: n % 100,
        }
    }

    /// Encode as `major * 10000 + minor * 100 + patch`.
    pub const fn number(self) -> u32 {
        self.major * 10000 + self.minor * 100 + self.patch
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Version of the libhp actually loaded (`hp_version`).
///
/// ```
/// assert_eq!(hp::version().major, hp::Version::HEADER.major);
/// ```
pub fn version() -> Version {
    // SAFETY: thread-safe, no arguments.
    Version::from_number(unsafe { sys::hp_version() })
}

/// The same as a static string, e.g. `"1.0.0"` (`hp_version_string`).
pub fn version_string() -> &'static str {
    // SAFETY: thread-safe; returns a static string.
    error::static_str(unsafe { sys::hp_version_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_numbers_round_trip() {
        let v = Version::from_number(10203);
        assert_eq!((v.major, v.minor, v.patch), (1, 2, 3));
        assert_eq!(v.number(), 10203);
        assert_eq!(v.to_string(), "1.2.3");
        assert!(Version::from_number(10100) > Version::from_number(10009));
    }
}
