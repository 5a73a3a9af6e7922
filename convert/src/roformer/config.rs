//! [`RoFormerConfig`]: an MSST YAML config read for conversion. Every key of its `model:`
//! section is either built here, has no effect on inference (dropout, training losses,
//! gradient checkpointing), or is refused by name; the `audio:`, `training:` and `inference:`
//! keys give the chunking and the stems.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ConvertError;
use crate::yaml::read_msst_yaml;

/// Which RoFormer the checkpoint is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Variant {
    /// BS-RoFormer: consecutive bands of `freqs_per_bands` STFT bins.
    BandSplit {
        /// Bins per band, in frequency order.
        freqs_per_bands: Vec<usize>,
    },
    /// Mel-RoFormer: `num_bands` overlapping mel bands.
    MelBand {
        /// Number of mel bands.
        num_bands: usize,
        /// The mel filterbank's sample rate.
        sample_rate_hz: usize,
    },
}

/// The network and processing an MSST config describes.
#[derive(Debug, Clone, PartialEq)]
pub struct RoFormerConfig {
    /// BS or Mel.
    pub variant: Variant,
    /// Token width.
    pub dim: usize,
    /// Number of (time, frequency) transformer pairs.
    pub depth: usize,
    /// Stems (mask estimators).
    pub num_stems: usize,
    /// Layers of each time transformer.
    pub time_transformer_depth: usize,
    /// Layers of each frequency transformer.
    pub freq_transformer_depth: usize,
    /// Layers of the linear-attention transformer before each pair (0: none).
    pub linear_transformer_depth: usize,
    /// Width of an attention head.
    pub dim_head: usize,
    /// Attention heads.
    pub heads: usize,
    /// Mask estimator MLP depth (`mask_estimator_depth`).
    pub mask_estimator_depth: usize,
    /// Mask estimator hidden width over `dim`.
    pub mlp_expansion_factor: usize,
    /// Whether each block adds the outputs of the blocks before it.
    pub skip_connection: bool,
    /// Whether the DC bin is zeroed after masking.
    pub zero_dc: bool,
    /// FFT size (= window).
    pub n_fft: usize,
    /// STFT hop.
    pub hop_frames: usize,
    /// Samples per chunk (`audio.chunk_size`).
    pub chunk_frames: usize,
    /// `inference.num_overlap`, when given.
    pub num_overlap: Option<usize>,
    /// `inference.batch_size`, when given: MSST's `demix` fades a whole file's first and last
    /// chunks per batch, so Stemflow's whole-file mode needs it to match.
    pub batch_size: Option<usize>,
    /// The stems' names, in output order (`prefer_target_instrument`).
    pub stems: Vec<String>,
    /// `audio.sample_rate`.
    pub sample_rate_hz: usize,
}

/// Keys of `model:` that change nothing at inference.
const NO_EFFECT_KEYS: &[&str] = &[
    "attn_dropout",
    "ff_dropout",
    "flash_attn",
    "dim_freqs_in",
    "multi_stft_resolution_loss_weight",
    "multi_stft_resolutions_window_sizes",
    "multi_stft_hop_size",
    "multi_stft_normalized",
    "use_torch_checkpoint",
    "match_input_audio_length",
];

/// Keys of `model:` built here (with their checks).
const BUILT_KEYS: &[&str] = &[
    "dim",
    "depth",
    "stereo",
    "num_stems",
    "time_transformer_depth",
    "freq_transformer_depth",
    "linear_transformer_depth",
    "freqs_per_bands",
    "num_bands",
    "sample_rate",
    "dim_head",
    "heads",
    "stft_n_fft",
    "stft_hop_length",
    "stft_win_length",
    "stft_normalized",
    "stft_window_fn",
    "zero_dc",
    "mask_estimator_depth",
    "mlp_expansion_factor",
    "skip_connection",
    "use_pope",
];

/// BS-RoFormer's default bands (`DEFAULT_FREQS_PER_BANDS`, for n_fft 2048).
const DEFAULT_FREQS_PER_BANDS: [usize; 62] = [
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 12, 12, 12, 12, 12, 12, 12, 12, 24, 24, 24, 24, 24, 24, 24, 24, 48, 48, 48, 48, 48,
    48, 48, 48, 128, 129,
];

