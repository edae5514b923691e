//! Stacks and threads on them, against the real libhp.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use hp::{BackendKind, ErrorKind, Stack, StackCacheConfig, StackMode, StackOptions};

const MIB: usize = 1 << 20;

#[test]
fn lean_stack_has_a_guard_below_and_no_huge_pages() {
    let s = Stack::new(MIB + 1).unwrap();
    assert!(s.size() > MIB);
    assert_eq!(s.base() as usize % 4096, 0);
    let info = s.info().unwrap();
    assert_eq!(info.mode, StackMode::Lean);
    assert_eq!(info.kind, BackendKind::Base);
    assert_eq!(info.base_addr, s.base() as u64);
    assert_eq!(info.usable_size, s.size() as u64);
    assert!(info.guard_size >= 4096);
    assert_eq!(info.guard_addr + info.guard_size, info.base_addr);
    assert_eq!(info.huge_bytes, 0);
    s.destroy().unwrap();
}

#[test]
fn huge_stack_or_a_clean_refusal() {
    match StackOptions::new().huge(true).create(4 * MIB) {
        Ok(s) => {
            let info = s.info().unwrap();
            assert_eq!(info.mode, StackMode::Huge);
            assert!(info.page_size > 4096);
            assert_eq!(info.base_addr % info.page_size, 0, "{info:?}");
        }
        Err(e) => assert_eq!(e.kind(), ErrorKind::NoHugePages, "{e}"),
    }
    // With allow_lean there is always a stack.
    let s = StackOptions::new()
        .huge(true)
        .allow_lean(true)
        .create(4 * MIB)
        .unwrap();
    assert!(matches!(
        s.info().unwrap().mode,
        StackMode::Huge | StackMode::Lean
    ));
}

#[test]
fn bad_requests_are_errors() {
    assert_eq!(Stack::new(0).unwrap_err().kind(), ErrorKind::Size);
    let e = StackOptions::new().flags(1 << 40).create(MIB).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Flags);
    let e = StackOptions::new()
        .guard_size(hp::sys::HP_STACK_MAX_GUARD + 1)
        .create(MIB)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(!e.detail().is_empty());
}

#[test]
fn stacks_move_between_threads() {
    let s = StackOptions::new()
        .guard_size(64 << 10)
        .create(MIB)
        .unwrap();
    assert!(s.info().unwrap().guard_size >= 64 << 10);
    std::thread::spawn(move || drop(s)).join().unwrap();
}

#[test]
fn spawned_closure_runs_on_the_libhp_stack() {
    let t = StackOptions::new()
        .spawn(2 * MIB, || {
            let local = [1u8; 64];
            (std::hint::black_box(&local).as_ptr() as u64, 6 * 7)
        })
        .unwrap();
    let info = t.info().unwrap();
    let (addr, value) = t.join().unwrap();
    assert_eq!(value, 42);
    assert!(
        addr >= info.base_addr && addr < info.base_addr + info.usable_size,
        "local at {addr:#x}, stack {:#x}+{:#x}",
        info.base_addr,
        info.usable_size
    );
}

#[test]
fn a_panic_comes_back_from_join() {
    // The default panic hook prints "boom on a libhp stack" to stderr: expected.
    let t = StackOptions::new()
        .spawn(2 * MIB, || -> u32 { panic!("boom on a libhp stack") })
        .unwrap();
    let payload = t.join().unwrap_err();
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"boom on a libhp stack")
    );
}

