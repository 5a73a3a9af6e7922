//! [`ZipArchive`]: a zip reader over a byte slice, for PyPI wheels and torch checkpoints.
//!
//! It reads what those two writers produce and refuses the rest with a [`ConvertError::Zip`]
//! that says what is wrong:
//!
//! - wheels: ordinary zips with deflated entries and a classic end-of-central-directory record;
//! - torch checkpoints (`torch.save` with the zip serialization): stored entries with
//!   general-purpose flag `0x0808` (sizes and CRC in a trailing data descriptor, zeros in the
//!   local header), DOS date and time 0 (an invalid date, accepted here), an `0x4246` ("FB")
//!   extra field padding each entry's data to a 64-byte boundary, and a ZIP64
//!   end-of-central-directory record and locator before the classic one.
//!
//! Sizes, CRCs and offsets come from the central directory (and its ZIP64 extra fields when a
//! 32-bit field is saturated); a local header is read only for its name and extra lengths, to
//! find where the data starts. Encrypted entries, multi-disk archives, data ranges outside the
//! file and compression methods other than stored (0) and deflate (8) are refused. Every entry's
//! CRC-32 and size are checked when it is read, and [`ZipArchive::read`] refuses an entry larger
//! than its `max_bytes` before inflating anything, so a zip bomb cannot allocate more than that.

use std::borrow::Cow;

use crate::error::ConvertError;

/// Size of the classic end-of-central-directory record without its comment.
const EOCD_SIZE_BYTES: usize = 22;
/// Longest comment the classic end record can announce (its length is a `u16`).
const MAX_COMMENT_BYTES: usize = u16::MAX as usize;
/// Size of the ZIP64 end-of-central-directory locator.
const ZIP64_LOCATOR_SIZE_BYTES: usize = 20;
/// Size of the ZIP64 end-of-central-directory record's fixed part.
const ZIP64_EOCD_SIZE_BYTES: usize = 56;
/// Size of a central directory entry's fixed part.
const CENTRAL_ENTRY_SIZE_BYTES: usize = 46;
/// Size of a local file header's fixed part.
const LOCAL_HEADER_SIZE_BYTES: usize = 30;

/// Signature of the classic end-of-central-directory record (`PK\x05\x06`).
const EOCD_SIGNATURE: u32 = 0x0605_4b50;
/// Signature of the ZIP64 end-of-central-directory record (`PK\x06\x06`).
const ZIP64_EOCD_SIGNATURE: u32 = 0x0606_4b50;
/// Signature of the ZIP64 end-of-central-directory locator (`PK\x06\x07`).
const ZIP64_LOCATOR_SIGNATURE: u32 = 0x0706_4b50;
/// Signature of a central directory entry (`PK\x01\x02`).
const CENTRAL_ENTRY_SIGNATURE: u32 = 0x0201_4b50;
/// Signature of a local file header (`PK\x03\x04`).
const LOCAL_HEADER_SIGNATURE: u32 = 0x0403_4b50;
/// Signature of a data descriptor (`PK\x07\x08`).
const DATA_DESCRIPTOR_SIGNATURE: u32 = 0x0807_4b50;

/// Id of the ZIP64 extended-information extra field.
const ZIP64_EXTRA_ID: u16 = 0x0001;
/// Id of torch's alignment padding extra field ("FB").
const TORCH_PADDING_EXTRA_ID: u16 = 0x4246;

/// General-purpose flag bit 0: the entry is encrypted.
const FLAG_ENCRYPTED: u16 = 1 << 0;
/// General-purpose flag bit 3: sizes and CRC follow the data in a data descriptor.
const FLAG_DATA_DESCRIPTOR: u16 = 1 << 3;
/// General-purpose flag bit 6: strong encryption.
const FLAG_STRONG_ENCRYPTION: u16 = 1 << 6;
/// General-purpose flag bit 11: the name is UTF-8.
const FLAG_UTF8_NAME: u16 = 1 << 11;

/// Compression method 0: stored.
const METHOD_STORED: u16 = 0;
/// Compression method 8: deflate.
const METHOD_DEFLATED: u16 = 8;

/// Largest output a deflate stream can produce per input byte (deflate's maximum ratio is
/// about 1032:1); caps the first allocation when a header declares a huge size.
const MAX_DEFLATE_RATIO: usize = 1032;
/// Size of the buffer the inflater writes into before the bytes are appended to the output.
const INFLATE_CHUNK_BYTES: usize = 64 * 1024;

/// One file in a [`ZipArchive`], as its central directory describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZipEntry {
    /// Path inside the archive, `/`-separated (UTF-8; names without the UTF-8 flag that are not
    /// valid UTF-8 are decoded lossily).
    pub name: String,
    /// Compression method: 0 = stored, 8 = deflate ([`ZipArchive::read`] refuses others).
    pub method: u16,
    /// Size of the entry's data in the archive, in bytes.
    pub compressed_size: u64,
    /// Size of the entry once decompressed, in bytes.
    pub uncompressed_size: u64,
    /// CRC-32 of the decompressed data.
    pub crc32: u32,
    /// Offset of the entry's local file header in the archive.
    local_header_offset: u64,
    /// Offset of the entry's data in the archive (after the local header, name and extra).
    data_offset: u64,
}

/// A parsed zip archive borrowing the archive's bytes.
///
/// [`parse`](Self::parse) reads and checks the whole central directory and every local header;
/// [`read`](Self::read) then returns an entry's bytes, borrowed for stored entries.
#[derive(Clone)]
pub struct ZipArchive<'a> {
    /// The whole archive.
    bytes: &'a [u8],
    /// Entries in central-directory order; names are unique.
    entries: Vec<ZipEntry>,
}

impl std::fmt::Debug for ZipArchive<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZipArchive")
            .field("len_bytes", &self.bytes.len())
            .field("entries", &self.entries)
            .finish()
    }
}

/// Where the central directory is, from the end records.
struct CentralDirectory {
    /// Number of entries.
    num_entries: u64,
    /// Size in bytes.
    size_bytes: u64,
    /// Offset of its first entry.
    offset: u64,
    /// Offset of the first end record (ZIP64 record if there is one, else the classic one):
    /// the central directory must end at or before it.
    end_records_offset: u64,
}

