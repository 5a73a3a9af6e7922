//! [`ZipArchive`]: PyPI wheels and torch checkpoints read with the `zip` crate, with size limits,
//! CRC checks and stored entries borrowed from the archive's bytes.
//!
//! The `zip` crate parses the end records (classic and ZIP64), the central directory and each
//! entry's local header; it reads what the two writers Stemflow meets produce:
//!
//! - wheels: ordinary zips with deflated entries;
//! - torch checkpoints (`torch.save` with the zip serialization): stored entries with
//!   general-purpose flag `0x0808` (sizes and CRC in a trailing data descriptor, zeros in the
//!   local header), DOS date and time 0, an `0x4246` ("FB") extra field padding each entry's
//!   data to a 64-byte boundary, and ZIP64 end records.
//!
//! On top of it, [`ZipArchive::read`] refuses an entry larger than its `max_bytes` before
//! inflating anything, checks every entry's size and CRC-32, and returns a stored entry as a
//! slice of the archive: a checkpoint's tensor data is never copied. Encrypted entries and
//! compression methods other than stored (0) and deflate (8) are refused by name. Every failure
//! is a [`ConvertError::Zip`] that says what is wrong.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{Cursor, Read};

use crate::budget::ReadBudget;
use crate::error::ConvertError;

/// Compression method 0: stored.
const METHOD_STORED: u16 = 0;
/// Compression method 8: deflate.
const METHOD_DEFLATED: u16 = 8;

/// One file in a [`ZipArchive`], as its central directory describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZipEntry {
    /// Path inside the archive, `/`-separated.
    pub name: String,
    /// Compression method: 0 = stored, 8 = deflate ([`ZipArchive::read`] refuses others).
    pub method: u16,
    /// Size of the entry's data in the archive, in bytes.
    pub compressed_size: u64,
    /// Size of the entry once decompressed, in bytes.
    pub uncompressed_size: u64,
    /// CRC-32 of the decompressed data.
    pub crc32: u32,
    /// Index in the `zip` crate's archive.
    index: usize,
    /// Offset of the entry's data in the archive (after the local header, name and extra).
    data_offset: u64,
}

/// A parsed zip archive borrowing the archive's bytes.
///
/// [`parse`](Self::parse) reads the central directory and every local header;
/// [`read`](Self::read) then returns an entry's bytes, borrowed for stored entries.
#[derive(Clone)]
pub struct ZipArchive<'a> {
    /// The whole archive.
    bytes: &'a [u8],
    /// The `zip` crate's reader, for inflating deflated entries.
    archive: zip::ZipArchive<Cursor<&'a [u8]>>,
    /// Entries in central-directory order.
    entries: Vec<ZipEntry>,
    /// Index into `entries` by name (the first entry of a name).
    by_name: HashMap<String, usize>,
}

impl std::fmt::Debug for ZipArchive<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZipArchive")
            .field("len_bytes", &self.bytes.len())
            .field("entries", &self.entries)
            .finish()
    }
}

