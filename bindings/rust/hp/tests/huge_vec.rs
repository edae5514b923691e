//! HugeVec<T> against the real libhp (no global allocator here): contents
//! survive growth, memory is one libhp block on huge pages where the
//! machine has them, and zeroed vectors read as zero even after the cache
//! recycled dirty pages.

use hp::{ErrorKind, HugeVec};

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
