//! Owned libhp blocks and the options that allocate them.

use std::ffi::{c_char, c_void, CString};
use std::fmt;
use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use hp_sys as sys;

use crate::error::{check, Error, Result};

/// How to allocate a [`Block`] or a [`HugeVec`](crate::HugeVec): a builder
/// over `struct hp_alloc_opts`.
///
/// ```no_run
/// let block = hp::AllocOptions::new()
///     .page_size(2 << 20)   // 2 MiB pages
///     .require_huge(true)   // fail with ErrorKind::NoHugePages rather than use base pages
///     .pool(false)          // never from a reserved pool: fork-safe (see "Fork" in the crate docs)
///     .alloc(64 << 20)?;
/// # Ok::<(), hp::Error>(())
/// ```
///
/// The options a block is allocated with hold for every later resize
/// (`hp_realloc`): a block kept out of the pool, or away from an excluded
/// backend, never grows onto it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocOptions {
    flags: u64,
    page_size: u64,
    /// `None`: the default of what is allocated ([`Block`]: the pool when
    /// it has the pages; [`HugeVec`](crate::HugeVec): no pool).
    pool: Option<bool>,
    backend: Option<String>,
    exclude: Vec<String>,
    numa: Option<(Numa, Vec<u32>)>,
}

/// How [`AllocOptions::numa`] places a block on its NUMA nodes (`HP_NUMA_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numa {
    /// Those nodes first; when their pools are short, other nodes, then
    /// another page kind (`HP_NUMA_PREFER`).
    Prefer,
    /// Only those nodes: a page kind they cannot supply is passed over
    /// (`HP_NUMA_BIND`).
    Bind,
    /// Pages round-robin over the nodes (`HP_NUMA_INTERLEAVE`).
    Interleave,
}

/// A placement in the form `hp_alloc_opts` and `hp_stack_opts` take: the
/// `HP_NUMA_*` mode (0: none) and the bitmap of nodes 0 to 1023.
pub(crate) fn numa_bits(numa: &Option<(Numa, Vec<u32>)>) -> Result<(u32, [u64; 16])> {
    let mut bits = [0u64; 16];
    let Some((mode, nodes)) = numa else {
        return Ok((0, bits));
    };
    for &n in nodes {
        if n >= 1024 {
            return Err(Error::new(
                sys::HP_EINVAL,
                format!("numa: node {n} is not below 1024"),
            ));
        }
        bits[(n / 64) as usize] |= 1u64 << (n % 64);
    }
    let mode = match mode {
        Numa::Prefer => sys::HP_NUMA_PREFER,
        Numa::Bind => sys::HP_NUMA_BIND,
        Numa::Interleave => sys::HP_NUMA_INTERLEAVE,
    };
    Ok((mode, bits))
}

/// Every `HP_F_*` bit libhp 1.3 knows.
const KNOWN_FLAGS: u64 = sys::HP_F_REQUIRE_HUGE
    | sys::HP_F_POPULATE
    | sys::HP_F_COLLAPSE
    | sys::HP_F_NOZERO
    | sys::HP_F_NOPOOL
    | sys::HP_F_PAGE_SHIFT_MASK;

/// Validated options in the form `hp_alloc_ex` takes: what a [`HugeVec`]
/// keeps for each allocation it makes.
///
/// [`HugeVec`]: crate::HugeVec
#[derive(Debug, Default)]
pub(crate) struct CallOptions {
    pub(crate) flags: u64,
    backend: Option<CString>,
    exclude: Option<CString>,
    /// `HP_NUMA_*` (0: no placement) and its node bitmap (nodes 0 to 1023).
    numa_mode: u32,
    numa_nodes: [u64; 16],
}

impl CallOptions {
    /// The default of containers: no pool, libhp picks everything else.
    pub(crate) const CONTAINER: CallOptions = CallOptions {
        flags: sys::HP_F_NOPOOL,
        backend: None,
        exclude: None,
        numa_mode: 0,
        numa_nodes: [0; 16],
    };

