//! Rust side-by-side benchmark: `Vec<T>` on `System`, `Vec<T>` on
//! `hp::HpAlloc`, and `hp::HugeVec<T>`, in one process, interleaved.
//!
//! Cases (each round runs every variant of every case, each measurement in
//! a fresh process so that no variant inherits another's pages or libhp's
//! cache of freed ranges; the variant order cycles through all six
//! permutations from round to round):
//! - `push`: push u64s one by one until the vector holds 1 GiB;
//! - `gather`: a 4 GiB array of u64 filled with its indices, then the sum
//!   of `GATHER_LOADS` elements at random indices (independent loads);
//!   `fill` is reported as its own row;
//! - `axpy`: a zeroed 1 GiB array of f64, then `x[i] = 1.5 * x[i] + i` in
//!   two passes (allocation, first touch, streaming).
//!
//! The global allocator is a switch: in `System` mode every call goes to
//! `System`; in `HpAlloc` mode to `HpAlloc` (which sends the small ones to
//! `System` too). A measuring process sets the mode once, before its
//! large allocations, and resets it after they are freed.
//!
//! Usage: `hp-bench [ROUNDS]` (default 5); prints a Markdown table of
//! medians (with min–max) and paired ratios (each variant's time over
//! `Vec`/System's in the same round, median over rounds).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use hp::{HpAlloc, HugeVec};

struct Switch;
static USE_HP: AtomicBool = AtomicBool::new(false);
static HP: HpAlloc = HpAlloc::new();

// SAFETY: each call goes to one allocator chosen by USE_HP, which only
// changes while no allocation at or above HpAlloc's threshold is alive (see
// the module docs); below the threshold both modes use System.
unsafe impl GlobalAlloc for Switch {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        unsafe {
            if USE_HP.load(Ordering::Relaxed) {
                HP.alloc(l)
            } else {
                System.alloc(l)
            }
        }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        unsafe {
            if USE_HP.load(Ordering::Relaxed) {
                HP.alloc_zeroed(l)
            } else {
                System.alloc_zeroed(l)
            }
        }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded contract.
        unsafe {
            if USE_HP.load(Ordering::Relaxed) {
                HP.dealloc(p, l)
            } else {
                System.dealloc(p, l)
            }
        }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        // SAFETY: forwarded contract.
        unsafe {
            if USE_HP.load(Ordering::Relaxed) {
                HP.realloc(p, l, n)
            } else {
                System.realloc(p, l, n)
            }
        }
    }
}

#[global_allocator]
static GLOBAL: Switch = Switch;

const GIB: usize = 1 << 30;
const GATHER_LOADS: usize = 4_000_000;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Variant {
    VecSystem,
    VecHpAlloc,
    HugeVec,
}

const VARIANTS: [Variant; 3] = [Variant::VecSystem, Variant::VecHpAlloc, Variant::HugeVec];

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::VecSystem => "Vec, System",
            Variant::VecHpAlloc => "Vec, HpAlloc",
            Variant::HugeVec => "HugeVec",
        }
    }
}

/// Where the data lived: libhp's backend and huge bytes, or "System".
fn placement(p: *const u8) -> String {
    match hp::block_info(p) {
        Ok(i) => format!(
            "{} {} KiB pages, {} MiB huge",
            i.backend,
            i.page_size >> 10,
            i.huge_bytes >> 20
        ),
        Err(_) => "System (malloc)".to_string(),
    }
}