impl<'a> ZipArchive<'a> {
    /// Parses the archive's end records, central directory and local headers.
    ///
    /// Fails with [`ConvertError::Zip`] for anything the `zip` crate cannot read (no end record,
    /// a truncated or damaged central directory, a missing local header; its message is
    /// included) and for encrypted entries. Entry data is not read here. When two entries have
    /// the same name, the later one wins (the `zip` crate's rule). Not realtime-safe: allocates
    /// the entry list.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, ConvertError> {
        let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|error| {
            zip_error(format!(
                "not a readable zip archive ({} bytes): {error}",
                bytes.len()
            ))
        })?;
        let mut entries = Vec::with_capacity(archive.len());
        for index in 0..archive.len() {
            let label = archive
                .name_for_index(index)
                .map_or_else(|| format!("number {index}"), str::to_string);
            // The raw reader reads the local header, which gives the data's offset.
            let file = archive.by_index_raw(index).map_err(|error| {
                zip_error(format!("entry {label}'s local header is damaged: {error}"))
            })?;
            let name = String::from_utf8_lossy(file.name_raw()).into_owned();
            if file.encrypted() {
                return Err(zip_error(format!(
                    "entry {name} is encrypted; encrypted archives are not supported"
                )));
            }
            let data_offset = file
                .data_start()
                .ok_or_else(|| zip_error(format!("entry {name}'s data offset is unknown")))?;
            #[allow(deprecated)] // `to_u16` is the crate's way to name the method's number.
            let method = file.compression().to_u16();
            entries.push(ZipEntry {
                name,
                method,
                compressed_size: file.compressed_size(),
                uncompressed_size: file.size(),
                crc32: file.crc32(),
                index,
                data_offset,
            });
        }
        let mut by_name = HashMap::with_capacity(entries.len());
        for (position, entry) in entries.iter().enumerate() {
            by_name.entry(entry.name.clone()).or_insert(position);
        }
        Ok(Self {
            bytes,
            archive,
            entries,
            by_name,
        })
    }

    /// All entries, in central-directory order. Realtime-safe.
    pub fn entries(&self) -> &[ZipEntry] {
        &self.entries
    }

    /// The entry named exactly `name` (the first, if several are). Realtime-safe.
    pub fn find(&self, name: &str) -> Option<&ZipEntry> {
        self.by_name
            .get(name)
            .map(|&position| &self.entries[position])
    }

    /// The only entry whose name ends with `suffix`, e.g. `"/data.pkl"`.
    ///
    /// Returns `None` both when no entry matches and when several do (an ambiguous archive is
    /// treated like one without the file; callers report "not found or not unique").
    /// Realtime-safe.
    pub fn find_suffix(&self, suffix: &str) -> Option<&ZipEntry> {
        let mut matches = self.entries.iter().filter(|e| e.name.ends_with(suffix));
        let first = matches.next()?;
        match matches.next() {
            Some(_) => None,
            None => Some(first),
        }
    }

    /// The decompressed bytes of `entry`: borrowed from the archive when stored (method 0),
    /// inflated by the `zip` crate when deflated (method 8).
    ///
    /// Refuses, with [`ConvertError::Zip`]: an entry whose declared uncompressed size exceeds
    /// `max_bytes` (before reading anything), other compression methods (named in the message),
    /// data that lies beyond the end of the archive, a stored entry whose two sizes differ, a
    /// deflate stream that is damaged, truncated or inflates to a size other than the declared
    /// one (inflating stops one byte past the declared size, so output never exceeds
    /// `max_bytes + 1` bytes), and a CRC-32 mismatch. `entry` should come from this archive's
    /// [`entries`](Self::entries); one from another archive gives an error or other bytes,
    /// never a panic. Not realtime-safe: inflating allocates.
    pub fn read(&self, entry: &ZipEntry, max_bytes: u64) -> Result<Cow<'a, [u8]>, ConvertError> {
        let name = &entry.name;
        if entry.uncompressed_size > max_bytes {
            return Err(zip_error(format!(
                "entry {name} is {} bytes uncompressed, more than the limit of {max_bytes} bytes",
                entry.uncompressed_size
            )));
        }
        let compressed = entry
            .data_offset
            .checked_add(entry.compressed_size)
            .and_then(|end| {
                let start = usize::try_from(entry.data_offset).ok()?;
                self.bytes.get(start..usize::try_from(end).ok()?)
            })
            .ok_or_else(|| {
                zip_error(format!(
                    "entry {name}'s data ({} bytes at offset {}) lies beyond the end of the \
                     archive ({} bytes)",
                    entry.compressed_size,
                    entry.data_offset,
                    self.bytes.len()
                ))
            })?;
        match entry.method {
            METHOD_STORED => {
                if entry.compressed_size != entry.uncompressed_size {
                    return Err(zip_error(format!(
                        "stored entry {name} declares {} bytes compressed but {} bytes \
                         uncompressed; a stored entry's sizes must be equal",
                        entry.compressed_size, entry.uncompressed_size
                    )));
                }
                let crc32 = crc32fast::hash(compressed);
                if crc32 != entry.crc32 {
                    return Err(zip_error(format!(
                        "CRC-32 mismatch in entry {name}: the data hashes to {crc32:08x}, the \
                         central directory says {:08x}",
                        entry.crc32
                    )));
                }
                Ok(Cow::Borrowed(compressed))
            }
            METHOD_DEFLATED => self.inflate(entry).map(Cow::Owned),
            other => Err(zip_error(format!(
                "entry {name} uses compression method {other} ({}); only stored (0) and \
                 deflate (8) are supported",
                method_name(other)
            ))),
        }
    }

    /// [`read`](Self::read) within `budget`: a deflated entry's declared size is charged before
    /// anything is inflated (refused with [`ConvertError::Zip`] naming `what` past the
    /// budget); a stored entry is borrowed and costs nothing. Not realtime-safe: inflating
    /// allocates.
    pub fn read_within(
        &self,
        entry: &ZipEntry,
        budget: &ReadBudget,
        what: &str,
    ) -> Result<Cow<'a, [u8]>, ConvertError> {
        if entry.method != METHOD_STORED {
            budget
                .charge(
                    entry.uncompressed_size,
                    &format!("inflating {what} ({})", entry.name),
                )
                .map_err(zip_error)?;
        }
        self.read(entry, entry.uncompressed_size)
    }

    /// Inflates the deflated `entry` with the `zip` crate, which checks the CRC-32 when the
    /// stream ends; reads at most one byte more than the declared size.
    fn inflate(&self, entry: &ZipEntry) -> Result<Vec<u8>, ConvertError> {
        let name = &entry.name;
        let declared = usize::try_from(entry.uncompressed_size).map_err(|_| {
            zip_error(format!(
                "entry {name} declares {} bytes, more than this machine can address",
                entry.uncompressed_size
            ))
        })?;
        // Cheap: the crate shares the parsed directory; the cursor is a slice and a position.
        let mut archive = self.archive.clone();
        let file = archive
            .by_index(entry.index)
            .map_err(|error| zip_error(format!("entry {name} cannot be read: {error}")))?;
        // Deflate's best ratio is about 1032:1: never reserve more than the stream can give.
        let most =
            usize::try_from(entry.compressed_size.saturating_mul(1032)).unwrap_or(usize::MAX);
        let capacity = declared.min(most);
        let mut output = Vec::with_capacity(capacity);
        file.take(entry.uncompressed_size.saturating_add(1))
            .read_to_end(&mut output)
            .map_err(|error| {
                let message = error.to_string();
                if message.contains("checksum") {
                    zip_error(format!(
                        "CRC-32 mismatch in entry {name}: the inflated data does not hash to \
                         {:08x} ({message})",
                        entry.crc32
                    ))
                } else {
                    zip_error(format!(
                        "entry {name}'s deflate stream is damaged or truncated: {message}"
                    ))
                }
            })?;
        if output.len() > declared {
            return Err(zip_error(format!(
                "entry {name} inflates to more than the {declared} bytes its central directory \
                 declares"
            )));
        }
        if output.len() != declared {
            return Err(zip_error(format!(
                "entry {name}'s deflate stream is truncated: it inflates to {} of {declared} \
                 declared bytes",
                output.len()
            )));
        }
        Ok(output)
    }
}

