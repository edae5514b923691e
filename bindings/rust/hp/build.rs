//! rustc-link-arg printed by hp-sys only reaches hp-sys's own binaries, so the
//! rpath for this package's tests and examples comes from DEP_HP_LIBDIR, the
//! `cargo:libdir=` that hp-sys (links = "hp") exports to its dependents.
//! DEP_HP_VERSION (what pkg-config reported) becomes HP_LINKED_VERSION for
//! `hp::linked_version()`.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_HP_LIBDIR");
    println!("cargo:rerun-if-env-changed=DEP_HP_VERSION");
    let version = std::env::var("DEP_HP_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=HP_LINKED_VERSION={version}");
    if let Ok(dir) = std::env::var("DEP_HP_LIBDIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        // For the tests: the directory this package's binaries should load libhp from.
        println!("cargo:rustc-env=HP_TEST_LIBDIR={dir}");
    }
}