/// The largest width, depth or count a config may ask for (a bound against absurd graphs).
const MAX_SIZE: usize = 1 << 16;
/// The largest number a config may give at all, a chunk's samples included (the engine's
/// `MAX_CHUNK_FRAMES`, 2^22 samples: 95 s at 44.1 kHz).
const MAX_LENGTH: usize = MAX_SIZE * 64;

/// The config's values with typed getters that name the key in their errors.
struct Keys<'a>(&'a BTreeMap<String, Value>);

impl Keys<'_> {
    fn size(&self, key: &str, default: Option<usize>) -> Result<usize, ConvertError> {
        match self.0.get(key) {
            None | Some(Value::Null) => default.ok_or_else(|| {
                ConvertError::Config(format!("the config has no `{key}`, which the model needs"))
            }),
            Some(value) => match value.as_u64() {
                Some(v) if v <= MAX_LENGTH as u64 => Ok(v as usize),
                Some(v) => Err(ConvertError::Config(format!(
                    "`{key}` {v} is larger than {MAX_LENGTH}, the most this converter takes"
                ))),
                None => Err(ConvertError::Config(format!(
                    "`{key}` must be a whole number, found {value}"
                ))),
            },
        }
    }

    fn flag(&self, key: &str, default: bool) -> Result<bool, ConvertError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(value) => Err(ConvertError::Config(format!(
                "`{key}` must be true or false, found {value}"
            ))),
        }
    }

    fn sizes(&self, key: &str) -> Result<Option<Vec<usize>>, ConvertError> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_u64().map(|v| v as usize).ok_or_else(|| {
                        ConvertError::Config(format!("`{key}` must list whole numbers"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(value) => Err(ConvertError::Config(format!(
                "`{key}` must be a list, found {value}"
            ))),
        }
    }

    fn names(&self, key: &str) -> Option<Vec<String>> {
        self.0.get(key)?.as_array().map(|items| {
            items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .unwrap_or_else(|| v.to_string())
                })
                .collect()
        })
    }
}

