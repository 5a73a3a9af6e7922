//! Writers for tests and fixtures (feature `test-writers`; never used by the converters): zips
//! with the `zip` crate, torch's checkpoint zip layout byte for byte, pickles of numpy dicts and
//! of torch state dicts as torch writes them, and malicious pickles.

use std::io::{Cursor, Write};

pub mod crafted;

/// The committed fixture at `path` under convert's `tests/fixtures/` (e.g. `htdemucs/small.th`).
/// Panics when it is missing: a test without its fixture cannot run.
pub fn fixture(path: &str) -> Vec<u8> {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path);
    std::fs::read(&full).unwrap_or_else(|e| panic!("fixture {}: {e}", full.display()))
}

use crate::torch::opcode;

/// Signature of a local file header (`PK\x03\x04`).
const LOCAL_HEADER_SIGNATURE: u32 = 0x0403_4b50;
/// Signature of a data descriptor (`PK\x07\x08`).
const DATA_DESCRIPTOR_SIGNATURE: u32 = 0x0807_4b50;
/// Signature of a central directory entry (`PK\x01\x02`).
const CENTRAL_ENTRY_SIGNATURE: u32 = 0x0201_4b50;
/// Signature of the classic end-of-central-directory record (`PK\x05\x06`).
const EOCD_SIGNATURE: u32 = 0x0605_4b50;
/// Signature of the ZIP64 end-of-central-directory record (`PK\x06\x06`).
const ZIP64_EOCD_SIGNATURE: u32 = 0x0606_4b50;
/// Signature of the ZIP64 end-of-central-directory locator (`PK\x06\x07`).
const ZIP64_LOCATOR_SIGNATURE: u32 = 0x0706_4b50;
/// Size of a local file header's fixed part.
const LOCAL_HEADER_SIZE_BYTES: usize = 30;
/// Id of torch's alignment padding extra field ("FB").
const TORCH_PADDING_EXTRA_ID: u16 = 0x4246;
/// General-purpose flag bit 3: sizes and CRC follow the data in a data descriptor.
const FLAG_DATA_DESCRIPTOR: u16 = 1 << 3;
/// General-purpose flag bit 11: the name is UTF-8.
const FLAG_UTF8_NAME: u16 = 1 << 11;
/// Compression method 0: stored.
const METHOD_STORED: u16 = 0;
/// Alignment of entry data in torch checkpoints (`kFieldAlignment`).
const TORCH_ALIGNMENT_BYTES: usize = 64;

/// How [`write_zip`] stores an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZipMethod {
    /// Method 0: the bytes as they are.
    Stored,
    /// Method 8: raw deflate.
    Deflated,
}

/// An ordinary zip written by the `zip` crate: for each `(name, data, method)` an entry dated
/// 1980-01-01, then the central directory. Panics on a duplicate name (the crate refuses it).
pub fn write_zip(entries: &[(&str, &[u8], ZipMethod)]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for &(name, data, method) in entries {
        let method = match method {
            ZipMethod::Stored => zip::CompressionMethod::Stored,
            ZipMethod::Deflated => zip::CompressionMethod::Deflated,
        };
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(method)
            .last_modified_time(zip::DateTime::default());
        // Writing into memory fails only on a duplicate name.
        writer.start_file(name, options).expect("a new entry");
        writer.write_all(data).expect("writing into memory");
    }
    writer.finish().expect("writing into memory").into_inner()
}

/// A checkpoint laid out byte for byte like torch's zip writer (`torch.save`, torch 1.x;
/// SPEC §2.1): entries `<archive_name>/data.pkl` (= `data_pkl`) and `<archive_name>/version`
/// (= `"3\n"`), as [`write_torch_zip`] writes them.
pub fn write_torch_checkpoint(archive_name: &str, data_pkl: &[u8]) -> Vec<u8> {
    write_torch_zip(archive_name, &[("data.pkl", data_pkl), ("version", b"3\n")])
}

