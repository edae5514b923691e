//! Fork-safe by default: `HugeVec` and `HpAlloc` (this binary's global
//! allocator) keep out of hugetlb pools unless asked (`pool(true)`). With
//! a 2 MiB pool that has free pages when the blocks are made (so a lost rule
//! shows as hugetlb pages in /proc/self/smaps) and is drained before the
//! forks, HPTEST_FORKS (default 100) children forked from a threaded parent
//! write every page of every block they inherited while the parent writes
//! them too: none may die. The controls, a `HugeVec` and an `HpAlloc` block
//! that opted in to the pool, kill their children with SIGBUS, which shows
//! the pool really was empty.
//!
//! Needs root and a 2 MiB hugetlb pool; resizes the pool under the
//! machine-wide knob lock (/run/lock/libhp-knobs.lock) and puts it back,
//! also when the test fails. Without them it says why and checks only what
//! it can.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_int;
use std::fs;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use hp::{AllocOptions, HpAlloc, HugeVec, DEFAULT_THRESHOLD};

#[global_allocator]
static GLOBAL: HpAlloc = HpAlloc::new();

const MIB: usize = 1 << 20;
const PAGE: usize = 4096;
const POOL: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB";
const SIGBUS: c_int = 7;

extern "C" {
    fn fork() -> c_int;
    fn waitpid(pid: c_int, status: *mut c_int, options: c_int) -> c_int;
    fn _exit(code: c_int) -> !;
    fn flock(fd: c_int, op: c_int) -> c_int;
    fn geteuid() -> u32;
}

fn read_pool(file: &str) -> u64 {
    fs::read_to_string(format!("{POOL}/{file}"))
        .unwrap_or_else(|e| panic!("{POOL}/{file}: {e}"))
        .trim()
        .parse()
        .unwrap()
}

/// The 2 MiB pool under the knob lock; nr_hugepages goes back to what it
/// was on drop (a failed assertion included).
struct Pool {
    _lock: fs::File,
    before: u64,
}

impl Pool {
    fn lock() -> Pool {
        let path = if fs::metadata("/run/lock").is_ok() {
            "/run/lock/libhp-knobs.lock"
        } else {
            "/tmp/libhp-knobs.lock"
        };
        let lock = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        // SAFETY: a valid descriptor; LOCK_EX (2) waits for the lock.
        assert_eq!(unsafe { flock(lock.as_raw_fd(), 2) }, 0, "flock {path}");
        // Surplus pages (blocks still held after an earlier shrink) are not
        // part of the persistent pool: writing them back would keep them.
        let before = read_pool("nr_hugepages") - read_pool("surplus_hugepages");
        Pool {
            _lock: lock,
            before,
        }
    }

    /// Make the pool have `free` free pages that nobody reserved; the
    /// number obtained.
    fn set_free(&self, free: u64) -> u64 {
        let unusable =
            read_pool("nr_hugepages") - read_pool("free_hugepages") + read_pool("resv_hugepages");
        fs::write(format!("{POOL}/nr_hugepages"), format!("{}\n", unusable + free)).unwrap();
        hp::reprobe().unwrap();
        Self::usable()
    }

    /// Free pages that a fork child's copy could take (free minus
    /// reserved); resv_hugepages may read as a wrapped huge number during
    /// another process's fork (KERNEL-FACTS), read again then.
    fn usable() -> u64 {
        loop {
            let (free, resv) = (read_pool("free_hugepages"), read_pool("resv_hugepages"));
            if resv <= read_pool("nr_hugepages") {
                return free.saturating_sub(resv);
            }
            std::thread::yield_now();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        let _ = fs::write(format!("{POOL}/nr_hugepages"), format!("{}\n", self.before));
        let _ = hp::reprobe();
    }
}

/// Bytes of [addr, addr + len) on hugetlb pages now (Private_Hugetlb +
/// Shared_Hugetlb of the mappings overlapping it: 6.18 sometimes files
/// private hugetlb under Shared_).
fn smaps_hugetlb(addr: *const u8, len: usize) -> usize {
    let (lo, hi) = (addr as usize, addr as usize + len);
    let smaps = fs::read_to_string("/proc/self/smaps").unwrap();
    let (mut inside, mut kb) = (false, 0usize);
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((s, e)) = first.split_once('-') {
            if let (Ok(s), Ok(e)) = (usize::from_str_radix(s, 16), usize::from_str_radix(e, 16)) {
                inside = s < hi && e > lo;
                continue;
            }
        }
        if inside && (line.starts_with("Private_Hugetlb:") || line.starts_with("Shared_Hugetlb:")) {
            kb += line.split_whitespace().nth(1).unwrap().parse::<usize>().unwrap();
        }
    }
    kb * 1024
}

