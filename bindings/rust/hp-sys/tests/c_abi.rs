//! hp-sys checked against the C headers, by a C compiler.
//!
//! The test writes a small C program that includes <hp.h> (found through the
//! cflags pkg-config gave build.rs) and prints sizeof/alignof/offsetof of every
//! public struct and field and the value of every constant, then compares
//! them with what Rust sees. Every extern function declared in
//! src/bindings.rs is also turned into a C function-pointer assignment that
//! `cc -Werror` rejects if the header's signature differs.
//!
//! The `*_INIT` macros are compared with the `init()` constructors of
//! src/lib.rs field by field, and the functions exported by the version
//! script (abi/libhp.map, when the crate sits in the source tree) with the
//! functions declared.
//!
//! Any drift between the headers and this crate fails here, even where
//! bindgen is not installed. `HP_SYS_TEST_CFLAGS` replaces the compile-time
//! cflags (e.g. `-I/tmp/changed-include`) to test a different header tree.

use hp_sys::*;
use std::collections::{BTreeMap, BTreeSet};
use std::mem::{align_of, offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

const BINDINGS_RS: &str = include_str!("../src/bindings.rs");
const LIB_RS: &str = include_str!("../src/lib.rs");

struct Field {
    name: &'static str,
    offset: usize,
    size: usize,
}

struct Struct {
    name: &'static str,
    size: usize,
    align: usize,
    fields: Vec<Field>,
    /// The bytes of the fields of `name::init()`, in order (padding left
    /// out), to compare with the C `*_INIT` macro.
    init: Vec<u8>,
}

/// The bytes of a field: an integer, pointer, or array of them, so no padding.
fn bytes_of<T>(v: &T) -> Vec<u8> {
    // SAFETY: reads size_of::<T>() initialised bytes of a live value.
    unsafe { std::slice::from_raw_parts(v as *const T as *const u8, size_of::<T>()) }.to_vec()
}

fn size_of_field<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// The Rust view of a struct: `layout!(hp_x { a, b, c })`.
macro_rules! layout {
    ($s:ident { $($f:ident),* $(,)? }) => {
        Struct {
            name: stringify!($s),
            size: size_of::<$s>(),
            align: align_of::<$s>(),
            fields: vec![$(Field {
                name: stringify!($f),
                offset: offset_of!($s, $f),
                size: size_of_field(|s: &$s| &s.$f),
            }),*],
            init: {
                let v = $s::init();
                let mut b = Vec::new();
                $(b.extend(bytes_of(&v.$f));)*
                b
            },
        }
    };
}

/// The Rust value of each constant: `constants![A, B]`.
macro_rules! constants {
    ($($c:ident),* $(,)?) => { vec![$((stringify!($c), $c as i128)),*] };
}

#[rustfmt::skip]
fn structs() -> Vec<Struct> {
    vec![
        layout!(hp_alloc_opts {
            size, reserved, flags, backend, exclude, numa_mode, numa_max_node, numa_nodes
        }),
        layout!(hp_block_info {
            size, reserved, backend, requested_page_size, page_size, usable_size, mapped_size,
            huge_bytes, flags, numa_node, fd, fd_offset, pin, reserved2, numa_mode, numa_count,
            numa_mask
        }),
        layout!(hp_backend_info {
            size, available, kind, n_page_sizes, name, path, reason, page_sizes, pool_free,
            description
        }),
        layout!(hp_stack_opts {
            size, reserved, flags, guard_size, numa_mode, numa_max_node, numa_nodes
        }),
        layout!(hp_stack_info {
            size, mode, kind, from_cache, source, flags, base_addr, usable_size, guard_addr,
            guard_size, page_size, resident_bytes, huge_bytes
        }),
        layout!(hp_stack_cache_config { size, reserved, max_stacks, max_bytes, keep_bytes }),
        layout!(hp_stack_cache_stats {
            size, reserved, max_stacks, max_bytes, keep_bytes, cached_stacks, cached_bytes,
            kept_bytes, hits, misses, released, evictions
        }),
        layout!(hp_cache_config { size, reserved, max_bytes, idle_ms, pool_idle_ms }),
        layout!(hp_cache_stats_entry { backend, page_size, bytes, ranges }),
        layout!(hp_cache_stats {
            size, n_entries, bytes, ranges, hits, misses, releases, released_bytes,
            adopted_bytes, max_bytes, idle_ms, pool_idle_ms, reaper_running, reserved, entries
        }),
    ]
}

#[rustfmt::skip]
fn consts() -> Vec<(&'static str, i128)> {
    constants![
        HP_VERSION_MAJOR, HP_VERSION_MINOR, HP_VERSION_PATCH, HP_VERSION_NUMBER,
        HP_OK, HP_EINVAL, HP_ENOMEM, HP_ESIZE, HP_EFLAGS, HP_EFOREIGN, HP_EINTERIOR,
        HP_EDOUBLEFREE, HP_ENOHUGE, HP_ENOBACKEND, HP_EBACKEND, HP_EENV, HP_ENOTSUP,
        HP_ERANGE, HP_EOS,
        HP_F_REQUIRE_HUGE, HP_F_POPULATE, HP_F_COLLAPSE, HP_F_NOZERO, HP_F_NOPOOL,
        HP_BLOCK_PIN_NONE, HP_BLOCK_PIN_NAMED, HP_BLOCK_PIN_ENV,
        HP_NUMA_DEFAULT, HP_NUMA_PREFER, HP_NUMA_BIND, HP_NUMA_INTERLEAVE,
        HP_F_PAGE_SHIFT_POS, HP_F_PAGE_SHIFT_MASK,
        HP_F_PAGE_4K, HP_F_PAGE_64K, HP_F_PAGE_2M, HP_F_PAGE_1G,
        HP_MAX_PAGE_SIZES,
        HP_KIND_OTHER, HP_KIND_HUGETLB, HP_KIND_THP, HP_KIND_MTHP, HP_KIND_BASE,
        HP_STACK_LEAN, HP_STACK_HUGE, HP_STACK_HUGETLB, HP_STACK_THP, HP_STACK_ALLOW_LEAN,
        HP_STACK_POPULATE, HP_STACK_NOCACHE, HP_STACK_MAX_SIZE, HP_STACK_MAX_GUARD,
        HP_STACK_MAX_HANDLES, HP_STACK_HANDLE_QUARANTINE, HP_STACK_MODE_LEAN, HP_STACK_MODE_HUGE,
        HP_STACK_CACHE_DEFAULT_STACKS, HP_STACK_CACHE_DEFAULT_BYTES,
        HP_STACK_CACHE_DEFAULT_KEEP_BYTES, HP_STACK_CACHE_MAX_STACKS,
        HP_CACHE_DEFAULT_IDLE_MS, HP_CACHE_DEFAULT_POOL_IDLE_MS, HP_CACHE_MAX_IDLE_MS,
        HP_CACHE_MAX_BYTES, HP_CACHE_STATS_MAX_ENTRIES,
    ]
}

// ---- reading the Rust declarations back out of the source -------------

/// `pub fn name(args) -> ret;` items of bindings.rs: (name, [arg types], ret).
fn extern_fns() -> Vec<(String, Vec<String>, Option<String>)> {
    let flat = BINDINGS_RS.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = Vec::new();
    for item in flat.split("pub fn ").skip(1) {
        let decl = item.split(';').next().unwrap();
        let (name, rest) = decl.split_once('(').unwrap();
        let (args, ret) = rest.rsplit_once(')').unwrap();
        let args = split_top_level(args)
            .into_iter()
            .map(|a| a.split_once(':').unwrap().1.trim().to_string())
            .collect();
        let ret = ret.trim().strip_prefix("->").map(|r| r.trim().to_string());
        out.push((name.trim().to_string(), args, ret));
    }
    out
}

/// Split "a: T, b: Option<fn(x: U, y: V) -> W>," at the commas outside
/// brackets, dropping empty pieces.
fn split_top_level(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, ch) in s.char_indices() {
        match ch {
            '(' | '<' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '>' if !s[..i].ends_with('-') => depth -= 1,
            ',' if depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out.retain(|a| !a.is_empty());
    out
}

/// `pub struct name { pub a: T, ... }` items of bindings.rs: name -> fields.
/// Opaque structs (bindgen's `_unused: [u8; 0]`, no public field) have none.
fn declared_structs() -> BTreeMap<String, Vec<String>> {
    // One field per line: bindgen puts `#[doc = "..."]` attributes (whose
    // text may hold ',' or '}') on lines of their own above each field.
    let mut out = BTreeMap::new();
    let mut lines = BINDINGS_RS.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim().strip_prefix("pub struct ") else {
            continue;
        };
        let Some((name, _)) = rest.split_once('{') else {
            continue;
        };
        let fields = lines
            .by_ref()
            .map(str::trim)
            .take_while(|l| *l != "}")
            .filter_map(|l| l.strip_prefix("pub "))
            .map(|f| f.split(':').next().unwrap().trim().to_string())
            .collect();
        out.insert(name.trim().to_string(), fields);
    }
    out
}

/// Names of `pub const NAME:` in bindings.rs and lib.rs.
fn declared_consts() -> BTreeSet<String> {
    [BINDINGS_RS, LIB_RS]
        .iter()
        .flat_map(|src| src.lines())
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter(|l| !l.starts_with("fn "))
        .map(|l| l.split(':').next().unwrap().trim().to_string())
        .collect()
}

/// C spelling of a Rust FFI type as bindgen writes it.
fn c_type(rust: &str, structs: &BTreeSet<String>) -> String {
    let t = rust
        .trim()
        .replace("::std::os::raw::", "")
        .replace("::core::ffi::", "")
        .replace("::std::option::", "");
    // Option<unsafe extern "C" fn(a: A, ...) -> R>: a nullable C function pointer.
    if let Some(f) = t.strip_prefix("Option<").and_then(|f| f.strip_suffix('>')) {
        let f = f.trim().trim_end_matches(',').trim();
        let f = f
            .strip_prefix("unsafe extern \"C\" fn")
            .expect("an extern \"C\" fn");
        let (args, ret) = f
            .trim()
            .strip_prefix('(')
            .unwrap()
            .rsplit_once(')')
            .unwrap();
        let ret = ret
            .trim()
            .strip_prefix("->")
            .map_or("void".into(), |r| c_type(r, structs));
        let args: Vec<String> = split_top_level(args)
            .into_iter()
            .map(|a| c_type(a.split_once(':').map_or(a, |x| x.1), structs))
            .collect();
        let args = if args.is_empty() {
            "void".to_string()
        } else {
            args.join(", ")
        };
        return format!("{ret} (*)({args})");
    }
    if let Some(inner) = t.strip_prefix("*const ") {
        return format!("const {} *", c_type(inner, structs));
    }
    if let Some(inner) = t.strip_prefix("*mut ") {
        return format!("{} *", c_type(inner, structs));
    }
    match t.as_str() {
        "c_void" => "void".into(),
        "c_char" => "char".into(),
        "c_int" => "int".into(),
        "c_uint" => "unsigned int".into(),
        "c_long" => "long".into(),
        "c_ulong" => "unsigned long".into(),
        "u8" | "u16" | "u32" | "u64" => format!("uint{}_t", &t[1..]),
        "i8" | "i16" | "i32" | "i64" => format!("int{}_t", &t[1..]),
        "usize" => "size_t".into(),
        "isize" => "ptrdiff_t".into(),
        s if structs.contains(s) => format!("struct {s}"),
        s if s.starts_with("hp_") => format!("enum {s}"),
        s => panic!("c_abi.rs: no C spelling for Rust type `{s}`; extend c_type()"),
    }
}

// ---- the C side ---------------------------------------------------------

/// Prints "S name size align", "F struct.field offset size", "C NAME value".
fn c_layout_program() -> String {
    let mut c = String::from(
        "#include <hp.h>\n#include <stdio.h>\n#include <stddef.h>\n#include <stdalign.h>\n\
         static void pb(const void *p, size_t n)\n\
         { for (size_t i = 0; i < n; i++) printf(\"%02x\", ((const unsigned char *)p)[i]); }\n\
         static void pc(const char *n, int neg, unsigned long long mag)\n\
         { printf(\"C %s %s%llu\\n\", n, neg ? \"-\" : \"\", mag); }\n\
         #define PC(x) pc(#x, (x) < 0, (x) < 0 ? 0ULL - (unsigned long long)(x) : (unsigned long long)(x))\n\
         int main(void) {\n",
    );
    for s in structs() {
        c += &format!(
            "  printf(\"S {0} %zu %zu\\n\", sizeof(struct {0}), alignof(struct {0}));\n",
            s.name
        );
        for f in &s.fields {
            c += &format!(
                "  printf(\"F {0}.{1} %zu %zu\\n\", offsetof(struct {0}, {1}), sizeof(((struct {0} *)0)->{1}));\n",
                s.name, f.name
            );
        }
        c += &format!(
            "  {{ static const struct {0} v = {1}_INIT; printf(\"I {0} \");",
            s.name,
            s.name.to_uppercase()
        );
        for f in &s.fields {
            c += &format!(" pb(&v.{0}, sizeof(v.{0}));", f.name);
        }
        c += " printf(\"\\n\"); }\n";
    }
    for (name, _) in consts() {
        c += &format!("  PC({name});\n");
    }
    c += "  return 0;\n}\n";
    c
}

/// One function-pointer assignment per extern fn of bindings.rs. A prototype
/// that differs from the header makes it an incompatible-pointer assignment,
/// which -Werror turns into a compile error naming the function.
fn c_signature_check() -> String {
    let names: BTreeSet<String> = declared_structs().into_keys().collect();
    let mut c = String::from("#include <hp.h>\n");
    for (name, args, ret) in extern_fns() {
        let ret = ret.map_or("void".to_string(), |r| c_type(&r, &names));
        let args: Vec<String> = args.iter().map(|a| c_type(a, &names)).collect();
        let args = if args.is_empty() {
            "void".to_string()
        } else {
            args.join(", ")
        };
        c += &format!("{ret} (*check_{name})({args}) = {name};\n");
    }
    c
}

fn cflags() -> String {
    std::env::var("HP_SYS_TEST_CFLAGS").unwrap_or_else(|_| env!("HP_SYS_CFLAGS").to_string())
}

/// Compile `src` with the C compiler against the headers; with `run`, link
/// it, run it and return its output.
fn compile_c(tag: &str, src: &str, run: bool) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hp-sys-c-abi-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("check.c");
    let exe = dir.join("check");
    std::fs::write(&file, src).unwrap();
    let cflags = cflags();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let mut cmd = Command::new(&cc);
    cmd.args(["-std=c11", "-Werror"])
        .args(cflags.split_whitespace())
        .arg(&file);
    if run {
        cmd.arg("-o").arg(&exe);
    } else {
        cmd.arg("-fsyntax-only");
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` (set CC): {e}"));
    assert!(
        out.status.success(),
        "the C {tag} check did not compile against the headers ({cflags});\n\
         hp-sys no longer matches them:\n{}\n--- {} ---\n{src}",
        String::from_utf8_lossy(&out.stderr),
        file.display()
    );
    let mut stdout = String::new();
    if run {
        let res = Command::new(&exe).output().unwrap();
        assert!(res.status.success());
        stdout = String::from_utf8(res.stdout).unwrap();
    }
    std::fs::remove_dir_all(&dir).ok();
    stdout
}

#[test]
fn struct_layouts_initialisers_and_constants_match_the_c_headers() {
    let c = compile_c("layout", &c_layout_program(), true);
    let mut want = Vec::new();
    for s in structs() {
        want.push(format!("S {} {} {}", s.name, s.size, s.align));
        for f in &s.fields {
            want.push(format!("F {}.{} {} {}", s.name, f.name, f.offset, f.size));
        }
        let hex: String = s.init.iter().map(|b| format!("{b:02x}")).collect();
        want.push(format!("I {} {hex}", s.name));
    }
    for (name, v) in consts() {
        want.push(format!("C {name} {v}"));
    }
    let got: Vec<&str> = c.lines().collect();
    let bad: Vec<String> = want
        .iter()
        .zip(got.iter())
        .filter(|(w, g)| w != g)
        .map(|(w, g)| format!("  rust: {w}\n     C: {g}"))
        .collect();
    assert!(
        bad.is_empty(),
        "hp-sys disagrees with the C headers:\n{}",
        bad.join("\n")
    );
    assert_eq!(want.len(), got.len());
}

#[test]
fn function_signatures_match_the_c_headers() {
    compile_c("signature", &c_signature_check(), false);
}

#[test]
fn every_declared_struct_and_constant_is_checked() {
    let mut declared = declared_structs();
    declared.retain(|_, fields| !fields.is_empty()); // opaque handles have no layout
    let checked: BTreeMap<String, Vec<String>> = structs()
        .into_iter()
        .map(|s| {
            (
                s.name.to_string(),
                s.fields.iter().map(|f| f.name.to_string()).collect(),
            )
        })
        .collect();
    assert_eq!(
        declared, checked,
        "update structs() in tests/c_abi.rs to match src/bindings.rs"
    );

    let consts: BTreeSet<String> = consts().iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(
        declared_consts(),
        consts,
        "update consts() in tests/c_abi.rs to match the crate"
    );
}

#[test]
fn every_exported_symbol_is_declared() {
    // The version script lists what libhp exports; it sits in the source
    // tree, so this check runs only when the crate is built from there.
    let map = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../abi/libhp.map");
    let Ok(text) = std::fs::read_to_string(&map) else {
        eprintln!("note: {} not found; export check skipped", map.display());
        return;
    };
    let exported: BTreeSet<String> = text
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_suffix(';'))
        .filter(|l| l.starts_with("hp_"))
        .map(str::to_string)
        .collect();
    let declared: BTreeSet<String> = extern_fns().into_iter().map(|f| f.0).collect();
    assert!(!exported.is_empty());
    let missing: Vec<_> = exported.difference(&declared).collect();
    let extra: Vec<_> = declared.difference(&exported).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "abi/libhp.map and src/bindings.rs disagree (rerun hp-sys/bindgen.sh):\n  \
         exported, not declared: {missing:?}\n  declared, not exported: {extra:?}"
    );
}
