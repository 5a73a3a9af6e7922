//! Neural model families with their published pipelines, streamed.
//!
//! | family | graph contract | around the graph | reference followed |
//! |---|---|---|---|
//! | HTDemucs (`demucs-onnx` export) | `mix` `[1, 2, T]` → `stems` `[1, S, 2, T]`, S = 4 or 6 | segments of T every `T − T/4`, triangle transition weights | `demucs/apply.py` `apply_model` (demucs 4.1.0) |
//! | MDX-Net (UVR) | `[1, 4, dim_f, dim_t]` → same | STFT (n_fft, hop 1024, periodic Hann, centre reflect), bins ≥ dim_f dropped, bins 0–2 zeroed, chunks of `hop·(dim_t − 1)` every 75 %, `np.hanning` overlap-add, `trim = n_fft/2` zeros before; secondary = mix − compensate · primary | `mdx_separator.py` + `uvr_lib_v5/stft.py` (audio-separator 0.47.1) |
//! | BS/Mel-RoFormer (MSST export, STFT outside) | `[1, 2F, T, 2]` (stereo interleaved per bin, real/imag) → mask `[1, N, 2F, T, 2]` | STFT (n_fft 2048, hop 441), complex mask, DC zeroed, iSTFT; chunks every `chunk/num_overlap`, linear fades of `chunk/10` (none on the first chunk's start), `border` reflect-padded before | `utils/model_utils.py` `demix` (Music-Source-Separation-Training ccc011a) |
//!
//! What a stream cannot do and the reference does on whole files is left out and documented
//! in the README: normalisation by whole-file statistics (demucs' mean/std, audio-separator's
//! peak) and the different handling of the file's last chunk. Everything else is the same
//! arithmetic, checked against numpy implementations in `models/make_test_models.py`.
//!
//! Stems: a model stem named vocals, drums, bass, guitar or piano goes to that stem; a two-stem
//! model's instrumental (or an MDX-Net model whose primary stem is the instrumental) makes
//! Vocals the mix minus it; the rest goes to `Other`, which is always the residual. Guitar and
//! piano are folded back into `Other` unless the user asks for them ([`crate::ExtraStems`]).

pub mod overlap_add;
pub mod params;
pub mod stft;

use std::path::Path;
use std::sync::Arc;

use crate::onnx::{ActiveDevice, GraphSignature, ModelRunner, SessionSource};
use crate::runtime::devices::{DeviceChoice, DeviceId};
use crate::runtime::session::{build_session, AcquiredSession, ModelBytes};
use crate::separator::{stem_channel, PlanarBlock, Separator};
use crate::stem::{Stem, NUM_SEPARATED_STEMS};
use overlap_add::{ChunkLayout, Lead, OverlapAdd};
use stft::{Complex64, Stft};

/// The rate every supported family runs at unless its config says otherwise.
pub const MODEL_SAMPLE_RATE_HZ: u32 = 44_100;
/// Largest chunk accepted: a hostile file cannot make Stemflow allocate gigabytes.
pub const MAX_CHUNK_FRAMES: usize = 1 << 22;
/// Largest spectrogram dimension accepted (bins or frames).
const MAX_SPECTRAL_DIM: i64 = 1 << 14;
/// Largest number of stems accepted.
const MAX_MODEL_STEMS: i64 = 16;
/// Largest model file accepted.
pub const MAX_MODEL_FILE_BYTES: u64 = 4 << 30;
/// Demucs' source order.
const DEMUCS_SOURCES: [&str; 6] = ["drums", "bass", "other", "vocals", "guitar", "piano"];

/// A family of separation models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum ModelFamily {
    /// Hybrid Transformer Demucs exported to ONNX (waveform in, waveform stems out).
    HtDemucs,
    /// UVR's MDX-Net (spectrogram in, spectrogram out).
    MdxNet,
    /// BS-RoFormer / Mel-RoFormer with the STFT outside the graph (spectrogram in, complex masks out).
    RoFormer,
}

