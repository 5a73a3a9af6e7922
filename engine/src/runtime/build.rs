//! Building one ONNX Runtime session on one device, with the provider registered so that a
//! failure is an error rather than a silent CPU fallback.

use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

use ort::ep;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;

use super::constant_fold::{fold, fold_constants, FoldOutcome, DISABLE_PREPACKING_KEY};
use super::device_id::{DeviceId, Provider};
use super::gpu_tuning::GpuTuning;
use super::graph_cache::{partial_path, CacheEntry};
use super::library::runtime;

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
/// an error. `cache`: this model's entry in the graph cache (`graph_cache::cache_entry`:
/// the optimised graph on the CPU, the folded graph elsewhere), used when present and written
/// when not; a cache that cannot be used (a full disk, a refused entry) costs only the time,
/// never the session. Requires a loaded runtime. Not realtime-safe.
///
/// A graph built from `model_bytes` (not from the cache) has its constant subgraphs computed
/// first (`fold_constants`): ONNX Runtime's own folding can need several times the model's
/// size while the session is created.
///
/// On a GPU the provider is set up as [`GpuTuning::current`] says (TF32, cuDNN's search, graph
/// capture). Every session runs with ONNX Runtime's CPU memory arena and without memory
/// patterns. The arena keeps the blocks of one run for the next (without it, a model's large activations are mapped
/// and faulted in afresh at every run: MDX-Net 2.7 M page faults and 20 % of its time on a 30 s
/// song, HTDemucs 15 %) and costs no more memory than a run's peak; memory patterns are what made
/// a session keep the peak of every run reserved (HTDemucs: 7.4 GB instead of 1.9 GB).
pub fn build_session(
    device: DeviceId,
    model_bytes: &[u8],
    intra_threads: usize,
    cache: Option<&CacheEntry>,
) -> Result<Session, String> {
    let tuning = match device {
        DeviceId::CPU => GpuTuning::default(),
        _ => GpuTuning::current(),
    };
    build_session_with(device, model_bytes, intra_threads, cache, &tuning)
}

/// [`build_session`] with the GPU set-up given (sessions shared between instances are keyed by
/// it). Not realtime-safe.
pub fn build_session_with(
    device: DeviceId,
    model_bytes: &[u8],
    intra_threads: usize,
    cache: Option<&CacheEntry>,
    tuning: &GpuTuning,
) -> Result<Session, String> {
    let target = Target {
        device,
        intra_threads,
        tuning,
    };
    match cache {
        Some(CacheEntry::Optimised(entry)) => {
            match session_through_cache(target, model_bytes, entry) {
                Ok(session) => return Ok(session),
                Err(CacheFailure::Model(reason)) => return Err(reason),
                Err(CacheFailure::Cache(reason)) => {
                    log::warn!("the optimised-graph cache was not used: {reason}")
                }
            }
        }
        Some(CacheEntry::Folded(entry)) => {
            return session_through_folded_entry(target, model_bytes, entry)
        }
        None => {}
    }
    let model_bytes = fold_constants(model_bytes, intra_threads);
    commit(
        target,
        GraphOptimizationLevel::Level3,
        GraphSource::Bytes(&model_bytes),
        None,
    )
}

/// Where and how a session runs: device, threads, GPU set-up.
#[derive(Clone, Copy)]
struct Target<'a> {
    device: DeviceId,
    intra_threads: usize,
    tuning: &'a GpuTuning,
}

/// Why a session did not come through the cache.
enum CacheFailure {
    /// ONNX Runtime refused the model itself (an uncached build would fail the same way).
    Model(String),
    /// The cache could not be written or read; an uncached build may still succeed.
    Cache(String),
}

/// Loads the cached graph at `entry`, writing it first when it is missing.
fn session_through_cache(
    target: Target<'_>,
    model_bytes: &[u8],
    entry: &Path,
) -> Result<Session, CacheFailure> {
    if !entry.is_file() {
        let io = |e: std::io::Error| CacheFailure::Cache(format!("{}: {e}", entry.display()));
        if let Some(dir) = entry.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let partial = partial_path(entry);
        let model_bytes = fold_constants(model_bytes, target.intra_threads);
        let written = commit(
            target,
            GraphOptimizationLevel::Level2,
            GraphSource::Bytes(&model_bytes),
            Some(&partial),
        );
        let renamed = match written {
            Ok(session) => {
                drop(session);
                std::fs::rename(&partial, entry).map_err(io)
            }
            Err(reason) => {
                let _ = std::fs::remove_file(&partial);
                // ONNX Runtime fails the whole session when it cannot write the optimised graph
                // (a full disk): build it without the cache. If that fails too, the model itself
                // was refused.
                return match commit(
                    target,
                    GraphOptimizationLevel::Level3,
                    GraphSource::Bytes(&model_bytes),
                    None,
                ) {
                    Ok(session) => {
                        log::warn!("the optimised graph was not cached: {reason}");
                        Ok(session)
                    }
                    Err(reason) => Err(CacheFailure::Model(reason)),
                };
            }
        };
        drop(model_bytes);
        if let Err(failure) = renamed {
            let _ = std::fs::remove_file(&partial);
            return Err(failure);
        }
    }
    commit(
        target,
        GraphOptimizationLevel::Level3,
        GraphSource::File(entry),
        None,
    )
    .map_err(|reason| {
        let _ = std::fs::remove_file(entry);
        CacheFailure::Cache(format!(
            "{} was refused ({reason}); removed, it is rebuilt at the next start",
            entry.display()
        ))
    })
}