fn touch(p: *mut u8, len: usize, byte: u8) {
    for off in (0..len).step_by(PAGE) {
        // SAFETY: off < len, inside a live block of the caller's.
        unsafe { p.add(off).write_volatile(byte) };
    }
}

/// Fork a child that writes a byte into every page of every block, reads
/// the first back and exits 0 (3 on a wrong byte); returns its pid. The
/// child calls nothing but memory accesses and _exit: its parent has
/// threads.
fn fork_writer(blocks: &[(*mut u8, usize)], byte: u8) -> c_int {
    // SAFETY: the child only touches memory it inherited and _exits.
    let pid = unsafe { fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        for &(p, len) in blocks {
            touch(p, len, byte);
            // SAFETY: as in touch.
            if unsafe { p.read_volatile() } != byte {
                // SAFETY: ends the child without running anything of the parent's.
                unsafe { _exit(3) };
            }
        }
        // SAFETY: as above.
        unsafe { _exit(0) };
    }
    pid
}

/// How a child ended: Ok(exit code) or Err(signal).
fn wait(pid: c_int) -> Result<i32, i32> {
    let mut status = 0;
    // SAFETY: status is a valid out-parameter; pid is our child.
    assert_eq!(unsafe { waitpid(pid, &mut status, 0) }, pid);
    if status & 0x7f == 0 {
        Ok((status >> 8) & 0xff)
    } else {
        Err(status & 0x7f)
    }
}

