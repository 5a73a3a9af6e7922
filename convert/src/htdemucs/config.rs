//! [`HtDemucsConfig`]: an HTDemucs checkpoint's `kwargs` (the arguments demucs' `capture_init`
//! recorded), with demucs 4's defaults (`demucs/htdemucs.py`, `HTDemucs.__init__`) for the
//! ones left out, checked for what the converter builds.

use crate::error::ConvertError;
use crate::torch::Value;

/// The sample rate Stemflow's models run at.
const SAMPLE_RATE_HZ: i64 = 44_100;

/// The transformer's positional embedding (`t_emb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PositionalEmbedding {
    /// `"sin"`: sinusoids of the time step (shift 0: `t_sin_random_shift` must be 0).
    Sin,
    /// `"cape"` at inference: sinusoids of the time step minus the mean time step when
    /// `t_cape_mean_normalize`, no augmentation.
    Cape {
        /// Whether positions are centred on their mean.
        mean_normalize: bool,
    },
}

/// What the converter needs of an HTDemucs model's hyper-parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct HtDemucsConfig {
    /// Source names in output order.
    pub sources: Vec<String>,
    /// Audio channels (2).
    pub audio_channels: usize,
    /// Hidden channels of the first frequency layer.
    pub channels: usize,
    /// Hidden channels of the first time layer (`channels_time`, else `channels`).
    pub channels_time: usize,
    /// Channel growth per layer.
    pub growth: f64,
    /// FFT size (hop `nfft / 4`).
    pub nfft: usize,
    /// Encoder (and decoder) layers.
    pub depth: usize,
    /// Whether each layer ends with a 1×1 (encoder) or `1 + 2·context` (decoder) convolution
    /// and a GLU.
    pub rewrite: bool,
    /// Weight of the frequency embedding added after the first frequency layer (0: none).
    pub freq_emb: f64,
    /// `emb_scale`: the embedding's values are its weights times this.
    pub emb_scale: f64,
    /// Convolution kernel along frequency and time.
    pub kernel_size: usize,
    /// Convolution stride.
    pub stride: usize,
    /// Context of the decoder's rewrite convolution.
    pub context: usize,
    /// Context of the encoder's rewrite convolution.
    pub context_enc: usize,
    /// First layer with group normalisation.
    pub norm_starts: usize,
    /// Groups of that normalisation.
    pub norm_groups: usize,
    /// 1: DConv branches in the encoder, 2: in the decoder, 3: both, 0: none.
    pub dconv_mode: u8,
    /// DConv layers (negative: no dilation).
    pub dconv_depth: i64,
    /// DConv channel compression.
    pub dconv_comp: f64,
    /// Channels of the 1×1 convolutions around the transformer (0: none).
    pub bottom_channels: usize,
    /// Transformer layers per branch (0: no transformer).
    pub t_layers: usize,
    /// Positional embedding.
    pub t_emb: PositionalEmbedding,
    /// Feed-forward width over model width.
    pub t_hidden_scale: f64,
    /// Attention heads.
    pub t_heads: usize,
    /// Layer norm of the transformer inputs.
    pub t_norm_in: bool,
    /// Group norm (one group) of the transformer inputs, when `t_norm_in` is off.
    pub t_norm_in_group: bool,
    /// Whether the transformer layers' norms are one-group group norms, not layer norms.
    pub t_group_norm: bool,
    /// Whether the norms come before attention and feed-forward.
    pub t_norm_first: bool,
    /// Whether each layer ends with a one-group group norm (with `t_norm_first`).
    pub t_norm_out: bool,
    /// Sinusoid period.
    pub t_max_period: f64,
    /// Layer scales on the residual branches.
    pub t_layer_scale: bool,
    /// GELU (else ReLU) in the feed-forward blocks.
    pub t_gelu: bool,
    /// Weight of the positional embedding.
    pub t_weight_pos_embed: f64,
    /// Whether the first transformer layer is a cross-attention layer.
    pub t_cross_first: bool,
    /// Frames per model run: `int(segment × samplerate)`.
    pub segment_frames: usize,
}