impl<'a> ZipArchive<'a> {
    /// Parses the archive's end records, central directory and local headers.
    ///
    /// Finds the classic end-of-central-directory record by scanning back at most
    /// 65 557 bytes (22 + the longest comment), honours a ZIP64 locator and record before it
    /// and ZIP64 extra fields in central entries whose 32-bit fields are saturated. Fails with
    /// [`ConvertError::Zip`] for anything that is not a well-formed single-disk archive: no end
    /// record, multi-disk archives, an entry count the central directory cannot hold, encrypted
    /// entries, duplicate names, a local header or data range outside the file. Entry data is
    /// not read here. Not realtime-safe: allocates the entry list.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, ConvertError> {
        let directory = find_central_directory(bytes)?;
        let entries = parse_central_directory(bytes, &directory)?;
        Ok(Self { bytes, entries })
    }

    /// All entries, in central-directory order. Realtime-safe.
    pub fn entries(&self) -> &[ZipEntry] {
        &self.entries
    }

    /// The entry named exactly `name` (names are unique: [`parse`](Self::parse) refuses
    /// duplicates). Realtime-safe.
    pub fn find(&self, name: &str) -> Option<&ZipEntry> {
        self.entries.iter().find(|entry| entry.name == name)
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
    /// inflated when deflated (method 8).
    ///
    /// Refuses, with [`ConvertError::Zip`]: an entry whose declared uncompressed size exceeds
    /// `max_bytes` (before reading anything), other compression methods (named in the message),
    /// a deflate stream that is damaged, truncated or inflates to a size other than the declared
    /// one (inflating stops one byte past the declared size, so output never exceeds
    /// `max_bytes + 1` bytes), a stored entry whose two sizes differ, and a CRC-32 mismatch.
    /// `entry` should come from this archive's [`entries`](Self::entries); one from another
    /// archive gives an error or other bytes, never a panic. Not realtime-safe: inflating
    /// allocates.
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
            .and_then(|end| self.bytes.get(to_usize(entry.data_offset)?..to_usize(end)?))
            .ok_or_else(|| {
                zip_error(format!(
                    "entry {name}'s data ({} bytes at offset {}) lies beyond the end of the \
                     archive ({} bytes)",
                    entry.compressed_size,
                    entry.data_offset,
                    self.bytes.len()
                ))
            })?;
        let data = match entry.method {
            METHOD_STORED => {
                if entry.compressed_size != entry.uncompressed_size {
                    return Err(zip_error(format!(
                        "stored entry {name} declares {} bytes compressed but {} bytes \
                         uncompressed; a stored entry's sizes must be equal",
                        entry.compressed_size, entry.uncompressed_size
                    )));
                }
                Cow::Borrowed(compressed)
            }
            METHOD_DEFLATED => Cow::Owned(inflate(name, compressed, entry.uncompressed_size)?),
            other => {
                return Err(zip_error(format!(
                    "entry {name} uses compression method {other} ({}); only stored (0) and \
                     deflate (8) are supported",
                    method_name(other)
                )))
            }
        };
        let crc32 = crc32fast::hash(&data);
        if crc32 != entry.crc32 {
            return Err(zip_error(format!(
                "CRC-32 mismatch in entry {name}: the data hashes to {crc32:08x}, the central \
                 directory says {:08x}",
                entry.crc32
            )));
        }
        Ok(data)
    }
}

/// A [`ConvertError::Zip`] with `message`.
fn zip_error(message: String) -> ConvertError {
    ConvertError::Zip(message)
}

/// `value` as a `usize`, or `None` when it does not fit.
fn to_usize(value: u64) -> Option<usize> {
    usize::try_from(value).ok()
}

/// The little-endian `u16` at `offset`, or `None` past the end.
fn u16_at(bytes: &[u8], offset: usize) -> Option<u16> {
    let field = bytes.get(offset..offset.checked_add(2)?)?;
    Some(u16::from_le_bytes([field[0], field[1]]))
}

/// The little-endian `u32` at `offset`, or `None` past the end.
fn u32_at(bytes: &[u8], offset: usize) -> Option<u32> {
    let field = bytes.get(offset..offset.checked_add(4)?)?;
    Some(u32::from_le_bytes([field[0], field[1], field[2], field[3]]))
}

/// The little-endian `u64` at `offset`, or `None` past the end.
fn u64_at(bytes: &[u8], offset: usize) -> Option<u64> {
    let field = bytes.get(offset..offset.checked_add(8)?)?;
    let mut array = [0u8; 8];
    array.copy_from_slice(field);
    Some(u64::from_le_bytes(array))
}

/// Finds the end records and returns where the central directory is.
fn find_central_directory(bytes: &[u8]) -> Result<CentralDirectory, ConvertError> {
    let len_bytes = bytes.len();
    let not_found = || {
        zip_error(format!(
            "no end-of-central-directory record in the last {} bytes: not a zip archive, or a \
             truncated one ({len_bytes} bytes)",
            (EOCD_SIZE_BYTES + MAX_COMMENT_BYTES).min(len_bytes)
        ))
    };
    let last_start = len_bytes
        .checked_sub(EOCD_SIZE_BYTES)
        .ok_or_else(not_found)?;
    let first_start = last_start.saturating_sub(MAX_COMMENT_BYTES);
    let eocd_offset = (first_start..=last_start)
        .rev()
        .find(|&at| {
            u32_at(bytes, at) == Some(EOCD_SIGNATURE)
                && u16_at(bytes, at + 20)
                    .is_some_and(|comment| at + EOCD_SIZE_BYTES + usize::from(comment) <= len_bytes)
        })
        .ok_or_else(not_found)?;
    // All reads below are in range: the record's 22 bytes are in the slice.
    let field16 = |at: usize| u16_at(bytes, eocd_offset + at).unwrap_or(0);
    let field32 = |at: usize| u32_at(bytes, eocd_offset + at).unwrap_or(0);
    let disk_number = u32::from(field16(4));
    let central_disk = u32::from(field16(6));
    let mut directory = CentralDirectory {
        num_entries: u64::from(field16(10)),
        size_bytes: u64::from(field32(12)),
        offset: u64::from(field32(16)),
        end_records_offset: eocd_offset as u64,
    };
    let mut entries_on_disk = u64::from(field16(8));
    let mut disks = (disk_number, central_disk);

    let locator_offset = eocd_offset.checked_sub(ZIP64_LOCATOR_SIZE_BYTES);
    let locator = locator_offset.filter(|&at| u32_at(bytes, at) == Some(ZIP64_LOCATOR_SIGNATURE));
    if let Some(locator) = locator {
        let record_disk = u32_at(bytes, locator + 4).unwrap_or(0);
        let record_offset = u64_at(bytes, locator + 8).unwrap_or(0);
        let total_disks = u32_at(bytes, locator + 16).unwrap_or(0);
        if record_disk != 0 || total_disks > 1 {
            return Err(zip_error(format!(
                "multi-disk (spanned) archives are not supported: the ZIP64 locator names disk \
                 {record_disk} of {total_disks}"
            )));
        }
        let record = to_usize(record_offset)
            .filter(|&at| {
                at.checked_add(ZIP64_EOCD_SIZE_BYTES)
                    .is_some_and(|end| end <= locator)
            })
            .ok_or_else(|| {
                zip_error(format!(
                    "the ZIP64 end-of-central-directory record's offset {record_offset} lies \
                     outside the archive ({len_bytes} bytes)"
                ))
            })?;
        if u32_at(bytes, record) != Some(ZIP64_EOCD_SIGNATURE) {
            return Err(zip_error(format!(
                "no ZIP64 end-of-central-directory record at offset {record_offset}, where the \
                 ZIP64 locator points"
            )));
        }
        let field32 = |at: usize| u32_at(bytes, record + at).unwrap_or(0);
        let field64 = |at: usize| u64_at(bytes, record + at).unwrap_or(0);
        disks = (field32(16), field32(20));
        entries_on_disk = field64(24);
        directory.num_entries = field64(32);
        directory.size_bytes = field64(40);
        directory.offset = field64(48);
        directory.end_records_offset = record as u64;
    }

    if disks != (0, 0) || entries_on_disk != directory.num_entries {
        return Err(zip_error(format!(
            "multi-disk (spanned) archives are not supported: this is disk {}, the central \
             directory starts on disk {}, {entries_on_disk} of {} entries are on this disk",
            disks.0, disks.1, directory.num_entries
        )));
    }
    let directory_end = directory.offset.checked_add(directory.size_bytes);
    if directory_end.is_none_or(|end| end > directory.end_records_offset) {
        return Err(zip_error(format!(
            "the central directory ({} bytes at offset {}) lies outside the archive: the end \
             records start at offset {} (truncated or damaged archive)",
            directory.size_bytes, directory.offset, directory.end_records_offset
        )));
    }
    let min_size_bytes = directory
        .num_entries
        .checked_mul(CENTRAL_ENTRY_SIZE_BYTES as u64);
    if min_size_bytes.is_none_or(|min| min > directory.size_bytes) {
        return Err(zip_error(format!(
            "the archive claims {} entries but its central directory holds only {} bytes (at \
             least {CENTRAL_ENTRY_SIZE_BYTES} bytes per entry)",
            directory.num_entries, directory.size_bytes
        )));
    }
    Ok(directory)
}

