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
//! - [`HugeVec<T>`](HugeVec) is a growable huge-page array of plain old
//!   data ([`Pod`]: numbers and arrays of them), with no global allocator
//!   and no `unsafe` in user code.
//! - [`HugeVec`] and [`HpAlloc`] never use hugetlb pool pages unless asked,
//!   so a forked child can write what it inherited (see "Fork" below).
//! - [`Stack`] / [`StackOptions`] make lean or huge thread and coroutine
//!   stacks; [`StackOptions::spawn`] runs a closure on a thread on one.
//! - [`backends`] lists what libhp found ([`reprobe`] refreshes it);
//!   [`version`] is the loaded library's.
//! - Every failure is an [`Error`]: the C code plus libhp's detail message.
//!
//! Threading: every libhp function is thread-safe, and a block may be freed
//! by another thread, so [`Block`] is `Send + Sync`. The raw API is
//! re-exported as [`sys`].
//!
//! # Soundness
//!
//! Miri cannot run this crate (it calls C), so soundness is argued here and
//! the type-level parts are tested with `compile_fail` examples (run by
//! `cargo test` as doc tests):
//!
//! - **Every byte safe code can read is initialised.** [`Block`] derefs to
//!   `[u8]` and is only made without `HP_F_NOZERO` (libhp zero-fills the
//!   block and whatever `hp_realloc` adds past its usable size);
//!   [`AllocOptions::flags`] refuses the bit. Memory that need not be
//!   zeroed is an [`UninitBlock`], which derefs to `[MaybeUninit<u8>]`, and
//!   becomes a `Block` by [`UninitBlock::fill`] or the `unsafe`
//!   [`UninitBlock::assume_init`]; such a `Block` zeroes bytes past its
//!   written prefix before a growing resize exposes them. [`HugeVec`] only
//!   exposes its first `len` elements, each written by a push, a copy or a
//!   fill, or zero-filled by libhp (all-zero bytes are a valid [`Pod`]:
//!   a sealed trait of the primitive numbers and arrays of them).
//! - **No use after free or resize.** Slices borrow the block, and
//!   `resize`, `free` and drop need it by value or `&mut`:
//!
//!   ```compile_fail,E0502
//!   let mut b = hp::alloc(4096)?;
//!   let s: &[u8] = &b;
//!   b.resize(1 << 20)?; // error: `b` is borrowed by `s`
//!   println!("{}", s[0]);
//!   # Ok::<(), hp::Error>(())
//!   ```
//!
//!   ```compile_fail,E0505
//!   let b = hp::alloc(4096)?;
//!   let s: &[u8] = &b;
//!   drop(b); // error: `b` is borrowed by `s`
//!   println!("{}", s[0]);
//!   # Ok::<(), hp::Error>(())
//!   ```
//! - **Threads.** `Block`, `UninitBlock`, `HugeVec<T>` and [`Stack`] are
//!   `Send + Sync` (libhp is thread-safe and a block may be freed by any
//!   thread). A [`StackThread`] carries its closure's result to `join`, so
//!   spawning needs `Send + 'static`:
//!
//!   ```compile_fail,E0277
//!   let rc = std::rc::Rc::new(1);
//!   let t = hp::StackOptions::new().spawn(1 << 20, move || *rc)?;
//!   # Ok::<(), hp::Error>(())
//!   ```
//!
//!   and a `StackThread` must be joined or deliberately dropped (it detaches):
//!
//!   ```compile_fail
//!   #![deny(unused_must_use)]
//!   hp::StackOptions::new().spawn(1 << 20, || ())?;
//!   # Ok::<(), hp::Error>(())
//!   ```
//! - **Raw pointers stay raw.** [`block_info`] takes any pointer and libhp
//!   only looks it up. [`Stack::base`] is a raw pointer: using a stack's
//!   memory is up to the caller's `unsafe` code.
//! - **The global allocator** ([`HpAlloc`]) hands out page-aligned libhp
//!   blocks or `System` memory for the same layout, and finds the owner of a
//!   pointer through libhp's registry (see its documentation); it never
//!   calls the global allocator itself.
//! - Every `unsafe` block carries a `// SAFETY:` comment
//!   (`clippy::undocumented_unsafe_blocks` is denied), and
//!   `unsafe_op_in_unsafe_fn` is denied.

