//! The realloc-growth loop of bench/realloc (the C benchmark), in Rust:
//!
//! ```text
//! ptr = NULL; old = 0
//! for size = 4; size < 1 GiB; size *= 2:
//!     ptr = realloc(ptr, size)
//!     memset(ptr + old, 0xff, size - old)
//!     old = size
//! free(ptr)
//! ```
//!
//! Run (release, or the fill loop dominates):
//!
//! ```text
//! cargo run --release --example realloc_growth -- [block|vec|both] [iterations] [2|1.5]
//! ```
//!
//! - `block`: an `hp::Block` grown with `Block::resize`, i.e. `hp_realloc`
//!   on every step from 4 bytes on.
//! - `vec`: a `Vec<u8>` under the `HpAlloc` global allocator: `System` below
//!   2 MiB, then `hp_realloc` for every step above.

use std::time::Instant;

#[global_allocator]
static GLOBAL: hp::HpAlloc = hp::HpAlloc::new();

const LIMIT: usize = 1 << 30;

fn next(size: usize, growth: f64) -> usize {
    if growth == 2.0 {
        size * 2
    } else {
        (size * 3 / 2).max(size + 1)
    }
}

/// Returns (steps, final size, info of the final block).
fn grow_block(growth: f64) -> Result<(usize, usize, hp::BlockInfo), hp::Error> {
    let (mut size, mut old, mut steps) = (4, 0, 0);
    let mut block = hp::alloc(size)?;
    while size < LIMIT {
        if steps > 0 {
            block.resize(size)?;
        }
        block[old..].fill(0xff);
        old = size;
        steps += 1;
        size = next(size, growth);
    }
    assert!(block.iter().all(|&b| b == 0xff), "contents lost");
    Ok((steps, old, block.info()?))
}

fn grow_vec(growth: f64) -> Result<(usize, usize, hp::BlockInfo), hp::Error> {
    let (mut size, mut steps) = (4, 0);
    let mut v: Vec<u8> = Vec::new();
    while size < LIMIT {
        v.reserve_exact(size - v.len()); // one realloc to exactly `size`, as in C
        v.resize(size, 0xff);
        steps += 1;
        size = next(size, growth);
    }
    assert!(v.iter().all(|&b| b == 0xff), "contents lost");
    Ok((steps, v.len(), hp::block_info(v.as_ptr())?))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map_or("both", String::as_str);
    let iterations: usize = args.get(1).map_or(Ok(3), |s| s.parse())?;
    let growth: f64 = args.get(2).map_or(Ok(2.0), |s| s.parse())?;
    let modes: &[&str] = match mode {
        "both" => &["block", "vec"],
        "block" => &["block"],
        "vec" => &["vec"],
        _ => {
            return Err(format!(
                "usage: realloc_growth [block|vec|both] [iterations] [2|1.5], not {mode:?}"
            )
            .into())
        }
    };
    println!(
        "libhp {}, growth x{growth}, {iterations} iteration(s)",
        hp::version()
    );
    for &m in modes {
        for i in 1..=iterations {
            let start = Instant::now();
            let (steps, size, info) = if m == "block" {
                grow_block(growth)?
            } else {
                grow_vec(growth)?
            };
            println!(
                "{m:5} #{i}: {:8.3} s  {steps} steps to {} MiB  backend {} ({} KiB pages), {} MiB huge",
                start.elapsed().as_secs_f64(),
                size >> 20,
                info.backend,
                info.page_size >> 10,
                info.huge_bytes >> 20
            );
        }
    }
    Ok(())
}
