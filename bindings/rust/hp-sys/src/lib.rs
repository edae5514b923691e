//! Raw FFI declarations for libhp, the C library that makes Linux huge pages
//! easy (`#include <hp.h>`).
//!
//! Everything here mirrors the C headers one to one, with their comments as
//! the docs of the functions, types and fields (the error codes and the
//! `#define` constants have none: bindgen cannot carry those; read
//! `hp/errors.h` and the other headers, or `hp_strerror`). Every `hp_*`
//! function is thread-safe. For a safe API use the `hp` crate.
//!
//! - `src/bindings.rs` is made by bindgen from `include/hp.h` and committed;
//!   `bindgen.sh --check` fails when it drifts from the headers.
//! - The `HP_F_*`/`HP_STACK_*` flags and the 64-bit limits (built with
//!   `UINT64_C()` in C, which bindgen 0.60 cannot evaluate) and the `*_INIT`
//!   initialisers are written out below.
//! - `tests/c_abi.rs` compiles a C program against the installed headers and
//!   checks every struct size, field offset, constant and function signature
//!   declared here.
//!
//! Linking: the build script finds libhp with `pkg-config --libs --cflags
//! libhp` (set `PKG_CONFIG_PATH=<builddir>/meson-uninstalled` for an
//! uninstalled build) and exports `DEP_HP_LIBDIR` to direct dependents.

// The docs of the generated items are the headers' comments (bindgen.sh
// passes -fparse-all-comments): C prose, whose brackets are no Rust links.
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    clippy::all,
    rustdoc::broken_intra_doc_links
)]
mod bindings {
    include!("bindings.rs");
}
pub use bindings::*;

/// Fail with `HP_ENOHUGE` instead of using base pages.
pub const HP_F_REQUIRE_HUGE: u64 = 0x1;
/// Prefault the whole block before returning.
pub const HP_F_POPULATE: u64 = 0x2;
/// Ask the kernel to collapse the block into huge pages now.
pub const HP_F_COLLAPSE: u64 = 0x4;
/// Contents may be left over from earlier use (not zero-filled).
pub const HP_F_NOZERO: u64 = 0x8;
pub const HP_F_NOPOOL: u64 = 0x10;
/// Mask of the bits (56..61) that carry log2 of a requested page size.
pub const HP_F_PAGE_SHIFT_MASK: u64 = 0x3f << HP_F_PAGE_SHIFT_POS;
/// Request 4 KiB pages.
pub const HP_F_PAGE_4K: u64 = 12 << HP_F_PAGE_SHIFT_POS;
/// Request 64 KiB pages.
pub const HP_F_PAGE_64K: u64 = 16 << HP_F_PAGE_SHIFT_POS;
/// Request 2 MiB pages.
pub const HP_F_PAGE_2M: u64 = 21 << HP_F_PAGE_SHIFT_POS;
/// Request 1 GiB pages.
pub const HP_F_PAGE_1G: u64 = 30 << HP_F_PAGE_SHIFT_POS;

/// Stack mode: lean (the default), never backed by huge pages.
pub const HP_STACK_LEAN: u64 = 0;
/// Stack mode: huge (hugetlb or THP).
pub const HP_STACK_HUGE: u64 = 0x1;
/// Huge mode from the hugetlb pool only.
pub const HP_STACK_HUGETLB: u64 = 0x2;
/// Huge mode from THP only.
pub const HP_STACK_THP: u64 = 0x4;
/// Huge mode if possible, else a lean stack instead of `HP_ENOHUGE`.
pub const HP_STACK_ALLOW_LEAN: u64 = 0x8;
/// Prefault the whole usable range now.
pub const HP_STACK_POPULATE: u64 = 0x10;
/// Neither reuse a cached stack nor cache this one when destroyed.
pub const HP_STACK_NOCACHE: u64 = 0x20;
/// Largest usable stack size, in bytes.
pub const HP_STACK_MAX_SIZE: u64 = 1 << 40;
/// Largest stack guard, in bytes.
pub const HP_STACK_MAX_GUARD: u64 = 1 << 30;
/// Default `max_bytes` of the stack cache (usable bytes of all cached stacks).
pub const HP_STACK_CACHE_DEFAULT_BYTES: u64 = 1 << 30;
/// Default `keep_bytes` of the stack cache (usable bytes of cached stacks
/// that keep their pages).
pub const HP_STACK_CACHE_DEFAULT_KEEP_BYTES: u64 = 8 << 20;