/// Builds the session from the folded graph at `entry` (see [`super::graph_cache`]), folding
/// the model and writing the entry first when it is missing. An entry the session cannot be
/// built from is replaced when the model, folded afresh, builds (else the device or the model is
/// what failed, and the entry stays).
fn session_through_folded_entry(
    target: Target<'_>,
    model_bytes: &[u8],
    entry: &Path,
) -> Result<Session, String> {
    let level = GraphOptimizationLevel::Level3;
    let cached = match std::fs::read(entry) {
        Ok(bytes) => Some(bytes),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => {
            log::warn!(
                "the folded-graph cache was not used: {}: {error}",
                entry.display()
            );
            None
        }
    };
    let mut refusal = None;
    if let Some(bytes) = &cached {
        // Empty: the model has nothing to fold.
        let graph = if bytes.is_empty() { model_bytes } else { bytes };
        match commit(target, level, GraphSource::Bytes(graph), None) {
            Ok(session) => return Ok(session),
            Err(reason) => refusal = Some(reason),
        }
    }
    let folded = fold(model_bytes, target.intra_threads);
    let graph = match &folded {
        FoldOutcome::Folded(bytes) => bytes.as_slice(),
        FoldOutcome::NothingToFold | FoldOutcome::Failed => model_bytes,
    };
    let session = commit(target, level, GraphSource::Bytes(graph), None)?;
    let contents = match &folded {
        FoldOutcome::Folded(bytes) => bytes.as_slice(),
        FoldOutcome::NothingToFold => &[],
        FoldOutcome::Failed => {
            // Folding may work next time; an entry the model's own bytes build without is bad.
            if refusal.is_some() {
                let _ = std::fs::remove_file(entry);
            }
            return Ok(session);
        }
    };
    if let Some(reason) = refusal {
        log::warn!(
            "{} was refused ({reason}); replaced by the model folded afresh",
            entry.display()
        );
    }
    if let Err(reason) = write_entry(entry, contents) {
        log::warn!("the folded graph was not cached: {reason}");
    }
    Ok(session)
}

/// Writes a cache entry under a temporary name and renames it into place.
fn write_entry(entry: &Path, contents: &[u8]) -> Result<(), String> {
    let io = |e: std::io::Error| format!("{}: {e}", entry.display());
    if let Some(dir) = entry.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let partial = partial_path(entry);
    let written =
        std::fs::write(&partial, contents).and_then(|()| std::fs::rename(&partial, entry));
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written.map_err(io)
}

/// ONNX Runtime's session option that turns DirectML's graph fusion off.
const DML_DISABLE_GRAPH_FUSION_KEY: &str = "ep.dml.disable_graph_fusion";

/// Where a session's graph comes from.
#[derive(Clone, Copy)]
enum GraphSource<'a> {
    Bytes(&'a [u8]),
    File(&'a Path),
}

/// Creates one session; `save_to` makes ONNX Runtime write the graph as optimised to `level`
/// (such a session is only for that: its weights are not prepacked for running).
fn commit(
    target: Target<'_>,
    level: GraphOptimizationLevel,
    source: GraphSource<'_>,
    save_to: Option<&Path>,
) -> Result<Session, String> {
    let device = target.device;
    let first = commit_once(target, level, source, save_to, false);
    match first {
        Err(reason) if device.provider == Provider::DirectMl => {
            // DirectML compiles each partition it takes into one DirectML graph; where that
            // fails (seen with Wine's Direct3D 12: `DmlGraphFusionHelper` … invalid parameter),
            // the operators may still run one by one, which beats the CPU.
            match commit_once(target, level, source, save_to, true) {
                Ok(session) => {
                    log::warn!(
                        "{device}: running without DirectML's graph fusion, which failed: {reason}"
                    );
                    Ok(session)
                }
                Err(again) => Err(format!(
                    "{} (and without DirectML's graph fusion: {})",
                    reason.trim_end(),
                    again.trim_end()
                )),
            }
        }
        result => result,
    }
}

/// [`commit`], once; `is_dml_fusion_off` turns DirectML's graph fusion off.
fn commit_once(
    target: Target<'_>,
    level: GraphOptimizationLevel,
    source: GraphSource<'_>,
    save_to: Option<&Path>,
    is_dml_fusion_off: bool,
) -> Result<Session, String> {
    let Target {
        device,
        intra_threads,
        tuning,
    } = target;
    let runtime = runtime().map_err(|e| e.to_string())?;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut builder = Session::builder(runtime.environment())
            .map_err(|e| e.to_string())?
            .with_intra_threads(intra_threads)
            .map_err(|e| e.to_string())?
            .with_optimization_level(level)
            .map_err(|e| e.to_string())?
            .with_memory_pattern(false)
            .map_err(|e| e.to_string())?;
        if let Some(path) = save_to {
            // A session that saves its graph is built for that alone (dropped unrun).
            builder = builder
                .with_optimized_model_path(path)
                .map_err(|e| e.to_string())?
                .with_config_entry(DISABLE_PREPACKING_KEY, "1")
                .map_err(|e| e.to_string())?;
        }
        if is_dml_fusion_off {
            builder = builder
                .with_config_entry(DML_DISABLE_GRAPH_FUSION_KEY, "1")
                .map_err(|e| e.to_string())?;
        }
        for (key, value) in tuning.session_config(device) {
            builder = builder
                .with_config_entry(key, value)
                .map_err(|e| e.to_string())?;
        }
        let cpu = ep::CPU::default().with_arena_allocator(true).build();
        let providers = match tuning.execution_provider(device) {
            Some(provider) => vec![provider, cpu],
            None => vec![cpu],
        };
        builder = builder
            .with_execution_providers(providers)
            .map_err(|e| e.to_string())?;
        match source {
            GraphSource::Bytes(bytes) => builder.commit_from_memory(bytes),
            GraphSource::File(path) => builder.commit_from_file(path),
        }
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
