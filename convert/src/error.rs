//! [`ConvertError`]: why a checkpoint could not be converted, in words a user can act on.

/// Why a download, an archive, a checkpoint or a conversion failed.
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
    /// A file's SHA-256 is not the pinned one.
    Checksum {
        /// What was checked.
        what: String,
        /// The pinned hash.
        expected: String,
        /// The file's hash.
        found: String,
    },
    /// Downloading failed.
    Download(String),
    /// Reading or writing a file failed.
    Io(String),
    /// A model cannot be quantized (not a model, already quantized, nothing to quantize).
    Quantize(String),
    /// A model cannot be converted to float16 (not a model, already converted, sub-graphs).
    Float16(String),
    /// The source could not be reached at all (no network, DNS, a proxy refusing): the message
    /// says what to fetch by hand.
    Unreachable(String),
    /// The owner's terms for a model have not been accepted; nothing was downloaded.
    TermsNotAccepted {
        /// The model.
        model: String,
        /// Its terms.
        terms: String,
    },
    /// The caller cancelled; a partial download is kept and resumed next time.
    Cancelled,
}

impl std::fmt::Display for ConvertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConvertError::Zip(m) => write!(f, "damaged archive: {m}"),
            ConvertError::Pickle(m) => write!(f, "refused checkpoint: {m}"),
            ConvertError::Layout(m) => write!(f, "unexpected checkpoint layout: {m}"),
            ConvertError::Checksum {
                what,
                expected,
                found,
            } => write!(
                f,
                "{what} has SHA-256 {found}, expected {expected}: the file is damaged or not the pinned release"
            ),
            ConvertError::Download(m) => write!(f, "download failed: {m}"),
            ConvertError::Io(m) => f.write_str(m),
            ConvertError::Quantize(m) => write!(f, "cannot quantize: {m}"),
            ConvertError::Float16(m) => write!(f, "cannot convert to float16: {m}"),
            ConvertError::Unreachable(m) => write!(f, "cannot reach the source: {m}"),
            ConvertError::TermsNotAccepted { model, terms } => write!(
                f,
                "the owner's terms for {model} have not been accepted (nothing was downloaded): \
                 {terms}"
            ),
            ConvertError::Cancelled => f.write_str(
                "cancelled; what was downloaded is kept and resumed by the next attempt",
            ),
        }
    }
}

impl ConvertError {
    /// The same error with `prefix` before and `suffix` after its message (a checksum, a
    /// cancellation or unaccepted terms, which say everything, are kept as they are).
    pub fn with_context(self, prefix: &str, suffix: &str) -> Self {
        let wrap = |message: String| format!("{prefix}{message}{suffix}");
        match self {
            ConvertError::Zip(m) => ConvertError::Zip(wrap(m)),
            ConvertError::Pickle(m) => ConvertError::Pickle(wrap(m)),
            ConvertError::Layout(m) => ConvertError::Layout(wrap(m)),
            ConvertError::Download(m) => ConvertError::Download(wrap(m)),
            ConvertError::Io(m) => ConvertError::Io(wrap(m)),
            ConvertError::Quantize(m) => ConvertError::Quantize(wrap(m)),
            ConvertError::Float16(m) => ConvertError::Float16(wrap(m)),
            ConvertError::Unreachable(m) => ConvertError::Unreachable(wrap(m)),
            error @ (ConvertError::Checksum { .. }
            | ConvertError::TermsNotAccepted { .. }
            | ConvertError::Cancelled) => error,
        }
    }
}

impl std::error::Error for ConvertError {}

impl From<stemflow_onnx::GraphError> for ConvertError {
    fn from(error: stemflow_onnx::GraphError) -> Self {
        ConvertError::Layout(error.0)
    }
}