impl std::fmt::Display for ModelFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ModelFamily::HtDemucs => "HTDemucs",
            ModelFamily::MdxNet => "MDX-Net",
            ModelFamily::RoFormer => "RoFormer",
        })
    }
}

/// How a Stemflow stem is made from the model's outputs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StemRoute {
    /// The model has nothing for it.
    Silent,
    /// Model output `index` times `gain`.
    Output(usize, f32),
    /// The input minus model output `index` times `gain`.
    MixMinus(usize, f32),
}

/// What each family runs around its graph.
#[derive(Debug, Clone, PartialEq)]
pub enum FamilyKind {
    /// HTDemucs: the graph takes waveforms.
    HtDemucs,
    /// MDX-Net: STFT with `n_fft`, `hop_frames`, `dim_f` bins kept, `dim_t` frames.
    MdxNet {
        /// FFT size.
        n_fft: usize,
        /// STFT hop.
        hop_frames: usize,
        /// Bins given to the model.
        dim_f: usize,
        /// Frames per chunk.
        dim_t: usize,
        /// UVR's `compensate`.
        compensate: f32,
        /// UVR's `primary_stem`.
        primary_stem: String,
    },
    /// RoFormer: STFT with `n_fft` and `hop_frames`, complex masks.
    RoFormer {
        /// FFT size.
        n_fft: usize,
        /// STFT hop.
        hop_frames: usize,
        /// STFT frames per chunk.
        frames: usize,
        /// Whether the DC bin is zeroed after masking.
        zero_dc: bool,
    },
}

/// Everything known about a model file once its graph has been checked.
#[derive(Debug, Clone)]
pub struct ModelDescription {
    /// The family.
    pub family: ModelFamily,
    /// Family-specific processing.
    pub kind: FamilyKind,
    /// The model's own stem names, in output order.
    pub stems: Vec<String>,
    /// The separated stems (vocals, drums, bass, guitar, piano) from the outputs.
    pub routes: [StemRoute; NUM_SEPARATED_STEMS],
    /// The chunking.
    pub layout: ChunkLayout,
    /// Sample rate the model runs at.
    pub sample_rate_hz: u32,
    /// Graph input and output names and the input shape.
    pub input_name: String,
    /// Output name.
    pub output_name: String,
    /// Input tensor shape.
    pub input_shape: Vec<usize>,
    /// Where the parameters came from.
    pub params_source: String,
}

fn expected_signatures() -> &'static str {
    "expected one of: HTDemucs `mix` [1, 2, T] → `stems` [1, 4|6, 2, T]; \
     MDX-Net [1, 4, dim_f, dim_t] → [1, 4, dim_f, dim_t]; \
     RoFormer [1, 2·(n_fft/2+1), frames, 2] → [1, N, 2·(n_fft/2+1), frames, 2]"
}

/// Reads a model file, refusing files that are too big. Not realtime-safe.
pub fn read_model_file(path: &Path) -> Result<ModelBytes, String> {
    let metadata = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !metadata.is_file() {
        return Err(format!("{}: not a file", path.display()));
    }
    if metadata.len() > MAX_MODEL_FILE_BYTES {
        return Err(format!(
            "{}: {} bytes is larger than any supported model",
            path.display(),
            metadata.len()
        ));
    }
    let model = ModelBytes::read(path)?;
    check_external_data(&model.bytes, path)?;
    Ok(model)
}

/// Refuses graphs whose tensors point at external data: Stemflow loads models from memory, and a
/// hostile path (`../../…`, absolute) must never be followed.
fn check_external_data(bytes: &[u8], path: &Path) -> Result<(), String> {
    match crate::families::protobuf::external_data_locations(bytes) {
        Ok(locations) if locations.is_empty() => Ok(()),
        Ok(locations) => Err(format!(
            "{}: the model keeps its weights in external files ({}); Stemflow only loads self-contained .onnx files",
            path.display(),
            locations.join(", ")
        )),
        Err(error) => Err(format!("{}: not an ONNX model ({error})", path.display())),
    }
}

mod protobuf;

