//! Building one ONNX Runtime session on one device, with the provider registered so that a
//! failure is an error rather than a silent CPU fallback.

use std::sync::atomic::{AtomicU8, Ordering};

use ort::session::Session;

use super::device_id::DeviceId;
use super::runtime;

/// Overrides the number of threads one inference uses.
pub const INTRA_THREADS_ENV: &str = "STEMFLOW_INTRA_THREADS";

/// Who the process is, for how many cores inference may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadBudget {
    /// Inside a DAW: every core but one, which is left to the host (the default).
    Plugin,
    /// A command-line run that owns the machine: every core.
    AllCores,
}

/// The process-wide budget, set once by the CLI (0: plugin, 1: all cores).
static THREAD_BUDGET: AtomicU8 = AtomicU8::new(0);

/// Sets the process-wide thread budget (the CLI uses every core). Call before building sessions.
pub fn set_thread_budget(budget: ThreadBudget) {
    THREAD_BUDGET.store(
        match budget {
            ThreadBudget::Plugin => 0,
            ThreadBudget::AllCores => 1,
        },
        Ordering::Relaxed,
    );
}

/// The process-wide budget (see [`set_thread_budget`]).
pub fn thread_budget() -> ThreadBudget {
    if THREAD_BUDGET.load(Ordering::Relaxed) == 1 {
        ThreadBudget::AllCores
    } else {
        ThreadBudget::Plugin
    }
}

/// Threads per inference and, when `STEMFLOW_INTRA_THREADS` could not be used as given, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntraThreads {
    /// Threads one inference uses.
    pub count: usize,
    /// A note for the user when the setting was capped or ignored.
    pub note: Option<String>,
}

/// Threads per inference: `STEMFLOW_INTRA_THREADS` (capped at the cores present), else the
/// [`ThreadBudget`]'s share of the cores.
pub fn intra_threads() -> IntraThreads {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let budget = match thread_budget() {
        ThreadBudget::AllCores => cores,
        ThreadBudget::Plugin => cores.saturating_sub(1).max(1),
    };
    match std::env::var(INTRA_THREADS_ENV) {
        Err(_) => IntraThreads {
            count: budget,
            note: None,
        },
        Ok(value) => match value.trim().parse::<usize>() {
            Ok(n) if n > 0 && n <= cores => IntraThreads {
                count: n,
                note: None,
            },
            Ok(n) if n > cores => IntraThreads {
                count: cores,
                note: Some(format!(
                    "{INTRA_THREADS_ENV}={n} is more than the {cores} cores here; using {cores}"
                )),
            },
            _ => IntraThreads {
                count: budget,
                note: Some(format!(
                    "{INTRA_THREADS_ENV}={value:?} is not a number of threads (1 or more); using {budget}"
                )),
            },
        },
    }
}

/// Threads per inference (see [`intra_threads`]).
pub fn default_intra_threads() -> usize {
    intra_threads().count
}

/// Builds a session of `model_bytes` on `device`, with the provider registered so that failure is
/// an error. Requires a loaded runtime. Not realtime-safe.
pub fn build_session(
    device: DeviceId,
    model_bytes: &[u8],
    intra_threads: usize,
) -> Result<Session, String> {
    let runtime = runtime().map_err(|e| e.to_string())?;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut builder = Session::builder(runtime.environment())
            .map_err(|e| e.to_string())?
            .with_intra_threads(intra_threads)
            .map_err(|e| e.to_string())?;
        if let Some(provider) = device.execution_provider() {
            builder = builder
                .with_execution_providers([provider])
                .map_err(|e| e.to_string())?;
        }
        builder
            .commit_from_memory(model_bytes)
            .map_err(|e| e.to_string())
    }));
    result.unwrap_or_else(|_| {
        Err(format!(
            "ONNX Runtime panicked while creating a session on {device}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thread_setting_is_capped_at_the_cores_and_says_so() {
        // One test touches the variable, so parallel tests do not race on it.
        let cores = std::thread::available_parallelism().unwrap().get();
        std::env::set_var(INTRA_THREADS_ENV, "1000");
        let capped = intra_threads();
        assert_eq!(capped.count, cores);
        assert!(capped.note.unwrap().contains("1000"));
        std::env::set_var(INTRA_THREADS_ENV, "zero");
        let ignored = intra_threads();
        assert!(ignored.count >= 1);
        assert!(ignored.note.unwrap().contains("not a number"));
        std::env::set_var(INTRA_THREADS_ENV, "1");
        assert_eq!(
            intra_threads(),
            IntraThreads {
                count: 1,
                note: None
            }
        );
        std::env::remove_var(INTRA_THREADS_ENV);
        set_thread_budget(ThreadBudget::AllCores);
        assert_eq!(intra_threads().count, cores);
        set_thread_budget(ThreadBudget::Plugin);
        assert_eq!(intra_threads().count, cores.saturating_sub(1).max(1));
    }
}
