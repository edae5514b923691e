//! libhp error codes as a Rust error type. Every C status goes through
//! [`check`] or [`Error::last`]: the one place codes become `Error`s.

use std::ffi::{c_char, CStr};
use std::fmt;

use hp_sys as sys;

/// What went wrong, one variant per libhp error code (`HP_E*`).
///
/// New codes may be appended to libhp; they arrive as [`ErrorKind::Unknown`]
/// until this crate learns them, hence `#[non_exhaustive]`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// `HP_EINVAL`: invalid argument.
    InvalidArgument,
    /// `HP_ENOMEM`: out of memory.
    OutOfMemory,
    /// `HP_ESIZE`: size is zero or too large.
    Size,
    /// `HP_EFLAGS`: unknown or conflicting flags (or a bad page size).
    Flags,
    /// `HP_EFOREIGN`: pointer was not allocated by libhp.
    Foreign,
    /// `HP_EINTERIOR`: pointer points inside a block, not at its start.
    Interior,
    /// `HP_EDOUBLEFREE`: block was already freed.
    DoubleFree,
    /// `HP_ENOHUGE`: huge pages were required but cannot be provided.
    NoHugePages,
    /// `HP_ENOBACKEND`: no such backend, or it is unavailable.
    NoBackend,
    /// `HP_EBACKEND`: a backend failed or returned an invalid result.
    Backend,
    /// `HP_EENV`: invalid `HP_*` environment value.
    Environment,
    /// `HP_ENOTSUP`: operation not supported.
    NotSupported,
    /// `HP_ERANGE`: index or value out of range.
    Range,
    /// `HP_EOS`: an operating system call failed.
    Os,
    /// A code this crate does not know (see [`Error::code`]).
    Unknown,
}

impl ErrorKind {
    pub(crate) fn from_code(code: i32) -> ErrorKind {
        match code {
            sys::HP_EINVAL => ErrorKind::InvalidArgument,
            sys::HP_ENOMEM => ErrorKind::OutOfMemory,
            sys::HP_ESIZE => ErrorKind::Size,
            sys::HP_EFLAGS => ErrorKind::Flags,
            sys::HP_EFOREIGN => ErrorKind::Foreign,
            sys::HP_EINTERIOR => ErrorKind::Interior,
            sys::HP_EDOUBLEFREE => ErrorKind::DoubleFree,
            sys::HP_ENOHUGE => ErrorKind::NoHugePages,
            sys::HP_ENOBACKEND => ErrorKind::NoBackend,
            sys::HP_EBACKEND => ErrorKind::Backend,
            sys::HP_EENV => ErrorKind::Environment,
            sys::HP_ENOTSUP => ErrorKind::NotSupported,
            sys::HP_ERANGE => ErrorKind::Range,
            sys::HP_EOS => ErrorKind::Os,
            _ => ErrorKind::Unknown,
        }
    }
}

/// A failed libhp call: the C error code plus the detail text libhp gave
/// for it (`hp_last_error_detail()`), which names the argument, the value
/// and the reason.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    code: i32,
    detail: String,
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn static_str(p: *const c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    // SAFETY: hp_strerror / hp_error_name / hp_version_string return static,
    // NUL-terminated ASCII strings.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
}

impl Error {
    /// The error a libhp call just reported on this thread, with its detail.
    /// Call right after the failing call (the detail lives until the next
    /// libhp call on the thread). `code` is what the call returned, or
    /// `None` for calls that return NULL and leave the code in
    /// `hp_last_error()`.
    pub(crate) fn last(code: Option<i32>) -> Error {
        // SAFETY: both are thread-safe and take no arguments; the detail
        // string is copied before any other libhp call.
        let code = code.unwrap_or_else(|| unsafe { sys::hp_last_error() });
        // SAFETY: as above; a NUL-terminated thread-local string.
        let detail = unsafe { CStr::from_ptr(sys::hp_last_error_detail()) };
        let mut detail = detail.to_string_lossy().into_owned();
        if code == sys::HP_OK && detail.is_empty() {
            detail = "the call failed without setting an error code".to_string();
        }
        Error { code, detail }
    }

    /// An error found on the Rust side, before calling libhp.
    pub(crate) fn new(code: i32, detail: impl Into<String>) -> Error {
        Error {
            code,
            detail: detail.into(),
        }
    }

    /// The kind of error.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::from_code(self.code)
    }

    /// The raw C code (`HP_E*`, negative).
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The symbolic C name, e.g. `"HP_ENOHUGE"` (`hp_error_name`).
    pub fn name(&self) -> &'static str {
        // SAFETY: thread-safe, returns a static string for any code.
        static_str(unsafe { sys::hp_error_name(self.code) })
    }

    /// libhp's static description of the code (`hp_strerror`).
    pub fn description(&self) -> &'static str {
        // SAFETY: thread-safe, returns a static string for any code.
        static_str(unsafe { sys::hp_strerror(self.code) })
    }

    /// The detail message of the failing call; may be empty.
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

/// `Ok(())` for `HP_OK`, else the error with this thread's detail.
pub(crate) fn check(rc: i32) -> Result<()> {
    if rc == sys::HP_OK {
        Ok(())
    } else {
        Err(Error::last(Some(rc)))
    }
}

impl fmt::Display for Error {
    /// `"<description> (<NAME>): <detail>"`, e.g.
    /// `no such backend, or it is unavailable (HP_ENOBACKEND): no loaded backend named "x"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.description(), self.name())?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("code", &self.code)
            .field("name", &self.name())
            .field("detail", &self.detail)
            .finish()
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        use std::io::ErrorKind as Io;
        let kind = match e.kind() {
            ErrorKind::OutOfMemory | ErrorKind::NoHugePages => Io::OutOfMemory,
            ErrorKind::InvalidArgument | ErrorKind::Size | ErrorKind::Flags => Io::InvalidInput,
            ErrorKind::NotSupported => Io::Unsupported,
            ErrorKind::NoBackend => Io::NotFound,
            _ => Io::Other,
        };
        std::io::Error::new(kind, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_c_code_has_a_kind_and_a_name() {
        for code in sys::HP_EOS..=sys::HP_EINVAL {
            let e = Error::new(code, "");
            assert_ne!(e.kind(), ErrorKind::Unknown, "code {code}");
            assert!(e.name().starts_with("HP_E"), "{code}: {}", e.name());
            assert_eq!(e.to_string(), format!("{} ({})", e.description(), e.name()));
        }
        let e = Error::new(sys::HP_EOS - 1, "x");
        assert_eq!(e.kind(), ErrorKind::Unknown);
        assert_eq!(e.name(), "HP_UNKNOWN");
        assert!(e.to_string().ends_with("(HP_UNKNOWN): x"), "{e}");
    }
}
