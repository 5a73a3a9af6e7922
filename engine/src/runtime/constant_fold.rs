//! Folding a model's constant subgraphs by running them, before ONNX Runtime optimises it.
//!
//! ONNX Runtime folds constants itself, but it keeps every folded intermediate as an
//! initializer until the pass ends. A graph exported with a long constant chain — HTDemucs from
//! demucs-onnx computes its ISTFT's window envelope with 680 `ScatterND` steps, each a new
//! 1.4 MB vector — then needs 4.4 GB at session creation for a 314 MB model (5.5 GB peak for a
//! first separation where every later one needs 1.9 GB). So, before the real build:
//!
//! 1. ONNX Runtime optimises the graph at the basic level with constant folding limited to
//!    outputs of [`SMALL_FOLD_BYTES`]: shapes become constants (it knows them), the large
//!    constants stay as nodes, and the graph is written out (to a file in the temporary folder,
//!    read back and removed: ONNX Runtime saves optimised graphs to files only);
//! 2. [`fold_plan::plan`] finds the nodes whose inputs are all constants, and a small model of
//!    them runs once, as any model runs: ONNX Runtime frees each intermediate after its last
//!    reader, so the chain costs what one step holds;
//! 3. the graph gets their values as initializers ([`fold_plan::FoldPlan::rewrite`]) and is built
//!    as before. The kernels that compute the values are the ones ONNX Runtime's folding runs, so
//!    the model computes the same numbers.
//!
//! Any failure on the way leaves the model as it was (the build then folds it the old way).

use std::borrow::Cow;
use std::path::PathBuf;

use ort::ep;
use ort::logging::LogLevel;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::{Session, SessionInputValue};
use ort::value::{DynValue, TensorElementType, ValueType};

use super::fold_plan::{self, FoldedTensor};
use super::library::runtime;
use stemflow_onnx::field::data_type;

/// Outputs up to this size are folded by ONNX Runtime in step 1 (shapes, indices, small
/// tables); larger ones are computed in step 2.
pub const SMALL_FOLD_BYTES: usize = 64 * 1024;

/// The session option that limits ONNX Runtime's constant folding. A runtime that does not know
/// it folds everything in step 1, as it always did, and leaves nothing for step 2.
const MAX_FOLD_OUTPUT_KEY: &str = "optimization.constant_folding_max_output_size_in_bytes";

/// What [`fold_constants`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoldReport {
    /// Nodes computed ahead and replaced by their values.
    pub num_folded: usize,
    /// Values the rest of the graph reads from them.
    pub num_values: usize,
}

/// The session option that keeps ONNX Runtime from repacking the weights of its matrix products
/// for its kernels when the session is created: wasted on a session that only writes its graph
/// out (HTDemucs: ~0.4 s). The saved graph is the same (packed weights are not saved).
pub const DISABLE_PREPACKING_KEY: &str = "session.disable_prepacking";

/// What [`fold`] made of a model.
pub enum FoldOutcome {
    /// The model with its constant subgraphs computed and in place.
    Folded(Vec<u8>),
    /// The model has no constant subgraph to compute: it is used as it is.
    NothingToFold,
    /// Folding failed (logged): the model is used as it is, and ONNX Runtime folds it.
    Failed,
}

/// Computes `model`'s constant subgraphs and puts their values in place (see the module docs),
/// logging what it did. Requires a loaded runtime. Not realtime-safe.
pub fn fold(model: &[u8], intra_threads: usize) -> FoldOutcome {
    match try_fold(model, intra_threads) {
        Ok(Some((folded, report))) => {
            log::debug!(
                "folded {} constant nodes into {} values before optimising",
                report.num_folded,
                report.num_values
            );
            FoldOutcome::Folded(folded)
        }
        Ok(None) => FoldOutcome::NothingToFold,
        Err(reason) => {
            log::info!("constants left to ONNX Runtime's folding: {reason}");
            FoldOutcome::Failed
        }
    }
}

/// `model` with its constant subgraphs computed and in place ([`fold`]), or the model unchanged
/// when there is nothing to fold or folding failed. Requires a loaded runtime. Not
/// realtime-safe.
pub fn fold_constants(model: &[u8], intra_threads: usize) -> Cow<'_, [u8]> {
    match fold(model, intra_threads) {
        FoldOutcome::Folded(folded) => Cow::Owned(folded),
        FoldOutcome::NothingToFold | FoldOutcome::Failed => Cow::Borrowed(model),
    }
}

/// The folded model and what was folded; `None` when nothing was.
pub fn try_fold(
    model: &[u8],
    intra_threads: usize,
) -> Result<Option<(Vec<u8>, FoldReport)>, String> {
    let basic = optimise_basic(model)?;
    let Some(plan) = fold_plan::plan(&basic)? else {
        return Ok(None);
    };
    let values = run_constants(&plan.sub_model, &plan.outputs, intra_threads)?;
    let folded = plan.rewrite(&basic, &values)?;
    Ok(Some((
        folded,
        FoldReport {
            num_folded: plan.num_folded,
            num_values: plan.outputs.len(),
        },
    )))
}