/// Checks a model file's graph against the families and reads its parameters. Needs a loaded
/// runtime. Not realtime-safe: builds a CPU session.
pub fn describe_model(path: &Path, model: &ModelBytes) -> Result<ModelDescription, String> {
    let session = build_session(DeviceId::CPU, &model.bytes, 1)
        .map_err(|e| format!("{}: not a usable ONNX model: {e}", model.name))?;
    let signature = GraphSignature::of(&session);
    describe_signature(&signature, path, &model.bytes).map_err(|e| format!("{}: {e}", model.name))
}

fn mismatch(signature: &GraphSignature) -> String {
    format!(
        "signature mismatch: {}; found {signature}",
        expected_signatures()
    )
}

/// Matches a signature to a family and derives the processing from it and the parameters.
pub fn describe_signature(
    signature: &GraphSignature,
    path: &Path,
    bytes: &[u8],
) -> Result<ModelDescription, String> {
    let [input] = signature.inputs.as_slice() else {
        return Err(mismatch(signature));
    };
    let [output] = signature.outputs.as_slice() else {
        return Err(mismatch(signature));
    };
    if !input.is_f32 || !output.is_f32 {
        return Err(mismatch(signature));
    }
    // A dynamic batch dimension runs with batch 1.
    let batch_ok = |dims: &[i64]| dims.first().is_some_and(|&d| d == 1 || d < 0);
    let fixed = |d: i64, max: i64| d > 0 && d <= max;
    let (i, o) = (&input.dims, &output.dims);
    if !batch_ok(i) || !batch_ok(o) {
        return Err(mismatch(signature));
    }
    let sidecar = params::read_sidecar(path)?;
    if i.len() == 3 && o.len() == 4 {
        // HTDemucs.
        let t = i[2];
        let valid = input.name == "mix"
            && output.name == "stems"
            && i[1] == 2
            && fixed(t, MAX_CHUNK_FRAMES as i64)
            && (o[1] == 4 || o[1] == 6)
            && o[2] == 2
            && o[3] == t;
        if !valid {
            return Err(mismatch(signature));
        }
        let chunk_frames = t as usize;
        let overlap = sidecar
            .as_ref()
            .and_then(|p| p.f64("overlap"))
            .unwrap_or(0.25);
        if !(0.0..0.95).contains(&overlap) {
            return Err(format!("overlap {overlap} out of range 0–0.95"));
        }
        let step_frames = ((1.0 - overlap) * chunk_frames as f64) as usize;
        let stems: Vec<String> = DEMUCS_SOURCES[..o[1] as usize]
            .iter()
            .map(|s| s.to_string())
            .collect();
        return Ok(ModelDescription {
            family: ModelFamily::HtDemucs,
            kind: FamilyKind::HtDemucs,
            routes: routes_by_name(&stems, 1.0),
            stems,
            layout: ChunkLayout {
                chunk_frames,
                step_frames: step_frames.max(1),
                lead: Lead::Zeros(0),
            },
            sample_rate_hz: MODEL_SAMPLE_RATE_HZ,
            input_name: input.name.clone(),
            output_name: output.name.clone(),
            input_shape: vec![1, 2, chunk_frames],
            params_source: sidecar
                .and_then(|p| p.source)
                .unwrap_or_else(|| "demucs defaults".into()),
        });
    }
    if i.len() == 4 && o.len() == 4 && i[1] == 4 {
        // MDX-Net.
        let (dim_f, dim_t) = (i[2], i[3]);
        if !(fixed(dim_f, MAX_SPECTRAL_DIM) && fixed(dim_t, MAX_SPECTRAL_DIM) && o[1..] == i[1..]) {
            return Err(mismatch(signature));
        }
        let params = params::uvr_table_entry(bytes).or(sidecar).ok_or_else(|| {
            format!(
                "an MDX-Net model that is not in UVR's model table and has no sidecar: put a `{}` next to it with \
                 {{\"mdx_n_fft_scale_set\": 6144, \"mdx_dim_f_set\": {dim_f}, \"mdx_dim_t_set\": {}, \"compensate\": 1.035, \"primary_stem\": \"Vocals\"}}",
                path.with_extension("json").file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                (dim_t as f64).log2().round() as i64
            )
        })?;
        let source = params.source.clone().unwrap_or_default();
        let n_fft = params
            .usize("mdx_n_fft_scale_set")
            .ok_or_else(|| format!("{source}: mdx_n_fft_scale_set missing"))?;
        let want_f = params
            .usize("mdx_dim_f_set")
            .ok_or_else(|| format!("{source}: mdx_dim_f_set missing"))?;
        let want_t = 1usize
            << params
                .usize("mdx_dim_t_set")
                .ok_or_else(|| format!("{source}: mdx_dim_t_set missing"))?
                .min(20);
        if want_f != dim_f as usize
            || want_t != dim_t as usize
            || want_f > n_fft / 2 + 1
            || n_fft < 16
        {
            return Err(format!(
                "{source} says dim_f {want_f}, dim_t {want_t}, n_fft {n_fft}, but the graph takes dim_f {dim_f}, dim_t {dim_t}"
            ));
        }
        let hop_frames = params.usize("hop_length").unwrap_or(1024);
        let overlap = params.f64("overlap").unwrap_or(0.25);
        if !(0.0..0.95).contains(&overlap) || hop_frames == 0 {
            return Err(format!(
                "{source}: overlap {overlap} or hop {hop_frames} out of range"
            ));
        }
        let chunk_frames = hop_frames * (dim_t as usize - 1);
        if chunk_frames > MAX_CHUNK_FRAMES || chunk_frames <= n_fft {
            return Err(format!(
                "{source}: chunk of {chunk_frames} frames out of range"
            ));
        }
        let step_frames = ((1.0 - overlap) * chunk_frames as f64) as usize;
        let compensate = params.f64("compensate").unwrap_or(1.0) as f32;
        let primary_stem = params.str("primary_stem").unwrap_or("Vocals").to_string();
        let primary = primary_stem.to_lowercase();
        let routes = match stem_for_name(&primary) {
            // The secondary stem is the reference's `mix − compensate · primary`; the primary is
            // scaled the same way so that the stems sum to the input.
            Some(stem) => {
                let mut routes = [StemRoute::Silent; NUM_SEPARATED_STEMS];
                routes[stem.index()] = StemRoute::Output(0, compensate);
                routes
            }
            None => {
                let mut routes = [StemRoute::Silent; NUM_SEPARATED_STEMS];
                routes[Stem::Vocals.index()] = StemRoute::MixMinus(0, compensate);
                routes
            }
        };
        return Ok(ModelDescription {
            family: ModelFamily::MdxNet,
            kind: FamilyKind::MdxNet {
                n_fft,
                hop_frames,
                dim_f: dim_f as usize,
                dim_t: dim_t as usize,
                compensate,
                primary_stem: primary_stem.clone(),
            },
            stems: vec![primary],
            routes,
            layout: ChunkLayout {
                chunk_frames,
                step_frames: step_frames.max(1),
                lead: Lead::Zeros(n_fft / 2),
            },
            sample_rate_hz: MODEL_SAMPLE_RATE_HZ,
            input_name: input.name.clone(),
            output_name: output.name.clone(),
            input_shape: vec![1, 4, dim_f as usize, dim_t as usize],
            params_source: source,
        });
    }
    if i.len() == 4 && o.len() == 5 && i[3] == 2 && o[4] == 2 {
        // RoFormer.
        let (bins2, frames, stems_n) = (i[1], i[2], o[1]);
        if !(fixed(bins2, 2 * MAX_SPECTRAL_DIM)
            && bins2 % 2 == 0
            && fixed(frames, MAX_SPECTRAL_DIM)
            && fixed(stems_n, MAX_MODEL_STEMS)
            && o[2] == bins2
            && o[3] == frames)
        {
            return Err(mismatch(signature));
        }
        let params = sidecar.unwrap_or_default();
        let get = |keys: &[&str]| keys.iter().find_map(|k| params.usize(k));
        let n_fft = get(&["n_fft", "model.stft_n_fft", "audio.n_fft"]).unwrap_or(2048);
        let hop_frames =
            get(&["hop_length", "model.stft_hop_length", "audio.hop_length"]).unwrap_or(441);
        if n_fft / 2 + 1 != bins2 as usize / 2 || hop_frames == 0 {
            return Err(format!(
                "the graph takes {} bins per channel, which does not match n_fft {n_fft} (set `n_fft` in the sidecar)",
                bins2 / 2
            ));
        }
        let chunk_frames = hop_frames * (frames as usize - 1);
        if let Some(configured) = get(&["chunk_size", "inference.chunk_size", "audio.chunk_size"]) {
            if configured != chunk_frames {
                return Err(format!(
                    "the config's chunk_size {configured} does not match the graph's {frames} frames × hop {hop_frames}"
                ));
            }
        }
        if chunk_frames > MAX_CHUNK_FRAMES || chunk_frames <= n_fft {
            return Err(format!("a chunk of {chunk_frames} frames is out of range"));
        }
        let num_overlap = get(&["num_overlap", "inference.num_overlap"])
            .unwrap_or(4)
            .max(1);
        let step_frames = chunk_frames / num_overlap;
        let target = ["target_instrument", "training.target_instrument"]
            .iter()
            .find_map(|k| params.str(k).map(str::to_string));
        let stems: Vec<String> = match (target, ["instruments", "training.instruments"].iter().find_map(|k| params.strings(k))) {
            (Some(target), _) => vec![target.to_lowercase()],
            (None, Some(list)) => list.iter().map(|s| s.to_lowercase()).collect(),
            (None, None) if stems_n == 1 => vec!["vocals".to_string()],
            (None, None) => {
                return Err(format!(
                    "a {stems_n}-stem RoFormer model needs its stem names: put the MSST config next to it as `{}` \
                     (or a JSON sidecar with \"instruments\")",
                    path.with_extension("yaml").file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
                ))
            }
        };
        if stems.len() != stems_n as usize {
            return Err(format!(
                "the config names {} stems but the graph has {stems_n}",
                stems.len()
            ));
        }
        let zero_dc = ["zero_dc", "model.zero_dc"]
            .iter()
            .find_map(|k| params.bool(k))
            .unwrap_or(true);
        let border = chunk_frames - step_frames;
        return Ok(ModelDescription {
            family: ModelFamily::RoFormer,
            kind: FamilyKind::RoFormer {
                n_fft,
                hop_frames,
                frames: frames as usize,
                zero_dc,
            },
            routes: routes_by_name(&stems, 1.0),
            stems,
            layout: ChunkLayout {
                chunk_frames,
                step_frames: step_frames.max(1),
                lead: Lead::Reflect(border),
            },
            sample_rate_hz: get(&["sample_rate", "audio.sample_rate"])
                .unwrap_or(MODEL_SAMPLE_RATE_HZ as usize) as u32,
            input_name: input.name.clone(),
            output_name: output.name.clone(),
            input_shape: vec![1, bins2 as usize, frames as usize, 2],
            params_source: params
                .source
                .unwrap_or_else(|| "RoFormer defaults (n_fft 2048, hop 441, 4 overlaps)".into()),
        });
    }
    Err(mismatch(signature))
}

