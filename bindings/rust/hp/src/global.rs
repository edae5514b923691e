//! A global allocator that serves large allocations from libhp, and falls
//! back to `System` when libhp refuses.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::{c_int, c_void, CStr};
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

use hp_sys as sys;

use crate::error::{static_str, ErrorKind};

/// Smallest [`HpAlloc`] threshold: one transparent huge page on x86_64
/// (2 MiB). A smaller `HpAlloc<N>` does not compile.
///
/// Below one huge page libhp serves base pages anyway, each allocation
/// costs an `mmap` and a `munmap` (100,000 `Box<u64>` under a 1-byte
/// threshold took 0.84 s), and a block that starts on base pages keeps its
/// backend when `hp_realloc` grows it.
///
/// ```compile_fail,E0080
/// #[global_allocator]
/// static GLOBAL: hp::HpAlloc<1> = hp::HpAlloc::new(); // error: below one huge page
/// ```
pub const MIN_THRESHOLD: usize = 2 << 20;

/// Default [`HpAlloc`] threshold: allocations of 2 MiB or more go to libhp.
pub const DEFAULT_THRESHOLD: usize = MIN_THRESHOLD;

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
/// `THRESHOLD` must be at least [`MIN_THRESHOLD`] (checked at compile time).
///
/// **Fork.** `HpAlloc` keeps out of reserved hugetlb pools (`HP_F_NOPOOL`:
/// THP, mTHP or base pages serve its blocks) unless it was made with
/// [`pool(true)`](HpAlloc::pool). A global allocator serves every `Vec`,
/// `String` and `Box` of a program, libraries included, and any of them may
/// fork: a child that writes inherited
/// private pool pages when the pool has no free page dies of SIGBUS, and a
/// write by the parent takes the page away from the children (crate docs,
/// "Fork"). With `pool(true)` large allocations take pool pages when the
/// pool has them (the fastest memory to populate); use it only in a
/// program whose forked children never write memory they inherited, or that
/// keeps enough pool pages free:
///
/// ```no_run
/// #[global_allocator]
/// static GLOBAL: hp::HpAlloc = hp::HpAlloc::new().pool(true); // fork caveat above
/// ```
///
/// **libhp refuses → `System`.** When libhp cannot serve an allocation (an
/// invalid `HP_*` environment variable, no usable backend, out of memory),
/// that allocation comes from `System` instead of aborting the program.
/// The first refusal is reported once: one line on stderr naming libhp's
/// reason (e.g. the variable), written with `write(2)` from a fixed buffer,
/// or a call of the hook set with [`set_fallback_hook`].
/// [`fallback_count`] counts them all.
///
/// **Who owns a pointer.** A layout below the threshold (or aligned above
/// [`MAX_ALIGN`]) is always `System`'s. A large one is libhp's if libhp
/// says so: `dealloc` calls `hp_free` on a page-aligned pointer, which frees
/// a libhp block and answers `HP_EFOREIGN` (touching nothing) for any other
/// pointer, which then goes to `System`; a pointer that is not page aligned
/// cannot be a libhp block and goes straight to `System`. This is a
/// per-pointer question answered under libhp's registry lock, so it is
/// correct with any number of threads, and neither path allocates through
/// the global allocator. `realloc` asks `hp_realloc` first and, when it
/// refuses, `hp_info` (which never touches the memory) to learn whether the
/// block is still libhp's; a block may move between the two allocators
/// whenever its size crosses the threshold or libhp refuses.
#[derive(Debug, Clone, Copy)]
pub struct HpAlloc<const THRESHOLD: usize = DEFAULT_THRESHOLD> {
    /// `HP_F_NOPOOL`, or 0 with [`pool(true)`](HpAlloc::pool).
    pool_flag: u64,
}

impl<const THRESHOLD: usize> HpAlloc<THRESHOLD> {
    const VALID: () = assert!(
        THRESHOLD >= MIN_THRESHOLD,
        "HpAlloc<THRESHOLD>: the threshold must be at least hp::MIN_THRESHOLD (2 MiB, one huge page)"
    );

    /// The allocator; usable in a `static`. It keeps out of hugetlb pools
    /// (see "Fork" above).
    pub const fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        HpAlloc {
            pool_flag: sys::HP_F_NOPOOL,
        }
    }

    /// This allocator, taking hugetlb pool pages when the pool has them
    /// (`yes`) or never (`false`, the default). Read "Fork" above first.
    pub const fn pool(self, yes: bool) -> Self {
        HpAlloc {
            pool_flag: if yes { 0 } else { sys::HP_F_NOPOOL },
        }
    }

    /// Whether it may take hugetlb pool pages ([`pool`](HpAlloc::pool)).
    pub const fn uses_pool(&self) -> bool {
        self.pool_flag == 0
    }

    /// The threshold in bytes.
    pub const THRESHOLD: usize = THRESHOLD;

    /// Whether libhp is asked first for allocations of `layout`.
    #[inline]
    pub const fn uses_libhp(layout: Layout) -> bool {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        layout.size() >= THRESHOLD && layout.align() <= MAX_ALIGN
    }
}

