//! Thread and coroutine stacks (`include/hp/stack.h`): lean stacks that are
//! never backed by huge pages, or huge ones made of whole huge pages, each
//! with a guard below it.

use std::any::Any;
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};

use hp_sys as sys;

use crate::backend::BackendKind;
use crate::block::{c_chars, numa_bits, Numa};
use crate::error::{check, Error, Result};
use crate::overflow;

/// How to make a [`Stack`]: a builder over `struct hp_stack_opts`.
///
/// ```no_run
/// let s = hp::StackOptions::new().huge(true).allow_lean(true).create(8 << 20)?;
/// println!("{:?}", s.info()?);
/// # Ok::<(), hp::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackOptions {
    flags: u64,
    guard_size: u64,
    name: Option<String>,
    numa: Option<(Numa, Vec<u32>)>,
}

impl StackOptions {
    /// A lean stack (never huge pages), one base page of guard, cacheable.
    pub fn new() -> StackOptions {
        StackOptions::default()
    }

    fn flag(mut self, bit: u64, yes: bool) -> StackOptions {
        if yes {
            self.flags |= bit;
        } else {
            self.flags &= !bit;
        }
        self
    }

    /// Huge mode: whole huge pages from the hugetlb pool or THP (`HP_STACK_HUGE`).
    pub fn huge(self, yes: bool) -> StackOptions {
        self.flag(sys::HP_STACK_HUGE, yes)
    }

    /// Huge mode from the hugetlb pool only (`HP_STACK_HUGETLB`).
    pub fn hugetlb_only(self, yes: bool) -> StackOptions {
        self.flag(sys::HP_STACK_HUGETLB, yes)
    }

    /// Huge mode from THP only (`HP_STACK_THP`).
    pub fn thp_only(self, yes: bool) -> StackOptions {
        self.flag(sys::HP_STACK_THP, yes)
    }

    /// In huge mode, make a lean stack rather than fail with
    /// [`ErrorKind::NoHugePages`](crate::ErrorKind::NoHugePages) (`HP_STACK_ALLOW_LEAN`).
    pub fn allow_lean(self, yes: bool) -> StackOptions {
        self.flag(sys::HP_STACK_ALLOW_LEAN, yes)
    }

    /// Prefault the whole usable range now (`HP_STACK_POPULATE`).
    pub fn populate(self, yes: bool) -> StackOptions {
        self.flag(sys::HP_STACK_POPULATE, yes)
    }

    /// Neither reuse a cached stack nor cache this one (`HP_STACK_NOCACHE`).
    pub fn no_cache(self, yes: bool) -> StackOptions {
        self.flag(sys::HP_STACK_NOCACHE, yes)
    }

    /// Bytes of guard below the stack, rounded up to the base page; 0 (the
    /// default) means one base page.
    pub fn guard_size(mut self, bytes: u64) -> StackOptions {
        self.guard_size = bytes;
        self
    }

    /// OR raw `HP_STACK_*` bits into the request.
    pub fn flags(mut self, raw: u64) -> StackOptions {
        self.flags |= raw;
        self
    }

    /// Place the stack's memory on NUMA `nodes` (each below 1024; libhp
    /// 1.4), as [`AllocOptions::numa`](crate::AllocOptions::numa) places a
    /// block: libhp gives the thread that memory policy while mapping and
    /// sets it on the stack's memory, so pages faulted later follow it too.
    /// A placed stack is always mapped fresh, never taken from the stack
    /// cache. A node without memory, or outside the thread's cpuset, is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument), as
    /// is a node of 1024 or more or an empty `nodes`.
    pub fn numa(mut self, mode: Numa, nodes: &[u32]) -> StackOptions {
        self.numa = Some((mode, nodes.to_vec()));
        self
    }

    /// The options struct, pointing into `nodes` (which must outlive its use).
    fn raw(&self, nodes: &mut [u64; 16]) -> Result<sys::hp_stack_opts> {
        let mut o = sys::hp_stack_opts::init();
        o.flags = self.flags;
        o.guard_size = self.guard_size;
        let (mode, bits) = numa_bits(&self.numa)?;
        if mode != 0 {
            *nodes = bits;
            o.numa_mode = mode;
            o.numa_max_node = 1024;
            o.numa_nodes = nodes.as_ptr();
        }
        Ok(o)
    }

