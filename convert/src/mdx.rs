//! UVR's MDX-Net models, published as ONNX graphs of a spectrogram (`[1, 4, dim_f, dim_t]` → the
//! same), made into graphs for GPUs ([`mdx_gpu_graph`]): the published graph unchanged inside,
//! the STFT before it and the inverse STFT after it (audio-separator 0.47.1's `stft.py`:
//! n_fft, hop, periodic Hann, centred with reflect padding; the bins from `dim_f` on dropped,
//! bins 0–2 zeroed), so a run takes the waveform and gives the primary stem. A published graph
//! whose batch dimension is free takes a batch of chunks; one fixed at 1 takes one.

use std::collections::HashSet;

use stemflow_onnx::view::{raw_fields, GraphPart, ValueInfoView};
use stemflow_onnx::{Dim, DimView, ModelView};

use crate::error::ConvertError;
use crate::ops::spectral::SpectralFrames;
use crate::ops::{Builder, Precision, Target, GPU_GRAPH_METADATA_KEY, T};

/// The family name written into the graph.
pub const FAMILY_NAME: &str = "mdx_net";
/// What the wrapper's own nodes and values are named with.
const NAME_PREFIX: &str = "stemflow_gpu/";
/// The oldest default operator set the wrapper's operators (`Pad` with its pads as an input)
/// are written for.
const MIN_OPSET: i64 = 11;

/// The STFT around an MDX-Net graph: UVR's `mdx_n_fft_scale_set` and hop (1024 for every
/// published model).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MdxStft {
    /// FFT size.
    pub n_fft: usize,
    /// Samples between frames.
    pub hop: usize,
}

/// The published graph's input or output: its name and `[batch, 4, dim_f, dim_t]`.
struct Port {
    name: String,
    batch: Option<usize>,
    dim_f: usize,
    dim_t: usize,
}

fn layout(message: String) -> ConvertError {
    ConvertError::Layout(message)
}

/// The one input and one output of `model` that are not initializers.
fn ports(model: &ModelView<'_>) -> Result<(Port, Port), ConvertError> {
    let graph = model.graph().map_err(layout)?;
    let fields = raw_fields(graph).map_err(layout)?;
    let mut initializers = HashSet::new();
    let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
    for field in &fields {
        match GraphPart::read(field).map_err(layout)? {
            GraphPart::Initializer(tensor) => {
                initializers.insert(tensor.name);
            }
            GraphPart::Input(info) => inputs.push(info),
            GraphPart::Output(info) => outputs.push(info),
            _ => {}
        }
    }
    inputs.retain(|info| !initializers.contains(info.name));
    let port = |info: &ValueInfoView<'_>| -> Result<Port, ConvertError> {
        let fixed = |d: &DimView<'_>| match d {
            DimView::Fixed(n) if *n > 0 => Some(*n as usize),
            _ => None,
        };
        match info.dims.as_slice() {
            [batch, channels, f, t] if fixed(channels) == Some(4) => Ok(Port {
                name: info.name.to_owned(),
                batch: fixed(batch),
                dim_f: fixed(f).ok_or_else(|| layout(format!("{}: no fixed dim_f", info.name)))?,
                dim_t: fixed(t).ok_or_else(|| layout(format!("{}: no fixed dim_t", info.name)))?,
            }),
            _ => Err(layout(format!(
                "{} is not an MDX-Net spectrogram [batch, 4, dim_f, dim_t]",
                info.name
            ))),
        }
    };
    match (inputs.as_slice(), outputs.as_slice()) {
        ([input], [output]) => Ok((port(input)?, port(output)?)),
        _ => Err(layout(
            "an MDX-Net graph has one input and one output".into(),
        )),
    }
}

/// The GPU graph of the MDX-Net model `published` (its ONNX bytes) with the STFT `stft`, at
/// `precision` (float16: the published graph through [`crate::float16::convert_model`], its
/// input and output float32; the STFT float32 either way). Fails when the graph is not
/// MDX-Net's (one `[batch, 4, dim_f, dim_t]` input and output) or its operator set is older
/// than 11. Not realtime-safe.
pub fn mdx_gpu_graph(
    published: &[u8],
    stft: MdxStft,
    precision: Precision,
) -> Result<Vec<u8>, ConvertError> {
    let converted;
    let inner = match precision {
        Precision::Float32 => published,
        Precision::Float16 => {
            converted = crate::float16::convert_model(published)?.0;
            &converted
        }
    };
    let model = ModelView::read(inner).map_err(layout)?;
    let opset = model.default_opset().map_err(layout)?.unwrap_or(0);
    if opset < MIN_OPSET {
        return Err(layout(format!(
            "an MDX-Net graph of operator set {opset}: Stemflow wraps those of {MIN_OPSET} on"
        )));
    }
    let (input, output) = ports(&model)?;
    let (dim_f, dim_t) = (input.dim_f, input.dim_t);
    if (output.dim_f, output.dim_t) != (dim_f, dim_t) || dim_f > stft.n_fft / 2 + 1 {
        return Err(layout(format!(
            "MDX-Net graph {} → {}: dim_f {dim_f} and dim_t {dim_t} do not fit n_fft {}",
            input.name, output.name, stft.n_fft
        )));
    }
    let batched = input.batch != Some(1);
    let (split, wrapper) = wrapper(&input.name, &output.name, stft, dim_f, dim_t, batched)?;
    let label = match precision {
        Precision::Float32 => "float32",
        Precision::Float16 => "float16",
    };
    splice(&model, &wrapper, split, label)
}