impl RoFormerConfig {
    /// The config of a checkpoint; `is_band_split` says which model the checkpoint holds
    /// (BS-RoFormer has a `final_norm`, Mel-RoFormer none). Fails with
    /// [`ConvertError::Config`] naming the key for anything not built here (`use_pope`, a mono
    /// model, a window other than Hann over `n_fft`, unknown keys), a value out of range, bands
    /// that do not cover the spectrum, and YAML it does not read (anchors, with their line).
    pub fn from_yaml(text: &str, is_band_split: bool) -> Result<Self, ConvertError> {
        let values = read_msst_yaml(text).map_err(ConvertError::Config)?;
        let keys = Keys(&values);
        let model = |key: &str| format!("model.{key}");
        for key in values.keys().filter_map(|k| k.strip_prefix("model.")) {
            if !NO_EFFECT_KEYS.contains(&key) && !BUILT_KEYS.contains(&key) {
                return Err(ConvertError::Config(format!(
                    "`model.{key}` is not a RoFormer option this converter knows; it may \
                     change the network, so the model is not converted"
                )));
            }
        }
        if !values.keys().any(|k| k.starts_with("model.")) {
            return Err(ConvertError::Config(
                "the config has no model: section (is it an MSST RoFormer config?)".into(),
            ));
        }
        if keys.flag(&model("use_pope"), false)? {
            return Err(ConvertError::Config(
                "`model.use_pope`: PoPE embeddings are not built by this converter".into(),
            ));
        }
        if !keys.flag(&model("stereo"), false)? {
            return Err(ConvertError::Config(
                "`model.stereo` is false: Stemflow's RoFormer graphs are stereo; a mono \
                 RoFormer is not converted"
                    .into(),
            ));
        }
        if keys.flag(&model("stft_normalized"), false)? {
            return Err(ConvertError::Config(
                "`model.stft_normalized`: a normalised STFT is not what Stemflow computes".into(),
            ));
        }
        if values
            .get(&model("stft_window_fn"))
            .is_some_and(|v| !v.is_null())
        {
            return Err(ConvertError::Config(
                "`model.stft_window_fn`: only the default Hann window is built".into(),
            ));
        }
        let n_fft = keys.size(&model("stft_n_fft"), Some(2048))?;
        let hop_frames = keys.size(&model("stft_hop_length"), Some(512))?;
        let win = keys.size(&model("stft_win_length"), Some(2048))?;
        if win != n_fft {
            return Err(ConvertError::Config(format!(
                "`model.stft_win_length` {win} differs from stft_n_fft {n_fft}: only a \
                 window as long as the FFT is built"
            )));
        }
        for (key, value) in [("stft_n_fft", n_fft), ("stft_hop_length", hop_frames)] {
            if value == 0 {
                return Err(ConvertError::Config(format!(
                    "`model.{key}` is 0; it must be at least 1 sample"
                )));
            }
        }
        for (audio_key, value) in [("audio.n_fft", n_fft), ("audio.hop_length", hop_frames)] {
            if let Some(given) = values.get(audio_key).and_then(Value::as_u64) {
                if given == 0 {
                    return Err(ConvertError::Config(format!(
                        "`{audio_key}` is 0; it must be at least 1 sample"
                    )));
                }
                if given != value as u64 {
                    return Err(ConvertError::Config(format!(
                        "`{audio_key}` {given} differs from the model's {value} \
                         (model.stft_*): which one the model was trained with is unclear"
                    )));
                }
            }
        }
        let num_bins = n_fft / 2 + 1;
        let variant = if is_band_split {
            if values.contains_key(&model("num_bands")) {
                return Err(ConvertError::Config(
                    "the checkpoint is a BS-RoFormer (it has final_norm) but its config sets \
                     model.num_bands, a Mel-RoFormer key"
                        .into(),
                ));
            }
            let freqs_per_bands = keys
                .sizes(&model("freqs_per_bands"))?
                .unwrap_or_else(|| DEFAULT_FREQS_PER_BANDS.to_vec());
            let total: usize = freqs_per_bands.iter().sum();
            if total != num_bins || freqs_per_bands.len() < 2 || freqs_per_bands.contains(&0) {
                return Err(ConvertError::Config(format!(
                    "`model.freqs_per_bands`: {} bands of {total} bins in all; n_fft \
                     {n_fft} makes {num_bins} bins, to be split into at least 2 non-empty bands",
                    freqs_per_bands.len()
                )));
            }
            Variant::BandSplit { freqs_per_bands }
        } else {
            if values.contains_key(&model("freqs_per_bands")) {
                return Err(ConvertError::Config(
                    "the checkpoint is a Mel-RoFormer (it has no final_norm) but its config sets \
                     model.freqs_per_bands, a BS-RoFormer key"
                        .into(),
                ));
            }
            Variant::MelBand {
                num_bands: keys.size(&model("num_bands"), Some(60))?,
                sample_rate_hz: keys.size(&model("sample_rate"), Some(44100))?,
            }
        };
        let dim = keys.size(&model("dim"), None)?;
        let config = RoFormerConfig {
            variant,
            dim,
            depth: keys.size(&model("depth"), None)?,
            num_stems: keys.size(&model("num_stems"), Some(1))?,
            time_transformer_depth: keys.size(&model("time_transformer_depth"), Some(2))?,
            freq_transformer_depth: keys.size(&model("freq_transformer_depth"), Some(2))?,
            linear_transformer_depth: keys.size(&model("linear_transformer_depth"), Some(0))?,
            dim_head: keys.size(&model("dim_head"), Some(64))?,
            heads: keys.size(&model("heads"), Some(8))?,
            mask_estimator_depth: keys.size(
                &model("mask_estimator_depth"),
                Some(if is_band_split { 2 } else { 1 }),
            )?,
            mlp_expansion_factor: keys.size(&model("mlp_expansion_factor"), Some(4))?,
            skip_connection: keys.flag(&model("skip_connection"), false)?,
            zero_dc: keys.flag(&model("zero_dc"), true)?,
            n_fft,
            hop_frames,
            // demix prefers inference.chunk_size.
            chunk_frames: match values.get("inference.chunk_size") {
                Some(_) => keys.size("inference.chunk_size", None)?,
                None => keys.size("audio.chunk_size", None)?,
            },
            num_overlap: values
                .get("inference.num_overlap")
                .map(|_| keys.size("inference.num_overlap", None))
                .transpose()?,
            batch_size: values
                .get("inference.batch_size")
                .map(|_| keys.size("inference.batch_size", None))
                .transpose()?,
            stems: Vec::new(),
            sample_rate_hz: keys.size("audio.sample_rate", Some(44100))?,
        };
        let stems = match values.get("training.target_instrument") {
            Some(Value::String(target)) => vec![target.clone()],
            _ => keys.names("training.instruments").ok_or_else(|| {
                ConvertError::Config("the config names no `training.instruments`".into())
            })?,
        };
        config.check(stems)
    }

