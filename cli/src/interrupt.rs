//! Ctrl-C (SIGINT) and SIGTERM: the run stops at the next block, removes what it had not
//! finished (partial stem files, a stem folder it created) and exits with 128 + the signal's
//! number (130, 143), as shells expect. Finished stems stay.

use std::sync::atomic::{AtomicI32, Ordering};

/// The signal received, 0 for none.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

#[cfg(unix)]
extern "C" fn on_signal(signal: libc::c_int) {
    // Async-signal-safe: one atomic store.
    SIGNAL.store(signal, Ordering::SeqCst);
}

/// Installs the handlers (Unix; elsewhere the system's default applies). A file-size limit
/// (SIGXFSZ) is ignored so that it fails the write like a full disk, with a message.
pub fn install() {
    #[cfg(unix)]
    // SAFETY: ignoring a signal installs no code.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    #[cfg(unix)]
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `on_signal` only stores into an atomic, which is async-signal-safe; the
        // handler stays valid for the whole process.
        unsafe {
            libc::signal(signal, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// The signal that asks the run to stop, if one arrived.
pub fn received() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        signal => Some(signal),
    }
}

/// The exit status for a run stopped by `signal`: 128 + its number.
pub fn exit_status(signal: i32) -> u8 {
    (128 + signal).clamp(0, 255) as u8
}

/// The signal's name for messages.
pub fn name(signal: i32) -> &'static str {
    #[cfg(unix)]
    match signal {
        libc::SIGINT => return "interrupted (Ctrl-C)",
        libc::SIGTERM => return "terminated (SIGTERM)",
        _ => {}
    }
    let _ = signal;
    "stopped by a signal"
}