/// The Stemflow stem a model stem name goes to directly.
fn stem_for_name(name: &str) -> Option<Stem> {
    match name {
        "vocals" | "vocal" | "voice" | "voices" | "singing" => Some(Stem::Vocals),
        "drums" | "drum" | "percussion" => Some(Stem::Drums),
        "bass" => Some(Stem::Bass),
        "guitar" | "guitars" => Some(Stem::Guitar),
        "piano" | "keys" => Some(Stem::Piano),
        _ => None,
    }
}

fn is_accompaniment(name: &str) -> bool {
    matches!(
        name,
        "instrumental" | "inst" | "accompaniment" | "no_vocals" | "karaoke" | "music"
    )
}

/// Routes for models that name their stems.
fn routes_by_name(stems: &[String], gain: f32) -> [StemRoute; NUM_SEPARATED_STEMS] {
    let mut routes = [StemRoute::Silent; NUM_SEPARATED_STEMS];
    for (index, name) in stems.iter().enumerate() {
        if let Some(stem) = stem_for_name(name) {
            routes[stem.index()] = StemRoute::Output(index, gain);
        }
    }
    if routes[Stem::Vocals.index()] == StemRoute::Silent {
        if let Some(index) = stems.iter().position(|s| is_accompaniment(s)) {
            routes[Stem::Vocals.index()] = StemRoute::MixMinus(index, gain);
        }
    }
    routes
}