/// Wait (a bounded number of rounds) until the reaper released `n` more
/// detached stacks than `before`.
fn wait_reaped(before: u64, n: u64) {
    for _ in 0..2000 {
        if hp::reaped_stack_threads() >= before + n {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    panic!(
        "the reaper released {} of {n} detached stacks",
        hp::reaped_stack_threads() - before
    );
}

// The detach tests share the reaper counter: one test runs them in turn.
#[test]
fn dropping_a_stack_thread_detaches_it_like_std() {
    // Drop returns while the thread still runs (std's JoinHandle detaches).
    let before = hp::reaped_stack_threads();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    let t = StackOptions::new()
        .guard_size(68 << 10)
        .spawn(2 * MIB + (68 << 10), move || {
            // Bounded: if drop blocked on this thread, the wait ends anyway.
            let released = go_rx.recv_timeout(Duration::from_secs(20)).is_ok();
            flag.store(true, Ordering::SeqCst);
            released
        })
        .unwrap();
    drop(t);
    assert!(
        !done.load(Ordering::SeqCst),
        "drop waited for the thread to end"
    );
    go_tx.send(()).unwrap();
    wait_reaped(before, 1);
    assert!(done.load(Ordering::SeqCst));
    // The stack went back to libhp: a stack of the same size and guard
    // (no other test uses them) now comes from the cache.
    let again = StackOptions::new()
        .guard_size(68 << 10)
        .create(2 * MIB + (68 << 10))
        .unwrap();
    assert!(
        again.info().unwrap().from_cache,
        "the stack was not released"
    );

    // Dropping the handle on its own thread: no panic, stack released later.
    let before = hp::reaped_stack_threads();
    let (tx, rx) = mpsc::channel::<hp::StackThread<bool>>();
    let t = StackOptions::new()
        .spawn(2 * MIB, move || {
            let me = rx.recv_timeout(Duration::from_secs(20)).unwrap();
            drop(me);
            true
        })
        .unwrap();
    let finished = Arc::new(AtomicBool::new(false));
    tx.send(t).unwrap();
    let watcher = {
        let finished = finished.clone();
        StackOptions::new()
            .spawn(MIB, move || finished.store(true, Ordering::SeqCst))
            .unwrap()
    };
    watcher.join().unwrap();
    assert!(finished.load(Ordering::SeqCst));
    wait_reaped(before, 1);

    // A finished thread whose handle is dropped is joined at once.
    let t = StackOptions::new().spawn(MIB, || 5).unwrap();
    for _ in 0..2000 {
        if t.is_finished() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(t.is_finished());
    drop(t);

    // join on the thread itself panics (caught in the thread), detaches,
    // and the stack is still released when the thread ends.
    let before = hp::reaped_stack_threads();
    let (tx, rx) = mpsc::channel::<hp::StackThread<()>>();
    let t = StackOptions::new()
        .spawn(2 * MIB, move || {
            if let Ok(me) = rx.recv_timeout(Duration::from_secs(20)) {
                me.join().unwrap();
            }
        })
        .unwrap();
    tx.send(t).unwrap();
    wait_reaped(before, 1);
}

fn deep(n: u64) -> u64 {
    let pad = std::hint::black_box([n as u8; 1024]);
    if n == 0 {
        return pad[0] as u64;
    }
    deep(n - 1) + std::hint::black_box(pad[7]) as u64
}

/// Child of `overflow_prints_a_message_and_aborts`: overflows a thread on a
/// lean stack, on a huge one (HP_TEST_STACK=huge), or, after an hp thread
/// installed the handler, a std thread (HP_TEST_STACK=std: std's own
/// report must still work through the chained handler).
#[test]
#[ignore = "run by overflow_prints_a_message_and_aborts"]
fn child_overflows_a_stack() {
    let mode = std::env::var("HP_TEST_STACK").unwrap_or_default();
    if mode == "std" {
        StackOptions::new()
            .spawn(MIB, || ())
            .unwrap()
            .join()
            .unwrap();
        let t = std::thread::Builder::new()
            .name("std-deep".into())
            .stack_size(MIB)
            .spawn(|| deep(u64::MAX))
            .unwrap();
        let _ = t.join();
    } else {
        let t = StackOptions::new()
            .huge(mode == "huge")
            .allow_lean(mode == "huge")
            .name("deep-recursion")
            .spawn(4 * MIB, || deep(u64::MAX))
            .unwrap();
        let _ = t.join();
    }
    println!("NOT REACHED");
}

#[test]
fn overflow_prints_a_message_and_aborts() {
    use std::os::unix::process::ExitStatusExt;
    for (mode, thread) in [
        ("lean", "deep-recursion"),
        ("huge", "deep-recursion"),
        ("std", "std-deep"),
    ] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "child_overflows_a_stack",
                "--nocapture",
            ])
            .env("HP_TEST_STACK", mode)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            Some(6),
            "{mode}: expected SIGABRT, got {}; stderr:\n{err}",
            out.status
        );
        assert!(
            // std >= 1.89 puts the thread id after the name.
            err.contains(&format!("thread '{thread}'")) && err.contains("has overflowed its stack"),
            "{mode}: stderr:\n{err}"
        );
        assert_eq!(err.contains("libhp stack"), mode != "std", "{mode}: {err}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("NOT REACHED"));
    }
}