    /// Make a stack of at least `size` usable bytes (`hp_stack_create_ex`).
    pub fn create(&self, size: usize) -> Result<Stack> {
        crate::check_loaded_version();
        let mut nodes = [0u64; 16];
        let opts = self.raw(&mut nodes)?;
        // SAFETY: opts is a valid, sized options struct; nodes outlives the call.
        let s = unsafe { sys::hp_stack_create_ex(size, &opts) };
        NonNull::new(s)
            .map(|raw| Stack { raw })
            .ok_or_else(|| Error::last(None))
    }

    /// Run `f` on a new thread whose stack is a libhp stack of at least
    /// `size` bytes (`hp_stack_thread_create`); `size` must leave room for
    /// the thread's TLS. A panic in `f` is caught and returned by
    /// [`StackThread::join`]. Like `std::thread`, a thread that runs into
    /// its guard prints `thread '<name>' has overflowed its stack` and
    /// aborts the process (SIGABRT) instead of dying of a bare SIGSEGV.
    ///
    /// # Errors
    ///
    /// What `hp_stack_thread_create` reports: the errors of
    /// [`create`](StackOptions::create), and
    /// [`InvalidArgument`](crate::ErrorKind::InvalidArgument) for a stack
    /// too small for a thread.
    pub fn spawn<F, T>(&self, size: usize, f: F) -> Result<StackThread<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        crate::check_loaded_version();
        let mut nodes = [0u64; 16];
        let opts = self.raw(&mut nodes)?;
        let packet = Arc::new(Packet {
            state: AtomicU8::new(RUNNING),
            raw: AtomicPtr::new(std::ptr::null_mut()),
            run: UnsafeCell::new(Some(Box::new(f))),
            result: UnsafeCell::new(None),
            name: self.name.clone(),
        });
        overflow::install();
        let arg = Arc::into_raw(packet.clone()) as *mut c_void;
        let mut raw = std::ptr::null_mut();
        // SAFETY: the trampoline matches the packet's type and takes over
        // the reference `arg` holds (or it is reclaimed here if no thread
        // started).
        let rc = unsafe {
            sys::hp_stack_thread_create(&mut raw, size, &opts, Some(trampoline::<T>), arg)
        };
        if rc != sys::HP_OK {
            let e = Error::last(Some(rc));
            // SAFETY: no thread was started ("on failure nothing is left
            // behind"), so the reference passed as arg is still ours.
            drop(unsafe { Arc::from_raw(arg as *const Packet<T>) });
            return Err(e);
        }
        let raw = match NonNull::new(raw) {
            Some(raw) => raw,
            None => {
                return Err(Error::new(
                    sys::HP_EBACKEND,
                    "hp_stack_thread_create returned HP_OK and no stack",
                ))
            }
        };
        packet.raw.store(raw.as_ptr(), Ordering::Release);
        Ok(StackThread {
            raw,
            packet: Some(packet),
        })
    }

    /// Name the threads of [`spawn`](StackOptions::spawn), as
    /// `std::thread::Builder::name` does: the name appears in the stack
    /// overflow message and (its first 15 bytes) as the OS thread name.
    pub fn name(mut self, name: impl Into<String>) -> StackOptions {
        self.name = Some(name.into());
        self
    }
}

type Thunk<T> = Box<dyn FnOnce() -> T + Send>;

/// `Packet::state`: the thread has not finished and nobody gave up on it.
const RUNNING: u8 = 0;
/// The thread finished its closure; its handle will join it.
const FINISHED: u8 = 1;
/// The handle was dropped first; the thread hands itself to the reaper.
const DETACHED: u8 = 2;

