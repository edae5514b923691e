//! Typed huge-page containers: [`HugeVec<T>`] for plain-old-data `T`.

use std::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use hp_sys as sys;

use crate::block::{block_info, AllocOptions, BlockInfo, CallOptions};
use crate::error::{Error, Result};

mod sealed {
    pub trait Sealed {}
}

/// Plain old data: `Copy`, no padding, no `Drop`, and every bit pattern —
/// all zeros in particular — is a valid value. Implemented for the
/// primitive integers, `f32`, `f64`, and arrays of them; sealed, so no
/// other type can claim it:
///
/// ```compile_fail,E0277
/// #[derive(Clone, Copy)]
/// struct Point { x: f64, y: f64 }
/// let v: hp::HugeVec<Point> = hp::HugeVec::new(); // Point is not Pod
/// ```
///
/// ```compile_fail,E0277
/// #[derive(Clone, Copy)]
/// struct Flag(bool); // 2 is not a valid bool
/// unsafe impl hp::Pod for Flag {} // error: sealed
/// ```
///
/// # Safety
///
/// Only this crate implements it (the supertrait is private); the
/// guarantees above let [`HugeVec`] hand out zero-filled memory as `T`s.
pub unsafe trait Pod: Copy + Send + Sync + 'static + sealed::Sealed {}

macro_rules! pod {
    ($($t:ty)*) => {$(
        impl sealed::Sealed for $t {}
        // SAFETY: a primitive number: no padding, every bit pattern valid.
        unsafe impl Pod for $t {}
    )*};
}
pod!(u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize f32 f64);

impl<T: Pod, const N: usize> sealed::Sealed for [T; N] {}
// SAFETY: an array of Pod has no padding between or after its elements
// (size is N * size_of::<T>()), and every bit pattern of each is valid.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

/// A growable array of plain-old-data `T` in one libhp block: the
/// huge-page counterpart of `Vec<T>`, without the global allocator and
/// without `unsafe` in user code.
///
/// Growth is `hp_realloc`, which moves page tables rather than bytes (a
/// `Vec` under `System` copies on every doubling that cannot grow in
/// place); [`zeroed`](HugeVec::zeroed) is one zero-filled mapping that is
/// faulted in lazily, like `vec![0; n]` on `calloc`.
///
/// ```
/// let mut v: hp::HugeVec<f64> = hp::HugeVec::zeroed(1 << 20)?; // 8 MiB of 0.0
/// v[7] = 1.5;
/// v.push(2.5);
/// v.extend_from_slice(&[3.0; 1000])?;
/// assert_eq!(v.len(), (1 << 20) + 1001);
/// assert_eq!(v.iter().sum::<f64>(), 1.5 + 2.5 + 3000.0);
/// println!("{:?}", v.info()?);
/// # Ok::<(), hp::Error>(())
/// ```
///
/// Allocation failures are [`Error`]s from the `try_*` methods and
/// constructors; [`push`](HugeVec::push) and [`reserve`](HugeVec::reserve)
/// panic with the error instead, like their `Vec` counterparts. Only
/// initialised elements are reachable: every one of the first `len` was
/// written (push, copy, fill) or zero-filled by libhp.
///
/// # Fork
///
/// A `HugeVec` keeps out of reserved hugetlb pools (`HP_F_NOPOOL`) unless
/// its [`AllocOptions`] say [`pool(true)`](AllocOptions::pool): THP, mTHP
/// or base pages serve it, so after `fork()` the parent and every child
/// may write it whatever the pool holds. A vector is handed to code that
/// forks without a thought for hugetlb, and on private pool pages that
/// code would die: a child's write to an inherited pool page needs a free
/// pool page for its copy, or it gets SIGBUS, and a write by the parent
/// takes the page away from the children (crate docs, "Fork"). With
/// [`pool(true)`](AllocOptions::pool) (through
/// [`with_options`](HugeVec::with_options)) the vector takes pool pages
/// when the pool has them, the fastest memory to populate; use it only in
/// a program that does not fork, or whose children do not write the
/// vector, or that keeps enough pool pages free. The choice holds for
/// every growth (libhp keeps a block's options through `hp_realloc`).
///
/// ```
/// // Fork-safe by default: never pool pages.
/// let v: hp::HugeVec<u64> = hp::HugeVec::zeroed(1 << 20)?;
/// assert_ne!(v.info()?.flags & hp::sys::HP_F_NOPOOL, 0);
/// // Opt in to the pool (the fork caveat above applies).
/// let o = hp::AllocOptions::new().pool(true);
/// let mut p: hp::HugeVec<u64> = hp::HugeVec::with_options(&o)?;
/// p.push(1);
/// assert_eq!(p.info()?.flags & hp::sys::HP_F_NOPOOL, 0);
/// # Ok::<(), hp::Error>(())
/// ```
pub struct HugeVec<T: Pod> {
    /// Dangling (aligned) while `cap == 0`, else a libhp block of
    /// `cap * size_of::<T>()` bytes.
    ptr: NonNull<T>,
    len: usize,
    cap: usize,
    /// How every block of this vector is allocated.
    opts: CallOptions,
    _owns: PhantomData<T>,
}