/// A fault that is not in the guard keeps its default action (SIGSEGV).
#[test]
#[ignore = "run by other_faults_stay_sigsegv"]
fn child_faults_outside_the_guard() {
    let t = StackOptions::new()
        .spawn(MIB, || {
            // SAFETY: none; this child process is meant to fault.
            unsafe { std::ptr::read_volatile(16 as *const u64) }
        })
        .unwrap();
    let _ = t.join();
}

#[test]
fn other_faults_stay_sigsegv() {
    use std::os::unix::process::ExitStatusExt;
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_faults_outside_the_guard"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(11), "{}: {err}", out.status);
    assert!(!err.contains("overflowed"), "{err}");
}

#[test]
fn a_stack_too_small_for_a_thread_is_refused() {
    let e = StackOptions::new().spawn(4096, || ()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

/// Make a stack of a size and guard no other test uses (so no other test can
/// take it from the cache), write `byte` at its base and destroy it.
fn cache_one_marked_stack(opts: &StackOptions, size: usize, byte: u8) -> u64 {
    let s = opts.create(size).unwrap();
    let usable = s.size() as u64;
    // SAFETY: the usable range is ours, mapped read-write, nothing runs on it.
    unsafe { s.base().write_volatile(byte) };
    s.destroy().unwrap();
    usable
}

/// The first byte of a new stack of that size and guard, and whether it
/// came from the cache.
fn reuse_marked_stack(opts: &StackOptions, size: usize) -> (u8, bool) {
    let s = opts.create(size).unwrap();
    // SAFETY: as above.
    let byte = unsafe { s.base().read_volatile() };
    (byte, s.info().unwrap().from_cache)
}

// The only test that configures the process-wide cache (tests run in
// parallel); other tests' stacks may come and go, so counters are compared
// with >= and contents only through stacks of a size and guard of its own.
#[test]
fn cache_counts_keeps_releases_and_trims() {
    let defaults = StackCacheConfig::default();
    assert_eq!(defaults.max_stacks, 64);
    assert_eq!(defaults.max_bytes, 1 << 30);
    assert_eq!(defaults.keep_bytes, 8 << 20);
    hp::configure_stack_cache(&defaults).unwrap();
    let before = hp::stack_cache_stats().unwrap();
    assert_eq!(before.config(), defaults);
    drop(Stack::new(3 * MIB).unwrap());
    drop(Stack::new(3 * MIB).unwrap());
    let after = hp::stack_cache_stats().unwrap();
    assert!(
        after.hits + after.misses >= before.hits + before.misses + 2,
        "{before:?} {after:?}"
    );
    assert!(after.kept_bytes <= after.keep_bytes, "{after:?}");
    assert!(after.kept_bytes <= after.cached_bytes, "{after:?}");
    assert!(after.cached_bytes <= after.max_bytes, "{after:?}");
    assert!(after.cached_stacks <= after.max_stacks, "{after:?}");

    // keep_bytes >= max_bytes: a cached stack keeps its pages and contents.
    let keep_all = StackCacheConfig {
        keep_bytes: defaults.max_bytes,
        ..defaults
    };
    hp::configure_stack_cache(&keep_all).unwrap();
    assert_eq!(hp::stack_cache_stats().unwrap().config(), keep_all);
    let kept = StackOptions::new().guard_size(52 << 10);
    let size = 3 * MIB + (52 << 10);
    let usable = cache_one_marked_stack(&kept, size, 0xa5);
    let st = hp::stack_cache_stats().unwrap();
    assert!(st.kept_bytes >= usable, "{st:?}");
    assert_eq!(reuse_marked_stack(&kept, size), (0xa5, true));

    // keep_bytes 0: pages are dropped on entry; the stack comes back zeroed.
    let keep_none = StackCacheConfig {
        keep_bytes: 0,
        ..defaults
    };
    hp::configure_stack_cache(&keep_none).unwrap();
    let st0 = hp::stack_cache_stats().unwrap();
    assert_eq!(st0.config(), keep_none);
    assert_eq!(st0.kept_bytes, 0, "{st0:?}");
    let released = StackOptions::new().guard_size(56 << 10);
    let size = 3 * MIB + (56 << 10);
    cache_one_marked_stack(&released, size, 0x5a);
    let st1 = hp::stack_cache_stats().unwrap();
    assert!(st1.released > st0.released, "{st0:?} {st1:?}");
    assert_eq!(st1.kept_bytes, 0, "{st1:?}");
    assert_eq!(reuse_marked_stack(&released, size), (0, true));

    hp::trim_stack_cache().unwrap();
    let bad = StackCacheConfig {
        max_stacks: u64::from(hp::sys::HP_STACK_CACHE_MAX_STACKS) + 1,
        ..defaults
    };
    assert_eq!(
        hp::configure_stack_cache(&bad).unwrap_err().kind(),
        ErrorKind::Range
    );
    hp::configure_stack_cache(&defaults).unwrap();
    assert_eq!(hp::stack_cache_stats().unwrap().config(), defaults);
}

/// The last node with memory (0 on one node, or without NUMA information).
fn last_node() -> u32 {
    std::fs::read_to_string("/sys/devices/system/node/has_memory")
        .unwrap_or_default()
        .trim()
        .split([',', '-'])
        .filter_map(|s| s.parse::<u32>().ok())
        .max()
        .unwrap_or(0)
}

/// The /proc/self/numa_maps line of the mapping that holds `addr` (the one
/// with the highest start at or below it): its policy and page counts.
fn numa_maps_line(addr: usize) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/numa_maps").ok()?;
    text.lines()
        .filter_map(|l| Some((usize::from_str_radix(l.split(' ').next()?, 16).ok()?, l)))
        .filter(|&(start, _)| start <= addr)
        .max_by_key(|&(start, _)| start)
        .map(|(_, l)| l.to_string())
}

/// The nodes a numa_maps line counts pages on ("N<node>=<pages>").
fn nodes_of(line: &str) -> Vec<u32> {
    line.split(' ')
        .filter_map(|t| t.strip_prefix('N')?.split_once('='))
        .filter_map(|(n, _)| n.parse().ok())
        .collect()
}

/// A placed stack carries the placement's policy on its memory (numa_maps
/// shows it, and its touched pages on that node), is never a cached stack,
/// and bad placements are refused. On one node only node 0 can be placed on
/// (the kernel lab's two-node guests run tests/kernel/numa.c, not cargo).
#[test]
fn numa_placed_stacks() {
    let Some(plain) = numa_maps_line(Stack::new(MIB).unwrap().base() as usize) else {
        eprintln!("skipped: /proc/self/numa_maps cannot be read (a kernel without NUMA)");
        return;
    };
    assert!(plain.contains(" default"), "{plain}");
    let node = last_node();
    // A plain stack of the same size in the cache: a placed one never takes it.
    StackOptions::new().create(2 * MIB).unwrap().destroy().unwrap();
    for (mode, policy) in [
        (hp::Numa::Bind, format!(" bind:{node} ")),
        (hp::Numa::Prefer, format!(" prefer:{node} ")),
        (hp::Numa::Interleave, format!(" interleave:{node} ")),
    ] {
        let s = StackOptions::new().numa(mode, &[node]).create(2 * MIB).unwrap();
        let info = s.info().unwrap();
        assert!(!info.from_cache, "{mode:?}: {info:?}");
        // SAFETY: the stack's usable bytes are ours until it is destroyed.
        unsafe { std::ptr::write_bytes(s.base(), 1, s.size()) };
        let line = numa_maps_line(s.base() as usize).unwrap();
        assert!(line.contains(&policy), "{mode:?}: {line}");
        assert_eq!(nodes_of(&line), vec![node], "{mode:?}: {line}");
        s.destroy().unwrap();
    }
    // A thread on a placed stack: its own frames are on that policy.
    let t = StackOptions::new()
        .numa(hp::Numa::Bind, &[node])
        .spawn(2 * MIB, || {
            let local = [7u8; 4096];
            numa_maps_line(std::hint::black_box(&local).as_ptr() as usize)
        })
        .unwrap();
    let line = t.join().unwrap().unwrap();
    assert!(line.contains(&format!(" bind:{node} ")), "{line}");
    for nodes in [vec![node + 1], vec![4096], vec![]] {
        let e = StackOptions::new().numa(hp::Numa::Bind, &nodes).create(MIB).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{nodes:?}: {e}");
        let e = StackOptions::new()
            .numa(hp::Numa::Prefer, &nodes)
            .spawn(MIB, || ())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{nodes:?}: {e}");
    }
}