    /// `hp_alloc_ex(len)` with these options and `extra` flags; null on
    /// failure with libhp's last error set.
    pub(crate) fn alloc(&self, len: usize, extra: u64) -> *mut c_void {
        let mut opts = sys::hp_alloc_opts::init();
        opts.flags = self.flags | extra;
        opts.backend = self.backend.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        opts.exclude = self.exclude.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        if self.numa_mode != 0 {
            opts.numa_mode = self.numa_mode;
            opts.numa_max_node = 1024;
            opts.numa_nodes = self.numa_nodes.as_ptr();
        }
        // SAFETY: opts, the strings and the node bitmap it points to outlive
        // the call.
        unsafe { sys::hp_alloc_ex(len, &opts) }
    }
}

impl Clone for CallOptions {
    fn clone(&self) -> Self {
        CallOptions {
            flags: self.flags,
            backend: self.backend.clone(),
            exclude: self.exclude.clone(),
            numa_mode: self.numa_mode,
            numa_nodes: self.numa_nodes,
        }
    }
}

impl AllocOptions {
    /// Defaults: libhp picks the backend and page size; base pages are an
    /// acceptable fallback; nothing is prefaulted.
    pub fn new() -> AllocOptions {
        AllocOptions::default()
    }

    /// Ask for pages of `bytes` (a power of two, at least 4096), e.g.
    /// `2 << 20`. 0 (the default) lets libhp choose.
    pub fn page_size(mut self, bytes: u64) -> AllocOptions {
        self.page_size = bytes;
        self
    }

