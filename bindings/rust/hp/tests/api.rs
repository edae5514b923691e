//! The safe API against the real libhp (no global allocator here).

use hp::{AllocOptions, BackendKind, Block, ErrorKind, Version};

const MIB: usize = 1 << 20;

/// Byte `i` of a position-dependent pattern: a moved page or a shifted copy
/// shows up as a mismatch.
fn pattern(i: usize, seed: u8) -> u8 {
    (i.wrapping_mul(131) ^ (i >> 12) ^ seed as usize) as u8
}

fn fill(b: &mut [u8], seed: u8) {
    for (i, x) in b.iter_mut().enumerate() {
        *x = pattern(i, seed);
    }
}

fn check(b: &[u8], seed: u8) {
    if let Some(i) = b
        .iter()
        .enumerate()
        .position(|(i, &x)| x != pattern(i, seed))
    {
        panic!("byte {i} is {:#x}, expected {:#x}", b[i], pattern(i, seed));
    }
}

#[test]
fn block_is_zeroed_writable_and_page_aligned() {
    let mut b = hp::alloc(3 * MIB + 5).unwrap();
    assert_eq!(b.len(), 3 * MIB + 5);
    assert!(!b.is_empty());
    assert_eq!(b.as_ptr() as usize % 4096, 0);
    assert!(b.iter().all(|&x| x == 0));
    fill(&mut b, 1);
    check(&b, 1);
    let info = b.info().unwrap();
    assert!(!info.backend.is_empty());
    assert!(info.usable_size >= b.len() as u64);
    assert!(info.mapped_size >= info.usable_size);
    assert!(
        info.page_size.is_power_of_two() && info.page_size >= 4096,
        "{info:?}"
    );
    assert_eq!(info.requested_page_size, 0);
    b.free().unwrap();
}

#[test]
fn resize_keeps_contents_both_ways() {
    let mut b = hp::alloc(100).unwrap();
    fill(&mut b, 2);
    for len in [5 * MIB, 17 * MIB + 3, 64 * MIB, 3 * MIB, 4097, 9 * MIB] {
        let keep = b.len().min(len);
        b.resize(len).unwrap();
        assert_eq!(b.len(), len);
        check(&b[..keep], 2);
        fill(&mut b, 2);
        assert!(b.info().unwrap().usable_size >= len as u64);
    }
}

#[test]
fn resize_to_zero_is_refused_and_the_block_survives() {
    let mut b = hp::alloc(4096).unwrap();
    b[0] = 42;
    let e = b.resize(0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Size);
    assert_eq!(b[0], 42);
    assert_eq!(b.len(), 4096);
}

#[test]
fn errors_carry_code_name_and_detail() {
    let e = hp::alloc(0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Size);
    assert_eq!(e.code(), hp::sys::HP_ESIZE);
    assert_eq!(e.name(), "HP_ESIZE");
    assert!(
        !e.detail().is_empty(),
        "libhp sets a detail for every failure"
    );
    let text = e.to_string();
    assert!(
        text.contains("HP_ESIZE") && text.contains(e.detail()),
        "{text}"
    );
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e.clone());
    assert_eq!(boxed.to_string(), text);
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput);

    let e = AllocOptions::new().flags(1 << 40).alloc(4096).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Flags);
    assert!(e.detail().contains("flag"), "{e}");

    let e = AllocOptions::new().page_size(3000).alloc(4096).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Flags);

    let e = AllocOptions::new()
        .backend("no-such-backend")
        .alloc(4096)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoBackend);
    assert!(e.detail().contains("no-such-backend"), "{e}");

    let e = AllocOptions::new()
        .backend("bad\0name")
        .alloc(4096)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn block_info_rejects_foreign_and_interior_pointers() {
    let local = 7u64;
    let e = hp::block_info(&local as *const u64 as *const u8).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Foreign);
    let b = hp::alloc(2 * MIB).unwrap();
    let e = hp::block_info(b.as_ptr().wrapping_add(4096)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Interior);
    assert_eq!(hp::block_info(b.as_ptr()).unwrap(), b.info().unwrap());
}

