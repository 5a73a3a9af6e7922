//! Running a session on host tensors (the CPU's way, and GPUs' without I/O binding): inputs
//! handed to ONNX Runtime as tensors, outputs read where ONNX Runtime left them.

use ort::session::Session;
use ort::value::Tensor;

use super::graph_io::GraphIo;

/// Runs `session` on one input tensor and returns its output flattened.
pub fn run_graph(
    session: &mut Session,
    input_name: &str,
    output_name: &str,
    shape: &[usize],
    input: &[f32],
) -> Result<Vec<f32>, String> {
    let tensor = Tensor::from_array((shape.to_vec(), input.to_vec())).map_err(|e| e.to_string())?;
    let outputs = session
        .run(ort::inputs![input_name => tensor])
        .map_err(|e| e.to_string())?;
    let output = outputs
        .get(output_name)
        .ok_or_else(|| format!("the model produced no output `{output_name}`"))?
        .try_extract_array::<f32>()
        .map_err(|e| e.to_string())?;
    Ok(output.iter().copied().collect())
}

/// Runs `session` on inputs `values` (in `io`'s order) and returns its outputs flattened.
pub fn run_graph_io(
    session: &mut Session,
    io: &GraphIo,
    values: &[Vec<f32>],
) -> Result<Vec<Vec<f32>>, String> {
    let tensors = io
        .inputs
        .iter()
        .zip(values)
        .map(|((_, shape), values)| {
            Tensor::from_array((shape.clone(), values.clone())).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut outputs = Vec::new();
    run_tensors(
        session,
        io,
        &tensors,
        &mut Some(|values: &[&[f32]]| {
            outputs = values.iter().map(|v| v.to_vec()).collect();
            Ok(())
        }),
    )??;
    Ok(outputs)
}

/// Runs `session` on `inputs` and hands its outputs to `read` (taken once, when the run
/// worked). The outer error is the inference's, the inner one `read`'s.
pub(crate) fn run_tensors(
    session: &mut Session,
    io: &GraphIo,
    inputs: &[Tensor<f32>],
    read: &mut Option<impl FnOnce(&[&[f32]]) -> Result<(), String>>,
) -> Result<Result<(), String>, String> {
    let named: Vec<(&str, &Tensor<f32>)> = io
        .inputs
        .iter()
        .map(|(name, _)| name.as_str())
        .zip(inputs)
        .collect();
    let outputs = session.run(named).map_err(|e| e.to_string())?;
    let mut values = Vec::with_capacity(io.outputs.len());
    for name in &io.outputs {
        let output = outputs
            .get(name.as_str())
            .ok_or_else(|| format!("the model produced no output `{name}`"))?;
        let (_, data) = output
            .try_extract_tensor::<f32>()
            .map_err(|e| e.to_string())?;
        values.push(data);
    }
    let read = read.take().expect("read once, after the run that worked");
    Ok(read(&values))
}