    /// Place the block on NUMA `nodes` (each below 1024; libhp 1.4): libhp
    /// gives the thread that memory policy while mapping and sets it on the
    /// block's memory; every resize keeps it. A node without memory, or
    /// outside the thread's cpuset, is
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument).
    pub fn numa(mut self, mode: Numa, nodes: &[u32]) -> AllocOptions {
        self.numa = Some((mode, nodes.to_vec()));
        self
    }

    /// Only this backend may serve the block (see [`backends`](crate::backends)).
    pub fn backend(mut self, name: impl Into<String>) -> AllocOptions {
        self.backend = Some(name.into());
        self
    }

    /// Never use this backend; may be called several times.
    pub fn exclude(mut self, name: impl Into<String>) -> AllocOptions {
        self.exclude.push(name.into());
        self
    }

    /// Fail with [`ErrorKind::NoHugePages`](crate::ErrorKind::NoHugePages)
    /// rather than fall back to base pages (`HP_F_REQUIRE_HUGE`).
    pub fn require_huge(self, yes: bool) -> AllocOptions {
        self.flag(sys::HP_F_REQUIRE_HUGE, yes)
    }

    /// Prefault the whole block before returning it (`HP_F_POPULATE`).
    pub fn populate(self, yes: bool) -> AllocOptions {
        self.flag(sys::HP_F_POPULATE, yes)
    }

    /// Ask the kernel to collapse the block into huge pages now (`HP_F_COLLAPSE`).
    pub fn collapse(self, yes: bool) -> AllocOptions {
        self.flag(sys::HP_F_COLLAPSE, yes)
    }

    /// Whether the memory may come from a reserved hugetlb pool. `false`
    /// passes `HP_F_NOPOOL`: THP, mTHP or base pages serve it, so after
    /// `fork()` either process may write it however empty the pool is. With
    /// `true`, a forked child that writes the inherited memory while the
    /// pool has no free page dies of SIGBUS (a private pool page needs a
    /// free pool page for its copy), and a write by the parent takes the
    /// page away from the child, whose next access to it is SIGBUS too
    /// (crate docs, "Fork"). Not set: a [`Block`] takes the pool when it
    /// has the pages (libhp's C default, for a caller who chose to), a
    /// [`HugeVec`](crate::HugeVec) keeps out of it.
    pub fn pool(mut self, yes: bool) -> AllocOptions {
        self.pool = Some(yes);
        self
    }

    /// The same as [`pool(!yes)`](AllocOptions::pool).
    pub fn no_pool(self, yes: bool) -> AllocOptions {
        self.pool(!yes)
    }

    /// OR raw `HP_F_*` bits into the request (libhp rejects unknown bits
    /// with [`ErrorKind::Flags`](crate::ErrorKind::Flags)).
    ///
    /// `HP_F_NOZERO` is refused here: a [`Block`] derefs to `[u8]`, and
    /// reading bytes left over from another allocation as `u8` is undefined
    /// behaviour in Rust. [`alloc`](AllocOptions::alloc) then fails with
    /// [`ErrorKind::Flags`](crate::ErrorKind::Flags); use
    /// [`alloc_uninit`](AllocOptions::alloc_uninit) for memory that need not
    /// be zeroed.
    pub fn flags(mut self, raw: u64) -> AllocOptions {
        self.flags |= raw;
        self
    }

    fn flag(mut self, bit: u64, yes: bool) -> AllocOptions {
        if yes {
            self.flags |= bit;
        } else {
            self.flags &= !bit;
        }
        self
    }

    /// The `HP_F_*` flags this request passes to libhp for a [`Block`].
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Flags`](crate::ErrorKind::Flags) if the page size is not
    /// a power of two of at least 4096 bytes.
    pub fn raw_flags(&self) -> Result<u64> {
        self.flags_for(true)
    }

    /// The flags, with `default_pool` deciding the pool when it was not set.
    fn flags_for(&self, default_pool: bool) -> Result<u64> {
        let mut flags = self.flags;
        match self.pool {
            Some(true) => flags &= !sys::HP_F_NOPOOL,
            Some(false) => flags |= sys::HP_F_NOPOOL,
            None if !default_pool => flags |= sys::HP_F_NOPOOL,
            None => {}
        }
        if self.page_size == 0 {
            return Ok(flags);
        }
        // SAFETY: a pure function of its argument, thread-safe.
        let bits = unsafe { sys::hp_page_size_flag(self.page_size) };
        if bits == 0 {
            return Err(Error::new(
                sys::HP_EFLAGS,
                format!(
                    "page_size {} is not a power of two of at least 4096 bytes",
                    self.page_size
                ),
            ));
        }
        Ok((flags & !sys::HP_F_PAGE_SHIFT_MASK) | bits)
    }

    /// Check every option and convert it for `hp_alloc_ex`, with
    /// `default_pool` deciding the pool when it was not set.
    pub(crate) fn prepare(&self, default_pool: bool) -> Result<CallOptions> {
        let flags = self.flags_for(default_pool)?;
        if flags & !KNOWN_FLAGS != 0 {
            return Err(Error::new(
                sys::HP_EFLAGS,
                format!(
                    "flags {:#x} has bits libhp does not know ({:#x})",
                    flags,
                    flags & !KNOWN_FLAGS
                ),
            ));
        }
        let backend = self.backend.as_deref().map(c_name).transpose()?;
        for name in &self.exclude {
            if name.contains(',') {
                return Err(Error::new(
                    sys::HP_EINVAL,
                    format!("exclude: backend name {name:?} contains ','"),
                ));
            }
        }
        let exclude = if self.exclude.is_empty() {
            None
        } else {
            Some(c_name(&self.exclude.join(","))?)
        };
        let (numa_mode, numa_nodes) = numa_bits(&self.numa)?;
        Ok(CallOptions {
            flags,
            backend,
            exclude,
            numa_mode,
            numa_nodes,
        })
    }

    /// Every backend and exclude name must be one libhp knows (loaded or
    /// rejected): a misspelt exclude would otherwise exclude nothing.
    pub(crate) fn check_names(&self) -> Result<()> {
        if self.backend.is_none() && self.exclude.is_empty() {
            return Ok(());
        }
        let known: Vec<String> = crate::backends()?.into_iter().map(|b| b.name).collect();
        let named = self.backend.iter().map(|n| ("backend", n));
        for (what, name) in named.chain(self.exclude.iter().map(|n| ("exclude", n))) {
            if !known.iter().any(|k| !k.is_empty() && k == name.trim()) {
                return Err(Error::new(
                    sys::HP_ENOBACKEND,
                    format!(
                        "{what}: no backend named {name:?} (libhp knows: {})",
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Allocate a zero-filled block of `len` bytes (rounded up to whole
    /// pages by libhp; the block derefs to exactly `len` bytes).
    ///
    /// # Errors
    ///
    /// What `hp_alloc_ex` reports ([`ErrorKind::Size`](crate::ErrorKind::Size)
    /// for 0, [`NoHugePages`](crate::ErrorKind::NoHugePages) with
    /// `require_huge`, [`NoBackend`](crate::ErrorKind::NoBackend),
    /// [`Environment`](crate::ErrorKind::Environment) for a bad `HP_*`
    /// variable, ...), [`Flags`](crate::ErrorKind::Flags) for `HP_F_NOZERO`
    /// or a bad page size, [`InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// for a backend name with a NUL byte or a `,`.
    pub fn alloc(&self, len: usize) -> Result<Block> {
        if self.flags & sys::HP_F_NOZERO != 0 {
            return Err(Error::new(
                sys::HP_EFLAGS,
                "HP_F_NOZERO would let safe code read another allocation's bytes; \
                 use AllocOptions::alloc_uninit, which gives MaybeUninit<u8>",
            ));
        }
        let raw = self.alloc_raw(len, 0)?;
        Ok(Block {
            raw,
            init_len: usize::MAX,
        })
    }

    /// Allocate a block of `len` bytes whose contents may be left over from
    /// earlier use (`HP_F_NOZERO`): libhp can then hand out recycled huge
    /// pages without clearing them. The bytes are `MaybeUninit<u8>` until
    /// written; [`UninitBlock::fill`] or [`UninitBlock::assume_init`] turn
    /// it into a [`Block`].
    ///
    /// ```
    /// let mut u = hp::AllocOptions::new().alloc_uninit(1 << 20)?;
    /// u[..4].copy_from_slice(&[std::mem::MaybeUninit::new(7); 4]);
    /// let b: hp::Block = u.fill(0);  // every byte written: now plain [u8]
    /// assert_eq!(b[0], 0);
    /// # Ok::<(), hp::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`alloc`](AllocOptions::alloc).
    pub fn alloc_uninit(&self, len: usize) -> Result<UninitBlock> {
        let raw = self.alloc_raw(len, sys::HP_F_NOZERO)?;
        Ok(UninitBlock { raw })
    }

    fn alloc_raw(&self, len: usize, extra: u64) -> Result<RawBlock> {
        crate::check_loaded_version();
        let opts = self.prepare(true)?;
        self.check_names()?;
        let p = opts.alloc(len, extra);
        match NonNull::new(p as *mut u8) {
            Some(ptr) => Ok(RawBlock {
                ptr,
                len,
                flags: opts.flags | extra,
            }),
            None => Err(Error::last(None)),
        }
    }
}

