//! SIGINT and SIGTERM while aiac has something to clean up.
//!
//! * While an output file is being written ([`TempGuard`]), its temporary file exists beside
//!   it; a signal then removes the temporary file and exits with 128 + the signal (130 for
//!   SIGINT, 143 for SIGTERM). Outside a write the signal does what it always does (the
//!   process dies of it).
//! * `aiac sweep` ([`defer`]) only records the signal: its loop forwards it to the running
//!   child, waits for the child, and exits ([`pending`], [`exit_code`]); so does `aiac dht`
//!   while it runs its launcher jobs.
//!
//! The handler is installed the first time either is needed, for both signals, and does only
//! async-signal-safe things: atomic loads and stores, `unlink`, `_exit`, `signal`, `raise`.
//! `aiac run` and `aiac dht` install it from the start ([`take`]).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering::SeqCst};
use std::sync::Once;

/// The temporary file being written, as a C string owned by [`TempGuard`] (null: none).
static TEMP: AtomicPtr<libc::c_char> = AtomicPtr::new(null_mut());
/// `aiac sweep`: record signals instead of acting on them.
static DEFER: AtomicBool = AtomicBool::new(false);
/// The signal recorded in deferred mode (0: none).
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // DEFER and PENDING: SeqCst, single flags read and written on their own. TEMP: the
    // swap's SeqCst includes the Acquire that pairs with the Release of the swap in
    // `TempGuard::new`, so the path's bytes, written before it was published, are seen whole
    // even when the handler runs on another thread.
    if DEFER.load(SeqCst) {
        PENDING.store(sig, SeqCst);
        return;
    }
    let temp = TEMP.swap(null_mut(), SeqCst);
    if !temp.is_null() {
        // SAFETY: (1) `temp` came from `CString::into_raw` in `TempGuard::new` and is freed
        // only by the one who swaps it out of TEMP: this handler now, so it stays valid;
        // (2) unlink and _exit are async-signal-safe.
        unsafe {
            libc::unlink(temp);
            libc::_exit(128 + sig);
        }
    }
    // Nothing to clean up: die of the signal, as without this handler.
    // SAFETY: signal and raise are async-signal-safe; restoring the default action and
    // raising the same signal again ends the process with it.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: (1) a zeroed sigaction is a valid value (no flags, empty mask) that
            // is then filled in; (2) `on_signal` has the signature sa_sigaction expects
            // without SA_SIGINFO and does only async-signal-safe work; (3) SA_RESTART keeps
            // the sweep's waits and writes going after a deferred signal; (4) both signals
            // are blocked while the handler runs, so a SIGTERM during a SIGINT's unlink cannot
            // enter again, find TEMP empty and kill the process before the unlink is done.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaddset(&mut sa.sa_mask, libc::SIGINT);
                libc::sigaddset(&mut sa.sa_mask, libc::SIGTERM);
                libc::sigaction(sig, &sa, null_mut());
            }
        }
    });
}

/// While alive, a SIGINT or SIGTERM removes `path` (a temporary file) and exits 130 or 143.
pub(crate) struct TempGuard {
    armed: bool,
}

impl TempGuard {
    /// Guard `path` (call before creating it, so no moment goes unguarded).
    pub(crate) fn new(path: &Path) -> Self {
        let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
            return TempGuard { armed: false };
        };
        install();
        // SeqCst (a Release among others): pairs with the handler's swap, see `on_signal`.
        let old = TEMP.swap(c.into_raw(), SeqCst);
        // One guard at a time (writes are sequential): a guard made while another is alive
        // takes over TEMP, and the older one's drop clears it.
        free(old);
        TempGuard { armed: true }
    }
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if self.armed {
            free(TEMP.swap(null_mut(), SeqCst));
        }
    }
}

/// Free a pointer swapped out of TEMP.
fn free(p: *mut libc::c_char) {
    if !p.is_null() {
        // SAFETY: every non-null value of TEMP came from `CString::into_raw`, and whoever
        // swaps it out (here) is its only owner.
        drop(unsafe { CString::from_raw(p) });
    }
}

/// Install the handler now: SIGINT and SIGTERM end the process as described above whether or
/// not it writes a file, also when it started with SIGINT ignored (a script's background job
/// does), as they do once it has checked or written an output file.
pub(crate) fn take() {
    install();
}

/// The exit code of a command stopped by `sig`: 128 + the signal, as a shell reports a
/// process the signal ended (130 for SIGINT, 143 for SIGTERM).
pub(crate) fn exit_code(sig: i32) -> std::process::ExitCode {
    std::process::ExitCode::from(u8::try_from(128 + sig).unwrap_or(1))
}

/// `aiac sweep`: from now on SIGINT and SIGTERM are only recorded, for [`pending`].
pub(crate) fn defer() {
    DEFER.store(true, SeqCst);
    install();
}

/// The signal received since [`defer`], if any.
pub(crate) fn pending() -> Option<i32> {
    match PENDING.load(SeqCst) {
        0 => None,
        s => Some(s),
    }
}
