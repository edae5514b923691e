//! HugeVec<T> against the real libhp (no global allocator here): contents
//! survive growth, memory is one libhp block on huge pages where the
//! machine has them, and zeroed vectors read as zero even after the cache
//! recycled dirty pages.

use hp::{AllocOptions, ErrorKind, HpAlloc, HugeVec};

const MIB: usize = 1 << 20;

#[test]
fn push_grows_through_hp_realloc_and_keeps_every_element() {
    let mut v: HugeVec<u64> = HugeVec::new();
    assert_eq!(v.capacity(), 0);
    assert_eq!(v.info().unwrap_err().kind(), ErrorKind::Foreign);
    let n = 64 * MIB / 8; // 64 MiB of u64
    let mut caps = Vec::new();
    for i in 0..n as u64 {
        v.push(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        if caps.last() != Some(&v.capacity()) {
            caps.push(v.capacity());
        }
    }
    assert_eq!(v.len(), n);
    assert!(caps.len() >= 10, "{caps:?}");
    assert!(caps.windows(2).all(|w| w[1] >= 2 * w[0]), "{caps:?}");
    for (i, &x) in v.iter().enumerate() {
        assert_eq!(
            x,
            (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            "element {i}"
        );
    }
    let info = v.info().unwrap();
    assert_eq!(info.flags & hp::sys::HP_F_NOZERO, hp::sys::HP_F_NOZERO);
    assert!(info.usable_size >= (v.capacity() * 8) as u64, "{info:?}");
    eprintln!("HugeVec<u64> of {} MiB: {info:?}", (n * 8) >> 20);
    // Where the machine has huge pages for this block, most of it is on them.
    if info.page_size > 4096 {
        assert!(info.huge_bytes >= (n * 8 / 2) as u64, "{info:?}");
    }
    assert_eq!(
        v.pop(),
        Some(((n - 1) as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
    );
    v.truncate(10);
    v.shrink_to_fit().unwrap();
    assert_eq!(v.capacity(), 10);
    assert_eq!(v[9], 9u64.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    v.clear();
    v.shrink_to_fit().unwrap();
    assert_eq!(v.capacity(), 0);
}

#[test]
fn zeroed_reads_zero_even_after_dirty_frees() {
    for _ in 0..4 {
        let mut dirty: HugeVec<u8> = HugeVec::zeroed(16 * MIB).unwrap();
        dirty.fill(0x41);
    }
    let z: HugeVec<f64> = HugeVec::zeroed(2 * MIB).unwrap();
    assert_eq!(z.len(), 2 * MIB);
    assert!(z.iter().all(|&x| x == 0.0));
    assert_eq!(z.info().unwrap().flags & hp::sys::HP_F_NOZERO, 0);

    // Growth after a truncate must not expose old elements' bytes as new
    // elements: only written elements are reachable.
    let mut v: HugeVec<u32> = HugeVec::from_slice(&[7; 1000]).unwrap();
    v.truncate(10);
    v.resize(2000, 3).unwrap();
    assert!(v[..10].iter().all(|&x| x == 7));
    assert!(v[10..].iter().all(|&x| x == 3));
}

#[test]
fn arrays_and_floats_are_pod() {
    let mut v: HugeVec<[f32; 4]> = HugeVec::with_capacity(100).unwrap();
    assert!(v.capacity() >= 100);
    v.extend((0..100).map(|i| [i as f32; 4]));
    v.extend_from_slice(&[[1.0; 4]; 3]).unwrap();
    assert_eq!(v.len(), 103);
    assert_eq!(v[42], [42.0; 4]);
    let c = v.try_clone().unwrap();
    assert_eq!(c, v);
    assert_ne!(c.as_ptr(), v.as_ptr());
    assert_eq!(v.as_ptr() as usize % 4096, 0);
}

#[test]
fn absurd_sizes_are_errors_not_aborts() {
    let e = HugeVec::<u64>::with_capacity(usize::MAX / 4).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Size, "{e}");
    let e = HugeVec::<u8>::zeroed(1 << 62).unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Size | ErrorKind::OutOfMemory),
        "{e}"
    );
    let mut v: HugeVec<u8> = HugeVec::from_slice(b"kept").unwrap();
    assert!(v.try_reserve(1 << 62).is_err());
    assert_eq!(&v[..], b"kept");
    v.push(b'!');
    assert_eq!(&v[..], b"kept!");
}

#[test]
fn huge_vecs_cross_threads() {
    let v: HugeVec<u16> = HugeVec::from_slice(&[9; 4096]).unwrap();
    let sum = std::thread::spawn(move || v.iter().map(|&x| x as u64).sum::<u64>())
        .join()
        .unwrap();
    assert_eq!(sum, 9 * 4096);
}

const NOPOOL: u64 = hp::sys::HP_F_NOPOOL;

#[test]
fn vectors_keep_out_of_pools_unless_asked_and_blocks_keep_the_c_default() {
    // Every way of making a vector: no pool.
    let z: HugeVec<u8> = HugeVec::zeroed(4 * MIB).unwrap();
    let c: HugeVec<u8> = HugeVec::with_capacity(4 * MIB).unwrap();
    let s: HugeVec<u8> = HugeVec::from_slice(&[1; 4096]).unwrap();
    let o: HugeVec<u8> = HugeVec::zeroed_with_options(MIB, &AllocOptions::new().populate(true))
        .unwrap();
    for v in [&z, &c, &s, &o, &s.try_clone().unwrap()] {
        assert_ne!(v.info().unwrap().flags & NOPOOL, 0, "{:?}", v.info());
        assert_ne!(v.info().unwrap().backend, "hugetlbfs");
    }
    // Opted in: the flag is not passed (whether the pool serves depends on
    // its free pages; tests/fork.rs checks that with a pool it does).
    let pooled = AllocOptions::new().pool(true);
    let mut p: HugeVec<u8> = HugeVec::with_options(&pooled).unwrap();
    p.resize(4 * MIB, 1).unwrap();
    assert_eq!(p.info().unwrap().flags & NOPOOL, 0);
    assert_eq!(p.try_clone().unwrap().info().unwrap().flags & NOPOOL, 0);
    // A Block keeps libhp's C default (the pool when it has the pages)
    // unless told; the two spellings agree.
    assert_eq!(hp::alloc(4096).unwrap().flags() & NOPOOL, 0);
    assert_ne!(AllocOptions::new().pool(false).alloc(4096).unwrap().flags() & NOPOOL, 0);
    assert_eq!(
        AllocOptions::new().no_pool(true),
        AllocOptions::new().pool(false)
    );
    assert_eq!(AllocOptions::new().pool(false).raw_flags().unwrap(), NOPOOL);
    // The global allocator likewise.
    assert!(!HpAlloc::<{ 2 << 20 }>::new().uses_pool());
    assert!(HpAlloc::<{ 2 << 20 }>::new().pool(true).uses_pool());
    assert!(!HpAlloc::<{ 2 << 20 }>::new().pool(true).pool(false).uses_pool());
}

#[test]
fn options_hold_for_every_growth_and_after_shrinking_to_nothing() {
    let opts = AllocOptions::new().exclude("thp-madvise");
    let mut v: HugeVec<u8> = HugeVec::with_options(&opts).unwrap();
    for size in [4096, MIB, 4 * MIB, 16 * MIB] {
        v.resize(size, 7).unwrap();
        let info = v.info().unwrap();
        assert_ne!(info.backend, "thp-madvise", "{size}: {info:?}");
        assert_ne!(info.flags & NOPOOL, 0, "{size}: {info:?}");
    }
    v.clear();
    v.shrink_to_fit().unwrap();
    assert_eq!(v.capacity(), 0);
    v.resize(8 * MIB, 1).unwrap();
    assert_ne!(v.info().unwrap().backend, "thp-madvise");
    let c = v.try_clone().unwrap();
    assert_ne!(c.info().unwrap().backend, "thp-madvise");
    assert_eq!(c, v);
}

#[test]
fn bad_options_are_errors_before_anything_is_allocated() {
    let kind = |o: AllocOptions| HugeVec::<u64>::with_options(&o).unwrap_err().kind();
    assert_eq!(kind(AllocOptions::new().page_size(3)), ErrorKind::Flags);
    assert_eq!(kind(AllocOptions::new().page_size(1024)), ErrorKind::Flags);
    assert_eq!(kind(AllocOptions::new().flags(1 << 40)), ErrorKind::Flags);
    assert_eq!(
        kind(AllocOptions::new().flags(hp::sys::HP_F_NOZERO)),
        ErrorKind::Flags
    );
    assert_eq!(kind(AllocOptions::new().backend("no-such")), ErrorKind::NoBackend);
    assert_eq!(kind(AllocOptions::new().exclude("no-such")), ErrorKind::NoBackend);
    assert_eq!(kind(AllocOptions::new().exclude("a,b")), ErrorKind::InvalidArgument);
    assert_eq!(kind(AllocOptions::new().backend("x\0y")), ErrorKind::InvalidArgument);
    let e = HugeVec::<u8>::zeroed_with_options(1, &AllocOptions::new().exclude("nope")).unwrap_err();
    assert!(e.to_string().contains("\"nope\""), "{e}");
    // A misspelt exclude of a Block is refused too, not ignored.
    let e = AllocOptions::new().exclude("hugetlbs").alloc(4096).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoBackend, "{e}");
    // Sizes: errors, never aborts, with the options too.
    let o = AllocOptions::new().pool(true);
    let e = HugeVec::<u64>::zeroed_with_options(usize::MAX / 4, &o).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Size, "{e}");
    let mut v = HugeVec::<[u64; 8]>::with_options(&o).unwrap();
    assert_eq!(v.try_reserve(usize::MAX / 32).unwrap_err().kind(), ErrorKind::Size);
    assert_eq!(v.try_reserve_exact(usize::MAX).unwrap_err().kind(), ErrorKind::Size);
    assert_eq!(v.capacity(), 0);
    // info() of a vector without a block says so.
    let e = v.info().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Foreign);
    assert!(e.to_string().contains("capacity 0"), "{e}");
}

