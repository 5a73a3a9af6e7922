//! Building one ONNX Runtime session on one device, with the provider registered so that a
//! failure is an error rather than a silent CPU fallback.

use ort::session::Session;

use super::device_id::DeviceId;
use super::runtime;

/// Overrides the number of threads one inference uses.
pub const INTRA_THREADS_ENV: &str = "STEMFLOW_INTRA_THREADS";

/// Threads per inference: `STEMFLOW_INTRA_THREADS`, else every core but one, which is left to
/// the DAW.
pub fn default_intra_threads() -> usize {
    if let Some(n) = std::env::var(INTRA_THREADS_ENV)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        return n;
    }
    std::thread::available_parallelism()
        .map(|n| n.get().saturating_sub(1).max(1))
        .unwrap_or(1)
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