/// Every keyword `HTDemucs.__init__` takes (demucs 4.0/4.1). A key outside this list is refused.
const KNOWN_KWARGS: &[&str] = &[
    "sources",
    "audio_channels",
    "channels",
    "channels_time",
    "growth",
    "nfft",
    "wiener_iters",
    "end_iters",
    "wiener_residual",
    "cac",
    "depth",
    "rewrite",
    "multi_freqs",
    "multi_freqs_depth",
    "freq_emb",
    "emb_scale",
    "emb_smooth",
    "kernel_size",
    "time_stride",
    "stride",
    "context",
    "context_enc",
    "norm_starts",
    "norm_groups",
    "dconv_mode",
    "dconv_depth",
    "dconv_comp",
    "dconv_init",
    "bottom_channels",
    "t_layers",
    "t_emb",
    "t_hidden_scale",
    "t_heads",
    "t_dropout",
    "t_max_positions",
    "t_norm_in",
    "t_norm_in_group",
    "t_group_norm",
    "t_norm_first",
    "t_norm_out",
    "t_max_period",
    "t_weight_decay",
    "t_lr",
    "t_layer_scale",
    "t_gelu",
    "t_weight_pos_embed",
    "t_sin_random_shift",
    "t_cape_mean_normalize",
    "t_cape_augment",
    "t_cape_glob_loc_scale",
    "t_sparse_self_attn",
    "t_sparse_cross_attn",
    "t_mask_type",
    "t_mask_random_seed",
    "t_sparse_attn_window",
    "t_global_window",
    "t_sparsity",
    "t_auto_sparsity",
    "t_cross_first",
    "rescale",
    "samplerate",
    "segment",
    "use_train_segment",
];

/// Reads the keyword arguments with their defaults.
struct Kwargs<'v> {
    items: &'v [(Value, Value)],
}

impl<'v> Kwargs<'v> {
    fn get(&self, key: &str) -> Option<&'v Value> {
        self.items
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
            .filter(|v| !matches!(v, Value::None))
    }

    fn wrong(key: &str, value: &Value, what: &str) -> ConvertError {
        ConvertError::Layout(format!(
            "HTDemucs kwargs: {key} is {}, expected {what}",
            value.describe()
        ))
    }

    fn usize(&self, key: &str, default: usize) -> Result<usize, ConvertError> {
        match self.get(key) {
            None => Ok(default),
            Some(value) => match value {
                Value::Int(v) if *v >= 0 => Ok(*v as usize),
                Value::Bool(b) => Ok(usize::from(*b)),
                _ => Err(Self::wrong(key, value, "a whole number ≥ 0")),
            },
        }
    }

    fn i64(&self, key: &str, default: i64) -> Result<i64, ConvertError> {
        match self.get(key) {
            None => Ok(default),
            Some(value) => value
                .as_i64()
                .ok_or_else(|| Self::wrong(key, value, "a whole number")),
        }
    }

    fn f64(&self, key: &str, default: f64) -> Result<f64, ConvertError> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(f64::from(u8::from(*b))),
            Some(value) => value
                .as_f64()
                .filter(|v| v.is_finite())
                .ok_or_else(|| Self::wrong(key, value, "a number")),
        }
    }

    fn bool(&self, key: &str, default: bool) -> Result<bool, ConvertError> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::Int(v)) => Ok(*v != 0),
            Some(value) => Err(Self::wrong(key, value, "True or False")),
        }
    }

    fn str(&self, key: &str, default: &'static str) -> Result<String, ConvertError> {
        match self.get(key) {
            None => Ok(default.to_owned()),
            Some(value) => value
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| Self::wrong(key, value, "a str")),
        }
    }
}

fn refuse(message: String) -> ConvertError {
    ConvertError::Layout(format!("this HTDemucs cannot be converted: {message}"))
}