/// What a thread and its handle share.
struct Packet<T> {
    state: AtomicU8,
    /// The stack, stored by spawn before the handle exists.
    raw: AtomicPtr<sys::hp_stack>,
    /// Taken by the thread.
    run: UnsafeCell<Option<Thunk<T>>>,
    /// Written by the thread before it sets FINISHED or sees DETACHED; read
    /// by join after hp_stack_thread_join.
    result: UnsafeCell<Option<std::thread::Result<T>>>,
    name: Option<String>,
}

// SAFETY: `run` and `result` are touched by the thread until it ends and by
// join only after hp_stack_thread_join returned (pthread_join synchronises
// with the thread's end); T: Send crosses threads once.
unsafe impl<T: Send> Sync for Packet<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Packet<T> {}

extern "C" fn trampoline<T>(arg: *mut c_void) -> *mut c_void {
    // SAFETY: arg is the reference to the packet that spawn gave this
    // thread alone.
    let packet = unsafe { Arc::from_raw(arg as *const Packet<T>) };
    // spawn stores the handle as soon as hp_stack_thread_create returns.
    let mut raw = packet.raw.load(Ordering::Acquire);
    while raw.is_null() {
        std::thread::yield_now();
        raw = packet.raw.load(Ordering::Acquire);
    }
    let guard = stack_info(raw)
        .map(|i| (i.guard_addr as usize, i.base_addr as usize))
        .unwrap_or((0, 0));
    let name = packet.name.as_deref().unwrap_or("");
    set_os_thread_name(name);
    let on_stack = overflow::enter(guard, name);
    // SAFETY: only this thread touches `run` and `result` until it ends.
    let run = unsafe { (*packet.run.get()).take() };
    if let Some(run) = run {
        // Unwinding out of an extern "C" fn aborts; hand the panic to join.
        let result = catch_unwind(AssertUnwindSafe(run));
        // SAFETY: as above.
        unsafe { *packet.result.get() = Some(result) };
    }
    drop(on_stack);
    if packet
        .state
        .compare_exchange(RUNNING, FINISHED, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        // DETACHED: nobody will join this thread, so the reaper does.
        reap(raw);
    }
    std::ptr::null_mut()
}

fn set_os_thread_name(name: &str) {
    extern "C" {
        fn pthread_self() -> usize;
        fn pthread_setname_np(thread: usize, name: *const std::ffi::c_char) -> i32;
    }
    if name.is_empty() {
        return;
    }
    let mut buf = [0u8; 16];
    let bytes: Vec<u8> = name.bytes().filter(|&b| b != 0).take(15).collect();
    buf[..bytes.len()].copy_from_slice(&bytes);
    // SAFETY: buf is NUL-terminated and at most 16 bytes, as Linux requires.
    unsafe { pthread_setname_np(pthread_self(), buf.as_ptr().cast()) };
}

/// A stack handle on its way to the reaper thread.
struct Detached(*mut sys::hp_stack);
// SAFETY: hp_stack_thread_join may be called from any thread.
unsafe impl Send for Detached {}

static REAPED: AtomicU64 = AtomicU64::new(0);

