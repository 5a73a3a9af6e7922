//! [`RemoteFile`]: one file a model is made of, at its owner's URL, and [`FileCheck`]: how it
//! is checked when downloaded. The catalogue lists them; the downloader and the Spleeter wheel
//! check them.

/// How a downloaded file is checked before it is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileCheck {
    /// SHA-256 of the whole file (lower-case hex), when known: the owner's (PyPI) or agreed by
    /// several independent publishers (`models/catalogue-sources.md` says which).
    pub sha256: Option<&'static str>,
    /// The leading hex digits of the SHA-256 the owner publishes (demucs names its files
    /// `<signature>-<first 8 hex digits>.th` and checks exactly that).
    pub sha256_prefix: Option<&'static str>,
    /// UVR's key for the file: the MD5 of its last 10,240,000 bytes (the whole file when
    /// smaller), which its parameter table is keyed by.
    pub uvr_md5_tail: Option<&'static str>,
    /// The file's size in bytes, when known.
    pub size_bytes: Option<u64>,
}

impl FileCheck {
    /// Whether nothing checks the whole file: no SHA-256 and no owner's prefix of one, only
    /// the size and UVR's MD5 of the last 10,240,000 bytes (`mel_roformer_viperx_1143`). Such
    /// a file is offered as *weakly verified*. Realtime-safe.
    pub const fn is_weak(&self) -> bool {
        self.sha256.is_none() && self.sha256_prefix.is_none()
    }

    /// A check of the SHA-256 alone (a pinned wheel's or checkpoint's).
    pub const fn of_sha256(sha256: &'static str) -> Self {
        Self {
            sha256: Some(sha256),
            sha256_prefix: None,
            uvr_md5_tail: None,
            size_bytes: None,
        }
    }
}

/// One file a catalogue model is made of, at its owner's URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteFile {
    /// Where the owner publishes it.
    pub url: &'static str,
    /// How it is checked.
    pub check: FileCheck,
}

impl RemoteFile {
    /// The file name at the end of the URL.
    pub fn file_name(&self) -> &'static str {
        self.url.rsplit('/').next().unwrap_or(self.url)
    }
}