impl HtDemucsConfig {
    /// The configuration of a demucs package (`klass`, `args`, `kwargs`).
    ///
    /// Fails with [`ConvertError::Layout`] naming the key for a model that is not an
    /// `HTDemucs`, an unknown keyword, a value of the wrong type, or an option this converter
    /// does not build (Wiener filtering, masks instead of complex-as-channels, `multi_freqs`,
    /// sparse attention, layers after the frequency axis is used up, a random positional shift
    /// at inference, another sample rate).
    pub fn from_package(package: &Value) -> Result<Self, ConvertError> {
        match package.get("klass") {
            Some(Value::Global { module, name })
                if module == "demucs.htdemucs" && name == "HTDemucs" => {}
            Some(Value::Global { module, name }) => {
                return Err(ConvertError::Layout(format!(
                    "the checkpoint holds a {module}.{name}; Stemflow converts HTDemucs \
                     (demucs v4) models"
                )))
            }
            Some(other) => {
                return Err(ConvertError::Layout(format!(
                    "the checkpoint's klass is {}, not a demucs model class",
                    other.describe()
                )))
            }
            None => {
                return Err(ConvertError::Layout(
                    "not a demucs model package (no klass, args, kwargs and state): a bare \
                     state dict needs its model's configuration"
                        .into(),
                ))
            }
        }
        if let Some(args) = package.get("args").and_then(Value::as_items) {
            if !args.is_empty() {
                return Err(ConvertError::Layout(format!(
                    "HTDemucs was built with {} positional arguments; demucs saves keywords \
                     only",
                    args.len()
                )));
            }
        }
        let items = package
            .get("kwargs")
            .and_then(Value::as_dict)
            .ok_or_else(|| ConvertError::Layout("the package has no kwargs dict".into()))?;
        for (key, _) in items {
            let key = key.as_str().ok_or_else(|| {
                ConvertError::Layout(format!("a kwargs key is {}", key.describe()))
            })?;
            if !KNOWN_KWARGS.contains(&key) {
                return Err(refuse(format!(
                    "unknown HTDemucs option {key:?} (a newer or patched demucs?)"
                )));
            }
        }
        Self::from_kwargs(&Kwargs { items })
    }