fn c_name(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| {
        Error::new(
            sys::HP_EINVAL,
            format!("backend name {s:?} contains a NUL byte"),
        )
    })
}

/// Allocate a zero-filled block of `len` bytes with the default options
/// (libhp picks the best backend and page size on this machine).
///
/// # Errors
///
/// As [`AllocOptions::alloc`].
pub fn alloc(len: usize) -> Result<Block> {
    AllocOptions::new().alloc(len)
}

/// The owner of one libhp block: pointer, length, flags; frees on drop.
/// [`Block`] and [`UninitBlock`] add what may be read through it.
struct RawBlock {
    ptr: NonNull<u8>,
    len: usize,
    flags: u64,
}

impl RawBlock {
    fn resize(&mut self, new_len: usize) -> Result<()> {
        if new_len == 0 {
            return Err(Error::new(
                sys::HP_ESIZE,
                "resize to 0 bytes: a block holds at least one byte; drop it to free it",
            ));
        }
        // SAFETY: ptr is a live block we own exclusively (&mut self); on
        // failure hp_realloc leaves it untouched and valid.
        let p = unsafe { sys::hp_realloc(self.ptr.as_ptr() as *mut c_void, new_len, self.flags) };
        match NonNull::new(p as *mut u8) {
            Some(ptr) => {
                self.ptr = ptr;
                self.len = new_len;
                Ok(())
            }
            None => Err(Error::last(None)),
        }
    }

    fn free(self) -> Result<()> {
        let p = self.ptr.as_ptr();
        std::mem::forget(self);
        // SAFETY: we owned the block and forgot `self`, so nothing frees it again.
        check(unsafe { sys::hp_free(p as *mut c_void) })
    }
}

impl Drop for RawBlock {
    fn drop(&mut self) {
        // SAFETY: we own the block; hp_free cannot fail for a live block.
        unsafe { sys::hp_free(self.ptr.as_ptr() as *mut c_void) };
    }
}

