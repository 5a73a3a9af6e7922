//! Stemflow's audio files: reading any supported input and writing stems, for the CLI and the
//! fuzz crate alike.
//!
//! - [`decode`]: [`AudioDecoder`] opens a file or a pipe (WAV, AIFF, FLAC, MP3, OGG/Vorbis,
//!   M4A/AAC, through symphonia) and hands out planar `f32` blocks, one packet in memory at a
//!   time. Every error is a sentence for the user; a damaged file never panics.
//! - [`encode`] (feature `encode`, on by default): [`encode::StemWriter`] streams a stem to a
//!   16/24-bit or float WAV, or a FLAC file, under a temporary name until it is complete.
//! - [`disk_space`]: [`disk_space::DiskGuard`] stops a run before the disk it writes to is full
//!   (a pipe copied to a temporary file, stems longer than the disk holds).
//!
//! ```no_run
//! let mut decoder = stemflow_audio::AudioDecoder::open("song.flac".as_ref())?;
//! println!("{}", decoder.info().describe());
//! while let Some([left, right]) = decoder.next_block()? {
//!     // `left` and `right` are the same slice for a mono file.
//!     assert_eq!(left.len(), right.len());
//! }
//! # Ok::<(), String>(())
//! ```

pub mod decode;
pub mod disk_space;
#[cfg(feature = "encode")]
pub mod encode;

pub use decode::{io_reason, AudioDecoder, SourceInfo, SUPPORTED_FORMATS};