/// Step 1: the model as ONNX Runtime's basic optimisations leave it, folding only small outputs.
fn optimise_basic(model: &[u8]) -> Result<Vec<u8>, String> {
    let path = scratch_path();
    let built = guarded(|| {
        Session::builder(runtime().map_err(|e| e.to_string())?.environment())
            .map_err(text)?
            .with_optimization_level(GraphOptimizationLevel::Level1)
            .map_err(text)?
            // One warning per node left unfolded otherwise (thousands), with `ORT_LOG=warning`.
            .with_log_level(LogLevel::Error)
            .map_err(text)?
            .with_config_entry(MAX_FOLD_OUTPUT_KEY, SMALL_FOLD_BYTES.to_string())
            .map_err(text)?
            // The session only writes the graph out, it never runs (see `DISABLE_PREPACKING_KEY`).
            .with_config_entry(DISABLE_PREPACKING_KEY, "1")
            .map_err(text)?
            .with_optimized_model_path(&path)
            .map_err(text)?
            .with_execution_providers([ep::CPU::default().build()])
            .map_err(text)?
            .commit_from_memory(model)
            .map_err(|e| e.to_string())
    });
    let read = built.and_then(|session| {
        drop(session);
        std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))
    });
    let _ = std::fs::remove_file(&path);
    read
}

/// Step 2: runs the constant part and returns its outputs' values, in `outputs`' order.
fn run_constants(
    sub_model: &[u8],
    outputs: &[String],
    intra_threads: usize,
) -> Result<Vec<FoldedTensor>, String> {
    guarded(|| {
        let mut session = Session::builder(runtime().map_err(|e| e.to_string())?.environment())
            .map_err(text)?
            .with_optimization_level(GraphOptimizationLevel::Disable)
            .map_err(text)?
            .with_intra_threads(intra_threads)
            .map_err(text)?
            .with_memory_pattern(false)
            .map_err(text)?
            .with_execution_providers([ep::CPU::default().build()])
            .map_err(text)?
            .commit_from_memory(sub_model)
            .map_err(|e| e.to_string())?;
        let no_inputs: [SessionInputValue<'_>; 0] = [];
        let values = session.run(no_inputs).map_err(|e| e.to_string())?;
        outputs
            .iter()
            .map(|name| {
                let value = values
                    .get(name)
                    .ok_or_else(|| format!("the constant {name} was not computed"))?;
                folded_tensor(value).map_err(|reason| format!("{name}: {reason}"))
            })
            .collect()
    })
}

/// A computed value as an initializer's parts.
fn folded_tensor(value: &DynValue) -> Result<FoldedTensor, String> {
    let ValueType::Tensor { ty, .. } = value.dtype() else {
        return Err("not a tensor".into());
    };
    macro_rules! raw {
        ($t:ty, $onnx:expr) => {{
            let (shape, data) = value
                .try_extract_tensor::<$t>()
                .map_err(|e| e.to_string())?;
            let raw = data.iter().flat_map(|v| v.to_le_bytes()).collect();
            (shape.to_vec(), $onnx, raw)
        }};
    }
    let (dims, data_type, raw): (Vec<i64>, i64, Vec<u8>) = match ty {
        TensorElementType::Float32 => raw!(f32, data_type::FLOAT),
        TensorElementType::Uint8 => raw!(u8, data_type::UINT8),
        TensorElementType::Int8 => raw!(i8, data_type::INT8),
        TensorElementType::Uint16 => raw!(u16, data_type::UINT16),
        TensorElementType::Int16 => raw!(i16, data_type::INT16),
        TensorElementType::Int32 => raw!(i32, data_type::INT32),
        TensorElementType::Int64 => raw!(i64, data_type::INT64),
        TensorElementType::Bool => {
            let (shape, data) = value
                .try_extract_tensor::<bool>()
                .map_err(|e| e.to_string())?;
            (
                shape.to_vec(),
                data_type::BOOL,
                data.iter().map(|&b| u8::from(b)).collect(),
            )
        }
        TensorElementType::Float64 => raw!(f64, data_type::DOUBLE),
        TensorElementType::Uint32 => raw!(u32, data_type::UINT32),
        TensorElementType::Uint64 => raw!(u64, data_type::UINT64),
        TensorElementType::Float16 => raw!(half::f16, data_type::FLOAT16),
        TensorElementType::Bfloat16 => raw!(half::bf16, data_type::BFLOAT16),
        other => return Err(format!("values of type {other:?} are not folded here")),
    };
    let dims = dims
        .into_iter()
        .map(|d| usize::try_from(d).map_err(|_| format!("a folded value has dimension {d}")))
        .collect::<Result<Vec<usize>, String>>()?;
    Ok(FoldedTensor {
        dims,
        data_type,
        raw,
    })
}

/// An ONNX Runtime error in words.
fn text<R>(error: ort::Error<R>) -> String {
    error.to_string()
}

/// Runs `f`, turning a panic inside ONNX Runtime's bindings into an error.
fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err("ONNX Runtime panicked".into()))
}

/// A file for step 1's graph, unique to this process and call.
fn scratch_path() -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    std::env::temp_dir().join(format!(
        "stemflow-fold-{}-{}.onnx",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}