fn forks() -> usize {
    std::env::var("HPTEST_FORKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(100)
}

fn nopool(p: *const u8) -> bool {
    let info = hp::block_info(p).unwrap_or_else(|e| panic!("{p:?} is no libhp block: {e}"));
    info.flags & hp::sys::HP_F_NOPOOL != 0
}

#[test]
fn children_write_default_vecs_and_global_allocations_with_the_pool_drained() {
    // SAFETY: no arguments.
    let root = unsafe { geteuid() } == 0;
    let writable = fs::metadata(format!("{POOL}/nr_hugepages"))
        .map(|m| !m.permissions().readonly())
        .unwrap_or(false);
    if !root || !writable {
        eprintln!("SKIP: needs root and {POOL} to resize the 2 MiB hugetlb pool");
        return;
    }
    let pool = Pool::lock();
    hp::trim_cache().unwrap();
    let free = pool.set_free(16);
    if free < 8 {
        eprintln!("SKIP: the kernel gave only {free} free 2 MiB pool pages");
        return;
    }

    // The defaults, made while the pool has free pages.
    let mut zeroed: HugeVec<u64> = HugeVec::zeroed(4 * MIB / 8).unwrap();
    let mut pushed: HugeVec<u8> = HugeVec::new();
    for i in 0..3 * MIB {
        pushed.push(i as u8); // grows through hp_realloc from one page
    }
    // With options (huge pages required where THP can give them): still no pool.
    let thp = hp::backends()
        .unwrap()
        .iter()
        .any(|b| b.available && b.kind == hp::BackendKind::Thp);
    let opts = AllocOptions::new().require_huge(thp).populate(true);
    let mut opted: HugeVec<u32> = HugeVec::zeroed_with_options(MIB, &opts).unwrap();
    let mut calloced = vec![0u8; 2 * MIB]; // HpAlloc::alloc_zeroed
    let mut grown: Vec<u8> = Vec::with_capacity(2 * MIB); // alloc, then realloc
    grown.resize(5 * MIB, 1);
    let mut boxed: Box<[u64]> = vec![5u64; MIB / 4].into_boxed_slice(); // 2 MiB

    // The controls: opted in to the pool.
    let mut pooled: HugeVec<u8> =
        HugeVec::zeroed_with_options(4 * MIB, &AllocOptions::new().pool(true)).unwrap();
    let pool_alloc = HpAlloc::<DEFAULT_THRESHOLD>::new().pool(true);
    assert!(pool_alloc.uses_pool() && !GLOBAL.uses_pool());
    let layout = Layout::from_size_align(4 * MIB, PAGE).unwrap();
    // SAFETY: a valid, non-zero layout; freed below with the same one.
    let raw = unsafe { pool_alloc.alloc(layout) };
    assert!(!raw.is_null());

    let mut blocks: Vec<(*mut u8, usize)> = vec![
        (zeroed.as_mut_ptr() as *mut u8, zeroed.len() * 8),
        (pushed.as_mut_ptr(), pushed.len()),
        (opted.as_mut_ptr() as *mut u8, opted.len() * 4),
        (calloced.as_mut_ptr(), calloced.len()),
        (grown.as_mut_ptr(), grown.len()),
        (boxed.as_mut_ptr() as *mut u8, boxed.len() * 8),
    ];
    for (i, &(p, len)) in blocks.iter().enumerate() {
        touch(p, len, 0x11);
        assert!(nopool(p), "block {i} lacks HP_F_NOPOOL");
        assert_eq!(smaps_hugetlb(p, len), 0, "block {i} is on hugetlb pages");
    }
    assert!(hp::block_info(grown.as_ptr()).unwrap().usable_size >= (5 * MIB) as u64);
    touch(pooled.as_mut_ptr(), pooled.len(), 0x22);
    touch(raw, layout.size(), 0x22);
    assert!(!nopool(pooled.as_ptr()) && !nopool(raw));
    let (on_pool, raw_on_pool) = (
        smaps_hugetlb(pooled.as_ptr(), pooled.len()),
        smaps_hugetlb(raw, layout.size()),
    );
    assert_eq!(
        (on_pool, raw_on_pool),
        (4 * MIB, 4 * MIB),
        "the controls should be on the free pool ({:?}, {:?})",
        pooled.info(),
        hp::block_info(raw)
    );

    // Drained, then forks from a parent whose threads allocate, write and
    // free (default HugeVecs and Vecs) all the while.
    let left = pool.set_free(0);
    assert_eq!(left, 0, "could not drain the 2 MiB pool");
    let stop = Arc::new(AtomicBool::new(false));
    let churn: Vec<_> = (0..3)
        .map(|t| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut rounds = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut v: HugeVec<u8> = HugeVec::zeroed((2 + t) * MIB).unwrap();
                    v[0] = 1;
                    let mut w: Vec<u8> = Vec::with_capacity((3 + t) * MIB);
                    w.push(1);
                    w.reserve(8 * MIB); // realloc
                    assert!(nopool(v.as_ptr()) && nopool(w.as_ptr()));
                    rounds += 1;
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                rounds
            })
        })
        .collect();
    let n = forks();
    let started = std::time::Instant::now();
    let (mut ok, mut sigbus, mut other) = (0, 0, Vec::new());
    for k in 0..n {
        let pid = fork_writer(&blocks, 0x33);
        // The parent writes the blocks while the child lives (a byte per
        // 2 MiB): on pool pages that would take them away from the child.
        for &(p, len) in &blocks {
            for off in (0..len).step_by(2 * MIB) {
                // SAFETY: off < len, inside a live block.
                unsafe { p.add(off).write_volatile(0x44 + (k % 7) as u8) };
            }
        }
        match wait(pid) {
            Ok(0) => ok += 1,
            Err(SIGBUS) => sigbus += 1,
            r => other.push(r),
        }
    }
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let rounds: u64 = churn.into_iter().map(|t| t.join().unwrap()).sum();
    let (pool_child, raw_child) = (
        wait(fork_writer(&[(pooled.as_mut_ptr(), pooled.len())], 0x55)),
        wait(fork_writer(&[(raw, layout.size())], 0x55)),
    );
    eprintln!(
        "{n} children of a parent with 3 allocating threads ({rounds} rounds) wrote {} default \
         blocks with the pool drained in {:.1} s: {ok} ok, {sigbus} SIGBUS, other {other:?}; \
         the pool controls' children: {pool_child:?}, {raw_child:?}",
        blocks.len(),
        elapsed.as_secs_f64()
    );
    assert_eq!((ok, sigbus), (n, 0), "other: {other:?}");
    assert_eq!(pool_child, Err(SIGBUS), "the pool HugeVec's child (was the pool drained?)");
    assert_eq!(raw_child, Err(SIGBUS), "the pool HpAlloc block's child");
    // The parent's own copies are intact.
    let last = 0x44 + ((n - 1) % 7) as u8;
    for &(p, _) in &blocks {
        // SAFETY: a live block.
        assert_eq!(unsafe { p.read_volatile() }, last);
    }
    blocks.clear();
    drop(pooled);
    // SAFETY: allocated above by pool_alloc with this layout.
    unsafe { pool_alloc.dealloc(raw, layout) };
    hp::trim_cache().unwrap();
    drop(pool);
}
