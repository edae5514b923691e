//! Owned libhp blocks and the options that allocate them.

use std::ffi::{c_char, c_void, CString};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use hp_sys as sys;

use crate::error::{check, Error, Result};

/// How to allocate a [`Block`]: a builder over `struct hp_alloc_opts`.
///
/// ```no_run
/// let block = hp::AllocOptions::new()
///     .page_size(2 << 20)   // 2 MiB pages
///     .require_huge(true)   // fail with ErrorKind::NoHugePages rather than use base pages
///     .exclude("hugetlbfs") // never from the reserved pool
///     .alloc(64 << 20)?;
/// # Ok::<(), hp::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllocOptions {
    flags: u64,
    page_size: u64,
    backend: Option<String>,
    exclude: Vec<String>,
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

    /// OR raw `HP_F_*` bits into the request (libhp rejects unknown bits
    /// with [`ErrorKind::Flags`](crate::ErrorKind::Flags)).
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

    /// The `HP_F_*` flags this request passes to libhp.
    pub fn raw_flags(&self) -> Result<u64> {
        if self.page_size == 0 {
            return Ok(self.flags);
        }
        // SAFETY: pure function, thread-safe.
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
        Ok((self.flags & !sys::HP_F_PAGE_SHIFT_MASK) | bits)
    }

    /// Allocate a zero-filled block of `len` bytes (rounded up to whole
    /// pages by libhp; the block derefs to exactly `len` bytes).
    pub fn alloc(&self, len: usize) -> Result<Block> {
        let flags = self.raw_flags()?;
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
        let mut opts = sys::hp_alloc_opts::init();
        opts.flags = flags;
        opts.backend = backend.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        opts.exclude = exclude.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        // SAFETY: opts and the strings it points to outlive the call.
        let p = unsafe { sys::hp_alloc_ex(len, &opts) };
        match NonNull::new(p as *mut u8) {
            Some(ptr) => Ok(Block { ptr, len, flags }),
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
pub fn alloc(len: usize) -> Result<Block> {
    AllocOptions::new().alloc(len)
}

/// An owned, page-aligned libhp block that derefs to `[u8]`.
///
/// Dropping it frees the block (`hp_free`). libhp allows any thread to use,
/// resize or free a block, and every libhp call is thread-safe, so a `Block`
/// is `Send`; shared references only read the bytes, so it is `Sync`.
/// Resizing needs `&mut`, which rules out the one thing C forbids: resizing
/// and freeing a block concurrently.
pub struct Block {
    ptr: NonNull<u8>,
    len: usize,
    flags: u64,
}

// SAFETY: see the type's documentation (include/hp/alloc.h: "a block may be
// freed by a different thread than the one that allocated it").
unsafe impl Send for Block {}
// SAFETY: &Block gives only &[u8] and thread-safe queries (hp_info).
unsafe impl Sync for Block {}

impl Block {
    /// Length in bytes (what was asked for, not the page-rounded size).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: libhp blocks hold at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Start of the block (page aligned).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Start of the block, writable.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The `HP_F_*` flags the block was allocated (or last resized) with.
    pub fn flags(&self) -> u64 {
        self.flags
    }

    /// Grow or shrink to `new_len` bytes (`hp_realloc`), keeping the first
    /// `min(old, new)` bytes; the block may move. Like C `realloc`, bytes
    /// past the old length are unspecified: zero when fresh pages back them,
    /// but a shrink followed by a grow may bring back what the shrink cut
    /// off within its last page.
    /// The allocation flags (page size, require-huge, populate) apply again;
    /// a backend restriction from [`AllocOptions::backend`] does not.
    /// On error the block is unchanged and still valid.
    pub fn resize(&mut self, new_len: usize) -> Result<()> {
        if new_len == 0 {
            return Err(Error::new(
                sys::HP_ESIZE,
                "resize to 0 bytes: a block holds at least one byte; drop it to free it",
            ));
        }
        // SAFETY: ptr is a live block we own exclusively (&mut self).
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

    /// What the block really is: backend, page size, huge-page backing now.
    pub fn info(&self) -> Result<BlockInfo> {
        block_info(self.as_ptr())
    }

    /// Free the block now, reporting an error that `drop` would ignore.
    pub fn free(self) -> Result<()> {
        let p = self.ptr.as_ptr();
        std::mem::forget(self);
        // SAFETY: we owned the block and forgot `self`, so nothing frees it again.
        check(unsafe { sys::hp_free(p as *mut c_void) })
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: we own the block; hp_free cannot fail for a live block.
        unsafe { sys::hp_free(self.ptr.as_ptr() as *mut c_void) };
    }
}

impl Deref for Block {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the block holds at least len initialised bytes (zero-filled,
        // or left over from earlier use with HP_F_NOZERO), owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for Block {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
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
            .field("ptr", &self.ptr)
            .field("len", &self.len)
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
}

/// Describe the libhp block that starts at `ptr` (`hp_info`), whoever owns
/// it: a [`Block`], a `Vec` served by [`HpAlloc`](crate::HpAlloc), or C code.
/// Safe for any pointer: libhp only looks it up and never dereferences it;
/// anything else gives [`ErrorKind::Foreign`](crate::ErrorKind::Foreign) or
/// [`ErrorKind::Interior`](crate::ErrorKind::Interior).
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
