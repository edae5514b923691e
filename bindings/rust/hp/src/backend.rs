//! The backends libhp found on this machine (`hp_backend_count`/`hp_backend_get`).

use hp_sys as sys;

use crate::block::c_chars;
use crate::error::{check, Result};

/// Kind of backend, used by libhp's selection policy (`enum hp_backend_kind`).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// Third-party plugin: never chosen automatically.
    Other,
    /// Reserved pool pages (`MAP_HUGETLB`).
    Hugetlb,
    /// PMD-size transparent huge pages.
    Thp,
    /// Multi-size THP (anonymous folio orders).
    Mthp,
    /// Base pages only.
    Base,
    /// A kind this crate does not know yet.
    Unknown(u32),
}

impl BackendKind {
    pub(crate) fn from_raw(kind: u32) -> BackendKind {
        match kind {
            sys::HP_KIND_OTHER => BackendKind::Other,
            sys::HP_KIND_HUGETLB => BackendKind::Hugetlb,
            sys::HP_KIND_THP => BackendKind::Thp,
            sys::HP_KIND_MTHP => BackendKind::Mthp,
            sys::HP_KIND_BASE => BackendKind::Base,
            k => BackendKind::Unknown(k),
        }
    }
}

/// One entry of libhp's backend list (`struct hp_backend_info`).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendInfo {
    /// Backend name, for [`AllocOptions::backend`](crate::AllocOptions::backend);
    /// empty if a rejected plugin had no readable name.
    pub name: String,
    /// Plugin file, or `"builtin"`.
    pub path: String,
    /// Why it is unavailable or was rejected; otherwise a summary.
    pub reason: String,
    /// Whether the backend can serve requests.
    pub available: bool,
    /// Its kind.
    pub kind: BackendKind,
    /// Page sizes it can map, ascending, in bytes.
    pub page_sizes: Vec<u64>,
    /// Free pages in the pool for each page size; `None` if unpooled.
    pub pool_free: Vec<Option<u64>>,
    /// The plugin's own description; empty if it gave none or was rejected.
    pub description: String,
}

/// Every backend libhp found: the built-in fallback, each plugin that
/// loaded and each plugin it rejected. Pool figures are read now.
pub fn backends() -> Result<Vec<BackendInfo>> {
    crate::check_loaded_version();
    // SAFETY: thread-safe, no arguments.
    let n = unsafe { sys::hp_backend_count() };
    if n < 0 {
        check(n)?;
    }
    (0..n as u32).map(backend).collect()
}

fn backend(index: u32) -> Result<BackendInfo> {
    let mut b = sys::hp_backend_info::init();
    // SAFETY: b is a valid, sized out-parameter.
    check(unsafe { sys::hp_backend_get(index, &mut b) })?;
    let n = (b.n_page_sizes as usize).min(b.page_sizes.len());
    Ok(BackendInfo {
        name: c_chars(&b.name),
        path: c_chars(&b.path),
        reason: c_chars(&b.reason),
        available: b.available != 0,
        kind: BackendKind::from_raw(b.kind),
        page_sizes: b.page_sizes[..n].to_vec(),
        pool_free: b.pool_free[..n]
            .iter()
            .map(|&f| (f != u64::MAX).then_some(f))
            .collect(),
        description: c_chars(&b.description),
    })
}

/// Probe every backend again now (`hp_reprobe`). libhp re-reads pool
/// counters at most every 100 ms and THP/mTHP switches only at load; call
/// this after changing kernel settings (nr_hugepages, THP enabled).
pub fn reprobe() -> Result<()> {
    // SAFETY: no arguments, thread-safe.
    check(unsafe { sys::hp_reprobe() })
}
