//! Which of a model's graphs runs on which device ([`crate::runtime::graph_files`]): the GPU
//! graph on a GPU, the CPU graph on the CPU; loading the one for a device, and building the
//! other one's session and description on a helper thread when the device changes, so that the
//! separator swaps graph and codec together at a hop boundary.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::description::ModelDescription;
use super::recognise::describe_model;
use crate::model_error::ModelError;
use crate::runtime::device_id::DeviceId;
use crate::runtime::devices::{candidates_for, devices, DeviceChoice};
use crate::runtime::graph_files::{graph_for, GraphChoice};
use crate::runtime::model_file::{read_model_file, ModelSource};
use crate::runtime::runner::ModelRunner;
use crate::runtime::session::{discard_spare_session, AcquiredSession, Precision};

/// A graph loaded for a device: its file, description and running session.
pub(super) struct LoadedGraph {
    pub graph: GraphChoice,
    pub description: ModelDescription,
    pub runner: ModelRunner,
    pub name: String,
}

/// A graph made ready on a helper thread, for [`ModelRunner::replace_graph`].
pub(super) struct ReadyGraph {
    pub graph: GraphChoice,
    pub description: ModelDescription,
    pub session: AcquiredSession,
    pub source: ModelSource,
    /// Why the GPU graph was given up for the CPU graph, when it was.
    pub fallback: Option<String>,
}

/// The device `choice` tries first.
fn preferred_device(choice: DeviceChoice) -> DeviceId {
    candidates_for(choice, devices())
        .first()
        .copied()
        .unwrap_or(DeviceId::CPU)
}

/// The graph of `model` that `choice` runs at `precision`.
pub(super) fn graph_for_choice(
    model: &Path,
    choice: DeviceChoice,
    precision: Precision,
) -> GraphChoice {
    graph_for(model, preferred_device(choice), precision)
}

/// Loads the graph of `model` for `choice` at `precision`: the GPU graph when `choice` leads to
/// a GPU and one lies beside the model. A GPU graph whose device fails is replaced by the CPU
/// graph (the fallback's reason kept). Not realtime-safe.
pub(super) fn load_graph(
    model: &Path,
    choice: DeviceChoice,
    precision: Precision,
) -> Result<LoadedGraph, ModelError> {
    let graph = graph_for_choice(model, choice, precision);
    let mut loaded = load_exact(&graph, choice)?;
    let active = loaded.runner.active_device();
    if graph.gpu_precision.is_some() && active.actual == DeviceId::CPU {
        let cpu_graph = graph_for(model, DeviceId::CPU, precision);
        if cpu_graph.path != graph.path {
            let mut cpu = load_exact(&cpu_graph, DeviceChoice::Device(DeviceId::CPU))?;
            cpu.runner.record_fallback(choice, active.fallback_reason);
            loaded = cpu;
        }
    }
    warn_without_gpu_graph(
        &loaded.graph,
        &loaded.description,
        loaded.runner.active_device().actual,
    );
    Ok(loaded)
}

/// Loads exactly `graph` on `choice`. Not realtime-safe.
pub(super) fn load_exact(
    graph: &GraphChoice,
    choice: DeviceChoice,
) -> Result<LoadedGraph, ModelError> {
    let model = Arc::new(read_model_file(&graph.path)?);
    let loaded = describe_model(&graph.path, &model).and_then(|description| {
        let runner = ModelRunner::new(model.clone(), choice, description.io.clone())?;
        Ok((description, runner))
    });
    // The runner took the session built to read the signature, if it runs on the CPU.
    discard_spare_session();
    let (description, runner) = loaded?;
    Ok(LoadedGraph {
        graph: graph.clone(),
        description,
        runner,
        name: model.name.clone(),
    })
}

/// Builds the session and description of `graph` on `choice` (the CPU graph instead when the
/// GPU fails and `cpu_graph` differs). Runs on a helper thread. Not realtime-safe.
pub(super) fn prepare_graph(
    graph: GraphChoice,
    cpu_graph: PathBuf,
    choice: DeviceChoice,
) -> Result<ReadyGraph, ModelError> {
    let ready = prepare_exact(graph.clone(), choice)?;
    if graph.gpu_precision.is_none() || ready.session.device() != DeviceId::CPU {
        return Ok(ready);
    }
    if cpu_graph == graph.path {
        return Ok(ready);
    }
    let reason = ready.session.fallback_reason();
    let cpu = GraphChoice {
        path: cpu_graph,
        gpu_precision: None,
    };
    Ok(ReadyGraph {
        fallback: reason,
        ..prepare_exact(cpu, DeviceChoice::Device(DeviceId::CPU))?
    })
}

fn prepare_exact(graph: GraphChoice, choice: DeviceChoice) -> Result<ReadyGraph, ModelError> {
    let model = Arc::new(read_model_file(&graph.path)?);
    let description = describe_model(&graph.path, &model);
    discard_spare_session();
    let description = description?;
    let session = ModelRunner::acquire(&model, choice, &description.io)?;
    Ok(ReadyGraph {
        source: ModelSource::of(&model),
        graph,
        description,
        session,
        fallback: None,
    })
}

/// Says so when a model Stemflow can make a GPU graph for runs its CPU graph on a GPU (it was
/// installed before Stemflow wrote them), and how to get one.
fn warn_without_gpu_graph(graph: &GraphChoice, description: &ModelDescription, device: DeviceId) {
    if graph.gpu_precision.is_some() || device == DeviceId::CPU {
        return;
    }
    let name = graph
        .path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    log::warn!(
        "{name} has no graph made for GPUs beside it ({name}.gpu.onnx; models installed before \
         Stemflow wrote them have none), so {device} runs its CPU graph ({} family), slower: \
         `stemflow models get {name} --force` (a model from the catalogue) or `stemflow models \
         import` of its checkpoint again writes it",
        description.family
    );
}