/// The overlap-add weights of a family: `(first chunk, every other chunk)`.
pub fn windows(description: &ModelDescription) -> (Vec<f64>, Vec<f64>) {
    let n = description.layout.chunk_frames;
    let window: Vec<f64> = match description.kind {
        // demucs: triangle 1..n/2, n−n/2..1, divided by its maximum (transition_power 1).
        FamilyKind::HtDemucs => {
            let w: Vec<f64> = (1..=n / 2)
                .chain((1..=n - n / 2).rev())
                .map(|v| v as f64)
                .collect();
            let max = w.iter().copied().fold(0.0, f64::max);
            w.into_iter().map(|v| v / max).collect()
        }
        // np.hanning(n): the symmetric Hann window.
        FamilyKind::MdxNet { .. } => (0..n)
            .map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / (n - 1) as f64).cos())
            .collect(),
        // MSST: ones with linspace fades of n/10 at both ends.
        FamilyKind::RoFormer { .. } => {
            let fade = n / 10;
            let mut w = vec![1.0; n];
            for i in 0..fade {
                let ramp = if fade > 1 {
                    i as f64 / (fade - 1) as f64
                } else {
                    1.0
                };
                w[i] = ramp;
                w[n - 1 - i] = ramp;
            }
            w
        }
    };
    let first = match description.kind {
        FamilyKind::RoFormer { .. } => {
            let mut first = window.clone();
            first[..n / 10].fill(1.0);
            first
        }
        _ => window.clone(),
    };
    (first, window)
}