/// Join a detached thread and release its stack on a helper thread (a
/// thread cannot release the stack it runs on). Started on first use.
fn reap(raw: *mut sys::hp_stack) {
    static REAPER: OnceLock<Option<Mutex<mpsc::Sender<Detached>>>> = OnceLock::new();
    let tx = REAPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Detached>();
        std::thread::Builder::new()
            .name("hp-stack-reaper".into())
            .spawn(move || {
                for Detached(raw) in rx {
                    // SAFETY: a handle whose thread nobody else joins.
                    if unsafe { sys::hp_stack_thread_join(raw, std::ptr::null_mut()) } == sys::HP_OK
                    {
                        REAPED.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
            .ok()
            .map(|_| Mutex::new(tx))
    });
    // Without a reaper (no thread could be started) the stack stays mapped.
    if let Some(tx) = tx {
        if let Ok(tx) = tx.lock() {
            let _ = tx.send(Detached(raw));
        }
    }
}

/// Detached [`StackThread`]s whose stacks the reaper released so far.
/// For tests and monitoring.
#[doc(hidden)]
pub fn reaped_stack_threads() -> u64 {
    REAPED.load(Ordering::Relaxed)
}

/// A thread running on a libhp stack, from [`StackOptions::spawn`]; the
/// counterpart of `std::thread::JoinHandle`.
///
/// [`join`](StackThread::join) waits for the thread and releases its
/// stack. Dropping the handle instead *detaches* the thread, as std does:
/// the drop returns at once, and the stack is released when the thread
/// ends (a helper thread joins it). Dropping the handle on its own thread
/// is fine, and `Drop` never panics.
#[must_use = "dropping a StackThread detaches the thread; join it to wait for it"]
pub struct StackThread<T> {
    raw: NonNull<sys::hp_stack>,
    /// `None` once joined.
    packet: Option<Arc<Packet<T>>>,
}

// SAFETY: joining is allowed from any thread; the packet is Send + Sync for
// T: Send (see there).
unsafe impl<T: Send> Send for StackThread<T> {}
// SAFETY: &StackThread only queries the stack (thread-safe in libhp).
unsafe impl<T: Send> Sync for StackThread<T> {}

impl<T> StackThread<T> {
    /// What the thread's stack is.
    ///
    /// # Errors
    ///
    /// None in practice: the handle keeps the stack alive.
    pub fn info(&self) -> Result<StackInfo> {
        stack_info(self.raw.as_ptr())
    }

    /// Whether the thread has finished running its closure.
    pub fn is_finished(&self) -> bool {
        self.packet
            .as_ref()
            .is_some_and(|p| p.state.load(Ordering::Acquire) == FINISHED)
    }

    /// Wait for the thread; its value, or the payload of its panic. The
    /// stack is released (`hp_stack_thread_join`).
    ///
    /// # Panics
    ///
    /// Like `JoinHandle::join`, if the thread cannot be joined, e.g. when
    /// called on the thread itself (the thread is then detached).
    pub fn join(mut self) -> std::result::Result<T, Box<dyn Any + Send + 'static>> {
        // SAFETY: we own the handle; the packet is still set (join takes self).
        let rc = unsafe { sys::hp_stack_thread_join(self.raw.as_ptr(), std::ptr::null_mut()) };
        if rc != sys::HP_OK {
            let e = Error::last(Some(rc));
            drop(self);
            panic!("StackThread::join: {e}");
        }
        let packet = self.packet.take().expect("a StackThread is joined once");
        // SAFETY: the thread has ended (hp_stack_thread_join returned HP_OK).
        let result = unsafe { (*packet.result.get()).take() };
        result.unwrap_or_else(|| Err(Box::new("the thread did not run its closure")))
    }
}

impl<T> std::fmt::Debug for StackThread<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackThread")
            .field("stack", &self.raw)
            .finish()
    }
}

impl<T> Drop for StackThread<T> {
    fn drop(&mut self) {
        let Some(packet) = self.packet.take() else {
            return;
        };
        if packet
            .state
            .compare_exchange(RUNNING, DETACHED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return; // the thread hands its stack to the reaper when it ends
        }
        // FINISHED: the thread is ending; join it now (a short wait), or let
        // the reaper do it when this is the thread itself (a thread-local's
        // destructor can drop its own handle after the closure returned).
        // SAFETY: nobody else joins this handle.
        let rc = unsafe { sys::hp_stack_thread_join(self.raw.as_ptr(), std::ptr::null_mut()) };
        if rc != sys::HP_OK {
            reap(self.raw.as_ptr());
        }
    }
}

/// An owned stack; dropping it releases it (into the cache, or unmapped).
/// Nothing may still run on it then. The stack is address space for a thread
/// or coroutine you start yourself, so its memory is only reachable through
/// raw pointers ([`base`](Stack::base)).
pub struct Stack {
    raw: NonNull<sys::hp_stack>,
}

// SAFETY: every hp_stack_* call is thread-safe, and a stack may be destroyed
// by any thread; &Stack only reads its description.
unsafe impl Send for Stack {}
// SAFETY: as above.
unsafe impl Sync for Stack {}

impl Stack {
    /// Make a lean stack of at least `size` bytes with the default options.
    pub fn new(size: usize) -> Result<Stack> {
        StackOptions::new().create(size)
    }