/// Reads every central directory entry and its local header.
fn parse_central_directory(
    bytes: &[u8],
    directory: &CentralDirectory,
) -> Result<Vec<ZipEntry>, ConvertError> {
    // `find_central_directory` checked that the directory lies inside `bytes`.
    let start = to_usize(directory.offset).unwrap_or(usize::MAX);
    let end = to_usize(directory.offset + directory.size_bytes).unwrap_or(usize::MAX);
    let central = bytes
        .get(start..end)
        .ok_or_else(|| zip_error("the central directory lies outside the archive".to_string()))?;
    let num_entries = to_usize(directory.num_entries).unwrap_or(usize::MAX);
    let mut entries = Vec::with_capacity(num_entries.min(central.len() / CENTRAL_ENTRY_SIZE_BYTES));
    let mut names = std::collections::HashSet::with_capacity(entries.capacity());
    let mut cursor = 0usize;
    for index in 0..num_entries {
        let (entry, next) = parse_central_entry(central, cursor, index)?;
        cursor = next;
        let entry = locate_data(bytes, entry, directory.offset)?;
        if !names.insert(entry.name.clone()) {
            return Err(zip_error(format!(
                "the archive holds two entries named {}",
                entry.name
            )));
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// Parses the central entry at `at` in `central` (entry number `index`); returns it (data
/// offset not yet known) and where the next one starts.
fn parse_central_entry(
    central: &[u8],
    at: usize,
    index: usize,
) -> Result<(ZipEntry, usize), ConvertError> {
    let truncated = || {
        zip_error(format!(
            "central directory entry {index} is cut off by the end of the central directory"
        ))
    };
    if u32_at(central, at) != Some(CENTRAL_ENTRY_SIGNATURE) {
        return Err(zip_error(format!(
            "central directory entry {index} has no PK\\x01\\x02 signature (damaged central \
             directory)"
        )));
    }
    let fixed = central
        .get(
            at..at
                .checked_add(CENTRAL_ENTRY_SIZE_BYTES)
                .ok_or_else(truncated)?,
        )
        .ok_or_else(truncated)?;
    let field16 = |offset: usize| u16_at(fixed, offset).unwrap_or(0);
    let field32 = |offset: usize| u32_at(fixed, offset).unwrap_or(0);
    let flags = field16(8);
    let method = field16(10);
    let crc32 = field32(16);
    let compressed_32 = field32(20);
    let uncompressed_32 = field32(24);
    let name_len = usize::from(field16(28));
    let extra_len = usize::from(field16(30));
    let comment_len = usize::from(field16(32));
    let disk_start_16 = field16(34);
    let local_offset_32 = field32(42);

    let name_start = at + CENTRAL_ENTRY_SIZE_BYTES;
    let extra_start = name_start + name_len;
    let next = extra_start + extra_len + comment_len;
    let name_bytes = central.get(name_start..extra_start).ok_or_else(truncated)?;
    let extra = central
        .get(extra_start..extra_start + extra_len)
        .ok_or_else(truncated)?;
    if next > central.len() {
        return Err(truncated());
    }
    let name = if flags & FLAG_UTF8_NAME != 0 {
        String::from_utf8(name_bytes.to_vec()).map_err(|_| {
            zip_error(format!(
                "central directory entry {index} is flagged UTF-8 but its name is not valid UTF-8"
            ))
        })?
    } else {
        String::from_utf8_lossy(name_bytes).into_owned()
    };
    if flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTION) != 0 {
        return Err(zip_error(format!(
            "entry {name} is encrypted; encrypted archives are not supported"
        )));
    }

    // ZIP64 extra field: only the saturated fields are present, in this order.
    let mut uncompressed_size = u64::from(uncompressed_32);
    let mut compressed_size = u64::from(compressed_32);
    let mut local_header_offset = u64::from(local_offset_32);
    let mut disk_start = u32::from(disk_start_16);
    let needs_zip64 = uncompressed_32 == u32::MAX
        || compressed_32 == u32::MAX
        || local_offset_32 == u32::MAX
        || disk_start_16 == u16::MAX;
    if needs_zip64 {
        let zip64 = find_extra(extra, ZIP64_EXTRA_ID).ok_or_else(|| {
            zip_error(format!(
                "entry {name} has a saturated 32-bit size or offset but no ZIP64 extra field"
            ))
        })?;
        let mut cursor = 0usize;
        let mut next_u64 = |what: &str| {
            let value = u64_at(zip64, cursor).ok_or_else(|| {
                zip_error(format!(
                    "entry {name}'s ZIP64 extra field is too short to hold its {what}"
                ))
            })?;
            cursor += 8;
            Ok::<u64, ConvertError>(value)
        };
        if uncompressed_32 == u32::MAX {
            uncompressed_size = next_u64("uncompressed size")?;
        }
        if compressed_32 == u32::MAX {
            compressed_size = next_u64("compressed size")?;
        }
        if local_offset_32 == u32::MAX {
            local_header_offset = next_u64("local header offset")?;
        }
        if disk_start_16 == u16::MAX {
            disk_start = u32_at(zip64, cursor).ok_or_else(|| {
                zip_error(format!(
                    "entry {name}'s ZIP64 extra field is too short to hold its disk number"
                ))
            })?;
        }
    }
    if disk_start != 0 {
        return Err(zip_error(format!(
            "entry {name} starts on disk {disk_start}: multi-disk (spanned) archives are not \
             supported"
        )));
    }
    let entry = ZipEntry {
        name,
        method,
        compressed_size,
        uncompressed_size,
        crc32,
        local_header_offset,
        data_offset: 0,
    };
    Ok((entry, next))
}

/// The payload of the extra field with id `id` in `extra`, if any.
fn find_extra(extra: &[u8], id: u16) -> Option<&[u8]> {
    let mut at = 0usize;
    while at + 4 <= extra.len() {
        let field_id = u16_at(extra, at)?;
        let size = usize::from(u16_at(extra, at + 2)?);
        let payload = extra.get(at + 4..at + 4 + size)?;
        if field_id == id {
            return Some(payload);
        }
        at += 4 + size;
    }
    None
}

/// Reads `entry`'s local header to find where its data starts, and checks that the data lies
/// before the central directory (which starts at `directory_offset`).
fn locate_data(
    bytes: &[u8],
    mut entry: ZipEntry,
    directory_offset: u64,
) -> Result<ZipEntry, ConvertError> {
    let name = &entry.name;
    let header = entry.local_header_offset;
    let header_at = to_usize(header)
        .filter(|&at| {
            at.checked_add(LOCAL_HEADER_SIZE_BYTES)
                .is_some_and(|end| end <= bytes.len())
        })
        .ok_or_else(|| {
            zip_error(format!(
                "entry {name}'s local header (offset {header}) lies beyond the end of the \
                 archive ({} bytes)",
                bytes.len()
            ))
        })?;
    if u32_at(bytes, header_at) != Some(LOCAL_HEADER_SIGNATURE) {
        return Err(zip_error(format!(
            "entry {name} has no local header (PK\\x03\\x04) at offset {header}"
        )));
    }
    // Only the name and extra lengths are used: sizes and CRC may be zero (flag bit 3).
    let name_len = u64::from(u16_at(bytes, header_at + 26).unwrap_or(0));
    let extra_len = u64::from(u16_at(bytes, header_at + 28).unwrap_or(0));
    let data_offset = header + LOCAL_HEADER_SIZE_BYTES as u64 + name_len + extra_len;
    let data_end = data_offset.checked_add(entry.compressed_size);
    match data_end {
        Some(end) if end <= bytes.len() as u64 && end <= directory_offset => {}
        Some(end) if end <= bytes.len() as u64 => {
            return Err(zip_error(format!(
                "entry {name}'s data (bytes {data_offset}..{end}) overlaps the central \
                 directory at offset {directory_offset}"
            )))
        }
        _ => {
            return Err(zip_error(format!(
                "entry {name}'s data ({} bytes at offset {data_offset}) lies beyond the end of \
                 the archive ({} bytes)",
                entry.compressed_size,
                bytes.len()
            )))
        }
    }
    entry.data_offset = data_offset;
    Ok(entry)
}

/// Inflates the raw deflate stream `compressed` of entry `name`, which must produce exactly
/// `declared_bytes` bytes; stops one byte past that.
fn inflate(name: &str, compressed: &[u8], declared_bytes: u64) -> Result<Vec<u8>, ConvertError> {
    let declared = to_usize(declared_bytes).ok_or_else(|| {
        zip_error(format!(
            "entry {name} declares {declared_bytes} bytes, more than this machine can address"
        ))
    })?;
    let initial_capacity = declared.min(
        compressed
            .len()
            .saturating_mul(MAX_DEFLATE_RATIO)
            .saturating_add(INFLATE_CHUNK_BYTES),
    );
    let mut output = Vec::with_capacity(initial_capacity);
    let mut chunk = vec![0u8; INFLATE_CHUNK_BYTES];
    let mut inflater = flate2::Decompress::new(false);
    loop {
        let consumed = to_usize(inflater.total_in()).unwrap_or(usize::MAX);
        let input = compressed.get(consumed..).unwrap_or(&[]);
        let produced_before = inflater.total_out();
        // One byte more than declared is enough to notice a stream that is too long.
        let room = (declared.saturating_add(1) - output.len()).min(chunk.len());
        let status = inflater
            .decompress(input, &mut chunk[..room], flate2::FlushDecompress::None)
            .map_err(|error| {
                zip_error(format!("entry {name}'s deflate stream is damaged: {error}"))
            })?;
        let produced = to_usize(inflater.total_out() - produced_before).unwrap_or(0);
        output.extend_from_slice(&chunk[..produced]);
        if output.len() > declared {
            return Err(zip_error(format!(
                "entry {name} inflates to more than the {declared} bytes its central directory \
                 declares"
            )));
        }
        match status {
            flate2::Status::StreamEnd => break,
            flate2::Status::Ok | flate2::Status::BufError => {
                let consumed_now = to_usize(inflater.total_in()).unwrap_or(usize::MAX);
                if produced == 0 && consumed_now == consumed {
                    return Err(zip_error(format!(
                        "entry {name}'s deflate stream is truncated: it ends after {} of {} \
                         declared bytes",
                        output.len(),
                        declared
                    )));
                }
            }
        }
    }
    if output.len() != declared {
        return Err(zip_error(format!(
            "entry {name} inflates to {} bytes but its central directory declares {declared} \
             bytes",
            output.len()
        )));
    }
    Ok(output)
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

/// Zip writers for tests and fixtures: an ordinary zip and torch's checkpoint layout.
#[doc(hidden)]
pub mod testing {
    use std::io::Write;

    use super::{
        CENTRAL_ENTRY_SIGNATURE, DATA_DESCRIPTOR_SIGNATURE, EOCD_SIGNATURE, FLAG_DATA_DESCRIPTOR,
        FLAG_UTF8_NAME, LOCAL_HEADER_SIGNATURE, LOCAL_HEADER_SIZE_BYTES, METHOD_DEFLATED,
        METHOD_STORED, TORCH_PADDING_EXTRA_ID, ZIP64_EOCD_SIGNATURE, ZIP64_LOCATOR_SIGNATURE,
    };

    /// How [`write_zip`] stores an entry.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum ZipMethod {
        /// Method 0: the bytes as they are.
        Stored,
        /// Method 8: raw deflate (flate2, default level).
        Deflated,
    }

    /// Alignment of entry data in torch checkpoints (`kFieldAlignment`).
    const TORCH_ALIGNMENT_BYTES: usize = 64;
    /// DOS date 1980-01-01, the earliest valid one, used by [`write_zip`].
    const DOS_DATE_1980_01_01: u16 = (1 << 5) | 1;
    /// "Version needed to extract" 2.0 (deflate), used by [`write_zip`].
    const VERSION_20: u16 = 20;

    /// An ordinary zip: for each `(name, data, method)` a local header with sizes and CRC, the
    /// data, then the central directory and a classic end record (no ZIP64, no data
    /// descriptors, date 1980-01-01). Names with non-ASCII characters get the UTF-8 flag.
    /// Archives of 4 GiB or more, or with 65 535 entries or more, are not supported (the
    /// 32-bit fields would wrap).
    pub fn write_zip(entries: &[(&str, &[u8], ZipMethod)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for &(name, data, method) in entries {
            let (method_id, payload) = match method {
                ZipMethod::Stored => (METHOD_STORED, data.to_vec()),
                ZipMethod::Deflated => (METHOD_DEFLATED, deflate(data)),
            };
            let flags = if name.is_ascii() { 0 } else { FLAG_UTF8_NAME };
            let crc32 = crc32fast::hash(data);
            let local_offset = out.len() as u32;
            put_u32(&mut out, LOCAL_HEADER_SIGNATURE);
            put_u16(&mut out, VERSION_20);
            put_u16(&mut out, flags);
            put_u16(&mut out, method_id);
            put_u16(&mut out, 0); // time 00:00:00
            put_u16(&mut out, DOS_DATE_1980_01_01);
            put_u32(&mut out, crc32);
            put_u32(&mut out, payload.len() as u32);
            put_u32(&mut out, data.len() as u32);
            put_u16(&mut out, name.len() as u16);
            put_u16(&mut out, 0); // extra
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&payload);

            put_u32(&mut central, CENTRAL_ENTRY_SIGNATURE);
            put_u16(&mut central, VERSION_20); // made by
            put_u16(&mut central, VERSION_20); // needed
            put_u16(&mut central, flags);
            put_u16(&mut central, method_id);
            put_u16(&mut central, 0);
            put_u16(&mut central, DOS_DATE_1980_01_01);
            put_u32(&mut central, crc32);
            put_u32(&mut central, payload.len() as u32);
            put_u32(&mut central, data.len() as u32);
            put_u16(&mut central, name.len() as u16);
            put_u16(&mut central, 0); // extra
            put_u16(&mut central, 0); // comment
            put_u16(&mut central, 0); // disk
            put_u16(&mut central, 0); // internal attributes
            put_u32(&mut central, 0); // external attributes
            put_u32(&mut central, local_offset);
            central.extend_from_slice(name.as_bytes());
        }
        let central_offset = out.len() as u32;
        out.extend_from_slice(&central);
        put_classic_eocd(
            &mut out,
            entries.len() as u16,
            central.len() as u32,
            central_offset,
        );
        out
    }

    /// A checkpoint laid out byte for byte like torch's zip writer (`torch.save`, torch 1.x;
    /// SPEC §2.1): entries `<archive_name>/data.pkl` (= `data_pkl`) and
    /// `<archive_name>/version` (= `"3\n"`), both stored with flag `0x0808`, version 0, DOS
    /// date and time 0, zero sizes and CRC in the local header, an `0x4246` ("FB") extra field
    /// of `'Z'`s so that the data starts on a 64-byte boundary, a data descriptor
    /// (`PK\x07\x08`, CRC, 32-bit sizes) after the data; then the central directory (no extra
    /// fields), a ZIP64 end record, a ZIP64 locator and a classic end record. Archives of
    /// 4 GiB or more are not supported.
    pub fn write_torch_checkpoint(archive_name: &str, data_pkl: &[u8]) -> Vec<u8> {
        let torch_flags = FLAG_DATA_DESCRIPTOR | FLAG_UTF8_NAME;
        let names = [
            format!("{archive_name}/data.pkl"),
            format!("{archive_name}/version"),
        ];
        let contents: [&[u8]; 2] = [data_pkl, b"3\n"];
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, data) in names.iter().zip(contents) {
            let local_offset = out.len();
            let crc32 = crc32fast::hash(data);
            // torch's getPadding: the extra field's 4-byte header counts before the padding.
            let unpadded_start = local_offset + LOCAL_HEADER_SIZE_BYTES + name.len() + 4;
            let padding_bytes =
                unpadded_start.next_multiple_of(TORCH_ALIGNMENT_BYTES) - unpadded_start;
            put_u32(&mut out, LOCAL_HEADER_SIGNATURE);
            put_u16(&mut out, 0); // version needed
            put_u16(&mut out, torch_flags);
            put_u16(&mut out, METHOD_STORED);
            put_u16(&mut out, 0); // time
            put_u16(&mut out, 0); // date (month 0: invalid)
            put_u32(&mut out, 0); // CRC: in the data descriptor
            put_u32(&mut out, 0); // compressed size: idem
            put_u32(&mut out, 0); // uncompressed size: idem
            put_u16(&mut out, name.len() as u16);
            put_u16(&mut out, (padding_bytes + 4) as u16);
            out.extend_from_slice(name.as_bytes());
            put_u16(&mut out, TORCH_PADDING_EXTRA_ID);
            put_u16(&mut out, padding_bytes as u16);
            out.resize(out.len() + padding_bytes, b'Z');
            out.extend_from_slice(data);
            put_u32(&mut out, DATA_DESCRIPTOR_SIGNATURE);
            put_u32(&mut out, crc32);
            put_u32(&mut out, data.len() as u32);
            put_u32(&mut out, data.len() as u32);

            put_u32(&mut central, CENTRAL_ENTRY_SIGNATURE);
            put_u16(&mut central, 0); // made by
            put_u16(&mut central, 0); // needed
            put_u16(&mut central, torch_flags);
            put_u16(&mut central, METHOD_STORED);
            put_u16(&mut central, 0); // time
            put_u16(&mut central, 0); // date
            put_u32(&mut central, crc32);
            put_u32(&mut central, data.len() as u32);
            put_u32(&mut central, data.len() as u32);
            put_u16(&mut central, name.len() as u16);
            put_u16(&mut central, 0); // extra
            put_u16(&mut central, 0); // comment
            put_u16(&mut central, 0); // disk
            put_u16(&mut central, 0); // internal attributes
            put_u32(&mut central, 0); // external attributes
            put_u32(&mut central, local_offset as u32);
            central.extend_from_slice(name.as_bytes());
        }
        let central_offset = out.len();
        out.extend_from_slice(&central);
        let zip64_record_offset = out.len();
        let num_entries = names.len() as u64;
        put_u32(&mut out, ZIP64_EOCD_SIGNATURE);
        put_u64(&mut out, 44); // size of the rest of the record
        put_u16(&mut out, 0x031e); // made by: Unix, 3.0 (miniz)
        put_u16(&mut out, 0x002d); // needed: 4.5 (ZIP64)
        put_u32(&mut out, 0); // this disk
        put_u32(&mut out, 0); // disk of the central directory
        put_u64(&mut out, num_entries);
        put_u64(&mut out, num_entries);
        put_u64(&mut out, central.len() as u64);
        put_u64(&mut out, central_offset as u64);
        put_u32(&mut out, ZIP64_LOCATOR_SIGNATURE);
        put_u32(&mut out, 0); // disk of the ZIP64 record
        put_u64(&mut out, zip64_record_offset as u64);
        put_u32(&mut out, 1); // total disks
        put_classic_eocd(
            &mut out,
            num_entries as u16,
            central.len() as u32,
            central_offset as u32,
        );
        out
    }

    /// Raw deflate of `data` at flate2's default level.
    fn deflate(data: &[u8]) -> Vec<u8> {
        let mut encoder =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        // Writing into a Vec cannot fail.
        encoder.write_all(data).expect("deflating into memory");
        encoder.finish().expect("deflating into memory")
    }

    /// Appends a classic end-of-central-directory record without comment.
    fn put_classic_eocd(out: &mut Vec<u8>, num_entries: u16, central_bytes: u32, offset: u32) {
        put_u32(out, EOCD_SIGNATURE);
        put_u16(out, 0); // this disk
        put_u16(out, 0); // disk of the central directory
        put_u16(out, num_entries);
        put_u16(out, num_entries);
        put_u32(out, central_bytes);
        put_u32(out, offset);
        put_u16(out, 0); // comment length
    }

    /// Appends `value` little-endian.
    fn put_u16(out: &mut Vec<u8>, value: u16) {
        out.extend_from_slice(&value.to_le_bytes());
    }

    /// Appends `value` little-endian.
    fn put_u32(out: &mut Vec<u8>, value: u32) {
        out.extend_from_slice(&value.to_le_bytes());
    }

    /// Appends `value` little-endian.
    fn put_u64(out: &mut Vec<u8>, value: u64) {
        out.extend_from_slice(&value.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{write_torch_checkpoint, write_zip, ZipMethod};
    use super::*;

    /// No entry is anywhere near this large in the tests.
    const LIMIT_BYTES: u64 = 1 << 30;

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

    use crate::test_rng::XorShift;

    #[test]
    fn write_zip_round_trips_stored_and_deflated_entries() {
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
        assert!(matches!(data, Cow::Borrowed(_)));
        assert_eq!(&data[..], &big[..]);
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
        let archive_bytes = write_zip(&[]);
        assert_eq!(archive_bytes.len(), EOCD_SIZE_BYTES);
        let archive = ZipArchive::parse(&archive_bytes).unwrap();
        assert!(archive.entries().is_empty());
        assert!(archive.find_suffix("").is_none());
    }

    #[test]
    fn archive_comment_is_skipped_when_finding_the_end_record() {
        let mut archive_bytes = write_zip(&[("x", b"payload", ZipMethod::Deflated)]);
        let comment = vec![b'#'; MAX_COMMENT_BYTES];
        let eocd = archive_bytes.len() - EOCD_SIZE_BYTES;
        put_u16(&mut archive_bytes, eocd + 20, MAX_COMMENT_BYTES as u16);
        archive_bytes.extend_from_slice(&comment);
        let archive = ZipArchive::parse(&archive_bytes).unwrap();
        let entry = archive.find("x").unwrap();
        assert_eq!(&archive.read(entry, 100).unwrap()[..], b"payload");
        // One byte more of trailing junk puts the record out of the scanned window.
        archive_bytes.push(b'#');
        assert_zip_error(
            ZipArchive::parse(&archive_bytes),
            "no end-of-central-directory record",
        );
    }

    #[test]
    fn torch_checkpoint_round_trips_and_has_torch_layout_quirks() {
        let data_pkl = sample(1000);
        let bytes = write_torch_checkpoint("testcheckpoint0", &data_pkl);
        // Local header of data.pkl: version 0, flag 0x0808, stored, time/date 0, zero CRC and sizes.
        assert_eq!(u32_at(&bytes, 0), Some(LOCAL_HEADER_SIGNATURE));
        assert_eq!(u16_at(&bytes, 4), Some(0));
        assert_eq!(u16_at(&bytes, 6), Some(0x0808));
        assert_eq!(u16_at(&bytes, 8), Some(0));
        assert_eq!(&bytes[10..26], &[0u8; 16]);
        assert_eq!(u16_at(&bytes, 26), Some(24));
        assert_eq!(u16_at(&bytes, 28), Some(10));
        assert_eq!(&bytes[30..54], b"testcheckpoint0/data.pkl");
        assert_eq!(&bytes[54..64], b"FB\x06\x00ZZZZZZ");
        assert_eq!(&bytes[64..1064], &data_pkl[..]);
        // Data descriptor right after the data.
        assert_eq!(u32_at(&bytes, 1064), Some(DATA_DESCRIPTOR_SIGNATURE));
        assert_eq!(u32_at(&bytes, 1068), Some(crc32fast::hash(&data_pkl)));
        assert_eq!(u32_at(&bytes, 1072), Some(1000));
        assert_eq!(u32_at(&bytes, 1076), Some(1000));
        // Second local header, its data 64-aligned too.
        assert_eq!(u32_at(&bytes, 1080), Some(LOCAL_HEADER_SIGNATURE));
        let version_data = 1080 + 30 + 23 + usize::from(u16_at(&bytes, 1080 + 28).unwrap());
        assert_eq!(version_data % 64, 0);
        assert_eq!(&bytes[version_data..version_data + 2], b"3\n");
        // ZIP64 record, locator and classic record at the end.
        let eocd = bytes.len() - EOCD_SIZE_BYTES;
        assert_eq!(u32_at(&bytes, eocd), Some(EOCD_SIGNATURE));
        let locator = eocd - ZIP64_LOCATOR_SIZE_BYTES;
        assert_eq!(u32_at(&bytes, locator), Some(ZIP64_LOCATOR_SIGNATURE));
        assert_eq!(u32_at(&bytes, locator - 56), Some(ZIP64_EOCD_SIGNATURE));

        let archive = ZipArchive::parse(&bytes).unwrap();
        assert_eq!(archive.entries().len(), 2);
        let pickle = archive.find_suffix("/data.pkl").unwrap();
        assert_eq!(pickle.name, "testcheckpoint0/data.pkl");
        assert_eq!(pickle.method, 0);
        assert_eq!(pickle.compressed_size, 1000);
        assert_eq!(pickle.data_offset, 64);
        assert_eq!(
            &archive.read(pickle, LIMIT_BYTES).unwrap()[..],
            &data_pkl[..]
        );
        let version = archive.find("testcheckpoint0/version").unwrap();
        assert_eq!(version.data_offset % 64, 0);
        assert_eq!(&archive.read(version, 2).unwrap()[..], b"3\n");
    }

    #[test]
    fn torch_checkpoint_padding_covers_every_alignment() {
        for len in 0..130 {
            let data_pkl = sample(len);
            let bytes = write_torch_checkpoint("archive", &data_pkl);
            let archive = ZipArchive::parse(&bytes).unwrap();
            for entry in archive.entries() {
                assert_eq!(entry.data_offset % 64, 0, "length {len}");
            }
            let pickle = archive.find_suffix("/data.pkl").unwrap();
            assert_eq!(&archive.read(pickle, 200).unwrap()[..], &data_pkl[..]);
        }
    }

    #[test]
    fn zip64_end_record_is_used_when_the_classic_one_is_saturated() {
        let mut bytes = write_torch_checkpoint("ckpt", b"pickle bytes");
        let eocd = bytes.len() - EOCD_SIZE_BYTES;
        put_u16(&mut bytes, eocd + 8, u16::MAX);
        put_u16(&mut bytes, eocd + 10, u16::MAX);
        put_u32(&mut bytes, eocd + 12, u32::MAX);
        put_u32(&mut bytes, eocd + 16, u32::MAX);
        let archive = ZipArchive::parse(&bytes).unwrap();
        assert_eq!(archive.entries().len(), 2);
        let pickle = archive.find("ckpt/data.pkl").unwrap();
        assert_eq!(&archive.read(pickle, 100).unwrap()[..], b"pickle bytes");
    }

    #[test]
    fn zip64_extra_fields_replace_saturated_central_fields() {
        // A stored entry whose central sizes and offset live in a ZIP64 extra field.
        let data = b"zip64 entry data";
        let name = b"big.bin";
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&LOCAL_HEADER_SIGNATURE.to_le_bytes());
        bytes.extend_from_slice(&[45, 0, 0, 0, 0, 0, 0, 0, 0x21, 0]);
        bytes.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(&(name.len() as u16).to_le_bytes());
        bytes.extend_from_slice(&20u16.to_le_bytes());
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(&ZIP64_EXTRA_ID.to_le_bytes());
        bytes.extend_from_slice(&16u16.to_le_bytes());
        bytes.extend_from_slice(&(data.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&(data.len() as u64).to_le_bytes());
        bytes.extend_from_slice(data);
        let central_offset = bytes.len();
        bytes.extend_from_slice(&CENTRAL_ENTRY_SIGNATURE.to_le_bytes());
        bytes.extend_from_slice(&[45, 0, 45, 0, 0, 0, 0, 0, 0, 0, 0x21, 0]);
        bytes.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(&(name.len() as u16).to_le_bytes());
        bytes.extend_from_slice(&(8u16 + 28).to_le_bytes());
        bytes.extend_from_slice(&[0; 6]); // comment length, disk, internal attributes
        bytes.extend_from_slice(&[0; 4]); // external attributes
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(name);
        // Another extra field first, to check the search skips it.
        bytes.extend_from_slice(&TORCH_PADDING_EXTRA_ID.to_le_bytes());
        bytes.extend_from_slice(&4u16.to_le_bytes());
        bytes.extend_from_slice(b"ZZZZ");
        bytes.extend_from_slice(&ZIP64_EXTRA_ID.to_le_bytes());
        bytes.extend_from_slice(&24u16.to_le_bytes());
        bytes.extend_from_slice(&(data.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&(data.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&0u64.to_le_bytes());
        let central_len = bytes.len() - central_offset;
        bytes.extend_from_slice(&EOCD_SIGNATURE.to_le_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 0, 1, 0, 1, 0]);
        bytes.extend_from_slice(&(central_len as u32).to_le_bytes());
        bytes.extend_from_slice(&(central_offset as u32).to_le_bytes());
        bytes.extend_from_slice(&[0, 0]);
        let archive = ZipArchive::parse(&bytes).unwrap();
        let entry = archive.find("big.bin").unwrap();
        assert_eq!(entry.compressed_size, data.len() as u64);
        assert_eq!(entry.uncompressed_size, data.len() as u64);
        assert_eq!(entry.local_header_offset, 0);
        assert_eq!(&archive.read(entry, 100).unwrap()[..], data);

        // Without the ZIP64 extra field the saturated fields cannot be resolved.
        let extra_id_at = central_offset + CENTRAL_ENTRY_SIZE_BYTES + name.len() + 8;
        put_u16(&mut bytes, extra_id_at, 0x7075);
        assert_zip_error(ZipArchive::parse(&bytes), "no ZIP64 extra field");
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
    fn duplicate_names_are_refused() {
        let bytes = write_zip(&[
            ("same", b"1", ZipMethod::Stored),
            ("same", b"2", ZipMethod::Stored),
        ]);
        assert_zip_error(ZipArchive::parse(&bytes), "two entries named same");
    }

    #[test]
    fn crc_mismatch_is_reported() {
        for method in [ZipMethod::Stored, ZipMethod::Deflated] {
            let mut bytes = write_zip(&[("entry.bin", &sample(5000), method)]);
            let central = find_signature(&bytes, CENTRAL_ENTRY_SIGNATURE, 0);
            let crc = u32_at(&bytes, central + 16).unwrap();
            put_u32(&mut bytes, central + 16, crc ^ 1);
            let archive = ZipArchive::parse(&bytes).unwrap();
            let entry = archive.find("entry.bin").unwrap();
            assert_zip_error(
                archive.read(entry, LIMIT_BYTES),
                "CRC-32 mismatch in entry entry.bin",
            );
        }
        // Damaged stored data, CRC untouched.
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
        for bytes in [&normal, &torch] {
            for cut in 0..bytes.len() {
                assert_zip_error(
                    ZipArchive::parse(&bytes[..cut]),
                    "no end-of-central-directory record",
                );
            }
        }
        // Data cut out of the middle while the end records survive: offsets no longer match.
        for start in [0, 10, 64, 400, 600] {
            let mut cut = torch.clone();
            cut.drain(start..start + 40);
            let message = zip_message(ZipArchive::parse(&cut));
            assert!(
                message.contains("outside the archive")
                    || message.contains("local header")
                    || message.contains("signature"),
                "cut at {start}: {message}"
            );
        }
    }

    #[test]
    fn truncated_deflate_stream_is_refused() {
        let data = sample(100_000);
        let mut bytes = write_zip(&[("x", &data, ZipMethod::Deflated)]);
        // Shrink the declared compressed size: the stream now ends early.
        let central = find_signature(&bytes, CENTRAL_ENTRY_SIGNATURE, 0);
        let compressed = u32_at(&bytes, central + 20).unwrap();
        put_u32(&mut bytes, central + 20, compressed / 2);
        let archive = ZipArchive::parse(&bytes).unwrap();
        let entry = archive.find("x").unwrap();
        assert_zip_error(archive.read(entry, LIMIT_BYTES), "truncated");
    }

    #[test]
    fn wrong_declared_size_is_refused() {
        let data = sample(10_000);
        for (declared, needle) in [
            (9_999, "more than the 9999 bytes"),
            (10_001, "inflates to 10000 bytes"),
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
    fn entry_beyond_the_end_is_refused() {
        let mut bytes = write_zip(&[("x", &sample(100), ZipMethod::Stored)]);
        let central = find_signature(&bytes, CENTRAL_ENTRY_SIGNATURE, 0);
        put_u32(&mut bytes, central + 20, 1_000_000);
        assert_zip_error(
            ZipArchive::parse(&bytes),
            "lies beyond the end of the archive",
        );

        let mut bytes = write_zip(&[("x", &sample(100), ZipMethod::Stored)]);
        put_u32(&mut bytes, central + 42, 5_000_000);
        assert_zip_error(
            ZipArchive::parse(&bytes),
            "local header (offset 5000000) lies beyond",
        );

        // Data running into the central directory.
        let mut bytes = write_zip(&[("x", &sample(100), ZipMethod::Stored)]);
        put_u32(&mut bytes, central + 20, 110);
        assert_zip_error(ZipArchive::parse(&bytes), "overlaps the central directory");

        // An entry taken from a bigger archive cannot read past this one's end.
        let big = write_zip(&[("x", &sample(10_000), ZipMethod::Stored)]);
        let big_archive = ZipArchive::parse(&big).unwrap();
        let small = write_zip(&[("x", &sample(10), ZipMethod::Stored)]);
        let small_archive = ZipArchive::parse(&small).unwrap();
        let foreign = big_archive.find("x").unwrap();
        assert_zip_error(small_archive.read(foreign, LIMIT_BYTES), "beyond the end");
    }

    #[test]
    fn unsupported_method_is_named() {
        let mut bytes = write_zip(&[("x.bz2", &sample(100), ZipMethod::Stored)]);
        let central = find_signature(&bytes, CENTRAL_ENTRY_SIGNATURE, 0);
        put_u16(&mut bytes, central + 10, 12);
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
    fn zip_bomb_stops_inflating_at_the_declared_size() {
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
    fn encrypted_and_multi_disk_archives_are_refused() {
        let mut bytes = write_zip(&[("secret", b"x", ZipMethod::Stored)]);
        let central = find_signature(&bytes, CENTRAL_ENTRY_SIGNATURE, 0);
        put_u16(&mut bytes, central + 8, 1);
        assert_zip_error(ZipArchive::parse(&bytes), "entry secret is encrypted");

        let mut bytes = write_zip(&[("x", b"x", ZipMethod::Stored)]);
        let eocd = bytes.len() - EOCD_SIZE_BYTES;
        put_u16(&mut bytes, eocd + 4, 1);
        assert_zip_error(ZipArchive::parse(&bytes), "multi-disk");

        let mut bytes = write_torch_checkpoint("t", b"x");
        let locator = bytes.len() - EOCD_SIZE_BYTES - ZIP64_LOCATOR_SIZE_BYTES;
        put_u32(&mut bytes, locator + 16, 3);
        assert_zip_error(ZipArchive::parse(&bytes), "multi-disk");
    }

    #[test]
    fn absurd_entry_counts_are_refused() {
        let mut bytes = write_zip(&[("x", b"x", ZipMethod::Stored)]);
        let eocd = bytes.len() - EOCD_SIZE_BYTES;
        put_u16(&mut bytes, eocd + 8, 60_000);
        put_u16(&mut bytes, eocd + 10, 60_000);
        assert_zip_error(ZipArchive::parse(&bytes), "claims 60000 entries");

        let mut bytes = write_torch_checkpoint("t", b"x");
        let record = bytes.len() - EOCD_SIZE_BYTES - ZIP64_LOCATOR_SIZE_BYTES - 56;
        bytes[record + 24..record + 32].copy_from_slice(&u64::MAX.to_le_bytes());
        bytes[record + 32..record + 40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_zip_error(
            ZipArchive::parse(&bytes),
            "claims 18446744073709551615 entries",
        );
    }

    #[test]
    fn random_damage_never_panics() {
        let normal = write_zip(&[
            ("a", &sample(2000), ZipMethod::Deflated),
            ("b", &sample(100), ZipMethod::Stored),
        ]);
        let torch = write_torch_checkpoint("t", &sample(300));
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for round in 0..3000 {
            let mut bytes = if round % 2 == 0 {
                normal.clone()
            } else {
                torch.clone()
            };
            let num_flips = 1 + rng.next() % 4;
            for _ in 0..num_flips {
                let at = (rng.next() % bytes.len() as u64) as usize;
                bytes[at] = rng.next() as u8;
            }
            if let Ok(archive) = ZipArchive::parse(&bytes) {
                for entry in archive.entries() {
                    let _ = archive.read(entry, 1 << 20);
                }
            }
        }
    }
}
