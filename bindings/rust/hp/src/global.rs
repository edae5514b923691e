//! A global allocator that serves large allocations from libhp.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::c_void;

use hp_sys as sys;

/// Default [`HpAlloc`] threshold: allocations of 2 MiB or more go to libhp.
///
/// 2 MiB is the smallest transparent huge page on x86_64: below it libhp
/// serves base pages anyway, and a block that starts on base pages keeps
/// its backend when `hp_realloc` grows it, so a `Vec` that entered libhp
/// at 1 MiB would stay on base pages at any size. Use
/// `HpAlloc<{ 1 << 20 }>` (any value) for another threshold.
pub const DEFAULT_THRESHOLD: usize = 2 << 20;

/// Largest alignment libhp blocks always satisfy: they are page aligned, and
/// no Linux base page is smaller than 4 KiB.
pub const MAX_ALIGN: usize = 4096;

/// A [`GlobalAlloc`] that serves every allocation of at least `THRESHOLD`
/// bytes (and alignment up to [`MAX_ALIGN`]) from libhp (`hp_alloc`,
/// `hp_realloc`, `hp_free`) and everything else from [`System`].
///
/// ```no_run
/// #[global_allocator]
/// static GLOBAL: hp::HpAlloc = hp::HpAlloc::new(); // 2 MiB threshold
/// // or: static GLOBAL: hp::HpAlloc<{ 64 << 20 }> = hp::HpAlloc::new();
/// ```
///
/// Which allocator owns a pointer follows from its layout alone, so `dealloc`
/// costs no lookup: a layout at or above the threshold (with alignment up to
/// 4096) is libhp's, anything else is `System`'s. A `realloc` that stays on
/// one side uses that allocator's realloc — for libhp that is `hp_realloc`,
/// which grows large blocks by remapping pages instead of copying bytes. A
/// `realloc` that crosses the threshold allocates on the other side, copies
/// and frees. Larger alignments always go to `System`.
///
/// Allocation failure returns null as `GlobalAlloc` requires (Rust then
/// calls `handle_alloc_error`); there is no silent fallback, because the
/// owner of a pointer must stay a function of its layout.
#[derive(Debug, Clone, Copy, Default)]
pub struct HpAlloc<const THRESHOLD: usize = DEFAULT_THRESHOLD>;

impl<const THRESHOLD: usize> HpAlloc<THRESHOLD> {
    /// The allocator; usable in a `static`.
    pub const fn new() -> Self {
        HpAlloc
    }

    /// The threshold in bytes.
    pub const THRESHOLD: usize = THRESHOLD;

    /// Whether libhp serves (and owns) allocations of `layout`.
    #[inline]
    pub const fn uses_libhp(layout: Layout) -> bool {
        layout.size() >= THRESHOLD && layout.align() <= MAX_ALIGN
    }
}

// Contents need not be zeroed (GlobalAlloc::alloc promises nothing), so
// libhp may skip zeroing recycled memory; alloc_zeroed passes 0.
const FLAGS: u64 = sys::HP_F_NOZERO;

// SAFETY: libhp returns page-aligned blocks of at least the requested size,
// which satisfies every layout routed to it (align <= 4096); hp_* calls are
// thread-safe; ownership is decided by layout, and realloc moves a block
// between the two allocators whenever its new layout changes owner.
unsafe impl<const THRESHOLD: usize> GlobalAlloc for HpAlloc<THRESHOLD> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if Self::uses_libhp(layout) {
            sys::hp_alloc(layout.size(), FLAGS) as *mut u8
        } else {
            System.alloc(layout)
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if Self::uses_libhp(layout) {
            sys::hp_alloc(layout.size(), 0) as *mut u8
        } else {
            System.alloc_zeroed(layout)
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if Self::uses_libhp(layout) {
            sys::hp_free(ptr as *mut c_void);
        } else {
            System.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees new_size, rounded up to align, fits isize.
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        match (Self::uses_libhp(layout), Self::uses_libhp(new_layout)) {
            // On failure hp_realloc returns NULL and leaves the block valid,
            // exactly the GlobalAlloc contract.
            (true, true) => sys::hp_realloc(ptr as *mut c_void, new_size, FLAGS) as *mut u8,
            (false, false) => System.realloc(ptr, layout, new_size),
            _ => {
                let new = self.alloc(new_layout);
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                new
            }
        }
    }
}
