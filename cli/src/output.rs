//! Writing to standard output and error without ever panicking: a closed pipe
//! (`stemflow models | head -1`) is a normal end of the output, and any other failure
//! (`> /dev/full`) is remembered so the command can say so and exit 1 — after the real work
//! (stems on disk) is done.

use std::io::Write;
use std::sync::Mutex;

/// The first standard-output error that was not a closed pipe.
static STDOUT_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// Writes formatted text to standard output. Not realtime-safe.
pub fn print(args: std::fmt::Arguments<'_>) {
    let result = std::io::stdout().lock().write_fmt(args);
    if let Err(error) = result {
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            let mut slot = STDOUT_ERROR.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert_with(|| error.to_string());
        }
    }
}

/// Writes formatted text to standard error, ignoring failures (there is nowhere left to report
/// them). Not realtime-safe.
pub fn eprint(args: std::fmt::Arguments<'_>) {
    let _ = std::io::stderr().lock().write_fmt(args);
}

/// Flushes standard output (a closed pipe or a failure is remembered as [`print`] does).
pub fn flush() {
    if let Err(error) = std::io::stdout().lock().flush() {
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            let mut slot = STDOUT_ERROR.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert_with(|| error.to_string());
        }
    }
}

/// Flushes standard output and returns the first failure to write it, if any (a closed pipe is
/// not one).
pub fn stdout_error() -> Option<String> {
    if let Err(error) = std::io::stdout().lock().flush() {
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            let mut slot = STDOUT_ERROR.lock().unwrap_or_else(|e| e.into_inner());
            slot.get_or_insert_with(|| error.to_string());
        }
    }
    STDOUT_ERROR
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// `println!` that never panics (see [`print`]).
macro_rules! say {
    () => {
        $crate::output::print(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::print(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that never panics (see [`eprint`]).
macro_rules! say_err {
    ($($arg:tt)*) => {
        $crate::output::eprint(format_args!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use say;
pub(crate) use say_err;
