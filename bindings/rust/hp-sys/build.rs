//! Find libhp with `pkg-config --libs --cflags libhp` and tell cargo how to
//! link it. Works with an installed libhp and with an uninstalled meson build
//! (`PKG_CONFIG_PATH=<builddir>/meson-uninstalled`).
//!
//! Emits: rustc-link-search / rustc-link-lib, an rpath for this package's own
//! test binaries, `cargo:libdir=` and `cargo:include=` (seen by dependents as
//! DEP_HP_LIBDIR / DEP_HP_INCLUDE; the `hp` crate turns DEP_HP_LIBDIR into an
//! rpath, because rustc-link-arg only applies to the package that prints it),
//! and HP_SYS_CFLAGS for tests/c_abi.rs, which compiles C against the headers.

use std::env;
use std::path::Path;
use std::process::Command;

fn pkg_config(args: &[&str]) -> Result<String, String> {
    let exe = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(&exe)
        .args(args)
        .arg("libhp")
        .output()
        .map_err(|e| format!("cannot run `{exe}`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "`{exe} {} libhp` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    for var in [
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "PKG_CONFIG_SYSROOT_DIR",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");

    check_version();
    let flags = pkg_config(&["--libs", "--cflags"]).unwrap_or_else(|e| {
        panic!(
            "\n\nhp-sys: cannot find libhp through pkg-config.\n  {e}\n\
             Either install libhp (meson install -C build), or point pkg-config at an\n\
             uninstalled build: PKG_CONFIG_PATH=/path/to/libhp/build/meson-uninstalled\n\n"
        )
    });

    let mut libdirs = Vec::new();
    let mut includes = Vec::new();
    let mut cflags = Vec::new();
    let mut libs = Vec::new();
    for tok in flags.split_whitespace() {
        if let Some(dir) = tok.strip_prefix("-L") {
            libdirs.push(dir.to_string());
        } else if let Some(lib) = tok.strip_prefix("-l") {
            libs.push(lib.to_string());
        } else if tok.starts_with("-I") || tok.starts_with("-D") {
            if let Some(dir) = tok.strip_prefix("-I") {
                includes.push(dir.to_string());
            }
            cflags.push(tok.to_string());
        }
    }
    // pkgconf drops -L for the system library directories; the libdir
    // variable is then the truth. (For the uninstalled build it is the other
    // way round: -L is right and libdir names a folder that does not exist.)
    if libdirs.is_empty() {
        if let Ok(dir) = pkg_config(&["--variable=libdir"]) {
            if Path::new(&dir).is_dir() {
                libdirs.push(dir);
            }
        }
    }
    if !libs.iter().any(|l| l == "hp") {
        panic!("hp-sys: `pkg-config --libs libhp` printed no -lhp: {flags}");
    }

    for dir in &libdirs {
        println!("cargo:rustc-link-search=native={dir}");
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    for lib in &libs {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    if let Some(dir) = libdirs.first() {
        println!("cargo:libdir={dir}");
    }
    println!(
        "cargo:include={}",
        env::join_paths(&includes).unwrap().to_string_lossy()
    );
    println!("cargo:rustc-env=HP_SYS_CFLAGS={}", cflags.join(" "));
}

/// libhp 1.x: at least 1.0 (the ABI these bindings declare, node HP_1.0)
/// and below 2 (a new SONAME, libhp.so.2, may change anything).
fn check_version() {
    let found = pkg_config(&["--modversion"]).unwrap_or_else(|e| {
        panic!(
            "\n\nhp-sys: cannot find libhp through pkg-config.\n  {e}\n\
             Either install libhp (meson install -C build), or point pkg-config at an\n\
             uninstalled build: PKG_CONFIG_PATH=/path/to/libhp/build/meson-uninstalled\n\n"
        )
    });
    let mut parts = found.split('.').map(|p| p.parse::<u32>().ok());
    let (major, minor) = (parts.next().flatten(), parts.next().flatten());
    let ok = matches!((major, minor), (Some(1), Some(_)));
    if !ok {
        let pc = pkg_config(&["--path"]).unwrap_or_else(|_| "?".to_string());
        panic!(
            "\n\nhp-sys: needs libhp >= 1.0 and < 2, but pkg-config found libhp {found} ({pc}).\n\
             Point PKG_CONFIG_PATH at a libhp 1.x build or installation.\n\n"
        );
    }
    // DEP_HP_VERSION for dependents: the version linked against.
    println!("cargo:version={found}");
}
