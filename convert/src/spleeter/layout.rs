//! The Spleeter graph's names, sizes and layer constants, apart so that the modules building
//! the graph share them without importing the module that declares them.

/// Name of the graph input: the mixture's magnitude spectrogram `[1, 2, T, 1024]`.
pub const MAGNITUDE_INPUT: &str = "magnitude";
/// Name of the graph output: every stem's masked magnitude `[1, S, 2, T, 1024]`.
pub const ESTIMATES_OUTPUT: &str = "estimates";
/// Frequency bins the network sees (the first 1024 of a 4096-point STFT).
pub const SPLEETER_BINS: usize = 1024;
/// Input channels: the stereo channels of the magnitude.
pub const INPUT_CHANNELS: usize = 2;
/// The encoder halves time six times, so the frames must be a multiple of this.
pub const FRAMES_MULTIPLE: usize = 64;
/// Encoder stages (`down1` … `down6`), and decoder stages before the mask (`up1` … `up6`).
pub const NUM_STAGES: usize = 6;
/// Batch normalisation's ε (Keras' default, which Spleeter trained with).
pub const BATCH_NORM_EPSILON: f32 = 1e-3;
/// The encoder's LeakyReLU slope.
pub const LEAKY_RELU_SLOPE: f32 = 0.2;
/// Metadata key naming the model family (what Stemflow's engine recognises).
pub const FAMILY_METADATA_KEY: &str = "stemflow.family";
/// Value of [`FAMILY_METADATA_KEY`] for these graphs.
pub const FAMILY_NAME: &str = "spleeter";
/// Metadata key listing the stems in output order, comma-separated.
pub const STEMS_METADATA_KEY: &str = "stemflow.stems";

/// Kernel of the strided (transposed) convolutions.
pub(super) const STRIDED_KERNEL: usize = 5;
/// Kernel of the final dilated convolution.
pub(super) const MASK_KERNEL: usize = 4;
/// TensorFlow's "same" padding for a stride-2, kernel-5 convolution on an even size:
/// `[T_begin, F_begin, T_end, F_end]`.
pub(super) const SAME_PADS: [usize; 4] = [1, 1, 2, 2];
/// "Same" padding for the kernel-4, dilation-2 convolution (effective kernel 7).
pub(super) const MASK_PADS: [usize; 4] = [3, 3, 3, 3];
/// The int64 initializer holding `[1]`, the axis the stems are stacked on.
pub(super) const STEM_AXIS_INITIALIZER: &str = "stem_axis";