    /// Lowest usable address; the stack grows down from `base + size`.
    /// With [`size`](Stack::size) it is what `pthread_attr_setstack` and
    /// `makecontext` take.
    pub fn base(&self) -> *mut u8 {
        // SAFETY: a live handle we own.
        unsafe { sys::hp_stack_base(self.raw.as_ptr()) as *mut u8 }
    }

    /// Usable bytes from `base`.
    pub fn size(&self) -> usize {
        // SAFETY: a live handle we own.
        unsafe { sys::hp_stack_size(self.raw.as_ptr()) }
    }

    /// What the stack really is, residency measured now.
    pub fn info(&self) -> Result<StackInfo> {
        stack_info(self.raw.as_ptr())
    }

    /// The raw handle, for C APIs; it stays owned by `self`.
    pub fn as_raw(&self) -> *mut sys::hp_stack {
        self.raw.as_ptr()
    }

    /// Release the stack now, reporting an error that `drop` would ignore.
    pub fn destroy(self) -> Result<()> {
        let raw = self.raw.as_ptr();
        std::mem::forget(self);
        // SAFETY: we owned the handle and forgot self, so nothing destroys it again.
        check(unsafe { sys::hp_stack_destroy(raw) })
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: we own the handle.
        unsafe { sys::hp_stack_destroy(self.raw.as_ptr()) };
    }
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("base", &self.base())
            .field("size", &self.size())
            .finish()
    }
}

/// Which mode a stack got (`HP_STACK_MODE_*`).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StackMode {
    /// Never backed by huge pages.
    Lean,
    /// Whole huge pages.
    Huge,
    /// A mode this crate does not know yet.
    Unknown(u32),
}

/// What libhp says about a stack (`struct hp_stack_info`).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackInfo {
    /// Mode actually obtained.
    pub mode: StackMode,
    /// `Base` (lean), `Thp` or `Hugetlb`.
    pub kind: BackendKind,
    /// Whether the stack was reused from the cache.
    pub from_cache: bool,
    /// Backend that mapped the stack (`"fallback"` for a lean one).
    pub source: String,
    /// `HP_STACK_*` flags given at creation.
    pub flags: u64,
    /// Lowest usable address.
    pub base_addr: u64,
    /// Usable bytes.
    pub usable_size: u64,
    /// The guard is `[guard_addr, base_addr)`.
    pub guard_addr: u64,
    /// Guard bytes.
    pub guard_size: u64,
    /// Page size the usable range is mapped for.
    pub page_size: u64,
    /// Usable bytes in memory now (measured).
    pub resident_bytes: u64,
    /// Usable bytes on pages larger than the base page now (measured).
    pub huge_bytes: u64,
}

fn stack_info(raw: *const sys::hp_stack) -> Result<StackInfo> {
    let mut i = sys::hp_stack_info::init();
    // SAFETY: a valid, sized out-parameter; libhp validates the handle.
    check(unsafe { sys::hp_stack_get_info(raw, &mut i) })?;
    Ok(StackInfo {
        mode: match i.mode {
            sys::HP_STACK_MODE_LEAN => StackMode::Lean,
            sys::HP_STACK_MODE_HUGE => StackMode::Huge,
            m => StackMode::Unknown(m),
        },
        kind: BackendKind::from_raw(i.kind),
        from_cache: i.from_cache != 0,
        source: c_chars(&i.source),
        flags: i.flags,
        base_addr: i.base_addr,
        usable_size: i.usable_size,
        guard_addr: i.guard_addr,
        guard_size: i.guard_size,
        page_size: i.page_size,
        resident_bytes: i.resident_bytes,
        huge_bytes: i.huge_bytes,
    })
}