    /// Checks sizes against each other and sets the stems.
    fn check(mut self, stems: Vec<String>) -> Result<Self, ConvertError> {
        let sizes = [
            ("dim", self.dim),
            ("depth", self.depth),
            ("num_stems", self.num_stems),
            ("dim_head", self.dim_head),
            ("heads", self.heads),
            ("mask_estimator_depth", self.mask_estimator_depth),
            ("mlp_expansion_factor", self.mlp_expansion_factor),
            ("stft_hop_length", self.hop_frames),
        ];
        for (key, value) in sizes {
            if value == 0 {
                return Err(ConvertError::Config(format!(
                    "`model.{key}` is 0; it must be 1 to {MAX_SIZE}"
                )));
            }
            if value > MAX_SIZE {
                return Err(ConvertError::Config(format!(
                    "`model.{key}` {value} is larger than {MAX_SIZE}, the most this converter \
                     takes"
                )));
            }
        }
        if !self.dim_head.is_multiple_of(2) {
            return Err(ConvertError::Config(format!(
                "`model.dim_head` {} must be even for rotary embeddings",
                self.dim_head
            )));
        }
        if self.n_fft < 4 || !self.n_fft.is_multiple_of(2) || self.n_fft > MAX_SIZE {
            return Err(ConvertError::Config(format!(
                "`model.stft_n_fft` {} is not an even FFT size",
                self.n_fft
            )));
        }
        if !self.chunk_frames.is_multiple_of(self.hop_frames) || self.chunk_frames <= self.n_fft {
            return Err(ConvertError::Config(format!(
                "`audio.chunk_size` {} must be a multiple of the hop {} and longer than the \
                 FFT",
                self.chunk_frames, self.hop_frames
            )));
        }
        if stems.len() != self.num_stems {
            return Err(ConvertError::Config(format!(
                "the config names {} stems ({}) for a model of num_stems {}",
                stems.len(),
                stems.join(", "),
                self.num_stems
            )));
        }
        self.stems = stems;
        Ok(self)
    }

    /// STFT frames per chunk (`torch.stft(center=True)`).
    pub fn frames(&self) -> usize {
        self.chunk_frames / self.hop_frames + 1
    }