/// An owned, page-aligned libhp block that derefs to `[u8]`.
///
/// Dropping it frees the block (`hp_free`). libhp allows any thread to use,
/// resize or free a block, and every libhp call is thread-safe, so a `Block`
/// is `Send`; shared references only read the bytes, so it is `Sync`.
/// Resizing needs `&mut`, which rules out the one thing C forbids: resizing
/// and freeing a block concurrently.
///
/// Every byte a `Block` derefs to is initialised: it is allocated without
/// `HP_F_NOZERO` (libhp zero-fills it, and zero-fills what `hp_realloc`
/// adds past the old usable size), or it comes from
/// [`UninitBlock::assume_init`], after which a growing
/// [`resize`](Block::resize) zeroes the bytes past the written prefix itself.
pub struct Block {
    raw: RawBlock,
    /// Bytes from this offset to the end of the usable size may be
    /// uninitialised (`usize::MAX`: none). Always `>= raw.len`.
    init_len: usize,
}

// SAFETY: see the type's documentation (include/hp/alloc.h: "a block may be
// freed by a different thread than the one that allocated it").
unsafe impl Send for Block {}
// SAFETY: &Block gives only &[u8] and thread-safe queries (hp_info).
unsafe impl Sync for Block {}

impl Block {
    /// Length in bytes (what was asked for, not the page-rounded size).
    pub fn len(&self) -> usize {
        self.raw.len
    }

    /// Always false: libhp blocks hold at least one byte.
    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }

    /// Start of the block (page aligned).
    pub fn as_ptr(&self) -> *const u8 {
        self.raw.ptr.as_ptr()
    }

    /// Start of the block, writable.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.raw.ptr.as_ptr()
    }

    /// The `HP_F_*` flags the block was allocated (or last resized) with;
    /// never `HP_F_NOZERO`.
    pub fn flags(&self) -> u64 {
        self.raw.flags
    }

    /// Grow or shrink to `new_len` bytes (`hp_realloc`), keeping the first
    /// `min(old, new)` bytes; the block may move. Like C `realloc`, bytes
    /// past the old length are unspecified (but initialised): zero when
    /// fresh pages back them, but a shrink followed by a grow may bring back
    /// what the shrink cut off within its last page.
    /// The allocation flags (page size, require-huge, populate) apply again.
    /// A block allocated with [`AllocOptions::backend`] is pinned: it is
    /// resized in that backend or not at all (never moved to another).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Size`](crate::ErrorKind::Size) for 0, or what
    /// `hp_realloc` reports (out of memory, no huge pages with
    /// `require_huge`). On error the block is unchanged and still valid.
    pub fn resize(&mut self, new_len: usize) -> Result<()> {
        self.raw.resize(new_len)?;
        if new_len > self.init_len {
            // Bytes [init_len, new_len) may be what HP_F_NOZERO left there
            // before assume_init: make them zero, as libhp would have.
            // SAFETY: the block is new_len bytes long and ours (&mut self).
            unsafe {
                self.raw
                    .ptr
                    .as_ptr()
                    .add(self.init_len)
                    .write_bytes(0, new_len - self.init_len)
            };
            self.init_len = new_len;
        }
        Ok(())
    }

    /// What the block really is: backend, page size, huge-page backing now.
    ///
    /// # Errors
    ///
    /// None in practice (libhp knows its own block); the `hp_info` code otherwise.
    pub fn info(&self) -> Result<BlockInfo> {
        block_info(self.as_ptr())
    }

    /// Free the block now, reporting an error that `drop` would ignore.
    ///
    /// # Errors
    ///
    /// What `hp_free` reports (for a live block: nothing).
    pub fn free(self) -> Result<()> {
        self.raw.free()
    }
}

impl Deref for Block {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the block holds at least len bytes, all initialised (see
        // the type's documentation: init_len >= len), owned by self.
        unsafe { std::slice::from_raw_parts(self.raw.ptr.as_ptr(), self.raw.len) }
    }
}

impl DerefMut for Block {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.raw.ptr.as_ptr(), self.raw.len) }
    }
}

