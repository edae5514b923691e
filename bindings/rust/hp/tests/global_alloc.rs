//! HpAlloc as the real #[global_allocator] of this test binary: large
//! allocations must be libhp blocks (hp_info knows their pointer), small or
//! over-aligned ones must not, and contents must survive every move.

use std::alloc::{GlobalAlloc, Layout};

use hp::{ErrorKind, HpAlloc, DEFAULT_THRESHOLD};

#[global_allocator]
static GLOBAL: HpAlloc = HpAlloc::new();

const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;

fn served_by_libhp(p: *const u8) -> bool {
    match hp::block_info(p) {
        Ok(_) => true,
        Err(e) if e.kind() == ErrorKind::Foreign => false,
        Err(e) => panic!("hp_info({p:?}): {e}"),
    }
}

/// A 1 MiB chunk whose bytes depend on their position, so a page that moved
/// or a copy that shifted is caught; each chunk's first 8 bytes hold its index.
fn reference_chunk() -> Vec<u8> {
    (0..MIB)
        .map(|i| (i.wrapping_mul(131) ^ (i >> 12)) as u8)
        .collect()
}

fn push_chunk(v: &mut Vec<u8>, reference: &[u8], index: usize) {
    v.extend_from_slice(reference);
    let at = v.len() - MIB;
    v[at..at + 8].copy_from_slice(&(index as u64).to_le_bytes());
}

fn check_chunks(v: &[u8], reference: &[u8]) {
    for (index, chunk) in v.chunks(MIB).enumerate() {
        assert_eq!(
            chunk[..8],
            (index as u64).to_le_bytes(),
            "chunk {index} header"
        );
        assert!(
            chunk[8..] == reference[8..chunk.len()],
            "chunk {index} contents"
        );
    }
}

#[test]
fn vec_grows_past_1_gib_through_hp_realloc() {
    let reference = reference_chunk();

    // Start below the threshold (System), cross it, then double up past 1 GiB.
    let mut v: Vec<u8> = Vec::with_capacity(64 << 10);
    assert!(!served_by_libhp(v.as_ptr()));
    let (mut cap, mut ptr) = (v.capacity(), v.as_ptr());
    let (mut hp_growths, mut moves, mut crossed) = (0, 0, false);
    let target = GIB / MIB + 1; // chunks: 1 GiB + 1 MiB, capacity 2 GiB
    for index in 0..target {
        push_chunk(&mut v, &reference, index);
        if v.capacity() == cap {
            continue;
        }
        let was_libhp = cap >= DEFAULT_THRESHOLD;
        cap = v.capacity();
        moves += (v.as_ptr() != ptr) as usize;
        ptr = v.as_ptr();
        if cap < DEFAULT_THRESHOLD {
            assert!(
                !served_by_libhp(ptr),
                "capacity {cap} is below the threshold"
            );
        } else {
            let info = hp::block_info(ptr)
                .unwrap_or_else(|e| panic!("a Vec of capacity {cap} is not a libhp block: {e}"));
            assert!(
                info.usable_size >= cap as u64,
                "{info:?} for capacity {cap}"
            );
            crossed |= !was_libhp;
            hp_growths += was_libhp as usize;
        }
        check_chunks(&v, &reference);
    }
    assert!(crossed, "the Vec never moved from System to libhp");
    assert!(hp_growths >= 9, "only {hp_growths} reallocs inside libhp");
    assert!(v.len() > GIB && v.capacity() >= v.len());
    let info = hp::block_info(v.as_ptr()).unwrap();
    eprintln!(
        "Vec: {} MiB in a {} MiB block, {hp_growths} hp_reallocs, {moves} moves: {info:?}",
        v.len() >> 20,
        v.capacity() >> 20
    );
    check_chunks(&v, &reference);
}

#[test]
fn small_allocations_stay_with_system() {
    let v: Vec<u8> = Vec::with_capacity(DEFAULT_THRESHOLD - 1);
    assert!(!served_by_libhp(v.as_ptr()));
    let s = String::from("small");
    assert!(!served_by_libhp(s.as_ptr()));
    let b = Box::new([0u8; 4096]);
    assert!(!served_by_libhp(b.as_ptr()));
}