/// Largest `max_bytes` of `hp_cache_configure`, in bytes.
pub const HP_CACHE_MAX_BYTES: u64 = 1 << 46;

impl hp_cache_config {
    /// `HP_CACHE_CONFIG_INIT`: size set, the built-in defaults (1 GiB,
    /// 10 s idle, 1 s idle for hugetlb pool pages).
    pub const fn init() -> Self {
        hp_cache_config {
            size: core::mem::size_of::<hp_cache_config>() as u32,
            reserved: 0,
            max_bytes: 1 << 30,
            idle_ms: HP_CACHE_DEFAULT_IDLE_MS as u64,
            pool_idle_ms: HP_CACHE_DEFAULT_POOL_IDLE_MS as u64,
        }
    }
}

impl hp_cache_stats_entry {
    /// `HP_CACHE_STATS_ENTRY_INIT`: everything zero.
    pub const fn init() -> Self {
        hp_cache_stats_entry {
            backend: [0; 32],
            page_size: 0,
            bytes: 0,
            ranges: 0,
        }
    }
}

impl hp_cache_stats {
    /// `HP_CACHE_STATS_INIT`: size set, everything else zero.
    pub const fn init() -> Self {
        const NO_ENTRY: hp_cache_stats_entry = hp_cache_stats_entry::init();
        hp_cache_stats {
            size: core::mem::size_of::<hp_cache_stats>() as u32,
            n_entries: 0,
            bytes: 0,
            ranges: 0,
            hits: 0,
            misses: 0,
            releases: 0,
            released_bytes: 0,
            adopted_bytes: 0,
            max_bytes: 0,
            idle_ms: 0,
            pool_idle_ms: 0,
            reaper_running: 0,
            reserved: 0,
            entries: [NO_ENTRY; HP_CACHE_STATS_MAX_ENTRIES as usize],
        }
    }
}

impl hp_alloc_opts {
    /// `HP_ALLOC_OPTS_INIT`: size set, everything else zero/NULL.
    pub const fn init() -> Self {
        hp_alloc_opts {
            size: core::mem::size_of::<hp_alloc_opts>() as u32,
            reserved: 0,
            flags: 0,
            backend: core::ptr::null(),
            exclude: core::ptr::null(),
            numa_mode: 0,
            numa_max_node: 0,
            numa_nodes: core::ptr::null(),
        }
    }
}

impl hp_block_info {
    /// `HP_BLOCK_INFO_INIT`: size set, everything else zero.
    pub const fn init() -> Self {
        hp_block_info {
            size: core::mem::size_of::<hp_block_info>() as u32,
            reserved: 0,
            backend: [0; 32],
            requested_page_size: 0,
            page_size: 0,
            usable_size: 0,
            mapped_size: 0,
            huge_bytes: 0,
            flags: 0,
            numa_node: -1,
            fd: -1,
            fd_offset: 0,
            pin: 0,
            reserved2: 0,
            numa_mode: 0,
            numa_count: 0,
            numa_mask: 0,
        }
    }
}

impl hp_backend_info {
    /// `HP_BACKEND_INFO_INIT`: size set, everything else zero.
    pub const fn init() -> Self {
        hp_backend_info {
            size: core::mem::size_of::<hp_backend_info>() as u32,
            available: 0,
            kind: 0,
            n_page_sizes: 0,
            name: [0; 32],
            path: [0; 256],
            reason: [0; 256],
            page_sizes: [0; HP_MAX_PAGE_SIZES as usize],
            pool_free: [0; HP_MAX_PAGE_SIZES as usize],
            description: [0; 128],
        }
    }
}