#[test]
fn std_traits_behave_like_vec() {
    let v: HugeVec<u32> = (0..10_000u32).collect();
    assert_eq!(v.len(), 10_000);
    assert_ne!(v.info().unwrap().flags & NOPOOL, 0);
    let mut c = v.clone();
    assert_eq!(c, v);
    assert_ne!(c.as_ptr(), v.as_ptr());
    for x in &mut c {
        *x += 1;
    }
    assert_eq!((&c).into_iter().copied().max(), Some(10_000));
    let r: &[u32] = v.as_ref();
    assert_eq!(r[9_999], 9_999);
    let owned: Vec<u32> = c.into_iter().rev().take(3).collect();
    assert_eq!(owned, [10_000, 9_999, 9_998]);
    let mut it = v.into_iter();
    assert_eq!(it.len(), 10_000);
    assert_eq!((it.next(), it.next_back()), (Some(0), Some(9_999)));
    assert_eq!(it.len(), 9_998);
    assert_eq!(format!("{:?}", HugeVec::from_slice(&[1u8, 2]).unwrap()), "[1, 2]");
    // Clone keeps the options.
    let o = AllocOptions::new().pool(true);
    let mut p: HugeVec<u8> = HugeVec::with_options(&o).unwrap();
    p.push(1);
    assert_eq!(p.clone().info().unwrap().flags & NOPOOL, 0);
}