    /// STFT bins per channel.
    pub fn num_bins(&self) -> usize {
        self.n_fft / 2 + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BS: &str = "audio:\n  chunk_size: 352800\n  n_fft: 2048\n  hop_length: 441 # hop\n\
        model:\n  dim: 512\n  depth: 12\n  stereo: true\n  num_stems: 1\n\
        \x20 time_transformer_depth: 1\n  freq_transformer_depth: 1\n  linear_transformer_depth: 0\n\
        \x20 freqs_per_bands: !!python/tuple\n  - 1024\n  - 1\n  dim_head: 64\n  heads: 8\n\
        \x20 attn_dropout: 0.1\n  flash_attn: true\n  stft_n_fft: 2048\n  stft_hop_length: 441\n\
        \x20 stft_win_length: 2048\n  stft_normalized: false\n  mask_estimator_depth: 2\n\
        \x20 multi_stft_resolutions_window_sizes: !!python/tuple\n  - 4096\n  - 256\n\
        training:\n  instruments:\n  - vocals\n  - other\n  target_instrument: vocals\n\
        inference:\n  batch_size: 4\n  num_overlap: 2\n";

    #[test]
    fn a_released_style_bs_config_reads_with_its_defaults() {
        let config = RoFormerConfig::from_yaml(BS, true).unwrap();
        assert_eq!(
            config.variant,
            Variant::BandSplit {
                freqs_per_bands: vec![1024, 1]
            }
        );
        assert_eq!((config.dim, config.depth, config.heads), (512, 12, 8));
        assert_eq!((config.frames(), config.num_bins()), (801, 1025));
        assert_eq!(config.stems, ["vocals"]);
        assert_eq!(config.num_overlap, Some(2));
        assert_eq!(config.batch_size, Some(4));
        assert!(config.zero_dc && !config.skip_connection);
        assert_eq!(config.mlp_expansion_factor, 4);
    }

    #[test]
    fn a_wrong_config_is_a_config_error_naming_the_key() {
        let cases = [
            (
                "  chunk_size: 352800\n",
                "  chunk_size: 100000000000\n",
                "`audio.chunk_size` 100000000000 is larger than 4194304",
            ),
            (
                "  hop_length: 441 # hop\n",
                "  hop_length: 0\n",
                "`audio.hop_length` is 0",
            ),
            (
                "  stft_hop_length: 441\n",
                "  stft_hop_length: 0\n",
                "`model.stft_hop_length` is 0",
            ),
            (
                "  dim: 512\n",
                "  dim: &width 512\n",
                "YAML anchors and aliases (`&name`, `*name`) are not supported (line 6)",
            ),
        ];
        for (from, to, expected) in cases {
            let error = edited_config_error(from, to);
            assert!(
                matches!(&error, ConvertError::Config(m) if m.contains(expected)),
                "{expected}: {error:?}"
            );
        }
    }

    /// The error of the BS-RoFormer config with its first `from` replaced by `to`.
    fn edited_config_error(from: &str, to: &str) -> ConvertError {
        let yaml = BS.replacen(from, to, 1);
        assert_ne!(yaml, BS, "{from}");
        RoFormerConfig::from_yaml(&yaml, true).unwrap_err()
    }

    #[test]
    fn what_is_not_built_is_refused_by_name() {
        let cases = [
            (
                "  depth: 12\n",
                "  depth: 12\n  fancy_option: 3\n",
                "model.fancy_option",
            ),
            ("  stereo: true\n", "  stereo: false\n", "mono"),
            (
                "  depth: 12\n",
                "  depth: 12\n  use_pope: true\n",
                "use_pope",
            ),
            (
                "  stft_win_length: 2048\n",
                "  stft_win_length: 1024\n",
                "stft_win_length",
            ),
            ("  - 1024\n  - 1\n", "  - 1024\n  - 2\n", "freqs_per_bands"),
            ("  num_stems: 1\n", "  num_stems: 2\n", "names 1 stems"),
            (
                "  chunk_size: 352800\n",
                "  chunk_size: 352801\n",
                "chunk_size",
            ),
            (
                "  hop_length: 441",
                "  hop_length: 512",
                "`audio.hop_length` 512",
            ),
        ];
        for (from, to, expected) in cases {
            let error = edited_config_error(from, to).to_string();
            assert!(error.contains(expected), "{expected}: {error}");
        }
        let error = RoFormerConfig::from_yaml(BS, false)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("freqs_per_bands, a BS-RoFormer key"),
            "{error}"
        );
        let mel = BS.replace(
            "  freqs_per_bands: !!python/tuple\n  - 1024\n  - 1\n",
            "  num_bands: 60\n",
        );
        let config = RoFormerConfig::from_yaml(&mel, false).unwrap();
        assert_eq!(
            config.variant,
            Variant::MelBand {
                num_bands: 60,
                sample_rate_hz: 44100
            }
        );
        assert_eq!(config.mask_estimator_depth, 2);
    }
}