/// A separator running a model of any family, streamed chunk by chunk.
pub struct ModelSeparator {
    runner: ModelRunner,
    description: ModelDescription,
    overlap_add: OverlapAdd,
    first_window: Vec<f64>,
    window: Vec<f64>,
    stft: Option<Stft>,
    /// The graph's input, reused.
    model_input: Vec<f32>,
    /// One chunk's outputs `[output][channel][frame]`, reused.
    chunk_outputs: Vec<f32>,
    /// Spectra `[channel][bin][frame]`, reused (spectral families).
    spectra: [Vec<Complex64>; 2],
    /// Masked or model spectrum for the inverse, reused.
    inverse_spectrum: Vec<Complex64>,
    inverse_output: Vec<f64>,
    name: String,
}

impl ModelSeparator {
    /// Loads `path`, checks its graph against the families, and builds a warm session on
    /// `device` (falling back to the CPU with the reason recorded). Not realtime-safe.
    pub fn load(path: &Path, device: DeviceChoice) -> Result<Self, String> {
        let model = Arc::new(read_model_file(path)?);
        let description = describe_model(path, &model)?;
        let runner = ModelRunner::new(
            model.clone(),
            device,
            &description.input_name,
            &description.output_name,
            description.input_shape.clone(),
        )?;
        Ok(Self::with_runner(runner, description, model.name.clone()))
    }