/// A checkpoint `<archive_name>/` in torch's layout of `data.pkl`, the storages `data/<key>`
/// and `version`, as [`write_torch_zip`] writes them.
pub fn write_torch_checkpoint_with_storages(
    archive_name: &str,
    data_pkl: &[u8],
    storages: &[(&str, &[u8])],
) -> Vec<u8> {
    let names: Vec<String> = storages.iter().map(|(k, _)| format!("data/{k}")).collect();
    let mut records: Vec<(&str, &[u8])> = vec![("data.pkl", data_pkl)];
    records.extend(
        names
            .iter()
            .zip(storages)
            .map(|(n, (_, d))| (n.as_str(), *d)),
    );
    records.push(("version", b"3\n"));
    write_torch_zip(archive_name, &records)
}

/// A zip laid out byte for byte like torch's zip writer: each `(name, data)` record as
/// `<archive_name>/<name>`, stored with flag `0x0808`, version 0, DOS date and time 0, zero
/// sizes and CRC in the local header, an `0x4246` ("FB") extra field of `'Z'`s so that the data
/// starts on a 64-byte boundary, a data descriptor (`PK\x07\x08`, CRC, 32-bit sizes) after the
/// data; then the central directory (no extra fields), a ZIP64 end record, a ZIP64 locator and
/// a classic end record. Archives of 4 GiB or more are not supported.
pub fn write_torch_zip(archive_name: &str, records: &[(&str, &[u8])]) -> Vec<u8> {
    let torch_flags = FLAG_DATA_DESCRIPTOR | FLAG_UTF8_NAME;
    let names: Vec<String> = records
        .iter()
        .map(|(name, _)| format!("{archive_name}/{name}"))
        .collect();
    let contents = records.iter().map(|&(_, data)| data);
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, data) in names.iter().zip(contents) {
        let local_offset = out.len();
        let crc32 = crc32fast::hash(data);
        // torch's getPadding: the extra field's 4-byte header counts before the padding.
        let unpadded_start = local_offset + LOCAL_HEADER_SIZE_BYTES + name.len() + 4;
        let padding_bytes = unpadded_start.next_multiple_of(TORCH_ALIGNMENT_BYTES) - unpadded_start;
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

/// How [`write_array_dict`] encodes its arrays; [`Default`] is what numpy 1 writes for
/// float32 arrays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrayEncoding {
    /// Module of `_reconstruct`: `numpy.core.multiarray` (numpy 1) or
    /// `numpy._core.multiarray` (numpy 2).
    pub reconstruct_module: &'static str,
    /// dtype kind, e.g. `f4`, `f8`.
    pub dtype_kind: &'static str,
    /// dtype byte order: `<`, `>` or `|`.
    pub byte_order: &'static str,
    /// Whether the state says Fortran order.
    pub is_fortran: bool,
}

impl Default for ArrayEncoding {
    fn default() -> Self {
        Self {
            reconstruct_module: "numpy.core.multiarray",
            dtype_kind: "f4",
            byte_order: "<",
            is_fortran: false,
        }
    }
}

/// The pickle `torch.save({key: np.float32 array, …})` writes (protocol 2, as in the
/// Spleeter checkpoints): `EMPTY_DICT`, then per array its key, `_reconstruct(ndarray,
/// (0,), _codecs.encode('b', 'latin1'))`, `BUILD` with `(1, shape, dtype, False,
/// _codecs.encode(<bytes as latin-1 text>, 'latin1'))`; the dtype, the globals, `'latin1'`
/// and `b'b'` are built once and fetched from the memo afterwards, exactly as CPython's
/// pickler does. Items are set in batches of 1000 (`MARK … SETITEMS`, or `SETITEM` for a
/// batch of one). The data length is not checked against the shape, so tests can write
/// inconsistent arrays; dimensions must be below 2³¹.
pub fn write_numpy_dict(arrays: &[(&str, &[usize], &[f32])]) -> Vec<u8> {
    let raw: Vec<Vec<u8>> = arrays
        .iter()
        .map(|(_, _, values)| {
            values
                .iter()
                .flat_map(|value| value.to_le_bytes())
                .collect()
        })
        .collect();
    let arrays: Vec<(&str, &[usize], &[u8])> = arrays
        .iter()
        .zip(&raw)
        .map(|(&(key, shape, _), data)| (key, shape, data.as_slice()))
        .collect();
    write_array_dict(&arrays, &ArrayEncoding::default())
}

