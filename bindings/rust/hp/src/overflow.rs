//! A std-like report when a thread overflows its libhp stack.
//!
//! std prints `thread '<name>' has overflowed its stack` and aborts when one
//! of *its* threads runs into its guard page, but a thread started by
//! `hp_stack_thread_create` is foreign to std: without this module the fault
//! kills the process with a bare SIGSEGV (and there is no alternate signal
//! stack on which any handler could run).
//!
//! [`install`] puts a SIGSEGV handler in place once per process
//! (`SA_SIGINFO | SA_ONSTACK`), keeping the previous action. Each thread of
//! [`StackOptions::spawn`](crate::StackOptions::spawn) calls [`enter`],
//! which gives the thread an alternate signal stack (`sigaltstack(2)`) and
//! records its guard range and name in thread-locals. The handler compares
//! the fault address (`si_addr`) with this thread's guard range: inside, it
//! writes the message with `write(2)` and aborts (SIGABRT, like std);
//! otherwise it hands the signal to the previous handler (std's, which does
//! the same for std threads), or restores the default action and returns,
//! so that the faulting instruction runs again and the default action
//! (SIGSEGV) takes place. The handler only reads thread-locals with
//! constant initialisers and calls async-signal-safe functions.
//!
//! The declarations below are glibc's for x86_64 and aarch64 (Linux
//! asm-generic signal numbers and flags); a unit test compiles C to check
//! the struct layouts. Elsewhere the module does nothing.