#[test]
fn options_choose_backend_page_size_and_flags() {
    let b = AllocOptions::new().backend("fallback").alloc(MIB).unwrap();
    let info = b.info().unwrap();
    assert_eq!(info.backend, "fallback");
    assert_eq!(info.pin, hp::Pin::Named);
    assert_eq!((info.fd, info.fd_offset), (-1, 0));

    // Populated: the built-in's query knows the first page's node.
    let b = AllocOptions::new().populate(true).alloc(MIB).unwrap();
    let info = b.info().unwrap();
    assert_eq!(info.pin, hp::Pin::None);
    assert!(info.numa_node >= 0, "node of a populated block: {}", info.numa_node);

    let b = AllocOptions::new().page_size(4096).alloc(MIB).unwrap();
    let info = b.info().unwrap();
    assert_eq!(info.requested_page_size, 4096);
    assert_eq!(
        info.flags & hp::sys::HP_F_PAGE_SHIFT_MASK,
        hp::sys::HP_F_PAGE_4K
    );

    let b = AllocOptions::new().populate(true).alloc(MIB).unwrap();
    assert_ne!(b.info().unwrap().flags & hp::sys::HP_F_POPULATE, 0);
    let opts = AllocOptions::new().populate(true).populate(false);
    assert_eq!(opts.raw_flags().unwrap(), 0);

    // No pool: the flag reaches libhp and is recorded; where the hugetlbfs
    // backend can serve, it does not serve this block, and naming it leaves
    // nothing to serve it, for that reason.
    let b = AllocOptions::new().no_pool(true).alloc(4 * MIB).unwrap();
    let info = b.info().unwrap();
    assert_ne!(info.flags & hp::sys::HP_F_NOPOOL, 0);
    assert_ne!(info.backend, "hugetlbfs");
    let hugetlb = hp::backends().unwrap().into_iter().any(|b| b.name == "hugetlbfs" && b.available);
    if hugetlb {
        let e = AllocOptions::new().no_pool(true).backend("hugetlbfs").alloc(4 * MIB).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::NoBackend), "{e}");
        assert!(e.to_string().contains("HP_F_NOPOOL"), "{e}");
    }

    // Excluding every available backend leaves nothing to serve the block.
    let mut all = AllocOptions::new();
    for be in hp::backends().unwrap().into_iter().filter(|b| b.available) {
        all = all.exclude(be.name);
    }
    assert_eq!(all.alloc(MIB).unwrap_err().kind(), ErrorKind::NoBackend);

    // Excluding the fallback makes libhp use something else, when it can.
    match AllocOptions::new().exclude("fallback").alloc(4 * MIB) {
        Ok(b) => assert_ne!(b.info().unwrap().backend, "fallback"),
        Err(e) => assert_eq!(e.kind(), ErrorKind::NoBackend, "{e}"),
    }
}

#[test]
fn require_huge_gives_huge_pages_or_a_clean_error() {
    match AllocOptions::new().require_huge(true).alloc(8 * MIB) {
        Ok(b) => {
            let info = b.info().unwrap();
            assert!(info.page_size > 4096, "{info:?}");
            assert_ne!(info.flags & hp::sys::HP_F_REQUIRE_HUGE, 0);
        }
        Err(e) => assert_eq!(e.kind(), ErrorKind::NoHugePages, "{e}"),
    }
}

#[test]
fn blocks_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Block>();

    let mut b = hp::alloc(4 * MIB).unwrap();
    fill(&mut b, 3);
    // Shared reads from several threads, then a free on another thread.
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| check(&b, 3));
        }
    });
    std::thread::spawn(move || {
        check(&b, 3);
        drop(b);
    })
    .join()
    .unwrap();
}

