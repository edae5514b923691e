//! rustc-link-arg printed by hp-sys only reaches hp-sys's own binaries, so the
//! rpath for this package's tests and examples comes from DEP_HP_LIBDIR, the
//! `cargo:libdir=` that hp-sys (links = "hp") exports to its dependents.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_HP_LIBDIR");
    if let Ok(dir) = std::env::var("DEP_HP_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