impl AsRef<[u8]> for Block {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl AsMut<[u8]> for Block {
    fn as_mut(&mut self) -> &mut [u8] {
        self
    }
}

impl fmt::Debug for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Block")
            .field("ptr", &self.raw.ptr)
            .field("len", &self.raw.len)
            .finish()
    }
}

/// A libhp block allocated with `HP_F_NOZERO`
/// ([`AllocOptions::alloc_uninit`]): its bytes may be left over from
/// earlier use, so it derefs to `[MaybeUninit<u8>]`, which safe code can
/// write but not read. [`fill`](UninitBlock::fill) or the `unsafe`
/// [`assume_init`](UninitBlock::assume_init) make it a [`Block`].
///
/// Reading is rejected at compile time:
///
/// ```compile_fail,E0308
/// let u = hp::AllocOptions::new().alloc_uninit(4096)?;
/// let bytes: &[u8] = &u; // MaybeUninit<u8>, not u8
/// # Ok::<(), hp::Error>(())
/// ```
///
/// and so is turning it into a `Block` without `unsafe`:
///
/// ```compile_fail,E0133
/// let u = hp::AllocOptions::new().alloc_uninit(4096)?;
/// let b: hp::Block = u.assume_init();
/// # Ok::<(), hp::Error>(())
/// ```
pub struct UninitBlock {
    raw: RawBlock,
}

// SAFETY: as for Block: libhp blocks may be used and freed by any thread.
unsafe impl Send for UninitBlock {}
// SAFETY: &UninitBlock gives only &[MaybeUninit<u8>] and hp_info.
unsafe impl Sync for UninitBlock {}

impl UninitBlock {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.raw.len
    }

    /// Always false: libhp blocks hold at least one byte.
    pub fn is_empty(&self) -> bool {
        self.raw.len == 0
    }

    /// Start of the block (page aligned).
    pub fn as_ptr(&self) -> *const u8 {
        self.raw.ptr.as_ptr()
    }

    /// Start of the block, writable.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.raw.ptr.as_ptr()
    }

    /// Grow or shrink to `new_len` bytes (`hp_realloc` with `HP_F_NOZERO`);
    /// the first `min(old, new)` bytes keep what was written to them, new
    /// bytes are uninitialised.
    ///
    /// # Errors
    ///
    /// As [`Block::resize`]; on error the block is unchanged.
    pub fn resize(&mut self, new_len: usize) -> Result<()> {
        self.raw.resize(new_len)
    }

    /// What the block really is.
    ///
    /// # Errors
    ///
    /// As [`Block::info`].
    pub fn info(&self) -> Result<BlockInfo> {
        block_info(self.as_ptr())
    }

    /// Set every byte to `byte` and return the now initialised [`Block`].
    pub fn fill(mut self, byte: u8) -> Block {
        // SAFETY: the block is len bytes long and ours (self by value).
        unsafe { self.as_mut_ptr().write_bytes(byte, self.raw.len) };
        // SAFETY: every one of the len bytes was just written.
        unsafe { self.assume_init() }
    }

    /// Declare the block initialised.
    ///
    /// # Safety
    ///
    /// Every one of the [`len`](UninitBlock::len) bytes must have been
    /// written (through the `MaybeUninit` slice or
    /// [`as_mut_ptr`](UninitBlock::as_mut_ptr)). Bytes past `len` need not
    /// be: the returned `Block` zeroes them before a
    /// [`resize`](Block::resize) exposes them (by writing, so such a growth
    /// faults its new pages in).
    pub unsafe fn assume_init(self) -> Block {
        let mut raw = self.raw;
        raw.flags &= !sys::HP_F_NOZERO;
        Block {
            init_len: raw.len,
            raw,
        }
    }
}

impl Deref for UninitBlock {
    type Target = [MaybeUninit<u8>];
    fn deref(&self) -> &[MaybeUninit<u8>] {
        // SAFETY: len bytes owned by self; MaybeUninit<u8> has no validity
        // requirement, so uninitialised bytes are fine.
        unsafe { std::slice::from_raw_parts(self.raw.ptr.as_ptr().cast(), self.raw.len) }
    }
}

impl DerefMut for UninitBlock {
    fn deref_mut(&mut self) -> &mut [MaybeUninit<u8>] {
        // SAFETY: as above, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.raw.ptr.as_ptr().cast(), self.raw.len) }
    }
}