#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod imp {
    use std::cell::{Cell, UnsafeCell};
    use std::ffi::{c_int, c_void};
    use std::fmt::Write as _;
    use std::mem::MaybeUninit;
    use std::sync::Once;

    pub(super) const SIGSEGV: c_int = 11;
    const SA_SIGINFO: c_int = 4;
    const SA_ONSTACK: c_int = 0x0800_0000;
    const SS_DISABLE: c_int = 2;
    const SIG_DFL: usize = 0;
    const SIG_IGN: usize = 1;
    /// Bytes of alternate signal stack per thread: far above MINSIGSTKSZ
    /// even with AVX-512 state (the kernel's AT_MINSIGSTKSZ is ~3.5 KiB).
    const ALT_STACK_SIZE: usize = 64 << 10;

    #[repr(C)]
    pub(super) struct SigSet {
        pub(super) bits: [u64; 16],
    }

    /// glibc's `struct sigaction`.
    #[repr(C)]
    pub(super) struct SigAction {
        pub(super) sa_sigaction: usize,
        pub(super) sa_mask: SigSet,
        pub(super) sa_flags: c_int,
        pub(super) sa_restorer: usize,
    }

    /// The head of glibc's `siginfo_t` (128 bytes), up to `si_addr`.
    #[repr(C)]
    pub(super) struct SigInfo {
        pub(super) si_signo: c_int,
        pub(super) si_errno: c_int,
        pub(super) si_code: c_int,
        pub(super) pad: c_int,
        pub(super) si_addr: usize,
    }

    /// `stack_t`.
    #[repr(C)]
    pub(super) struct StackT {
        pub(super) ss_sp: *mut c_void,
        pub(super) ss_flags: c_int,
        pub(super) ss_size: usize,
    }

    extern "C" {
        fn sigaction(sig: c_int, act: *const SigAction, old: *mut SigAction) -> c_int;
        fn sigemptyset(set: *mut SigSet) -> c_int;
        fn sigaltstack(ss: *const StackT, old: *mut StackT) -> c_int;
        fn write(fd: c_int, buf: *const c_void, count: usize) -> isize;
    }

    thread_local! {
        /// This thread's guard range `[start, end)`; empty when not an hp thread.
        static GUARD: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
        /// This thread's name (cut to 63 bytes) and its length.
        static NAME: Cell<([u8; 63], u8)> = const { Cell::new(([0; 63], 0)) };
    }

    /// The action in force before ours, written once before ours is installed.
    struct Previous(UnsafeCell<MaybeUninit<SigAction>>);
    // SAFETY: written only inside INSTALL.call_once, before the handler that
    // reads it is installed; read-only afterwards.
    unsafe impl Sync for Previous {}
    static PREVIOUS: Previous = Previous(UnsafeCell::new(MaybeUninit::uninit()));
    static INSTALL: Once = Once::new();

    pub(super) fn install() {
        INSTALL.call_once(|| {
            let prev = PREVIOUS.0.get().cast::<SigAction>();
            // SAFETY: reads the current action into PREVIOUS (valid, ours
            // alone inside call_once); then installs ours, a valid action
            // whose mask sigemptyset initialised.
            unsafe {
                if sigaction(SIGSEGV, std::ptr::null(), prev) != 0 {
                    return;
                }
                let mut act: SigAction = std::mem::zeroed();
                sigemptyset(&mut act.sa_mask);
                act.sa_sigaction =
                    on_segv as extern "C" fn(c_int, *mut SigInfo, *mut c_void) as usize;
                act.sa_flags = SA_SIGINFO | SA_ONSTACK;
                sigaction(SIGSEGV, &act, std::ptr::null_mut());
            }
        });
    }

    /// An alternate signal stack in use by this thread; dropping it turns it
    /// off (before freeing it).
    pub(crate) struct ThreadGuard {
        alt: *mut u8,
    }

    pub(super) fn enter(guard: (usize, usize), name: &str) -> ThreadGuard {
        let mut buf = [0u8; 63];
        let n = name.len().min(buf.len());
        buf[..n].copy_from_slice(&name.as_bytes()[..n]);
        NAME.with(|c| c.set((buf, n as u8)));
        GUARD.with(|g| g.set(guard));
        let layout = std::alloc::Layout::from_size_align(ALT_STACK_SIZE, 4096).unwrap();
        // SAFETY: a non-zero-sized layout.
        let alt = unsafe { std::alloc::alloc(layout) };
        if alt.is_null() {
            return ThreadGuard { alt };
        }
        let ss = StackT {
            ss_sp: alt.cast(),
            ss_flags: 0,
            ss_size: ALT_STACK_SIZE,
        };
        // SAFETY: ss describes memory this ThreadGuard owns until its drop
        // turns the alternate stack off.
        unsafe { sigaltstack(&ss, std::ptr::null_mut()) };
        ThreadGuard { alt }
    }

    impl Drop for ThreadGuard {
        fn drop(&mut self) {
            GUARD.with(|g| g.set((0, 0)));
            if self.alt.is_null() {
                return;
            }
            let off = StackT {
                ss_sp: std::ptr::null_mut(),
                ss_flags: SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: turns this thread's alternate stack off (we are not on
            // it: no signal handler is running), then frees it.
            unsafe {
                sigaltstack(&off, std::ptr::null_mut());
                let layout = std::alloc::Layout::from_size_align(ALT_STACK_SIZE, 4096).unwrap();
                std::alloc::dealloc(self.alt, layout);
            }
        }
    }

    /// Formats into a fixed buffer: a signal handler must not allocate.
    struct Line {
        buf: [u8; 256],
        len: usize,
    }

    impl std::fmt::Write for Line {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let n = s.len().min(self.buf.len() - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
            self.len += n;
            Ok(())
        }
    }

    extern "C" fn on_segv(sig: c_int, info: *mut SigInfo, ctx: *mut c_void) {
        // SAFETY: the kernel passes a valid siginfo_t with SA_SIGINFO.
        let addr = unsafe { (*info).si_addr };
        let (start, end) = GUARD.with(|g| g.get());
        if start <= addr && addr < end {
            let (buf, n) = NAME.with(|c| c.get());
            let name = std::str::from_utf8(&buf[..n as usize]).unwrap_or("?");
            let name = if name.is_empty() { "<unnamed>" } else { name };
            let mut line = Line {
                buf: [0; 256],
                len: 0,
            };
            let _ = write!(
                line,
                "\nthread '{name}' has overflowed its stack (libhp stack, guard {start:#x}..{end:#x})\n\
                 fatal runtime error: stack overflow, aborting\n"
            );
            // SAFETY: writes a live buffer to stderr; async-signal-safe.
            unsafe { write(2, line.buf.as_ptr().cast(), line.len) };
            std::process::abort();
        }
        // SAFETY: PREVIOUS was written before this handler was installed.
        let prev = unsafe { &*PREVIOUS.0.get().cast::<SigAction>() };
        match prev.sa_sigaction {
            SIG_DFL | SIG_IGN => {
                // Restore the default; returning re-runs the faulting
                // instruction, which now kills the process with SIGSEGV.
                // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask.
                unsafe {
                    let dfl: SigAction = std::mem::zeroed();
                    sigaction(sig, &dfl, std::ptr::null_mut());
                }
            }
            f if prev.sa_flags & SA_SIGINFO != 0 => {
                // SAFETY: the previous handler was installed with SA_SIGINFO,
                // so it has this signature.
                let f: extern "C" fn(c_int, *mut SigInfo, *mut c_void) =
                    unsafe { std::mem::transmute(f) };
                f(sig, info, ctx);
            }
            f => {
                // SAFETY: a plain sa_handler.
                let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(f) };
                f(sig);
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// The declarations above must match the C library's.
        #[test]
        fn layouts_match_the_c_headers() {
            let dir = std::env::temp_dir().join(format!("hp-sig-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let src = dir.join("sig.c");
            std::fs::write(
                &src,
                "#define _GNU_SOURCE\n#include <signal.h>\n#include <stddef.h>\n#include <stdio.h>\n\
                 int main(void){printf(\"%zu %zu %zu %zu %zu %zu %zu %d %d %d %d\\n\",\
                 sizeof(struct sigaction), offsetof(struct sigaction, sa_mask),\
                 offsetof(struct sigaction, sa_flags), offsetof(struct sigaction, sa_restorer),\
                 offsetof(siginfo_t, si_addr), sizeof(stack_t), offsetof(stack_t, ss_size),\
                 SIGSEGV, SA_SIGINFO, SA_ONSTACK, SS_DISABLE);return 0;}\n",
            )
            .unwrap();
            let exe = dir.join("sig");
            let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
            let st = std::process::Command::new(&cc)
                .arg(&src)
                .arg("-o")
                .arg(&exe)
                .status()
                .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
            assert!(st.success());
            let out = std::process::Command::new(&exe).output().unwrap();
            std::fs::remove_dir_all(&dir).ok();
            let c = String::from_utf8(out.stdout).unwrap();
            let rust = format!(
                "{} {} {} {} {} {} {} {} {} {} {}",
                std::mem::size_of::<SigAction>(),
                std::mem::offset_of!(SigAction, sa_mask),
                std::mem::offset_of!(SigAction, sa_flags),
                std::mem::offset_of!(SigAction, sa_restorer),
                std::mem::offset_of!(SigInfo, si_addr),
                std::mem::size_of::<StackT>(),
                std::mem::offset_of!(StackT, ss_size),
                SIGSEGV,
                SA_SIGINFO,
                SA_ONSTACK,
                SS_DISABLE
            );
            assert_eq!(c.trim(), rust);
        }
    }
}

#[cfg(not(all(
    target_os = "linux",
    target_env = "gnu",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
mod imp {
    pub(crate) struct ThreadGuard;
    pub(super) fn install() {}
    pub(super) fn enter(_guard: (usize, usize), _name: &str) -> ThreadGuard {
        ThreadGuard
    }
}

pub(crate) use imp::ThreadGuard;

/// Install the process-wide SIGSEGV handler (once).
pub(crate) fn install() {
    imp::install()
}

/// Mark the calling thread as running on a libhp stack whose guard is
/// `[guard.0, guard.1)`; until the returned value is dropped, a fault in
/// the guard is reported as a stack overflow of thread `name`.
pub(crate) fn enter(guard: (usize, usize), name: &str) -> ThreadGuard {
    imp::enter(guard, name)
}