#[test]
fn large_allocations_are_libhp_blocks() {
    let v: Vec<u8> = Vec::with_capacity(DEFAULT_THRESHOLD);
    assert!(
        served_by_libhp(v.as_ptr()),
        "exactly the threshold goes to libhp"
    );
    let z = vec![0u8; 8 * MIB]; // alloc_zeroed
    assert!(served_by_libhp(z.as_ptr()));
    assert!(z.iter().all(|&x| x == 0));
    let w = vec![0x5au64; MIB]; // 8 MiB of u64
    assert!(served_by_libhp(w.as_ptr() as *const u8));
    assert!(w.iter().all(|&x| x == 0x5a));
}

#[test]
fn realloc_moves_across_the_threshold_both_ways() {
    let reference = reference_chunk();
    assert!(
        !served_by_libhp(reference.as_ptr()),
        "1 MiB is below the threshold"
    );
    let mut v: Vec<u8> = reference[..512 << 10].to_vec();
    assert!(!served_by_libhp(v.as_ptr()));

    v.reserve_exact(3 * MIB); // System -> libhp
    assert!(served_by_libhp(v.as_ptr()));
    assert!(v[..] == reference[..512 << 10]);

    v.extend_from_slice(&reference[512 << 10..]);
    v.truncate(100_000);
    v.shrink_to_fit(); // libhp -> System
    assert!(!served_by_libhp(v.as_ptr()));
    assert!(v[..] == reference[..100_000]);

    v.resize(5 * MIB, 0xee); // System -> libhp again
    assert!(served_by_libhp(v.as_ptr()));
    assert!(v[..100_000] == reference[..100_000]);
    assert!(v[100_000..].iter().all(|&x| x == 0xee));

    v.truncate(DEFAULT_THRESHOLD);
    v.shrink_to_fit(); // libhp -> libhp, shrinking in hp_realloc
    assert!(served_by_libhp(v.as_ptr()));
    assert!(v[..100_000] == reference[..100_000]);
}

#[test]
fn alignment_up_to_a_page_goes_to_libhp_larger_to_system() {
    for (align, libhp) in [(4096, true), (8192, false), (2 * MIB, false)] {
        let layout = Layout::from_size_align(4 * MIB, align).unwrap();
        unsafe {
            let p = GLOBAL.alloc(layout);
            assert!(!p.is_null());
            assert_eq!(p as usize % align, 0, "align {align}");
            assert_eq!(served_by_libhp(p), libhp, "align {align}");
            p.write_bytes(0xab, layout.size());
            let q = GLOBAL.realloc(p, layout, 16 * MIB);
            assert!(!q.is_null());
            assert_eq!(q as usize % align, 0, "align {align} after realloc");
            assert_eq!(*q.add(4 * MIB - 1), 0xab);
            GLOBAL.dealloc(q, Layout::from_size_align(16 * MIB, align).unwrap());
        }
    }
}

#[test]
fn custom_threshold() {
    const T: usize = 4 << 20;
    static BIG: HpAlloc<T> = HpAlloc::new();
    assert_eq!(HpAlloc::<T>::THRESHOLD, T);
    assert!(HpAlloc::<T>::uses_libhp(
        Layout::from_size_align(T, 8).unwrap()
    ));
    assert!(!HpAlloc::<T>::uses_libhp(
        Layout::from_size_align(T - 1, 8).unwrap()
    ));
    unsafe {
        let layout = Layout::from_size_align(T + 10_000, 16).unwrap();
        let p = BIG.alloc_zeroed(layout);
        assert!(served_by_libhp(p));
        assert_eq!(*p.add(T + 9_999), 0);
        BIG.dealloc(p, layout);
        let small = Layout::from_size_align(T - 1, 16).unwrap();
        let p = BIG.alloc(small);
        assert!(!served_by_libhp(p));
        BIG.dealloc(p, small);
    }
}