impl fmt::Debug for UninitBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UninitBlock")
            .field("ptr", &self.raw.ptr)
            .field("len", &self.raw.len)
            .finish()
    }
}

/// What libhp says about a block (`struct hp_block_info`).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockInfo {
    /// Name of the backend serving the block, e.g. `"thp-madvise"`.
    pub backend: String,
    /// Page size asked for by the flags, 0 if none.
    pub requested_page_size: u64,
    /// Page size the backend mapped the block for.
    pub page_size: u64,
    /// Bytes the caller may use (the length rounded up to whole pages).
    pub usable_size: u64,
    /// Bytes of address space the block holds.
    pub mapped_size: u64,
    /// Bytes backed by pages larger than the base page right now (measured).
    pub huge_bytes: u64,
    /// `HP_F_*` flags the block was allocated with.
    pub flags: u64,
    /// NUMA node of the block's first page, as its backend's query reports
    /// it; -1 when unknown (no query, or the page is not resident yet).
    pub numa_node: i32,
    /// Descriptor backing the block (a memfd), owned by the backend and
    /// valid until the block is freed; -1 when none.
    pub fd: i32,
    /// Offset of the block's start in `fd`; 0 without one.
    pub fd_offset: u64,
    /// Whether a resize keeps the block in its backend, and why.
    pub pin: Pin,
    /// The placement it was allocated with ([`AllocOptions::numa`]); `None`:
    /// none, the thread's own policy (libhp 1.4).
    pub numa_mode: Option<Numa>,
    /// Nodes 0 to 63 holding its resident pages now, measured with
    /// `move_pages(2)` (nothing faulted in); more than one: it spans nodes.
    /// Empty when nothing is resident or the kernel has no NUMA support.
    pub numa_nodes: Vec<u32>,
}

/// Whether `hp_realloc` keeps a block in its backend (`hp_block_info.pin`).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin {
    /// The selection may move it to another allowed backend.
    None,
    /// `hp_alloc_opts.backend` named its backend: it stays there.
    Named,
    /// `HP_BACKENDS` listed only its backend when it was allocated.
    Env,
}

/// Describe the libhp block that starts at `ptr` (`hp_info`), whoever owns
/// it: a [`Block`], a `Vec` served by [`HpAlloc`](crate::HpAlloc), or C code.
/// Safe for any pointer: libhp only looks it up and never dereferences it.
///
/// # Errors
///
/// [`ErrorKind::Foreign`](crate::ErrorKind::Foreign) for a pointer libhp
/// did not return, [`ErrorKind::Interior`](crate::ErrorKind::Interior)
/// for one inside a block, [`ErrorKind::DoubleFree`](crate::ErrorKind::DoubleFree)
/// for a block freed already.
pub fn block_info(ptr: *const u8) -> Result<BlockInfo> {
    let mut info = sys::hp_block_info::init();
    // SAFETY: info is a valid, sized out-parameter; p is only looked up.
    check(unsafe { sys::hp_info(ptr as *const c_void, &mut info) })?;
    Ok(BlockInfo {
        backend: c_chars(&info.backend),
        requested_page_size: info.requested_page_size,
        page_size: info.page_size,
        usable_size: info.usable_size,
        mapped_size: info.mapped_size,
        huge_bytes: info.huge_bytes,
        flags: info.flags,
        numa_node: info.numa_node,
        fd: info.fd,
        fd_offset: info.fd_offset,
        pin: match info.pin {
            sys::HP_BLOCK_PIN_NAMED => Pin::Named,
            sys::HP_BLOCK_PIN_ENV => Pin::Env,
            _ => Pin::None,
        },
        numa_mode: match info.numa_mode {
            sys::HP_NUMA_PREFER => Some(Numa::Prefer),
            sys::HP_NUMA_BIND => Some(Numa::Bind),
            sys::HP_NUMA_INTERLEAVE => Some(Numa::Interleave),
            _ => None,
        },
        numa_nodes: (0..64u32)
            .filter(|n| (info.numa_mask >> n) & 1 != 0)
            .collect(),
    })
}

/// A fixed C char array up to its first NUL.
pub(crate) fn c_chars(a: &[c_char]) -> String {
    let bytes: Vec<u8> = a
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