    fn with_runner(runner: ModelRunner, description: ModelDescription, name: String) -> Self {
        let num_outputs = description.stems.len();
        let chunk = description.layout.chunk_frames;
        let (first_window, window) = windows(&description);
        let (stft, spectrum_len) = match description.kind {
            FamilyKind::HtDemucs => (None, 0),
            FamilyKind::MdxNet {
                n_fft, hop_frames, ..
            }
            | FamilyKind::RoFormer {
                n_fft, hop_frames, ..
            } => {
                let stft = Stft::new(n_fft, hop_frames);
                let len = stft.num_bins() * stft.num_frames(chunk);
                (Some(stft), len)
            }
        };
        Self {
            overlap_add: OverlapAdd::new(description.layout, num_outputs),
            model_input: vec![0.0; description.input_shape.iter().product()],
            chunk_outputs: vec![0.0; num_outputs * 2 * chunk],
            spectra: [
                vec![Complex64::default(); spectrum_len],
                vec![Complex64::default(); spectrum_len],
            ],
            inverse_spectrum: vec![Complex64::default(); spectrum_len],
            inverse_output: vec![0.0; chunk],
            first_window,
            window,
            stft,
            runner,
            description,
            name,
        }
    }

    /// The model's description.
    pub fn description(&self) -> &ModelDescription {
        &self.description
    }

    /// The session in use.
    pub fn session(&self) -> &AcquiredSession {
        self.runner.session()
    }