/// Like [`write_numpy_dict`] with raw data bytes and a chosen [`ArrayEncoding`] (for tests
/// of other dtypes, byte orders and Fortran order). An empty data buffer is written as
/// CPython does for `b''` in protocol 2: `__builtin__.bytes()`.
pub fn write_array_dict(arrays: &[(&str, &[usize], &[u8])], encoding: &ArrayEncoding) -> Vec<u8> {
    let mut writer = Writer::default();
    writer
        .out
        .extend_from_slice(&[opcode::PROTO, 2, opcode::EMPTY_DICT]);
    writer.put();
    let mut shared = Shared::default();
    for batch in arrays.chunks(1000) {
        if batch.len() > 1 {
            writer.out.push(opcode::MARK);
        }
        for &(key, shape, data) in batch {
            writer.unicode(key);
            writer.array(&mut shared, shape, data, encoding);
        }
        writer.out.push(if batch.len() > 1 {
            opcode::SETITEMS
        } else {
            opcode::SETITEM
        });
    }
    writer.out.push(opcode::STOP);
    writer.out
}

/// A small malicious pickle: `module.name('touch /tmp/pwned')`, as `pickle.dumps` of an
/// object whose `__reduce__` returns that call (protocol 2, `GLOBAL` opcode).
pub fn write_pickle_with_global(module: &str, name: &str) -> Vec<u8> {
    let mut writer = Writer::default();
    writer.out.extend_from_slice(&[opcode::PROTO, 2]);
    writer.global(module, name);
    writer.unicode("touch /tmp/pwned");
    writer.out.push(opcode::TUPLE1);
    writer.put();
    writer.out.push(opcode::REDUCE);
    writer.put();
    writer.out.push(opcode::STOP);
    writer.out
}

/// One tensor of [`write_torch_state_dict`]: `_rebuild_tensor_v2` of a storage persistent id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TorchTensorSpec<'a> {
    /// The state dict key.
    pub name: &'a str,
    /// The storage class, e.g. `FloatStorage`.
    pub storage_class: &'a str,
    /// The storage key (`data/<key>` in the zip).
    pub storage_key: &'a str,
    /// The storage's length in elements.
    pub storage_len: i64,
    /// Storage offset in elements.
    pub offset: i64,
    /// Size (`tensor.size()`).
    pub shape: &'a [i64],
    /// Stride in elements (`tensor.stride()`).
    pub stride: &'a [i64],
}