/// Stack cache settings (`struct hp_stack_cache_config`); `Default` is
/// libhp's default (`HP_STACK_CACHE_CONFIG_INIT`: 64 stacks, 1 GiB of
/// address space, 8 MiB kept).
///
/// A destroyed stack enters the cache and keeps its pages if the usable
/// bytes of the kept stacks stay within `keep_bytes` (reuse then costs no
/// syscall and no page fault, and the contents are whatever the last user
/// left); otherwise its pages are released (`MADV_DONTNEED`) and it comes
/// back zero-filled. A hugetlb stack that cannot be kept is unmapped at once.
/// `keep_bytes: 0` gives every byte of memory back at destroy;
/// `keep_bytes >= max_bytes` never drops anything.
///
/// ```no_run
/// // Keep up to 64 MiB of warm stacks for fast reuse.
/// hp::configure_stack_cache(&hp::StackCacheConfig {
///     keep_bytes: 64 << 20,
///     ..Default::default()
/// })?;
/// # Ok::<(), hp::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackCacheConfig {
    /// Most cached stacks, at most `HP_STACK_CACHE_MAX_STACKS`; 0 turns the
    /// cache off.
    pub max_stacks: u64,
    /// Usable bytes the cached stacks may total.
    pub max_bytes: u64,
    /// Of those, usable bytes whose pages are kept.
    pub keep_bytes: u64,
}

impl Default for StackCacheConfig {
    fn default() -> StackCacheConfig {
        let c = sys::hp_stack_cache_config::init();
        StackCacheConfig {
            max_stacks: c.max_stacks,
            max_bytes: c.max_bytes,
            keep_bytes: c.keep_bytes,
        }
    }
}

/// Settings and counters of the stack cache (`struct hp_stack_cache_stats`).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackCacheStats {
    /// Current bound on cached stacks.
    pub max_stacks: u64,
    /// Current bound on cached bytes.
    pub max_bytes: u64,
    /// Current bound on the usable bytes of cached stacks that keep their pages.
    pub keep_bytes: u64,
    /// Stacks in the cache now.
    pub cached_stacks: u64,
    /// Their usable bytes.
    pub cached_bytes: u64,
    /// Usable bytes of those that kept their pages.
    pub kept_bytes: u64,
    /// Creates served from the cache.
    pub hits: u64,
    /// Creates that mapped a new stack.
    pub misses: u64,
    /// Stacks whose pages were dropped as they entered the cache.
    pub released: u64,
    /// Cached stacks unmapped to respect a bound or trim.
    pub evictions: u64,
}

impl StackCacheStats {
    /// The configuration in force.
    pub fn config(&self) -> StackCacheConfig {
        StackCacheConfig {
            max_stacks: self.max_stacks,
            max_bytes: self.max_bytes,
            keep_bytes: self.keep_bytes,
        }
    }
}

/// Apply a stack cache configuration, trimming the cache to it at once.
/// Fails with [`ErrorKind::Range`](crate::ErrorKind::Range) if `max_stacks`
/// is above `HP_STACK_CACHE_MAX_STACKS`.
pub fn configure_stack_cache(config: &StackCacheConfig) -> Result<()> {
    let mut c = sys::hp_stack_cache_config::init();
    c.max_stacks = config.max_stacks;
    c.max_bytes = config.max_bytes;
    c.keep_bytes = config.keep_bytes;
    // SAFETY: a valid, sized config.
    check(unsafe { sys::hp_stack_cache_configure(&c) })
}

/// The stack cache's settings, its contents now, and counters since the
/// process started.
pub fn stack_cache_stats() -> Result<StackCacheStats> {
    let mut s = sys::hp_stack_cache_stats::init();
    // SAFETY: a valid, sized out-parameter.
    check(unsafe { sys::hp_stack_cache_get_stats(&mut s) })?;
    Ok(StackCacheStats {
        max_stacks: s.max_stacks,
        max_bytes: s.max_bytes,
        keep_bytes: s.keep_bytes,
        cached_stacks: s.cached_stacks,
        cached_bytes: s.cached_bytes,
        kept_bytes: s.kept_bytes,
        hits: s.hits,
        misses: s.misses,
        released: s.released,
        evictions: s.evictions,
    })
}

/// Unmap every cached stack now.
pub fn trim_stack_cache() -> Result<()> {
    // SAFETY: no arguments, thread-safe.
    check(unsafe { sys::hp_stack_cache_trim() })
}