#[test]
fn many_small_boxes_never_reach_libhp() {
    // Below the threshold nothing may cost an mmap: a libhp block would show
    // up in hp_info; System's do not.
    let boxes: Vec<Box<u64>> = (0..100_000u64).map(Box::new).collect();
    for b in boxes.iter().step_by(997) {
        assert!(!served_by_libhp(&**b as *const u64 as *const u8));
    }
    assert_eq!(boxes.iter().map(|b| **b).sum::<u64>(), 99_999 * 100_000 / 2);
}

/// Run this test binary again with `env`, running only the ignored test
/// `name`; returns (stdout, stderr, status).
fn run_child(name: &str, env: &[(&str, &str)]) -> (String, String, std::process::ExitStatus) {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        name,
        "--nocapture",
        "--test-threads=1",
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status,
    )
}

/// Child of `a_bad_environment_falls_back_to_system_with_one_line`: large
/// allocations of every kind while libhp refuses them all.
#[test]
#[ignore = "run by a_bad_environment_falls_back_to_system_with_one_line"]
fn child_allocates_while_libhp_refuses() {
    fn hook(f: &hp::Fallback<'_>) {
        println!("\nHOOK {} {} {}", f.name(), f.size(), f.detail());
    }
    if std::env::var_os("HP_TEST_HOOK").is_some() {
        hp::set_fallback_hook(Some(hook));
    }
    let mut v: Vec<u8> = Vec::new();
    for i in 0..(64 * MIB) / 4096 {
        v.extend_from_slice(&[i as u8; 4096]);
    }
    assert!(!served_by_libhp(v.as_ptr()));
    let z = vec![0u64; MIB];
    assert!(z.iter().all(|&x| x == 0));
    v.truncate(1000);
    v.shrink_to_fit();
    assert!(v.iter().enumerate().all(|(i, &x)| x == (i / 4096) as u8));
    let big: Vec<u32> = (0..4 * MIB as u32).collect();
    let moved = std::thread::spawn(move || big.iter().map(|&x| x as u64).sum::<u64>());
    assert!(moved.join().unwrap() > 0);
    assert!(hp::fallback_count() >= 4, "{}", hp::fallback_count());
    println!("CHILD DONE fallbacks={}", hp::fallback_count());
}

#[test]
fn a_bad_environment_falls_back_to_system_with_one_line() {
    for (var, value) in [
        ("HP_BACKENDS", ""),
        ("HP_DEBUG", "2"),
        ("HP_BACKEND_PATH", "relative/dir"),
    ] {
        let (out, err, status) = run_child("child_allocates_while_libhp_refuses", &[(var, value)]);
        assert!(
            status.success() && out.contains("CHILD DONE"),
            "{var}={value:?}: {status}\nstdout:\n{out}\nstderr:\n{err}"
        );
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{var}={value:?}: stderr is {err:?}");
        assert!(
            lines[0].contains(var) && lines[0].contains("HP_EENV"),
            "{var}: {}",
            lines[0]
        );
    }
    // With a hook, the application hears it instead of stderr.
    let (out, err, status) = run_child(
        "child_allocates_while_libhp_refuses",
        &[("HP_BACKENDS", ""), ("HP_TEST_HOOK", "1")],
    );
    assert!(status.success(), "{status}: {out} {err}");
    assert!(err.trim().is_empty(), "stderr: {err}");
    let hooked: Vec<&str> = out.lines().filter(|l| l.starts_with("HOOK ")).collect();
    assert_eq!(hooked.len(), 1, "{out}");
    assert!(
        hooked[0].starts_with("HOOK HP_EENV ") && hooked[0].contains("HP_BACKENDS"),
        "{out}"
    );
}

#[test]
fn large_vecs_cross_threads() {
    let v = vec![7u8; 32 * MIB];
    let handle = std::thread::spawn(move || {
        assert!(served_by_libhp(v.as_ptr()));
        drop(v); // freed on another thread
    });
    handle.join().unwrap();

    std::thread::scope(|s| {
        for t in 0..4u8 {
            s.spawn(move || {
                let mut v: Vec<u8> = Vec::new();
                for _ in 0..64 {
                    v.extend(std::iter::repeat(t).take(MIB));
                }
                assert!(served_by_libhp(v.as_ptr()));
                assert!(v.iter().all(|&x| x == t));
            });
        }
    });
}