    fn from_kwargs(k: &Kwargs<'_>) -> Result<Self, ConvertError> {
        let sources = match k.get("sources") {
            Some(value) => value
                .as_items()
                .and_then(|items| {
                    items
                        .iter()
                        .map(|s| s.as_str().map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                })
                .filter(|s| !s.is_empty() && s.len() <= 16)
                .ok_or_else(|| Kwargs::wrong("sources", value, "a list of 1 to 16 names"))?,
            None => return Err(refuse("its kwargs name no sources".into())),
        };
        let audio_channels = k.usize("audio_channels", 2)?;
        if audio_channels != 2 {
            return Err(refuse(format!(
                "audio_channels is {audio_channels}; Stemflow runs stereo models"
            )));
        }
        let channels = k.usize("channels", 48)?;
        let channels_time = k.usize("channels_time", channels)?;
        let nfft = k.usize("nfft", 4096)?;
        if !(nfft >= 16 && nfft.is_power_of_two() && nfft <= 1 << 15) {
            return Err(refuse(format!(
                "nfft {nfft} is not a power of two from 16 to 32768"
            )));
        }
        if k.usize("wiener_iters", 0)? != 0 || k.usize("end_iters", 0)? != 0 {
            return Err(refuse(
                "Wiener filtering (wiener_iters > 0) is not supported".into(),
            ));
        }
        if !k.bool("cac", true)? {
            return Err(refuse(
                "it masks magnitudes (cac False); only complex-as-channels models convert".into(),
            ));
        }
        if k.get("multi_freqs")
            .and_then(Value::as_items)
            .is_some_and(|items| !items.is_empty())
        {
            return Err(refuse(
                "multi_freqs (frequency bands split across layers) is not supported".into(),
            ));
        }
        let t_emb = match k.str("t_emb", "sin")?.as_str() {
            "sin" => {
                if k.i64("t_sin_random_shift", 0)? != 0 {
                    return Err(refuse(
                        "t_sin_random_shift > 0 shifts its positions at random on every run".into(),
                    ));
                }
                PositionalEmbedding::Sin
            }
            "cape" => PositionalEmbedding::Cape {
                mean_normalize: k.bool("t_cape_mean_normalize", true)?,
            },
            other => {
                return Err(refuse(format!(
                    "positional embedding t_emb {other:?} (only \"sin\" and \"cape\")"
                )))
            }
        };
        if k.bool("t_sparse_self_attn", false)? || k.bool("t_sparse_cross_attn", false)? {
            return Err(refuse(
                "sparse attention (xformers) is not supported".into(),
            ));
        }
        let samplerate = k.i64("samplerate", SAMPLE_RATE_HZ)?;
        if samplerate != SAMPLE_RATE_HZ {
            return Err(refuse(format!(
                "it runs at {samplerate} Hz; Stemflow's models run at {SAMPLE_RATE_HZ} Hz"
            )));
        }
        let segment_frames = match k.get("segment") {
            None => 10 * SAMPLE_RATE_HZ,
            Some(Value::Fraction {
                numerator,
                denominator,
            }) => {
                (i128::from(*numerator) * i128::from(SAMPLE_RATE_HZ) / i128::from(*denominator))
                    as i64
            }
            Some(Value::Int(seconds)) => seconds.saturating_mul(SAMPLE_RATE_HZ),
            Some(Value::Float(seconds)) => (seconds * SAMPLE_RATE_HZ as f64).floor() as i64,
            Some(other) => return Err(Kwargs::wrong("segment", other, "seconds")),
        };
        if !(nfft as i64..=1 << 22).contains(&segment_frames) {
            return Err(refuse(format!(
                "its segment is {segment_frames} frames (from {} to {} expected)",
                nfft,
                1 << 22
            )));
        }
        let config = HtDemucsConfig {
            sources,
            audio_channels,
            channels,
            channels_time,
            growth: k.f64("growth", 2.0)?,
            nfft,
            depth: k.usize("depth", 4)?,
            rewrite: k.bool("rewrite", true)?,
            freq_emb: k.f64("freq_emb", 0.2)?,
            emb_scale: k.f64("emb_scale", 10.0)?,
            kernel_size: k.usize("kernel_size", 8)?,
            stride: k.usize("stride", 4)?,
            context: k.usize("context", 1)?,
            context_enc: k.usize("context_enc", 0)?,
            norm_starts: k.usize("norm_starts", 4)?,
            norm_groups: k.usize("norm_groups", 4)?,
            dconv_mode: k.usize("dconv_mode", 1)?.min(3) as u8,
            dconv_depth: k.i64("dconv_depth", 2)?,
            dconv_comp: k.f64("dconv_comp", 8.0)?,
            bottom_channels: k.usize("bottom_channels", 0)?,
            t_layers: k.usize("t_layers", 5)?,
            t_emb,
            t_hidden_scale: k.f64("t_hidden_scale", 4.0)?,
            t_heads: k.usize("t_heads", 8)?,
            t_norm_in: k.bool("t_norm_in", true)?,
            t_norm_in_group: k.bool("t_norm_in_group", false)?,
            t_group_norm: k.bool("t_group_norm", false)?,
            t_norm_first: k.bool("t_norm_first", true)?,
            t_norm_out: k.bool("t_norm_out", true)?,
            t_max_period: k.f64("t_max_period", 10000.0)?,
            t_layer_scale: k.bool("t_layer_scale", true)?,
            t_gelu: k.bool("t_gelu", true)?,
            t_weight_pos_embed: k.f64("t_weight_pos_embed", 1.0)?,
            t_cross_first: k.bool("t_cross_first", false)?,
            segment_frames: segment_frames as usize,
        };
        config.check_shapes()?;
        Ok(config)
    }

    /// Checks the sizes the graph is built from, so that no arithmetic below can overflow or
    /// divide by zero.
    fn check_shapes(&self) -> Result<(), ConvertError> {
        let in_range = |name: &str, value: usize, max: usize| {
            if (1..=max).contains(&value) {
                Ok(())
            } else {
                Err(refuse(format!("{name} {value} outside 1..={max}")))
            }
        };
        in_range("channels", self.channels, 4096)?;
        in_range("channels_time", self.channels_time, 4096)?;
        in_range("depth", self.depth, 12)?;
        in_range("kernel_size", self.kernel_size, 64)?;
        in_range("stride", self.stride, 64)?;
        in_range("norm_groups", self.norm_groups, 4096)?;
        in_range("t_heads", self.t_heads, 256)?;
        if !(1.0..=8.0).contains(&self.growth)
            || !(1.0..=1024.0).contains(&self.dconv_comp)
            || !(0.0..=64.0).contains(&self.t_hidden_scale)
            || self.dconv_depth.unsigned_abs() > 16
            || self.context > 16
            || self.context_enc > 16
        {
            return Err(refuse(
                "growth, dconv_comp, t_hidden_scale, dconv_depth or context out of range".into(),
            ));
        }
        if self.kernel_size < self.stride {
            return Err(refuse(format!(
                "kernel_size {} with stride {}",
                self.kernel_size, self.stride
            )));
        }
        Ok(())
    }

    /// The STFT hop.
    pub fn hop_frames(&self) -> usize {
        self.nfft / 4
    }

    /// STFT frames per segment (`ceil(segment / hop)`).
    pub fn spec_frames(&self) -> usize {
        self.segment_frames.div_ceil(self.hop_frames())
    }

    /// Frequency bins the model sees (`nfft / 2`: the Nyquist bin is dropped).
    pub fn spec_bins(&self) -> usize {
        self.nfft / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(kwargs: Vec<(&str, Value)>) -> Value {
        let mut items = vec![(
            Value::Str("sources".into()),
            Value::List(
                ["drums", "bass", "other", "vocals"]
                    .iter()
                    .map(|s| Value::Str((*s).into()))
                    .collect(),
            ),
        )];
        items.extend(kwargs.into_iter().map(|(k, v)| (Value::Str(k.into()), v)));
        Value::Dict(vec![
            (
                Value::Str("klass".into()),
                Value::Global {
                    module: "demucs.htdemucs".into(),
                    name: "HTDemucs".into(),
                },
            ),
            (Value::Str("args".into()), Value::Tuple(Vec::new())),
            (Value::Str("kwargs".into()), Value::Dict(items)),
        ])
    }

    fn error(kwargs: Vec<(&str, Value)>) -> String {
        HtDemucsConfig::from_package(&package(kwargs))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn released_kwargs_read_with_the_segment_as_a_fraction() {
        let config = HtDemucsConfig::from_package(&package(vec![
            (
                "segment",
                Value::Fraction {
                    numerator: 39,
                    denominator: 5,
                },
            ),
            ("bottom_channels", Value::Int(512)),
            ("t_hidden_scale", Value::Float(4.0)),
            ("dconv_mode", Value::Int(1)),
        ]))
        .unwrap();
        // int(Fraction(39, 5) * 44100): htdemucs' training length.
        assert_eq!(config.segment_frames, 343_980);
        assert_eq!(config.spec_frames(), 336);
        assert_eq!(config.spec_bins(), 2048);
        assert_eq!(config.bottom_channels, 512);
        assert_eq!(config.channels_time, 48);
        assert_eq!(config.sources.len(), 4);
    }

    #[test]
    fn options_that_change_the_network_and_are_not_built_are_refused_by_name() {
        for (kwargs, says) in [
            (vec![("dconv_lstm", Value::Int(2))], "dconv_lstm"),
            (vec![("wiener_iters", Value::Int(1))], "Wiener"),
            (vec![("cac", Value::Bool(false))], "cac False"),
            (
                vec![("multi_freqs", Value::List(vec![Value::Float(0.25)]))],
                "multi_freqs",
            ),
            (vec![("t_emb", Value::Str("scaled".into()))], "scaled"),
            (vec![("t_sin_random_shift", Value::Int(100))], "at random"),
            (vec![("t_sparse_self_attn", Value::Bool(true))], "sparse"),
            (vec![("samplerate", Value::Int(48_000))], "48000 Hz"),
            (vec![("audio_channels", Value::Int(1))], "stereo"),
            (
                vec![("channels", Value::Str("48".into()))],
                "channels is the str",
            ),
        ] {
            let message = error(kwargs);
            assert!(message.contains(says), "{says}: {message}");
        }
    }

    #[test]
    fn another_model_class_is_named() {
        let mut value = package(Vec::new());
        if let Value::Dict(items) = &mut value {
            items[0].1 = Value::Global {
                module: "demucs.hdemucs".into(),
                name: "HDemucs".into(),
            };
        }
        let message = HtDemucsConfig::from_package(&value)
            .unwrap_err()
            .to_string();
        assert!(message.contains("demucs.hdemucs.HDemucs"), "{message}");
        let message = HtDemucsConfig::from_package(&Value::Dict(Vec::new()))
            .unwrap_err()
            .to_string();
        assert!(message.contains("not a demucs model package"), "{message}");
    }
}
