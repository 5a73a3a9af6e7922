//! [`FetchError`]: why a model could not be fetched, imported or installed, in words a user can
//! act on.

use stemflow_convert::ConvertError;

/// Why a download, a check, an installation or the conversion of what was fetched failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    /// What was fetched or given is not what it should be, or could not be converted (a damaged
    /// archive, a refused pickle, an unexpected layout).
    Convert(ConvertError),
    /// A file's hash is not the pinned one.
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

impl std::fmt::Display for FetchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FetchError::Convert(error) => error.fmt(f),
            FetchError::Checksum {
                what,
                expected,
                found,
            } => write!(
                f,
                "{what} has SHA-256 {found}, expected {expected}: the file is damaged or not the pinned release"
            ),
            FetchError::Download(m) => write!(f, "download failed: {m}"),
            FetchError::Io(m) => f.write_str(m),
            FetchError::Unreachable(m) => write!(f, "cannot reach the source: {m}"),
            FetchError::TermsNotAccepted { model, terms } => write!(
                f,
                "the owner's terms for {model} have not been accepted (nothing was downloaded): \
                 {terms}"
            ),
            FetchError::Cancelled => f.write_str(
                "cancelled; what was downloaded is kept and resumed by the next attempt",
            ),
        }
    }
}

impl FetchError {
    /// A file that is not the layout it should be ([`ConvertError::Layout`]).
    pub fn layout(message: String) -> Self {
        FetchError::Convert(ConvertError::Layout(message))
    }

    /// The same error with `prefix` before and `suffix` after its message (a checksum, a
    /// cancellation or unaccepted terms, which say everything, are kept as they are).
    pub fn with_context(self, prefix: &str, suffix: &str) -> Self {
        let wrap = |message: String| format!("{prefix}{message}{suffix}");
        match self {
            FetchError::Convert(error) => FetchError::Convert(error.with_context(prefix, suffix)),
            FetchError::Download(m) => FetchError::Download(wrap(m)),
            FetchError::Io(m) => FetchError::Io(wrap(m)),
            FetchError::Unreachable(m) => FetchError::Unreachable(wrap(m)),
            error @ (FetchError::Checksum { .. }
            | FetchError::TermsNotAccepted { .. }
            | FetchError::Cancelled) => error,
        }
    }
}

impl std::error::Error for FetchError {}

impl From<ConvertError> for FetchError {
    fn from(error: ConvertError) -> Self {
        FetchError::Convert(error)
    }
}
