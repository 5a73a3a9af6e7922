//! Cancelling a conversion from another thread: [`cancellable`] runs a conversion with a cancel
//! flag that the conversion looks at between steps (each checkpoint read, each tensor taken
//! from a checkpoint's state), failing with [`ConvertError::Cancelled`] once it is set. A
//! plugin instance destroyed while it converts a download (tens of seconds for a demucs bag)
//! stops within one step instead of running on after the host unloaded it.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::ConvertError;

thread_local! {
    /// The flag of the innermost [`cancellable`] on this thread (null: none).
    static CANCEL: Cell<*const AtomicBool> = const { Cell::new(std::ptr::null()) };
}

/// Runs `convert` on this thread, cancelled (at its next step) once `cancel` is set. Not
/// realtime-safe, as the conversions it runs.
pub fn cancellable<R>(cancel: &AtomicBool, convert: impl FnOnce() -> R) -> R {
    /// Puts the previous flag back however `convert` ends (unwinding included), so the pointer
    /// never outlives the borrow it came from.
    struct Restore(*const AtomicBool);
    impl Drop for Restore {
        fn drop(&mut self) {
            CANCEL.with(|flag| flag.set(self.0));
        }
    }
    let _restore = Restore(CANCEL.with(|flag| flag.replace(cancel)));
    convert()
}

/// Fails with [`ConvertError::Cancelled`] when the [`cancellable`] this runs in was cancelled.
/// Realtime-safe.
pub(crate) fn check() -> Result<(), ConvertError> {
    let flag = CANCEL.with(Cell::get);
    // SAFETY: a non-null pointer was set by `cancellable` from a borrow that lives until that
    // call returns, and `Restore` takes it out again before then, on this thread.
    let is_cancelled = !flag.is_null() && unsafe { &*flag }.load(Ordering::Relaxed);
    if is_cancelled {
        Err(ConvertError::Cancelled)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_fails_only_inside_a_cancelled_run_on_its_thread() {
        assert_eq!(check(), Ok(()), "outside any run");
        let cancel = AtomicBool::new(false);
        cancellable(&cancel, || {
            assert_eq!(check(), Ok(()));
            cancel.store(true, Ordering::Relaxed);
            assert_eq!(check(), Err(ConvertError::Cancelled));
            let other = AtomicBool::new(false);
            cancellable(&other, || {
                assert_eq!(check(), Ok(()), "the inner run's flag")
            });
            assert_eq!(
                check(),
                Err(ConvertError::Cancelled),
                "the outer one's again"
            );
            std::thread::scope(|s| {
                s.spawn(|| assert_eq!(check(), Ok(()), "another thread"));
            });
        });
        assert_eq!(check(), Ok(()), "after the run");
    }

    #[test]
    fn a_cancelled_conversion_stops_with_cancelled() {
        // A small HTDemucs saved by demucs itself (tests/fixtures/htdemucs/README.md).
        let small = crate::testing::fixture("htdemucs/small.th");
        let convert = || crate::htdemucs::demucs_to_onnx(&[small.as_slice()], None);
        let cancel = AtomicBool::new(true);
        assert_eq!(
            cancellable(&cancel, convert).err(),
            Some(ConvertError::Cancelled)
        );
        assert!(cancellable(&AtomicBool::new(false), convert).is_ok());
    }
}