#[test]
fn threads_allocate_resize_and_free_concurrently() {
    let handles: Vec<_> = (0..4u8)
        .map(|t| {
            std::thread::spawn(move || {
                for round in 0..20usize {
                    let mut b = hp::alloc(MIB + round * 4096).unwrap();
                    b[0] = t;
                    b.resize(2 * MIB + round).unwrap();
                    let last = b.len() - 1;
                    b[last] = t;
                    assert_eq!((b[0], b[last]), (t, t));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn backends_lists_the_builtin_fallback() {
    let list = hp::backends().unwrap();
    assert!(!list.is_empty());
    let fb = list
        .iter()
        .find(|b| b.name == "fallback")
        .expect("fallback backend");
    assert!(fb.available);
    assert_eq!(fb.kind, BackendKind::Base);
    for b in &list {
        assert_eq!(b.page_sizes.len(), b.pool_free.len());
        assert!(b.page_sizes.windows(2).all(|w| w[0] < w[1]), "{b:?}");
        if b.available {
            assert!(!b.page_sizes.is_empty(), "{b:?}");
        }
    }
}

#[test]
fn version_matches_the_headers() {
    let v = hp::version();
    assert_eq!(v.major, Version::HEADER.major);
    assert!(
        v >= Version::HEADER,
        "loaded libhp {v} is older than the headers {}",
        Version::HEADER
    );
    assert_eq!(hp::version_string(), v.to_string());
    assert_eq!(Version::from_number(v.number()), v);
}

#[test]
fn nozero_is_refused_by_the_safe_flags() {
    // A Block derefs to [u8]: HP_F_NOZERO would let safe code read another
    // allocation's leftover bytes.
    let e = AllocOptions::new()
        .flags(hp::sys::HP_F_NOZERO)
        .alloc(8 * MIB)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Flags, "{e}");
    assert!(e.detail().contains("alloc_uninit"), "{e}");
}

#[test]
fn uninit_blocks_become_blocks_only_when_written() {
    // Leave 0x41 in freed huge pages, as the cache may hand them back.
    for _ in 0..4 {
        let mut old = hp::alloc(8 * MIB).unwrap();
        old.fill(0x41);
    }
    let u = AllocOptions::new().alloc_uninit(8 * MIB).unwrap();
    assert_eq!(u.len(), 8 * MIB);
    assert_ne!(u.info().unwrap().flags & hp::sys::HP_F_NOZERO, 0);
    let b = u.fill(7);
    assert!(b.iter().all(|&x| x == 7));
    assert_eq!(b.flags() & hp::sys::HP_F_NOZERO, 0);

    // Written prefix only, then grow: what follows must read as zero.
    let mut u = AllocOptions::new().alloc_uninit(8 * MIB).unwrap();
    u.resize(5000).unwrap();
    for x in u.iter_mut() {
        x.write(9);
    }
    // SAFETY: all 5000 bytes were written just above.
    let mut b = unsafe { u.assume_init() };
    b.resize(8 * MIB).unwrap();
    assert!(b[..5000].iter().all(|&x| x == 9));
    if let Some(i) = b[5000..].iter().position(|&x| x != 0) {
        panic!(
            "byte {} after the written prefix is {:#x}",
            5000 + i,
            b[5000 + i]
        );
    }
}

#[test]
fn handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Block>();
    send_sync::<hp::UninitBlock>();
    send_sync::<hp::Stack>();
    send_sync::<hp::StackThread<u32>>();
    send_sync::<hp::Error>();
}

#[test]
fn the_library_loaded_is_the_one_linked() {
    let path = hp::library_path().expect("dladdr names the file of hp_version");
    assert!(
        path.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("libhp.so"),
        "{}",
        path.display()
    );
    // This package's binaries carry an rpath to the directory pkg-config
    // gave at build time: that libhp, not another one, must be running.
    if let Some(dir) = option_env!("HP_TEST_LIBDIR") {
        let dir = std::fs::canonicalize(dir).unwrap();
        let loaded = std::fs::canonicalize(&path).unwrap();
        assert!(
            loaded.starts_with(&dir),
            "loaded {} instead of the one in {}",
            loaded.display(),
            dir.display()
        );
    }
    assert_eq!(hp::version(), hp::linked_version());
}

#[test]
#[ignore = "run by a_different_loaded_version_is_reported"]
fn child_allocates_with_a_fake_hp_version() {
    let b = hp::alloc(4096).unwrap();
    drop(b);
    drop(hp::alloc(4096).unwrap());
    println!("CHILD loaded {}", hp::version());
}

#[test]
fn a_different_loaded_version_is_reported() {
    // An LD_PRELOADed hp_version() stands in for another libhp.so.1.
    let dir = std::env::temp_dir().join(format!("hp-ver-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("v.c");
    std::fs::write(&src, "unsigned hp_version(void) { return 10907; }\n").unwrap();
    let so = dir.join("libfakever.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = std::process::Command::new(&cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_allocates_with_a_fake_hp_version",
            "--nocapture",
        ])
        .env("LD_PRELOAD", &so)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("CHILD loaded 1.9.7"), "{stdout}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("libhp 1.9.7")
            && warnings[0].contains(&hp::linked_version().to_string()),
        "{}",
        warnings[0]
    );
}

/// NUMA placement on the last node with memory (node 0 on one node); a
/// node without memory is refused.
#[test]
fn numa_placement() {
    let text = std::fs::read_to_string("/sys/devices/system/node/has_memory").unwrap_or_default();
    let last = text
        .trim()
        .split([',', '-'])
        .filter_map(|s| s.parse::<u32>().ok())
        .max()
        .unwrap_or(0);
    let mut block = hp::AllocOptions::new()
        .no_pool(true)
        .numa(hp::Numa::Bind, &[last])
        .alloc(4 << 20)
        .expect("a block bound to the last node");
    block.fill(7);
    assert!(block.iter().all(|&b| b == 7));
    let info = block.info().expect("hp_info");
    assert_eq!(info.numa_mode, Some(hp::Numa::Bind));
    if !text.is_empty() {
        // With NUMA support (has_memory exists): measured where the pages are.
        assert_eq!(info.numa_nodes, vec![last], "{info:?}");
    }
    let plain = hp::alloc(1 << 20).expect("an unplaced block");
    let info = plain.info().expect("hp_info");
    assert_eq!(info.numa_mode, None);
    assert!(info.numa_nodes.len() <= 1, "1 MiB zero-filled on one node: {info:?}");
    let err = hp::AllocOptions::new()
        .numa(hp::Numa::Bind, &[last + 1])
        .alloc(4096)
        .unwrap_err();
    assert_eq!(err.kind(), hp::ErrorKind::InvalidArgument);
    let err = hp::AllocOptions::new()
        .numa(hp::Numa::Prefer, &[4096])
        .alloc(4096)
        .unwrap_err();
    assert_eq!(err.kind(), hp::ErrorKind::InvalidArgument);
}