    /// Runs the model on one chunk into `chunk_outputs`. Not realtime-safe (inference).
    fn run_chunk(&mut self, left: &[f32], right: &[f32]) -> Result<(), String> {
        let chunk = self.description.layout.chunk_frames;
        match self.description.kind.clone() {
            FamilyKind::HtDemucs => {
                self.model_input[..chunk].copy_from_slice(left);
                self.model_input[chunk..].copy_from_slice(right);
                let output = self.runner.run(&self.model_input)?;
                let needed = self.chunk_outputs.len();
                if output.len() < needed {
                    return Err(format!(
                        "the model returned {} values, expected {needed}",
                        output.len()
                    ));
                }
                self.chunk_outputs.copy_from_slice(&output[..needed]);
            }
            FamilyKind::MdxNet { dim_f, dim_t, .. } => {
                let stft = self.stft.as_mut().expect("spectral family");
                let frames = stft.num_frames(chunk);
                let bins = stft.num_bins();
                debug_assert_eq!(frames, dim_t);
                for (channel, signal) in [left, right].into_iter().enumerate() {
                    stft.forward(signal, &mut self.spectra[channel]);
                }
                // [1, 4, dim_f, dim_t]: L re, L im, R re, R im; bins 0–2 zeroed as the reference does.
                for channel in 0..2 {
                    for f in 0..dim_f {
                        for t in 0..dim_t {
                            let value = if f < 3 {
                                Complex64::default()
                            } else {
                                self.spectra[channel][f * frames + t]
                            };
                            self.model_input[((2 * channel) * dim_f + f) * dim_t + t] =
                                value.re as f32;
                            self.model_input[((2 * channel + 1) * dim_f + f) * dim_t + t] =
                                value.im as f32;
                        }
                    }
                }
                let output = self.runner.run(&self.model_input)?;
                if output.len() != 4 * dim_f * dim_t {
                    return Err(format!(
                        "the model returned {} values, expected {}",
                        output.len(),
                        4 * dim_f * dim_t
                    ));
                }
                for channel in 0..2 {
                    self.inverse_spectrum.fill(Complex64::default());
                    for f in 0..dim_f.min(bins) {
                        for t in 0..dim_t {
                            self.inverse_spectrum[f * frames + t] = Complex64::new(
                                output[((2 * channel) * dim_f + f) * dim_t + t] as f64,
                                output[((2 * channel + 1) * dim_f + f) * dim_t + t] as f64,
                            );
                        }
                    }
                    stft.inverse(&self.inverse_spectrum, frames, &mut self.inverse_output);
                    for (out, &v) in self.chunk_outputs[channel * chunk..][..chunk]
                        .iter_mut()
                        .zip(&self.inverse_output)
                    {
                        *out = v as f32;
                    }
                }
            }
            FamilyKind::RoFormer {
                frames, zero_dc, ..
            } => {
                let stft = self.stft.as_mut().expect("spectral family");
                let bins = stft.num_bins();
                for (channel, signal) in [left, right].into_iter().enumerate() {
                    stft.forward(signal, &mut self.spectra[channel]);
                }
                // [1, (f s), t, c]: stereo interleaved per bin.
                for f in 0..bins {
                    for s in 0..2 {
                        for t in 0..frames {
                            let value = self.spectra[s][f * frames + t];
                            let index = ((f * 2 + s) * frames + t) * 2;
                            self.model_input[index] = value.re as f32;
                            self.model_input[index + 1] = value.im as f32;
                        }
                    }
                }
                let mask = self.runner.run(&self.model_input)?;
                let num_stems = self.description.stems.len();
                if mask.len() != num_stems * bins * 2 * frames * 2 {
                    return Err(format!(
                        "the model returned {} values, expected {}",
                        mask.len(),
                        num_stems * bins * 4 * frames
                    ));
                }
                for n in 0..num_stems {
                    for s in 0..2 {
                        for f in 0..bins {
                            for t in 0..frames {
                                let index = (((n * bins + f) * 2 + s) * frames + t) * 2;
                                let m = Complex64::new(mask[index] as f64, mask[index + 1] as f64);
                                let x = self.spectra[s][f * frames + t];
                                self.inverse_spectrum[f * frames + t] = if zero_dc && f == 0 {
                                    Complex64::default()
                                } else {
                                    x * m
                                };
                            }
                        }
                        stft.inverse(&self.inverse_spectrum, frames, &mut self.inverse_output);
                        for (out, &v) in self.chunk_outputs[(n * 2 + s) * chunk..][..chunk]
                            .iter_mut()
                            .zip(&self.inverse_output)
                        {
                            *out = v as f32;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

impl Separator for ModelSeparator {
    fn name(&self) -> &str {
        &self.name
    }

    fn sample_rate_hz(&self) -> u32 {
        self.description.sample_rate_hz
    }

    fn hop_frames(&self) -> usize {
        self.overlap_add.hop_frames()
    }

    fn latency_frames(&self) -> usize {
        self.overlap_add.latency_frames()
    }

    fn scheduling_margin_frames(&self) -> usize {
        // A chunk's inference runs at a hop boundary; real-time playback must not wait for it.
        self.overlap_add.hop_frames()
    }

    fn reset(&mut self) {
        self.overlap_add.reset();
    }

    fn process_hop(&mut self, input: &PlanarBlock, stems: &mut PlanarBlock) {
        self.overlap_add
            .push_hop(input.channel(0), input.channel(1));
        while let Some((index, [left, right])) = self.overlap_add.ready_chunk() {
            // The chunk is copied out so the overlap-add state can be borrowed again below.
            let (left, right) = (left.to_vec(), right.to_vec());
            if let Err(error) = self.run_chunk(&left, &right) {
                // Nothing can run the model: its stems stay silent and Other carries the mix.
                log::error!("{}: {error}", self.name);
                self.chunk_outputs.fill(0.0);
            }
            let window = if index == 0 {
                &self.first_window
            } else {
                &self.window
            };
            self.overlap_add.accumulate(&self.chunk_outputs, window);
        }
        let routes = self.description.routes;
        self.overlap_add.emit_hop(|frame, view| {
            for (stem_index, route) in routes.iter().enumerate() {
                for channel in 0..2 {
                    let value = match (&view, *route) {
                        (None, _) | (_, StemRoute::Silent) => 0.0,
                        (Some(v), StemRoute::Output(k, gain)) => {
                            (v.value(k, channel) as f32) * gain
                        }
                        (Some(v), StemRoute::MixMinus(k, gain)) => {
                            v.mix(channel) - (v.value(k, channel) as f32) * gain
                        }
                    };
                    stems.channel_mut(stem_channel(stem_index, channel))[frame] = value;
                }
            }
        });
    }

    fn has_extra_stems(&self) -> bool {
        Stem::EXTRA
            .iter()
            .any(|stem| self.description.routes[stem.index()] != StemRoute::Silent)
    }

    fn session_source(&self) -> Option<SessionSource> {
        Some(self.runner.session_source())
    }

    fn install_session(&mut self, session: AcquiredSession) {
        self.runner.install_session(session);
    }

    fn active_device(&self) -> Option<ActiveDevice> {
        Some(self.runner.active_device())
    }
}