/// A [`ConvertError::Zip`] with `message`.
fn zip_error(message: String) -> ConvertError {
    ConvertError::Zip(message)
}

/// A readable name for compression `method` (APPNOTE 4.4.5).
fn method_name(method: u16) -> &'static str {
    match method {
        1 => "shrink",
        2..=5 => "reduce",
        6 => "implode",
        9 => "deflate64",
        10 => "PKWARE DCL implode",
        12 => "bzip2",
        14 => "LZMA",
        93 => "Zstandard",
        95 => "xz",
        96 => "JPEG",
        97 => "WavPack",
        98 => "PPMd",
        99 => "AES-encrypted",
        _ => "unknown method",
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::testing::{write_torch_checkpoint, write_zip, ZipMethod};
    use stemflow_kit::testing::XorShift64;

    /// No entry is anywhere near this large in the tests.
    const LIMIT_BYTES: u64 = 1 << 30;
    /// Signature of a central directory entry (`PK\x01\x02`).
    const CENTRAL_ENTRY_SIGNATURE: u32 = 0x0201_4b50;
    /// Signature of a local file header (`PK\x03\x04`).
    const LOCAL_HEADER_SIGNATURE: u32 = 0x0403_4b50;

    fn zip_message(result: Result<impl std::fmt::Debug, ConvertError>) -> String {
        match result {
            Err(ConvertError::Zip(message)) => message,
            other => panic!("expected ConvertError::Zip, got {other:?}"),
        }
    }

    fn assert_zip_error(result: Result<impl std::fmt::Debug, ConvertError>, needle: &str) {
        let message = zip_message(result);
        assert!(
            message.contains(needle),
            "message {message:?} does not contain {needle:?}"
        );
    }

    /// Offset of the first occurrence of `signature` at or after `from`.
    fn find_signature(bytes: &[u8], signature: u32, from: usize) -> usize {
        let needle = signature.to_le_bytes();
        from + bytes[from..]
            .windows(4)
            .position(|w| w == needle)
            .expect("signature present")
    }

    fn put_u32(bytes: &mut [u8], at: usize, value: u32) {
        bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    }

    fn put_u16(bytes: &mut [u8], at: usize, value: u16) {
        bytes[at..at + 2].copy_from_slice(&value.to_le_bytes());
    }

    /// Compressible test data with bytes ≥ 0x80.
    fn sample(len: usize) -> Vec<u8> {
        (0..len).map(|i| ((i * 7 + i / 13) % 251) as u8).collect()
    }

    /// A checkpoint torch 2.15 wrote (`tests/fixtures/torch/make_fixtures.py`).
    const TORCH_CHECKPOINT: &[u8] = include_bytes!("../tests/fixtures/torch/demucs_like_zip.th");

    #[test]
    fn stored_and_deflated_entries_round_trip() {
        let big = sample(200_000);
        let archive_bytes = write_zip(&[
            ("a/stored.bin", &big, ZipMethod::Stored),
            ("a/deflated.bin", &big, ZipMethod::Deflated),
            ("empty-stored", b"", ZipMethod::Stored),
            ("empty-deflated", b"", ZipMethod::Deflated),
            ("ünïcode.txt", "héllo".as_bytes(), ZipMethod::Deflated),
        ]);
        let archive = ZipArchive::parse(&archive_bytes).unwrap();
        let names: Vec<&str> = archive.entries().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "a/stored.bin",
                "a/deflated.bin",
                "empty-stored",
                "empty-deflated",
                "ünïcode.txt"
            ]
        );
        let stored = archive.find("a/stored.bin").unwrap();
        assert_eq!(stored.method, 0);
        assert_eq!(stored.uncompressed_size, big.len() as u64);
        let data = archive.read(stored, LIMIT_BYTES).unwrap();
        // Borrowed from the archive's own bytes.
        let Cow::Borrowed(slice) = data else {
            panic!("a stored entry was copied");
        };
        assert!(archive_bytes.as_ptr_range().contains(&slice.as_ptr()));
        assert_eq!(slice, &big[..]);
        let deflated = archive.find("a/deflated.bin").unwrap();
        assert_eq!(deflated.method, 8);
        assert!(deflated.compressed_size < deflated.uncompressed_size);
        assert_eq!(&archive.read(deflated, LIMIT_BYTES).unwrap()[..], &big[..]);
        for name in ["empty-stored", "empty-deflated"] {
            let entry = archive.find(name).unwrap();
            assert!(archive.read(entry, 0).unwrap().is_empty());
        }
        let text = archive.find_suffix(".txt").unwrap();
        assert_eq!(&archive.read(text, 100).unwrap()[..], "héllo".as_bytes());
        // Exactly at the limit is allowed.
        assert!(archive.read(deflated, big.len() as u64).is_ok());
    }

    #[test]
    fn empty_archive_has_no_entries() {
        let bytes = write_zip(&[]);
        let archive = ZipArchive::parse(&bytes).unwrap();
        assert!(archive.entries().is_empty());
        assert!(archive.find_suffix("").is_none());
    }

    #[test]
    fn zip64_entries_are_read() {
        // The `zip` crate's writer with ZIP64 extra fields forced on a small entry.
        let data = sample(1000);
        let mut writer = ::zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = ::zip::write::SimpleFileOptions::default()
            .compression_method(::zip::CompressionMethod::Stored)
            .large_file(true);
        writer.start_file("big.bin", options).unwrap();
        writer.write_all(&data).unwrap();
        let bytes = writer.finish().unwrap().into_inner();
        let archive = ZipArchive::parse(&bytes).unwrap();
        let entry = archive.find("big.bin").unwrap();
        assert_eq!(&archive.read(entry, LIMIT_BYTES).unwrap()[..], &data[..]);
    }

    #[test]
    fn a_real_torch_checkpoint_reads_with_its_layout_quirks() {
        // Flag 0x0808 (data descriptors), DOS date 0, "FB" padding, ZIP64 end records.
        let bytes = TORCH_CHECKPOINT;
        assert_eq!(&bytes[6..8], &0x0808u16.to_le_bytes());
        assert_eq!(&bytes[10..14], &[0; 4]);
        let archive = ZipArchive::parse(bytes).unwrap();
        let names: Vec<&str> = archive.entries().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names[0], "demucs_like_zip/data.pkl");
        assert!(names.contains(&"demucs_like_zip/data/2"));
        for entry in archive.entries() {
            assert_eq!(entry.method, 0);
            assert_eq!(entry.data_offset % 64, 0, "{} is not aligned", entry.name);
            assert!(matches!(
                archive.read(entry, LIMIT_BYTES).unwrap(),
                Cow::Borrowed(_)
            ));
        }
        let pickle = archive.find_suffix("/data.pkl").unwrap();
        let pickle = archive.read(pickle, LIMIT_BYTES).unwrap();
        assert_eq!(&pickle[..2], &[0x80, 2]);
        let byteorder = archive.find("demucs_like_zip/byteorder").unwrap();
        assert_eq!(&archive.read(byteorder, 10).unwrap()[..], b"little");
    }

    #[test]
    fn the_torch_layout_writer_pads_every_alignment() {
        for len in 0..130 {
            let data_pkl = sample(len);
            let bytes = write_torch_checkpoint("archive", &data_pkl);
            let archive = ZipArchive::parse(&bytes).unwrap();
            for entry in archive.entries() {
                assert_eq!(entry.data_offset % 64, 0, "length {len}");
            }
            let pickle = archive.find_suffix("/data.pkl").unwrap();
            assert_eq!(&archive.read(pickle, 200).unwrap()[..], &data_pkl[..]);
            let version = archive.find("archive/version").unwrap();
            assert_eq!(&archive.read(version, 2).unwrap()[..], b"3\n");
        }
    }

    #[test]
    fn find_suffix_returns_none_when_ambiguous() {
        let bytes = write_zip(&[
            ("one/data.pkl", b"1", ZipMethod::Stored),
            ("two/data.pkl", b"2", ZipMethod::Stored),
        ]);
        let archive = ZipArchive::parse(&bytes).unwrap();
        assert!(archive.find_suffix("/data.pkl").is_none());
        assert_eq!(
            archive.find_suffix("two/data.pkl").unwrap().name,
            "two/data.pkl"
        );
        assert!(archive.find_suffix("/missing").is_none());
        assert!(archive.find("data.pkl").is_none());
    }

    #[test]
    fn crc_mismatch_is_reported() {
        for method in [ZipMethod::Stored, ZipMethod::Deflated] {
            let mut bytes = write_zip(&[("entry.bin", &sample(5000), method)]);
            let central = find_signature(&bytes, CENTRAL_ENTRY_SIGNATURE, 0);
            let crc = u32::from_le_bytes(bytes[central + 16..central + 20].try_into().unwrap());
            put_u32(&mut bytes, central + 16, crc ^ 1);
            let archive = ZipArchive::parse(&bytes).unwrap();
            let entry = archive.find("entry.bin").unwrap();
            assert_zip_error(
                archive.read(entry, LIMIT_BYTES),
                "CRC-32 mismatch in entry entry.bin",
            );
        }
        // Damaged stored data in a torch checkpoint, CRC untouched.
        let mut bytes = write_torch_checkpoint("c", &sample(300));
        bytes[100] ^= 0x40;
        let archive = ZipArchive::parse(&bytes).unwrap();
        let entry = archive.find("c/data.pkl").unwrap();
        assert_zip_error(archive.read(entry, LIMIT_BYTES), "CRC-32 mismatch");
    }

    #[test]
    fn truncated_archives_are_refused_at_every_cut() {
        let normal = write_zip(&[
            ("a", &sample(3000), ZipMethod::Deflated),
            ("b", &sample(100), ZipMethod::Stored),
        ]);
        let torch = write_torch_checkpoint("t", &sample(500));
        for bytes in [&normal[..], &torch[..], TORCH_CHECKPOINT] {
            for cut in 0..bytes.len() {
                assert_zip_error(ZipArchive::parse(&bytes[..cut]), "not a readable zip");
            }
        }
    }

    #[test]
    fn damaged_deflate_streams_are_refused() {
        let data = sample(100_000);
        let bytes = write_zip(&[("x", &data, ZipMethod::Deflated)]);
        let local = find_signature(&bytes, LOCAL_HEADER_SIGNATURE, 0);
        let data_at = local + 30 + 1;
        // Garbage in the middle of the stream.
        let mut damaged = bytes.clone();
        for byte in &mut damaged[data_at + 100..data_at + 200] {
            *byte = 0xff;
        }
        let archive = ZipArchive::parse(&damaged).unwrap();
        let message = zip_message(archive.read(archive.find("x").unwrap(), LIMIT_BYTES));
        assert!(
            message.contains("damaged") || message.contains("CRC-32"),
            "{message}"
        );
        // Shrink the declared compressed size: the stream now ends early.
        let mut truncated = bytes.clone();
        let central = find_signature(&truncated, CENTRAL_ENTRY_SIGNATURE, 0);
        let compressed =
            u32::from_le_bytes(truncated[central + 20..central + 24].try_into().unwrap());
        put_u32(&mut truncated, central + 20, compressed / 2);
        let archive = ZipArchive::parse(&truncated).unwrap();
        let message = zip_message(archive.read(archive.find("x").unwrap(), LIMIT_BYTES));
        assert!(message.contains("truncated"), "{message}");
    }

    #[test]
    fn wrong_declared_sizes_are_refused() {
        let data = sample(10_000);
        for (declared, needle) in [
            (9_999, "more than the 9999 bytes"),
            (10_001, "inflates to 10000 of 10001"),
        ] {
            let mut bytes = write_zip(&[("x", &data, ZipMethod::Deflated)]);
            let central = find_signature(&bytes, CENTRAL_ENTRY_SIGNATURE, 0);
            put_u32(&mut bytes, central + 24, declared);
            let archive = ZipArchive::parse(&bytes).unwrap();
            let entry = archive.find("x").unwrap();
            assert_zip_error(archive.read(entry, LIMIT_BYTES), needle);
        }
        let mut bytes = write_zip(&[("s", &data, ZipMethod::Stored)]);
        let central = find_signature(&bytes, CENTRAL_ENTRY_SIGNATURE, 0);
        put_u32(&mut bytes, central + 24, 10_001);
        let archive = ZipArchive::parse(&bytes).unwrap();
        let entry = archive.find("s").unwrap();
        assert_zip_error(archive.read(entry, LIMIT_BYTES), "sizes must be equal");
    }

    #[test]
    fn entries_beyond_the_end_are_refused() {
        let mut bytes = write_zip(&[("x", &sample(100), ZipMethod::Stored)]);
        let central = find_signature(&bytes, CENTRAL_ENTRY_SIGNATURE, 0);
        put_u32(&mut bytes, central + 20, 1_000_000);
        put_u32(&mut bytes, central + 24, 1_000_000);
        match ZipArchive::parse(&bytes) {
            Ok(archive) => assert_zip_error(
                archive.read(archive.find("x").unwrap(), LIMIT_BYTES),
                "lies beyond the end of the archive",
            ),
            Err(error) => assert!(matches!(error, ConvertError::Zip(_))),
        }
        let mut bytes = write_zip(&[("x", &sample(100), ZipMethod::Stored)]);
        put_u32(&mut bytes, central + 42, 5_000_000);
        assert_zip_error(ZipArchive::parse(&bytes), "local header is damaged");

        // An entry taken from a bigger archive cannot read past this one's end.
        let big = write_zip(&[("x", &sample(10_000), ZipMethod::Stored)]);
        let big_archive = ZipArchive::parse(&big).unwrap();
        let small = write_zip(&[("x", &sample(10), ZipMethod::Stored)]);
        let small_archive = ZipArchive::parse(&small).unwrap();
        let foreign = big_archive.find("x").unwrap();
        assert_zip_error(small_archive.read(foreign, LIMIT_BYTES), "beyond the end");
    }

    #[test]
    fn unsupported_methods_are_named() {
        let mut bytes = write_zip(&[("x.bz2", &sample(100), ZipMethod::Stored)]);
        let central = find_signature(&bytes, CENTRAL_ENTRY_SIGNATURE, 0);
        put_u16(&mut bytes, central + 10, 12);
        put_u16(&mut bytes, 8, 12);
        let archive = ZipArchive::parse(&bytes).unwrap();
        let entry = archive.find("x.bz2").unwrap();
        assert_eq!(entry.method, 12);
        assert_zip_error(
            archive.read(entry, LIMIT_BYTES),
            "entry x.bz2 uses compression method 12 (bzip2)",
        );
    }

    #[test]
    fn over_limit_entries_are_refused_before_inflating() {
        let data = sample(5000);
        let bytes = write_zip(&[
            ("s", &data, ZipMethod::Stored),
            ("d", &data, ZipMethod::Deflated),
        ]);
        let archive = ZipArchive::parse(&bytes).unwrap();
        for entry in archive.entries() {
            assert_zip_error(
                archive.read(entry, 4999),
                "is 5000 bytes uncompressed, more than the limit of 4999 bytes",
            );
        }
    }

    #[test]
    fn a_zip_bomb_stops_inflating_at_the_declared_size() {
        // 64 MiB of zeros deflates to ~64 KiB; declare 1 KiB.
        let zeros = vec![0u8; 64 << 20];
        let mut bytes = write_zip(&[("bomb", &zeros, ZipMethod::Deflated)]);
        let central = find_signature(&bytes, CENTRAL_ENTRY_SIGNATURE, bytes.len() - 100);
        put_u32(&mut bytes, central + 24, 1024);
        let archive = ZipArchive::parse(&bytes).unwrap();
        let entry = archive.find("bomb").unwrap();
        assert_zip_error(
            archive.read(entry, 1 << 20),
            "inflates to more than the 1024 bytes",
        );
    }

    #[test]
    fn encrypted_entries_are_refused() {
        let mut bytes = write_zip(&[("secret", b"x", ZipMethod::Stored)]);
        let central = find_signature(&bytes, CENTRAL_ENTRY_SIGNATURE, 0);
        put_u16(&mut bytes, central + 8, 1);
        put_u16(&mut bytes, 6, 1);
        let message = zip_message(ZipArchive::parse(&bytes));
        assert!(
            message.contains("encrypted") || message.contains("secret"),
            "{message}"
        );
    }

    #[test]
    fn random_damage_never_panics() {
        let normal = write_zip(&[
            ("a", &sample(2000), ZipMethod::Deflated),
            ("b", &sample(100), ZipMethod::Stored),
        ]);
        let mut rng = XorShift64::new(0x9e37_79b9_7f4a_7c15);
        for round in 0..3000 {
            let mut bytes = match round % 3 {
                0 => normal.clone(),
                1 => write_torch_checkpoint("t", &sample(300)),
                _ => TORCH_CHECKPOINT.to_vec(),
            };
            let num_flips = 1 + rng.next_u64() % 4;
            for _ in 0..num_flips {
                let at = (rng.next_u64() % bytes.len() as u64) as usize;
                bytes[at] = rng.next_u64() as u8;
            }
            if let Ok(archive) = ZipArchive::parse(&bytes) {
                for entry in archive.entries() {
                    let _ = archive.read(entry, 1 << 20);
                }
            }
        }
    }
}
