//! [`ConvertError`]: why a checkpoint could not be converted, in words a user can act on.

/// Why an archive, a checkpoint, a conversion or a graph rewrite failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConvertError {
    /// The archive (wheel or checkpoint zip) is damaged or not a zip.
    Zip(String),
    /// The pickle is damaged, or asks for something a checkpoint never needs (a call outside the
    /// allow-list, named in the message).
    Pickle(String),
    /// The file or its arrays are not the layout the reader or converter expects (not a torch
    /// checkpoint, a missing storage or key, a wrong size or shape).
    Layout(String),
    /// A config given with a checkpoint (an MSST `.yaml`) is wrong: unreadable YAML, a key out
    /// of range or one the converter does not build. The message names the key; the caller
    /// names the file.
    Config(String),
    /// A model cannot be quantized (not a model, already quantized, nothing to quantize).
    Quantize(String),
    /// A model cannot be converted to float16 (not a model, already converted, sub-graphs).
    Float16(String),
    /// The conversion was cancelled ([`crate::cancel::cancellable`]).
    Cancelled,
}

impl std::fmt::Display for ConvertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConvertError::Zip(m) => write!(f, "damaged archive: {m}"),
            ConvertError::Pickle(m) => write!(f, "refused checkpoint: {m}"),
            ConvertError::Layout(m) => write!(f, "unexpected checkpoint layout: {m}"),
            ConvertError::Config(m) => f.write_str(m),
            ConvertError::Quantize(m) => write!(f, "cannot quantize: {m}"),
            ConvertError::Float16(m) => write!(f, "cannot convert to float16: {m}"),
            ConvertError::Cancelled => f.write_str("the conversion was cancelled"),
        }
    }
}

impl ConvertError {
    /// The same error with `prefix` before and `suffix` after its message.
    pub fn with_context(self, prefix: &str, suffix: &str) -> Self {
        let wrap = |message: String| format!("{prefix}{message}{suffix}");
        match self {
            ConvertError::Zip(m) => ConvertError::Zip(wrap(m)),
            ConvertError::Pickle(m) => ConvertError::Pickle(wrap(m)),
            ConvertError::Layout(m) => ConvertError::Layout(wrap(m)),
            ConvertError::Config(m) => ConvertError::Config(wrap(m)),
            ConvertError::Quantize(m) => ConvertError::Quantize(wrap(m)),
            ConvertError::Float16(m) => ConvertError::Float16(wrap(m)),
            ConvertError::Cancelled => ConvertError::Cancelled,
        }
    }
}

impl std::error::Error for ConvertError {}

impl From<stemflow_onnx::GraphError> for ConvertError {
    fn from(error: stemflow_onnx::GraphError) -> Self {
        ConvertError::Layout(error.0)
    }
}