impl<const THRESHOLD: usize> Default for HpAlloc<THRESHOLD> {
    fn default() -> Self {
        Self::new()
    }
}

// Contents need not be zeroed (GlobalAlloc::alloc promises nothing), so
// libhp may skip zeroing recycled memory; alloc_zeroed does not pass it.
const NOZERO: u64 = sys::HP_F_NOZERO;

/// Could `p` be the start of a libhp block? Blocks are page aligned.
#[inline]
fn maybe_libhp(p: *mut u8) -> bool {
    p as usize % MAX_ALIGN == 0
}

/// Does this code from a call that looked `p` up say that `p` is no live
/// libhp block (and so, in a correct program, `System`'s)?
fn foreign(code: i32) -> bool {
    matches!(
        code,
        sys::HP_EFOREIGN | sys::HP_EINTERIOR | sys::HP_EDOUBLEFREE
    )
}

/// Is `p` a live libhp block? `hp_info` only looks it up.
fn libhp_owns(p: *mut u8) -> bool {
    let mut info = sys::hp_block_info::init();
    // SAFETY: info is a valid, sized out-parameter; p is only looked up.
    unsafe { sys::hp_info(p as *const c_void, &mut info) == sys::HP_OK }
}

// SAFETY: every pointer handed out is either a libhp block (page aligned, at
// least the requested size, so it satisfies any layout with align <= 4096)
// or System's for the same layout; dealloc and realloc find the owner as
// the type's documentation says, and only ever free through it; the hp_*
// calls are thread-safe and do not call back into the global allocator.
unsafe impl<const THRESHOLD: usize> GlobalAlloc for HpAlloc<THRESHOLD> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if Self::uses_libhp(layout) {
            // SAFETY: thread-safe; any size and these flags are valid input.
            let p = unsafe { sys::hp_alloc(layout.size(), NOZERO | self.pool_flag) } as *mut u8;
            if !p.is_null() {
                return p;
            }
            refused(layout.size());
        }
        // SAFETY: the caller's layout, passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if Self::uses_libhp(layout) {
            // SAFETY: as in alloc; without HP_F_NOZERO libhp zero-fills.
            let p = unsafe { sys::hp_alloc(layout.size(), self.pool_flag) } as *mut u8;
            if !p.is_null() {
                return p;
            }
            refused(layout.size());
        }
        // SAFETY: the caller's layout, passed on unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if Self::uses_libhp(layout) && maybe_libhp(ptr) {
            // SAFETY: ptr came from this allocator; a failed hp_free never
            // touches memory.
            let rc = unsafe { sys::hp_free(ptr as *mut c_void) };
            if !foreign(rc) {
                // HP_OK, or libhp's own block that it could not unmap and
                // keeps (hp_free: "a later hp_free may succeed").
                return;
            }
        }
        // SAFETY: not a libhp block, so System allocated it with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees new_size, rounded up to align, fits isize.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let new_libhp = Self::uses_libhp(new_layout);
        let keep = layout.size().min(new_size);
        let mut libhp_refused = false;
        if Self::uses_libhp(layout) && maybe_libhp(ptr) {
            if !new_libhp {
                // Leaving libhp (or a large System block shrinking): copy
                // the small remainder out, then free by owner.
                // SAFETY: new_layout is valid (see above) and not zero-sized.
                let q = unsafe { System.alloc(new_layout) };
                if !q.is_null() {
                    // SAFETY: both blocks hold at least `keep` bytes, and are distinct.
                    unsafe { std::ptr::copy_nonoverlapping(ptr, q, keep) };
                    // SAFETY: ptr was allocated by self with layout.
                    unsafe { self.dealloc(ptr, layout) };
                }
                return q;
            }
            let flags = NOZERO | self.pool_flag;
            // SAFETY: on failure hp_realloc leaves the block untouched; a
            // pointer that is not libhp's is only looked up.
            let q = unsafe { sys::hp_realloc(ptr as *mut c_void, new_size, flags) } as *mut u8;
            if !q.is_null() {
                return q;
            }
            // SAFETY: thread-safe, no arguments.
            let code = unsafe { sys::hp_last_error() };
            if !foreign(code) {
                refused(new_size);
                libhp_refused = true;
                if libhp_owns(ptr) {
                    // libhp keeps its block valid but cannot resize it:
                    // move the contents to System.
                    // SAFETY: as above.
                    let q = unsafe { System.alloc(new_layout) };
                    if !q.is_null() {
                        // SAFETY: both hold `keep` bytes and are distinct.
                        unsafe { std::ptr::copy_nonoverlapping(ptr, q, keep) };
                        // SAFETY: a live libhp block we own.
                        unsafe { sys::hp_free(ptr as *mut c_void) };
                    }
                    return q;
                }
            }
        }
        // ptr is System's.
        if new_libhp && !libhp_refused {
            // SAFETY: as in alloc.
            let q = unsafe { sys::hp_alloc(new_size, NOZERO | self.pool_flag) } as *mut u8;
            if !q.is_null() {
                // SAFETY: both hold `keep` bytes and are distinct.
                unsafe { std::ptr::copy_nonoverlapping(ptr, q, keep) };
                // SAFETY: System allocated ptr with layout.
                unsafe { System.dealloc(ptr, layout) };
                return q;
            }
            refused(new_size);
        }
        // SAFETY: System allocated ptr with layout; new_size as the caller promised.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Why [`HpAlloc`] served an allocation from `System`: what libhp said