// SAFETY: a HugeVec owns its block (libhp blocks may be used and freed by
// any thread) and T: Pod is Send + Sync.
unsafe impl<T: Pod> Send for HugeVec<T> {}
// SAFETY: &HugeVec gives only &[T] and hp_info.
unsafe impl<T: Pod> Sync for HugeVec<T> {}

impl<T: Pod> HugeVec<T> {
    const VALID: () = assert!(
        std::mem::size_of::<T>() != 0 && std::mem::align_of::<T>() <= crate::MAX_ALIGN,
        "HugeVec<T>: T must have a size and an alignment of at most a page"
    );

    /// An empty vector; allocates nothing. Its memory will never come from
    /// a hugetlb pool (see "Fork" above).
    pub const fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        HugeVec {
            ptr: NonNull::dangling(),
            len: 0,
            cap: 0,
            opts: CallOptions::CONTAINER,
            _owns: PhantomData,
        }
    }

    /// An empty vector whose memory is allocated with `opts` (page size,
    /// backend, exclude, require_huge, populate, collapse, pool) for its
    /// whole life; allocates nothing yet. Without
    /// [`pool(true)`](AllocOptions::pool) it keeps out of hugetlb pools, as
    /// [`new`](HugeVec::new) does.
    ///
    /// ```
    /// let o = hp::AllocOptions::new().exclude("thp-madvise");
    /// let mut v: hp::HugeVec<u8> = hp::HugeVec::with_options(&o)?;
    /// v.resize(8 << 20, 1)?;
    /// assert_ne!(v.info()?.backend, "thp-madvise");
    /// # Ok::<(), hp::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// Checked here, before anything is allocated:
    /// [`ErrorKind::Flags`](crate::ErrorKind::Flags) for a page size that
    /// is not a power of two of at least 4096, for bits libhp does not know,
    /// or for `HP_F_NOZERO` (the vector decides what it zeroes);
    /// [`InvalidArgument`](crate::ErrorKind::InvalidArgument) for a backend
    /// name with a NUL byte or a `,`;
    /// [`NoBackend`](crate::ErrorKind::NoBackend) for a backend or exclude
    /// name that libhp does not know.
    pub fn with_options(opts: &AllocOptions) -> Result<Self> {
        let call = opts.prepare(false)?;
        if call.flags & sys::HP_F_NOZERO != 0 {
            return Err(Error::new(
                sys::HP_EFLAGS,
                "HugeVec: HP_F_NOZERO is the vector's own choice (zeroed() needs zeroed memory)",
            ));
        }
        opts.check_names()?;
        let mut v = Self::new();
        v.opts = call;
        Ok(v)
    }

    /// `len` zeros allocated with `opts`, as [`zeroed`](HugeVec::zeroed)
    /// and [`with_options`](HugeVec::with_options).
    ///
    /// # Errors
    ///
    /// As [`with_options`](HugeVec::with_options) and
    /// [`with_capacity`](HugeVec::with_capacity).
    pub fn zeroed_with_options(len: usize, opts: &AllocOptions) -> Result<Self> {
        Self::with_options(opts)?.into_zeroed(len)
    }

    /// An empty vector with room for `cap` elements.
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Size`](crate::ErrorKind::Size) if the bytes overflow,
    /// or what `hp_alloc` reports.
    pub fn with_capacity(cap: usize) -> Result<Self> {
        let mut v = Self::new();
        v.try_reserve_exact(cap)?;
        Ok(v)
    }

    /// `len` zeros: one zero-filled libhp block, faulted in on first touch.
    ///
    /// # Errors
    ///
    /// As [`with_capacity`](HugeVec::with_capacity).
    pub fn zeroed(len: usize) -> Result<Self> {
        Self::new().into_zeroed(len)
    }

    /// This empty vector, made `len` zeros in one zero-filled block.
    fn into_zeroed(mut self, len: usize) -> Result<Self> {
        debug_assert_eq!(self.cap, 0);
        if len == 0 {
            return Ok(self);
        }
        crate::check_loaded_version();
        let bytes = Self::bytes(len)?;
        // No HP_F_NOZERO (with_options refuses it): libhp zero-fills.
        let p = self.opts.alloc(bytes, 0) as *mut T;
        self.ptr = NonNull::new(p).ok_or_else(|| Error::last(None))?;
        self.cap = len;
        self.len = len; // all-zero bytes are valid T (Pod)
        Ok(self)
    }

    /// A copy of `src`.
    ///
    /// # Errors
    ///
    /// As [`with_capacity`](HugeVec::with_capacity).
    pub fn from_slice(src: &[T]) -> Result<Self> {
        let mut v = Self::with_capacity(src.len())?;
        v.extend_from_slice(src)?;
        Ok(v)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements that fit without growing.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// The elements.
    pub fn as_slice(&self) -> &[T] {
        self
    }

    /// The elements, writable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        self
    }

    fn bytes(n: usize) -> Result<usize> {
        n.checked_mul(std::mem::size_of::<T>())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| {
                Error::new(
                    sys::HP_ESIZE,
                    format!(
                        "{n} elements of {} bytes do not fit in the address space",
                        std::mem::size_of::<T>()
                    ),
                )
            })
    }

    /// Make the capacity exactly `cap` (at least `len`): `hp_alloc`, or
    /// `hp_realloc` of the block (page tables move, bytes do not).
    fn set_capacity(&mut self, cap: usize) -> Result<()> {
        debug_assert!(cap >= self.len && cap > 0);
        crate::check_loaded_version();
        let bytes = Self::bytes(cap)?;
        // New bytes past len need no zeroing: nothing reads them before a
        // push or copy writes them.
        let p = if self.cap == 0 {
            self.opts.alloc(bytes, sys::HP_F_NOZERO)
        } else {
            let flags = self.opts.flags | sys::HP_F_NOZERO;
            // SAFETY: ptr is our live block (&mut self); on failure
            // hp_realloc leaves it untouched.
            unsafe { sys::hp_realloc(self.ptr.as_ptr() as *mut c_void, bytes, flags) }
        };
        self.ptr = NonNull::new(p as *mut T).ok_or_else(|| Error::last(None))?;
        self.cap = cap;
        Ok(())
    }

    /// Room for at least `additional` more elements, growing the capacity
    /// at least twofold (amortised O(1) pushes).
    ///
    /// # Errors
    ///
    /// As [`with_capacity`](HugeVec::with_capacity); the vector is unchanged.
    pub fn try_reserve(&mut self, additional: usize) -> Result<()> {
        let need = self
            .len
            .checked_add(additional)
            .ok_or_else(|| Error::new(sys::HP_ESIZE, "HugeVec: capacity overflows usize"))?;
        if need <= self.cap {
            return Ok(());
        }
        let min = (4096 / std::mem::size_of::<T>()).max(1);
        self.set_capacity(need.max(self.cap.saturating_mul(2)).max(min))
    }

    /// Room for exactly `additional` more elements.
    ///
    /// # Errors
    ///
    /// As [`try_reserve`](HugeVec::try_reserve).
    pub fn try_reserve_exact(&mut self, additional: usize) -> Result<()> {
        let need = self
            .len
            .checked_add(additional)
            .ok_or_else(|| Error::new(sys::HP_ESIZE, "HugeVec: capacity overflows usize"))?;
        if need <= self.cap || need == 0 {
            return Ok(());
        }
        self.set_capacity(need)
    }

    /// As [`try_reserve`](HugeVec::try_reserve).
    ///
    /// # Panics
    ///
    /// If libhp cannot provide the memory (the panic message is the [`Error`]).
    pub fn reserve(&mut self, additional: usize) {
        if let Err(e) = self.try_reserve(additional) {
            panic!("HugeVec::reserve({additional}): {e}");
        }
    }

    /// Append `value`.
    ///
    /// # Errors
    ///
    /// As [`try_reserve`](HugeVec::try_reserve); the vector is unchanged.
    pub fn try_push(&mut self, value: T) -> Result<()> {
        if self.len == self.cap {
            self.try_reserve(1)?;
        }
        // SAFETY: len < cap, so the slot is inside our block.
        unsafe { self.ptr.as_ptr().add(self.len).write(value) };
        self.len += 1;
        Ok(())
    }

    /// Append `value`.
    ///
    /// # Panics
    ///
    /// If libhp cannot provide the memory, like `Vec::push`.
    pub fn push(&mut self, value: T) {
        if let Err(e) = self.try_push(value) {
            panic!("HugeVec::push: {e}");
        }
    }

    /// Remove and return the last element.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // SAFETY: the element at the old len - 1 was initialised.
        Some(unsafe { self.ptr.as_ptr().add(self.len).read() })
    }

    /// Append a copy of `src`.
    ///
    /// # Errors
    ///
    /// As [`try_reserve`](HugeVec::try_reserve); the vector is unchanged.
    pub fn extend_from_slice(&mut self, src: &[T]) -> Result<()> {
        self.try_reserve(src.len())?;
        // SAFETY: room for src.len() more elements; src cannot overlap our
        // spare capacity (no reference to it exists).
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(self.len), src.len())
        };
        self.len += src.len();
        Ok(())
    }

    /// Make the length `new_len`, filling new elements with `value`.
    ///
    /// # Errors
    ///
    /// As [`try_reserve`](HugeVec::try_reserve); the vector is unchanged.
    pub fn resize(&mut self, new_len: usize, value: T) -> Result<()> {
        if new_len <= self.len {
            self.len = new_len;
            return Ok(());
        }
        self.try_reserve_exact(new_len - self.len)?;
        for i in self.len..new_len {
            // SAFETY: i < new_len <= cap.
            unsafe { self.ptr.as_ptr().add(i).write(value) };
        }
        self.len = new_len;
        Ok(())
    }

    /// Keep the first `len` elements (no effect if there are fewer).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Remove every element; the capacity stays.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Give back the capacity past `len` (`hp_realloc` releases the tail
    /// in place); an empty vector frees its block.
    ///
    /// # Errors
    ///
    /// What `hp_realloc` reports; the vector is unchanged.
    pub fn shrink_to_fit(&mut self) -> Result<()> {
        if self.cap == self.len {
            return Ok(());
        }
        if self.len == 0 {
            // SAFETY: cap != len == 0, so ptr is our live block; T: Pod
            // needs no drop.
            unsafe { sys::hp_free(self.ptr.as_ptr() as *mut c_void) };
            self.ptr = NonNull::dangling();
            self.cap = 0;
            return Ok(());
        }
        self.set_capacity(self.len)
    }

    /// What libhp says about the block (backend, page size, huge bytes).
    ///
    /// # Errors
    ///
    /// [`ErrorKind::Foreign`](crate::ErrorKind::Foreign) while nothing is
    /// allocated (capacity 0).
    pub fn info(&self) -> Result<BlockInfo> {
        if self.cap == 0 {
            return Err(Error::new(
                sys::HP_EFOREIGN,
                "HugeVec::info: the vector has no block yet (capacity 0)",
            ));
        }
        block_info(self.ptr.as_ptr() as *const u8)
    }

    /// A copy in a new block, allocated with the same options.
    ///
    /// # Errors
    ///
    /// As [`from_slice`](HugeVec::from_slice).
    pub fn try_clone(&self) -> Result<Self> {
        let mut v = Self::new();
        v.opts = self.opts.clone();
        v.try_reserve_exact(self.len)?;
        v.extend_from_slice(self)?;
        Ok(v)
    }
}

impl<T: Pod> Default for HugeVec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Pod> Drop for HugeVec<T> {
    fn drop(&mut self) {
        if self.cap != 0 {
            // SAFETY: our live block; T: Pod needs no drop.
            unsafe { sys::hp_free(self.ptr.as_ptr() as *mut c_void) };
        }
    }
}

impl<T: Pod> Deref for HugeVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: ptr is aligned (a page-aligned block, or dangling for
        // cap 0) and the first len elements are initialised.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Pod> DerefMut for HugeVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as above, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Pod> Extend<T> for HugeVec<T> {
    /// # Panics
    ///
    /// If libhp cannot provide the memory, like `Vec::extend`.
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        let iter = iter.into_iter();
        self.reserve(iter.size_hint().0);
        for x in iter {
            self.push(x);
        }
    }
}

impl<T: Pod + fmt::Debug> fmt::Debug for HugeVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Pod + PartialEq> PartialEq for HugeVec<T> {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl<T: Pod + Eq> Eq for HugeVec<T> {}

impl<T: Pod> Clone for HugeVec<T> {
    /// A copy in a new block, with the same options
    /// ([`try_clone`](HugeVec::try_clone)).
    ///
    /// # Panics
    ///
    /// If libhp cannot provide the memory, like `Vec::clone`.
    fn clone(&self) -> Self {
        match self.try_clone() {
            Ok(v) => v,
            Err(e) => panic!("HugeVec::clone: {e}"),
        }
    }
}

impl<T: Pod> FromIterator<T> for HugeVec<T> {
    /// # Panics
    ///
    /// If libhp cannot provide the memory, like `Vec`'s `collect`.
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut v = HugeVec::new();
        v.extend(iter);
        v
    }
}

impl<T: Pod> AsRef<[T]> for HugeVec<T> {
    fn as_ref(&self) -> &[T] {
        self
    }
}

impl<T: Pod> AsMut<[T]> for HugeVec<T> {
    fn as_mut(&mut self) -> &mut [T] {
        self
    }
}

impl<'a, T: Pod> IntoIterator for &'a HugeVec<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, T: Pod> IntoIterator for &'a mut HugeVec<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

/// The elements of a [`HugeVec`] by value; the block is freed when the
/// iterator is dropped.
pub struct IntoIter<T: Pod> {
    vec: HugeVec<T>,
    front: usize,
    back: usize,
}

impl<T: Pod> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        if self.front == self.back {
            return None;
        }
        self.front += 1;
        Some(self.vec[self.front - 1])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.back - self.front, Some(self.back - self.front))
    }
}

impl<T: Pod> DoubleEndedIterator for IntoIter<T> {
    fn next_back(&mut self) -> Option<T> {
        if self.front == self.back {
            return None;
        }
        self.back -= 1;
        Some(self.vec[self.back])
    }
}

impl<T: Pod> ExactSizeIterator for IntoIter<T> {}

impl<T: Pod> IntoIterator for HugeVec<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        let back = self.len;
        IntoIter {
            vec: self,
            front: 0,
            back,
        }
    }
}