fn rng(state: &mut u64) -> u64 {
    // xorshift64*
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// Seconds of each phase, plus where the data was.
struct Run {
    phases: Vec<(&'static str, f64)>,
    placement: String,
}

fn push(v: Variant) -> Run {
    let n = GIB / 8;
    let t = Instant::now();
    let (ptr, sum) = match v {
        Variant::HugeVec => {
            let mut x: HugeVec<u64> = HugeVec::new();
            for i in 0..n as u64 {
                x.push(i);
            }
            (placement(x.as_ptr() as *const u8), black_box(x[n - 1]))
        }
        _ => {
            let mut x: Vec<u64> = Vec::new();
            for i in 0..n as u64 {
                x.push(i);
            }
            (placement(x.as_ptr() as *const u8), black_box(x[n - 1]))
        }
    };
    let s = t.elapsed().as_secs_f64();
    assert_eq!(sum, n as u64 - 1);
    Run {
        phases: vec![("push to 1 GiB", s)],
        placement: ptr,
    }
}

fn gather_over(x: &mut [u64]) -> (f64, f64) {
    let t = Instant::now();
    for (i, e) in x.iter_mut().enumerate() {
        *e = i as u64;
    }
    let fill = t.elapsed().as_secs_f64();
    let (mut state, mut sum) = (0x9e37_79b9_7f4a_7c15u64, 0u64);
    let n = x.len() as u64;
    let t = Instant::now();
    for _ in 0..GATHER_LOADS {
        sum = sum.wrapping_add(x[(rng(&mut state) % n) as usize]);
    }
    let gather = t.elapsed().as_secs_f64();
    black_box(sum);
    (fill, gather)
}

fn gather(v: Variant) -> Run {
    let n = 4 * GIB / 8;
    let (fill, g, at) = match v {
        Variant::HugeVec => {
            let mut x: HugeVec<u64> = HugeVec::zeroed(n).expect("4 GiB HugeVec");
            let (f, g) = gather_over(&mut x);
            (f, g, placement(x.as_ptr() as *const u8))
        }
        _ => {
            let mut x: Vec<u64> = vec![0; n];
            let (f, g) = gather_over(&mut x);
            (f, g, placement(x.as_ptr() as *const u8))
        }
    };
    Run {
        phases: vec![("4 GiB fill", fill), ("4 GiB random gather", g)],
        placement: at,
    }
}

fn axpy_over(x: &mut [f64]) {
    for _ in 0..2 {
        for (i, e) in x.iter_mut().enumerate() {
            *e = 1.5 * *e + i as f64;
        }
    }
    black_box(x[x.len() / 2]);
}

fn axpy(v: Variant) -> Run {
    let n = GIB / 8;
    let t = Instant::now();
    let at = match v {
        Variant::HugeVec => {
            let mut x: HugeVec<f64> = HugeVec::zeroed(n).expect("1 GiB HugeVec");
            axpy_over(&mut x);
            placement(x.as_ptr() as *const u8)
        }
        _ => {
            let mut x: Vec<f64> = vec![0.0; n];
            axpy_over(&mut x);
            placement(x.as_ptr() as *const u8)
        }
    };
    Run {
        phases: vec![(
            "1 GiB zeroed f64 + 2 axpy passes",
            t.elapsed().as_secs_f64(),
        )],
        placement: at,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

type Case = fn(Variant) -> Run;
const CASES: [(&str, Case); 3] = [("push", push), ("gather", gather), ("axpy", axpy)];

/// `hp-bench --one CASE VARIANT`: one measurement in this process; prints
/// `phase<TAB>seconds` lines and a `placement<TAB>...` line.
fn one(case: &str, variant: usize) {
    let (_, f) = CASES.iter().find(|(n, _)| *n == case).expect("case");
    let v = VARIANTS[variant];
    USE_HP.store(v == Variant::VecHpAlloc, Ordering::SeqCst);
    let run = f(v);
    USE_HP.store(false, Ordering::SeqCst);
    for (phase, s) in run.phases {
        println!("{phase}\t{s}");
    }
    println!("placement\t{}", run.placement);
}

/// The six orders of the three variants: round r uses PERMS[r % 6], so no
/// variant always runs after the same other one.
const PERMS: [[usize; 3]; 6] = [
    [0, 1, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
    [1, 0, 2],
    [0, 2, 1],
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--one") {
        one(&args[2], args[3].parse().expect("variant"));
        return;
    }
    let rounds: usize = args.get(1).map_or(5, |s| s.parse().expect("ROUNDS"));
    let exe = std::env::current_exe().unwrap();
    // rows: phase -> per-variant seconds, one per measured round
    let mut rows: Vec<(String, [Vec<f64>; 3])> = Vec::new();
    let mut placements: Vec<(String, [String; 3])> = Vec::new();
    eprintln!(
        "hp-bench: libhp {} from {}; {rounds} rounds after a warm-up, one process per measurement",
        hp::version(),
        hp::library_path().map_or("?".into(), |p| p.display().to_string())
    );
    for round in 0..=rounds {
        for (name, _) in CASES {
            for &k in &PERMS[round % PERMS.len()] {
                let out = std::process::Command::new(&exe)
                    .args(["--one", name, &k.to_string()])
                    .output()
                    .expect("run a measurement");
                assert!(
                    out.status.success(),
                    "{name} {:?}: {}",
                    VARIANTS[k],
                    out.status
                );
                let text = String::from_utf8(out.stdout).unwrap();
                eprintln!(
                    "round {round} {name:6} {:13} {}",
                    VARIANTS[k].name(),
                    text.replace('\n', "; ")
                );
                for line in text.lines() {
                    let (key, value) = line.split_once('\t').unwrap();
                    if key == "placement" {
                        if round == 0 {
                            match placements.iter_mut().find(|(c, _)| c == name) {
                                Some((_, p)) => p[k] = value.to_string(),
                                None => {
                                    let mut p: [String; 3] = Default::default();
                                    p[k] = value.to_string();
                                    placements.push((name.to_string(), p));
                                }
                            }
                        }
                        continue;
                    }
                    if round == 0 {
                        continue; // warm-up
                    }
                    let row = match rows.iter().position(|(p, _)| p == key) {
                        Some(i) => i,
                        None => {
                            rows.push((key.to_string(), Default::default()));
                            rows.len() - 1
                        }
                    };
                    rows[row].1[k].push(value.parse().unwrap());
                }
            }
        }
    }
    println!(
        "| case | Vec, System | Vec, HpAlloc | HugeVec | HpAlloc / System | HugeVec / System |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for (phase, t) in &rows {
        let ratio = |i: usize| median(t[i].iter().zip(&t[0]).map(|(a, b)| a / b).collect());
        let spread = |i: usize| {
            let (lo, hi) = t[i]
                .iter()
                .fold((f64::MAX, 0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            format!("{:.3} s ({lo:.2}–{hi:.2})", median(t[i].clone()))
        };
        println!(
            "| {phase} | {} | {} | {} | {:.2}x | {:.2}x |",
            spread(0),
            spread(1),
            spread(2),
            ratio(1),
            ratio(2)
        );
    }
    println!();
    println!("Where the data was (warm-up round):");
    println!();
    for (case, p) in &placements {
        println!(
            "- {case}: Vec, System: {}; Vec, HpAlloc: {}; HugeVec: {}",
            p[0], p[1], p[2]
        );
    }
}