/// The pickle `torch.save(OrderedDict(...))` writes for `tensors` into a zip checkpoint's
/// `data.pkl` (protocol 2): `collections.OrderedDict()`, then for each
/// tensor its key and `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, False,
/// OrderedDict())`, the storage a persistent id `('storage', torch.<class>, key, 'cpu', len)`.
/// Nothing is checked, so tests can write inconsistent tensors; ints must fit an `i32`.
pub fn write_torch_state_dict(tensors: &[TorchTensorSpec<'_>]) -> Vec<u8> {
    let mut writer = Writer::default();
    writer.out.extend_from_slice(&[opcode::PROTO, 2]);
    writer.global("collections", "OrderedDict");
    writer
        .out
        .extend_from_slice(&[opcode::EMPTY_TUPLE, opcode::REDUCE]);
    writer.out.push(opcode::MARK);
    for tensor in tensors {
        writer.unicode(tensor.name);
        writer.global("torch._utils", "_rebuild_tensor_v2");
        writer.out.push(opcode::MARK);
        writer.tuple(5, |w| {
            w.unicode("storage");
            w.global("torch", tensor.storage_class);
            w.unicode(tensor.storage_key);
            w.unicode("cpu");
            w.int(tensor.storage_len);
        });
        writer.out.push(opcode::BINPERSID);
        writer.int(tensor.offset);
        writer.tuple(tensor.shape.len(), |w| {
            tensor.shape.iter().for_each(|&d| w.int(d))
        });
        writer.tuple(tensor.stride.len(), |w| {
            tensor.stride.iter().for_each(|&d| w.int(d))
        });
        writer.out.push(opcode::NEWFALSE);
        writer.global("collections", "OrderedDict");
        writer
            .out
            .extend_from_slice(&[opcode::EMPTY_TUPLE, opcode::REDUCE]);
        writer
            .out
            .extend_from_slice(&[opcode::TUPLE, opcode::REDUCE]);
    }
    writer
        .out
        .extend_from_slice(&[opcode::SETITEMS, opcode::STOP]);
    writer.out
}

/// Memo indices of objects the pickler writes once and then fetches.
#[derive(Default)]
struct Shared {
    reconstruct: Option<u32>,
    ndarray: Option<u32>,
    encode: Option<u32>,
    latin1: Option<u32>,
    b_bytes: Option<u32>,
    dtype: Option<u32>,
    bytes_type: Option<u32>,
}

/// Opcode stream with CPython's memo numbering.
#[derive(Default)]
struct Writer {
    out: Vec<u8>,
    next_memo: u32,
}

impl Writer {
    /// Memoizes the top of the stack (`BINPUT`, or `LONG_BINPUT` from index 256).
    fn put(&mut self) -> u32 {
        let index = self.next_memo;
        self.next_memo += 1;
        if index < 256 {
            self.out.extend_from_slice(&[opcode::BINPUT, index as u8]);
        } else {
            self.out.push(opcode::LONG_BINPUT);
            self.out.extend_from_slice(&index.to_le_bytes());
        }
        index
    }

    /// Pushes memo entry `index`.
    fn get(&mut self, index: u32) {
        if index < 256 {
            self.out.extend_from_slice(&[opcode::BINGET, index as u8]);
        } else {
            self.out.push(opcode::LONG_BINGET);
            self.out.extend_from_slice(&index.to_le_bytes());
        }
    }

    /// Fetches `slot` if set, else writes it with `write` and memoizes it there.
    fn shared(&mut self, slot: &mut Option<u32>, write: impl FnOnce(&mut Self)) {
        match *slot {
            Some(index) => self.get(index),
            None => {
                write(self);
                *slot = Some(self.put());
            }
        }
    }

    /// A str (memoized, as CPython does).
    fn unicode(&mut self, text: &str) {
        self.out.push(opcode::BINUNICODE);
        self.out
            .extend_from_slice(&(text.len() as u32).to_le_bytes());
        self.out.extend_from_slice(text.as_bytes());
        self.put();
    }

    /// `GLOBAL module\nname\n` (memoized).
    fn global(&mut self, module: &str, name: &str) {
        self.out.push(opcode::GLOBAL);
        self.out
            .extend_from_slice(format!("{module}\n{name}\n").as_bytes());
        self.put();
    }

    /// An int as CPython's `save_long` writes it (for values that fit in an `i32`).
    fn int(&mut self, value: i64) {
        if (0..256).contains(&value) {
            self.out.extend_from_slice(&[opcode::BININT1, value as u8]);
        } else if (0..65536).contains(&value) {
            self.out.push(opcode::BININT2);
            self.out.extend_from_slice(&(value as u16).to_le_bytes());
        } else {
            self.out.push(opcode::BININT);
            self.out.extend_from_slice(&(value as i32).to_le_bytes());
        }
    }

    /// A tuple whose items `write_items` writes (`len` of them), as `save_tuple` does.
    fn tuple(&mut self, len: usize, write_items: impl FnOnce(&mut Self)) {
        if len == 0 {
            self.out.push(opcode::EMPTY_TUPLE);
            return;
        }
        if len > 3 {
            self.out.push(opcode::MARK);
        }
        write_items(self);
        self.out.push(match len {
            1 => opcode::TUPLE1,
            2 => opcode::TUPLE2,
            3 => opcode::TUPLE3,
            _ => opcode::TUPLE,
        });
        self.put();
    }

    /// `bytes` as CPython pickles them in protocol 2.
    fn bytes(&mut self, shared: &mut Shared, data: &[u8]) {
        if data.is_empty() {
            self.shared(&mut shared.bytes_type, |w| {
                w.out.push(opcode::GLOBAL);
                w.out.extend_from_slice(b"__builtin__\nbytes\n");
            });
            self.out.push(opcode::EMPTY_TUPLE);
            self.out.push(opcode::REDUCE);
            self.put();
            return;
        }
        let text: String = data.iter().map(|&byte| char::from(byte)).collect();
        self.shared(&mut shared.encode, |w| {
            w.out.push(opcode::GLOBAL);
            w.out.extend_from_slice(b"_codecs\nencode\n");
        });
        let latin1 = &mut shared.latin1;
        self.tuple(2, |w| {
            w.unicode(&text);
            match *latin1 {
                Some(index) => w.get(index),
                None => {
                    w.unicode("latin1");
                    *latin1 = Some(w.next_memo - 1);
                }
            }
        });
        self.out.push(opcode::REDUCE);
        self.put();
    }

    /// One array value: `_reconstruct(…)` then `BUILD`.
    fn array(
        &mut self,
        shared: &mut Shared,
        shape: &[usize],
        data: &[u8],
        encoding: &ArrayEncoding,
    ) {
        let reconstruct_module = encoding.reconstruct_module;
        self.shared(&mut shared.reconstruct, |w| {
            w.out.push(opcode::GLOBAL);
            w.out
                .extend_from_slice(format!("{reconstruct_module}\n_reconstruct\n").as_bytes());
        });
        // Arguments (ndarray, (0,), b'b').
        let mut b_bytes = shared.b_bytes;
        let mut ndarray = shared.ndarray;
        self.tuple(3, |w| {
            w.shared(&mut ndarray, |w| {
                w.out.push(opcode::GLOBAL);
                w.out.extend_from_slice(b"numpy\nndarray\n");
            });
            w.tuple(1, |w| w.int(0));
            match b_bytes {
                Some(index) => w.get(index),
                None => {
                    w.bytes(shared, b"b");
                    b_bytes = Some(w.next_memo - 1);
                }
            }
        });
        shared.b_bytes = b_bytes;
        shared.ndarray = ndarray;
        self.out.push(opcode::REDUCE);
        self.put();
        // State (1, shape, dtype, is_fortran, data).
        self.tuple(5, |w| {
            w.int(1);
            w.tuple(shape.len(), |w| {
                for &size in shape {
                    w.int(size as i64);
                }
            });
            w.dtype(shared, encoding);
            w.out.push(if encoding.is_fortran {
                opcode::NEWTRUE
            } else {
                opcode::NEWFALSE
            });
            w.bytes(shared, data);
        });
        self.out.push(opcode::BUILD);
    }

    /// The dtype: built on first use, fetched from the memo afterwards.
    fn dtype(&mut self, shared: &mut Shared, encoding: &ArrayEncoding) {
        if let Some(index) = shared.dtype {
            self.get(index);
            return;
        }
        self.global("numpy", "dtype");
        self.tuple(3, |w| {
            w.unicode(encoding.dtype_kind);
            w.out
                .extend_from_slice(&[opcode::NEWFALSE, opcode::NEWTRUE]);
        });
        self.out.push(opcode::REDUCE);
        shared.dtype = Some(self.put());
        self.tuple(8, |w| {
            w.int(3);
            w.unicode(encoding.byte_order);
            w.out
                .extend_from_slice(&[opcode::NONE, opcode::NONE, opcode::NONE]);
            w.int(-1);
            w.int(-1);
            w.int(0);
        });
        self.out.push(opcode::BUILD);
    }
}