impl hp_stack_opts {
    /// `HP_STACK_OPTS_INIT`: size set, everything else zero.
    pub const fn init() -> Self {
        hp_stack_opts {
            size: core::mem::size_of::<hp_stack_opts>() as u32,
            reserved: 0,
            flags: 0,
            guard_size: 0,
            numa_mode: 0,
            numa_max_node: 0,
            numa_nodes: core::ptr::null(),
        }
    }
}

impl hp_stack_info {
    /// `HP_STACK_INFO_INIT`: size set, everything else zero.
    pub const fn init() -> Self {
        hp_stack_info {
            size: core::mem::size_of::<hp_stack_info>() as u32,
            mode: 0,
            kind: 0,
            from_cache: 0,
            source: [0; 32],
            flags: 0,
            base_addr: 0,
            usable_size: 0,
            guard_addr: 0,
            guard_size: 0,
            page_size: 0,
            resident_bytes: 0,
            huge_bytes: 0,
        }
    }
}

impl hp_stack_cache_config {
    /// `HP_STACK_CACHE_CONFIG_INIT`: size set, the default bounds (64
    /// stacks, 1 GiB of address space, 8 MiB kept).
    pub const fn init() -> Self {
        hp_stack_cache_config {
            size: core::mem::size_of::<hp_stack_cache_config>() as u32,
            reserved: 0,
            max_stacks: HP_STACK_CACHE_DEFAULT_STACKS as u64,
            max_bytes: HP_STACK_CACHE_DEFAULT_BYTES,
            keep_bytes: HP_STACK_CACHE_DEFAULT_KEEP_BYTES,
        }
    }
}

impl hp_stack_cache_stats {
    /// `HP_STACK_CACHE_STATS_INIT`: size set, everything else zero.
    pub const fn init() -> Self {
        hp_stack_cache_stats {
            size: core::mem::size_of::<hp_stack_cache_stats>() as u32,
            reserved: 0,
            max_stacks: 0,
            max_bytes: 0,
            keep_bytes: 0,
            cached_stacks: 0,
            cached_bytes: 0,
            kept_bytes: 0,
            hits: 0,
            misses: 0,
            released: 0,
            evictions: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn links_and_reports_the_header_version() {
        let v = unsafe { hp_version() };
        assert_eq!(
            v / 10000,
            HP_VERSION_MAJOR,
            "loaded libhp {v} vs header {HP_VERSION_NUMBER}"
        );
        let s = unsafe { CStr::from_ptr(hp_version_string()) }
            .to_str()
            .unwrap();
        assert_eq!(s.split('.').count(), 3, "{s}");
    }

    #[test]
    fn raw_alloc_info_free_roundtrip() {
        unsafe {
            let p = hp_alloc(1 << 20, 0) as *mut u8;
            assert!(!p.is_null(), "hp_alloc: {}", hp_last_error());
            *p = 7;
            let mut info = hp_block_info::init();
            assert_eq!(hp_info(p as *const _, &mut info), HP_OK);
            assert!(info.usable_size >= 1 << 20);
            assert_eq!(hp_free(p as *mut _), HP_OK);
            assert_eq!(hp_free(p as *mut _), HP_EDOUBLEFREE);
            let detail = CStr::from_ptr(hp_last_error_detail()).to_str().unwrap();
            assert!(!detail.is_empty());
        }
    }

    #[test]
    fn page_size_flag_agrees_with_the_constants() {
        unsafe {
            assert_eq!(hp_page_size_flag(4096), HP_F_PAGE_4K);
            assert_eq!(hp_page_size_flag(2 << 20), HP_F_PAGE_2M);
            assert_eq!(hp_page_size_flag(1 << 30), HP_F_PAGE_1G);
            assert_eq!(hp_page_size_flag(3000), 0);
        }
    }
}