//!
//! # Fork
//!
//! Private hugetlb pages that exist when a process forks are shared
//! copy-on-write, and their pool reservations stay with the parent (kernel
//! `Documentation/admin-guide/mm/hugetlbpage.rst`,
//! `Documentation/mm/hugetlbfs_reserv.rst`). A write to such a page, by
//! either process, needs a free pool page nobody reserved. When the pool
//! has none, a child's write gets SIGBUS, and a write by the parent
//! succeeds but takes the page away from every child, whose next access to
//! it (a read too) gets SIGBUS. THP, mTHP and base pages have no such
//! rule.
//!
//! - **Containers and the allocator keep out of pools by default.**
//!   [`HugeVec`] and [`HpAlloc`] pass `HP_F_NOPOOL`: they are handed to
//!   code that forks without a thought for hugetlb (a library, a `Command`
//!   that a crate runs, a test harness), so a forked child may write them
//!   whatever the pool holds. Opt in with
//!   [`AllocOptions::pool(true)`](AllocOptions::pool) through
//!   [`HugeVec::with_options`], or [`HpAlloc::pool`]`(true)`, only where no
//!   forked child writes that memory or enough pool pages stay free.
//! - **An explicit [`Block`] keeps libhp's C default**: [`alloc`] and
//!   [`AllocOptions::alloc`] take the pool when it has the pages, for a
//!   caller who asked for a block and can be told the rule;
//!   [`AllocOptions::pool(false)`](AllocOptions::pool) keeps it out.
//! - **The choice holds for the block's life**: libhp keeps `HP_F_NOPOOL`,
//!   the exclude list, the page size and a named backend for every resize
//!   (`hp_realloc`), so memory that started off the pool never grows onto it.
//!
//! `tests/fork.rs` drains the pool after making vectors and `Vec`s under
//! `HpAlloc` while it had free pages, then forks children from a parent
//! whose threads keep allocating: every child writes every page of every
//! block, and none may die, while the children of the two opted-in
//! controls die of SIGBUS.

#![deny(unsafe_op_in_unsafe_fn, missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod backend;
mod block;
mod cache;
mod error;
mod global;
mod overflow;
mod stack;
mod vec;

pub use backend::{backends, reprobe, BackendInfo, BackendKind};
pub use block::{alloc, block_info, AllocOptions, Block, BlockInfo, Numa, Pin, UninitBlock};
pub use cache::{cache_stats, configure_cache, trim_cache, CacheConfig, CacheEntry, CacheStats};
pub use error::{Error, ErrorKind, Result};
pub use global::{
    fallback_count, set_fallback_hook, Fallback, FallbackHook, HpAlloc, DEFAULT_THRESHOLD,
    MAX_ALIGN, MIN_THRESHOLD,
};
pub use hp_sys as sys;
#[doc(hidden)]
pub use stack::reaped_stack_threads;
pub use stack::{
    configure_stack_cache, stack_cache_stats, trim_stack_cache, Stack, StackCacheConfig,
    StackCacheStats, StackInfo, StackMode, StackOptions, StackThread,
};
pub use vec::{HugeVec, IntoIter, Pod};

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

/// Version of the libhp actually loaded (`hp_version`); compare with
/// [`linked_version`].
///
/// ```
/// assert_eq!(hp::version().major, hp::Version::HEADER.major);
/// ```
pub fn version() -> Version {
    // SAFETY: thread-safe, no arguments.
    Version::from_number(unsafe { sys::hp_version() })
}

/// The same as a static string, e.g. `"1.4.0"` (`hp_version_string`).
pub fn version_string() -> &'static str {
    // SAFETY: thread-safe; returns a static string.
    error::static_str(unsafe { sys::hp_version_string() })
}

/// Version of the libhp this program was built against (what pkg-config
/// reported to `hp-sys`'s build script).
///
/// ```
/// assert_eq!(hp::linked_version().major, 1);
/// ```
pub fn linked_version() -> Version {
    let mut n = env!("HP_LINKED_VERSION")
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    Version {
        major: n.next().unwrap_or(0),
        minor: n.next().unwrap_or(0),
        patch: n.next().unwrap_or(0),
    }
}

/// The file the dynamic loader loaded libhp from (`dladdr` of
/// `hp_version`), e.g. `/usr/local/lib/x86_64-linux-gnu/libhp.so.1` or a
/// build tree's `build/lib/libhp.so.1`; `None` if the loader cannot say.
pub fn library_path() -> Option<std::path::PathBuf> {
    #[repr(C)]
    struct DlInfo {
        dli_fname: *const std::ffi::c_char,
        dli_fbase: *mut std::ffi::c_void,
        dli_sname: *const std::ffi::c_char,
        dli_saddr: *mut std::ffi::c_void,
    }
    extern "C" {
        fn dladdr(addr: *const std::ffi::c_void, info: *mut DlInfo) -> std::ffi::c_int;
    }
    let mut info = DlInfo {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    let f: unsafe extern "C" fn() -> u32 = sys::hp_version;
    // SAFETY: info is a valid out-parameter; the address is only looked up.
    if unsafe { dladdr(f as *const std::ffi::c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr gives a NUL-terminated path that lives as long as the
    // library stays loaded (libhp is never unloaded); copied at once.
    let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
    use std::os::unix::ffi::OsStrExt;
    Some(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(
        name.to_bytes(),
    )))
}

/// Warn once on stderr when the libhp loaded at run time is not the version
/// this program was built against (another libhp.so.1 found first by the
/// dynamic loader, e.g. an installed one instead of a build tree's).
/// Called by the entry points that allocate (not by [`HpAlloc`]).
pub(crate) fn check_loaded_version() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let (loaded, linked) = (version(), linked_version());
        if loaded != linked {
            let path = library_path().map_or_else(|| "?".into(), |p| p.display().to_string());
            eprintln!(
                "hp: warning: libhp {loaded} was loaded from {path}, but this program was built \
                 against libhp {linked}; set an rpath or LD_LIBRARY_PATH to run the intended one"
            );
        }
    });
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