/// The STFT and inverse STFT around a graph reading `input` and writing `output`; returns the
/// number of nodes that go before the published graph's, and the wrapper model's bytes.
fn wrapper(
    input: &str,
    output: &str,
    stft: MdxStft,
    dim_f: usize,
    dim_t: usize,
    batched: bool,
) -> Result<(usize, Vec<u8>), ConvertError> {
    let mut b = Builder::for_target(FAMILY_NAME, Target::Gpu(Precision::Float32));
    b.prefix_names(NAME_PREFIX);
    let chunk = stft.hop * (dim_t - 1);
    let batch_dim = match batched {
        true => Dim::Symbolic("batch".into()),
        false => Dim::Fixed(1),
    };
    b.graph.add_input(
        "mix",
        vec![batch_dim.clone(), Dim::Fixed(2), Dim::Fixed(chunk)],
    );
    let port = |name: &str, shape: &[usize]| match batched {
        true => T::batched(name, shape),
        false => T::new(name, shape),
    };
    let mix = port("mix", &[1, 2, chunk]);
    let signals = b.reshape(&mix, &[2, chunk])?;
    let half = stft.n_fft / 2;
    let padded = b.pad(&signals, 1, (half, half), Some("reflect"))?;
    let framing = SpectralFrames {
        n_fft: stft.n_fft,
        hop: stft.hop,
        bins: dim_f,
        normalized: false,
    };
    let z = b.stft(&padded, &framing)?;
    let spec = b.reshape(&z, &[1, 4, dim_f, dim_t])?;
    // audio-separator zeroes bins 0–2 of the model's input.
    let keep: Vec<f32> = (0..dim_f).map(|f| if f < 3 { 0.0 } else { 1.0 }).collect();
    let keep = b.constant_f32("keep_bins", &[dim_f, 1], keep)?;
    b.named(input).binary("Mul", &spec, &keep);
    let split = b.graph.nodes().len();
    let estimate = port(output, &[1, 4, dim_f, dim_t]);
    let z = b.reshape(&estimate, &[2, 2 * dim_f, dim_t])?;
    let added = b.istft_overlap_add(&z, &framing)?;
    let kept = b.slice(&added, 1, half, half + chunk)?;
    let waveform = b.divide_by_envelope(&kept, &framing, dim_t, half)?;
    let stems = b.reshape(&waveform, &[1, 1, 2, chunk])?;
    b.graph
        .add_node("Identity", "stems", &[&stems.name], &["stems"], Vec::new());
    b.graph.add_output(
        "stems",
        vec![batch_dim, Dim::Fixed(1), Dim::Fixed(2), Dim::Fixed(chunk)],
    );
    Ok((split, b.graph.to_model_bytes()))
}

/// The published model with the wrapper's nodes around its own (the first `split` before),
/// the wrapper's initializers beside its own, and the wrapper's input and output instead of
/// its own; its `value_info` (shapes of one batch size) left out.
fn splice(
    model: &ModelView<'_>,
    wrapper: &[u8],
    split: usize,
    precision: &str,
) -> Result<Vec<u8>, ConvertError> {
    use stemflow_onnx::field::graph as graph_field;
    let wrapper = ModelView::read(wrapper).map_err(layout)?;
    let theirs = raw_fields(model.graph().map_err(layout)?).map_err(layout)?;
    let ours = raw_fields(wrapper.graph().map_err(layout)?).map_err(layout)?;
    let of = |fields: &[stemflow_onnx::RawField<'_>], number| -> Vec<u8> {
        fields
            .iter()
            .filter(|f| f.number == number)
            .flat_map(|f| f.bytes.iter().copied())
            .collect()
    };
    let our_nodes: Vec<&stemflow_onnx::RawField<'_>> = ours
        .iter()
        .filter(|f| f.number == graph_field::NODE)
        .collect();
    let mut body = Vec::new();
    for field in &our_nodes[..split] {
        body.extend_from_slice(field.bytes);
    }
    body.extend(of(&theirs, graph_field::NODE));
    for field in &our_nodes[split..] {
        body.extend_from_slice(field.bytes);
    }
    body.extend(of(&theirs, graph_field::NAME));
    body.extend(of(&theirs, graph_field::INITIALIZER));
    body.extend(of(&ours, graph_field::INITIALIZER));
    body.extend(of(&ours, graph_field::INPUT));
    body.extend(of(&ours, graph_field::OUTPUT));
    let spliced = model.with_graph(&body, Some(("stemflow.family", FAMILY_NAME)));
    let spliced = ModelView::read(&spliced).map_err(layout)?;
    let graph = spliced.graph().map_err(layout)?.to_vec();
    Ok(spliced.with_graph(&graph, Some((GPU_GRAPH_METADATA_KEY, precision))))
}