/// when it refused. Handed to the hook of [`set_fallback_hook`].
#[derive(Debug, Clone, Copy)]
pub struct Fallback<'a> {
    size: usize,
    code: i32,
    detail: &'a str,
}

impl Fallback<'_> {
    /// Bytes asked for.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The libhp error code (`HP_E*`).
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The kind of error, e.g. [`ErrorKind::Environment`] for a bad `HP_*`
    /// variable.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::from_code(self.code)
    }

    /// The symbolic name, e.g. `"HP_EENV"`.
    pub fn name(&self) -> &'static str {
        // SAFETY: thread-safe, returns a static string for any code.
        static_str(unsafe { sys::hp_error_name(self.code) })
    }

    /// libhp's detail text; for a bad variable it names it and the
    /// accepted values.
    pub fn detail(&self) -> &str {
        self.detail
    }
}

impl fmt::Display for Fallback<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "hp: HpAlloc: libhp refused {} bytes ({}: {}); such allocations come from the system allocator",
            self.size,
            self.name(),
            self.detail
        )
    }
}

/// A function that receives the first [`Fallback`] instead of the line on
/// stderr. It runs inside the allocation that fell back: it must not panic
/// (a panic is caught and ignored) and should not allocate much.
pub type FallbackHook = fn(&Fallback<'_>);

static HOOK: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());
static REPORTED: AtomicBool = AtomicBool::new(false);
static FALLBACKS: AtomicU64 = AtomicU64::new(0);

/// Receive the first refusal of libhp through `hook` instead of the line
/// [`HpAlloc`] writes to stderr (`None` restores the line). Set it early in
/// `main`: only the first refusal of the process is reported.
pub fn set_fallback_hook(hook: Option<FallbackHook>) {
    let p = hook.map_or(std::ptr::null_mut(), |f| f as *mut ());
    HOOK.store(p, Ordering::Release);
}

/// How many allocations [`HpAlloc`] (any threshold) served from `System`
/// because libhp refused them, since the process started.
pub fn fallback_count() -> u64 {
    FALLBACKS.load(Ordering::Relaxed)
}

/// A formatter into a fixed buffer: reporting must not allocate, since it
/// runs inside the global allocator. Output that does not fit is cut.
struct FixedBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> fmt::Write for FixedBuf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(N - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

extern "C" {
    fn write(fd: c_int, buf: *const c_void, count: usize) -> isize;
}

/// Count a refusal of libhp; report the first one (with the detail of the
/// libhp call that just failed on this thread).
#[cold]
#[inline(never)]
fn refused(size: usize) {
    FALLBACKS.fetch_add(1, Ordering::Relaxed);
    if REPORTED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: thread-safe, no arguments; the detail is copied before any
    // other libhp call can change it.
    let code = unsafe { sys::hp_last_error() };
    // SAFETY: as above; a NUL-terminated thread-local string.
    let c_detail = unsafe { CStr::from_ptr(sys::hp_last_error_detail()) }.to_bytes();
    let mut copy = [0u8; 512];
    let n = c_detail.len().min(copy.len());
    copy[..n].copy_from_slice(&c_detail[..n]);
    let detail = match std::str::from_utf8(&copy[..n]) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&copy[..e.valid_up_to()]).unwrap_or(""),
    };
    let report = Fallback { size, code, detail };
    let hook = HOOK.load(Ordering::Acquire);
    if !hook.is_null() {
        // SAFETY: HOOK only ever holds null or a FallbackHook (see
        // set_fallback_hook); fn pointers and *mut () have the same size.
        let hook: FallbackHook = unsafe { std::mem::transmute::<*mut (), FallbackHook>(hook) };
        let _ = std::panic::catch_unwind(|| hook(&report));
        return;
    }
    let mut line = FixedBuf::<1024> {
        buf: [0; 1024],
        len: 0,
    };
    let _ = writeln!(line, "{report}");
    if line.len == line.buf.len() {
        line.buf[line.len - 1] = b'\n';
    }
    // SAFETY: writes line.len bytes of a live buffer to fd 2; a failed or
    // short write loses part of a diagnostic, nothing else.
    unsafe { write(2, line.buf.as_ptr() as *const c_void, line.len) };
}
