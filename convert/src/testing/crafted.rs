//! Crafted checkpoints (issue 45): files of at most 1 MB, each written to make a reader without a
//! whole-file memory budget allocate gigabytes, one way each: a memoised string or bytes
//! object referenced many times, many strided views of one storage, deflated storages and a
//! deflated pickle that inflate ~1,000-fold, and a long list. The tests of the budget, the
//! fuzzers' seed corpus and the peak-memory measurement of `stemflow models import`
//! (docs/models.md) all use these.

use crate::torch::opcode;

/// Largest a crafted file may be.
pub const MAX_CRAFTED_BYTES: usize = 1_000_000;
/// Most items pushed between a `MARK` and its `APPENDS` (the machine's stack holds 4,096).
const BATCH_ITEMS: usize = 4000;

/// One crafted checkpoint.
#[derive(Debug, Clone)]
pub struct CraftedCheckpoint {
    /// A short file-name-safe name, e.g. `shared-string`.
    pub name: &'static str,
    /// What a reader without a budget would allocate, in words.
    pub attack: &'static str,
    /// The file (at most [`MAX_CRAFTED_BYTES`]).
    pub bytes: Vec<u8>,
}

/// Every crafted checkpoint. Takes a few seconds (deflating about 2 GB of zeros).
pub fn crafted_checkpoints() -> Vec<CraftedCheckpoint> {
    vec![
        CraftedCheckpoint {
            name: "shared-string",
            attack: "a 500 KiB str memoised once and referenced 200,000 times: 100 GB of copies",
            bytes: torch_zip("t", &shared_text(opcode::BINUNICODE, 2), &[]),
        },
        CraftedCheckpoint {
            name: "shared-bytes",
            attack: "a 500 KiB bytes object memoised once and referenced 200,000 times: 100 GB",
            bytes: torch_zip("t", &shared_text(opcode::BINBYTES, 3), &[]),
        },
        CraftedCheckpoint {
            name: "legacy-shared-string",
            attack: "the shared str in a legacy (torch < 1.6) checkpoint, whose pickles share \
                     one budget",
            bytes: legacy_shared_text(),
        },
        CraftedCheckpoint {
            name: "strided-views",
            attack: "140,000 transposed views of one 256 KiB storage: 37 GB of gathered copies",
            bytes: strided_views(),
        },
        CraftedCheckpoint {
            name: "deflated-storage",
            attack: "a deflated storage of 900 MiB of zeros, and a tensor over it: 1.8 GB",
            bytes: deflated_storage(),
        },
        CraftedCheckpoint {
            name: "deflated-pickle",
            attack: "a data.pkl deflated from 680 MiB: a list of 680 million items, 22 GB",
            bytes: deflated_pickle(),
        },
        CraftedCheckpoint {
            name: "long-list",
            attack:
                "a list of a million Nones in a 1 MB pickle: 32 bytes an item, and a value each",
            bytes: torch_zip("t", &long_list(), &[]),
        },
    ]
}

/// A torch-layout zip of `data.pkl` and stored storages `data/<key>`.
fn torch_zip(archive: &str, pickle: &[u8], storages: &[(&str, &[u8])]) -> Vec<u8> {
    super::write_torch_checkpoint_with_storages(archive, pickle, storages)
}

/// `PROTO protocol`, `prefix`, then a list of `count` copies of `item`, in batches.
fn list_pickle(protocol: u8, prefix: &[u8], count: usize, item: &[u8]) -> Vec<u8> {
    let mut out = vec![opcode::PROTO, protocol];
    out.extend_from_slice(prefix);
    out.push(opcode::EMPTY_LIST);
    let mut left = count;
    while left > 0 {
        let batch = left.min(BATCH_ITEMS);
        out.push(opcode::MARK);
        for _ in 0..batch {
            out.extend_from_slice(item);
        }
        out.push(opcode::APPENDS);
        left -= batch;
    }
    out.push(opcode::STOP);
    out
}

/// A 500 KiB str (or bytes) in memo slot 0, then a list referencing it 200,000 times.
fn shared_text(code: u8, protocol: u8) -> Vec<u8> {
    let len = 500 << 10;
    let mut prefix = vec![code];
    prefix.extend_from_slice(&(len as u32).to_le_bytes());
    prefix.extend(std::iter::repeat_n(b'a', len));
    prefix.extend_from_slice(&[opcode::BINPUT, 0, opcode::POP]);
    list_pickle(protocol, &prefix, 200_000, &[opcode::BINGET, 0])
}

/// The legacy layout's header pickles (magic number, protocol 1001, an empty `sys_info`), then
/// [`shared_text`] as the main pickle (nothing follows: the read fails before the key list).
fn legacy_shared_text() -> Vec<u8> {
    let mut out = vec![opcode::PROTO, 2, opcode::LONG1, 10];
    out.extend_from_slice(&0x1950_a86a_20f9_469c_fc6c_u128.to_le_bytes()[..10]);
    out.extend_from_slice(&[opcode::STOP, opcode::PROTO, 2, opcode::BININT2]);
    out.extend_from_slice(&1001u16.to_le_bytes());
    out.extend_from_slice(&[
        opcode::STOP,
        opcode::PROTO,
        2,
        opcode::EMPTY_DICT,
        opcode::STOP,
    ]);
    out.extend_from_slice(&shared_text(opcode::BINUNICODE, 2));
    out
}

/// A list of 990,000 `None`s.
fn long_list() -> Vec<u8> {
    list_pickle(2, &[], 990_000, &[opcode::NONE])
}

/// The pickle prefix that memoises `_rebuild_tensor_v2` (slot 0) and its arguments (slot 1):
/// storage `0` of `storage_len` float32 elements, viewed with `shape` and `stride`.
fn tensor_arguments(storage_len: u32, shape: [u32; 2], stride: [u32; 2]) -> Vec<u8> {
    let mut out = vec![opcode::GLOBAL];
    out.extend_from_slice(b"torch._utils\n_rebuild_tensor_v2\n");
    out.extend_from_slice(&[opcode::BINPUT, 0, opcode::POP, opcode::MARK, opcode::MARK]);
    push_str(&mut out, "storage");
    out.push(opcode::GLOBAL);
    out.extend_from_slice(b"torch\nFloatStorage\n");
    push_str(&mut out, "0");
    push_str(&mut out, "cpu");
    push_int(&mut out, storage_len);
    out.extend_from_slice(&[opcode::TUPLE, opcode::BINPERSID]);
    push_int(&mut out, 0);
    for pair in [shape, stride] {
        push_int(&mut out, pair[0]);
        push_int(&mut out, pair[1]);
        out.push(opcode::TUPLE2);
    }
    out.extend_from_slice(&[opcode::NEWFALSE, opcode::NONE, opcode::TUPLE]);
    out.extend_from_slice(&[opcode::BINPUT, 1, opcode::POP]);
    out
}

fn push_str(out: &mut Vec<u8>, text: &str) {
    out.push(opcode::SHORT_BINUNICODE);
    out.push(text.len() as u8);
    out.extend_from_slice(text.as_bytes());
}

fn push_int(out: &mut Vec<u8>, value: u32) {
    out.push(opcode::BININT);
    out.extend_from_slice(&value.to_le_bytes());
}

/// 140,000 tensors, each the transpose of one 256 × 256 float32 storage.
fn strided_views() -> Vec<u8> {
    let prefix = tensor_arguments(256 * 256, [256, 256], [1, 256]);
    let call = [opcode::BINGET, 0, opcode::BINGET, 1, opcode::REDUCE];
    let pickle = list_pickle(2, &prefix, 140_000, &call);
    let storage = vec![0u8; 256 * 256 * 4];
    torch_zip("t", &pickle, &[("0", &storage)])
}

/// An entry of [`raw_zip`].
struct RawEntry {
    /// Path in the archive.
    name: &'static str,
    /// Raw deflate data, or the bytes themselves when `is_deflated` is false.
    data: Vec<u8>,
    /// CRC-32 of the inflated bytes.
    crc32: u32,
    /// Length of the inflated bytes.
    len_bytes: u64,
    /// Method 8 (deflate) rather than 0 (stored).
    is_deflated: bool,
}

impl RawEntry {
    /// A stored entry.
    fn stored(name: &'static str, data: &[u8]) -> Self {
        Self {
            name,
            data: data.to_vec(),
            crc32: crc32fast::hash(data),
            len_bytes: data.len() as u64,
            is_deflated: false,
        }
    }

    /// A deflated entry that inflates to `head`, `piece` `count` times, then `tail`, built
    /// without ever holding those bytes: each part is deflated once on its own (a sync flush
    /// ends it on a byte boundary, and it refers to nothing before it), and a deflate stream
    /// may hold such blocks one after the other, so `piece`'s blocks are repeated `count`
    /// times.
    fn deflated(name: &'static str, head: &[u8], piece: &[u8], count: usize, tail: &[u8]) -> Self {
        let block = |bytes: &[u8], flush| {
            let mut compress = flate2::Compress::new(flate2::Compression::best(), false);
            let mut out = Vec::with_capacity(bytes.len() / 2 + 64);
            compress
                .compress_vec(bytes, &mut out, flush)
                .expect("deflating into memory");
            out
        };
        let piece_block = block(piece, flate2::FlushCompress::Sync);
        let mut data = block(head, flate2::FlushCompress::Sync);
        for _ in 0..count {
            data.extend_from_slice(&piece_block);
        }
        data.extend(block(tail, flate2::FlushCompress::Finish));
        let mut crc = crc32fast::Hasher::new();
        crc.update(head);
        let mut piece_crc = crc32fast::Hasher::new();
        piece_crc.update(piece);
        for _ in 0..count {
            crc.combine(&piece_crc);
        }
        crc.update(tail);
        Self {
            name,
            data,
            crc32: crc.finalize(),
            len_bytes: (head.len() + piece.len() * count + tail.len()) as u64,
            is_deflated: true,
        }
    }
}

/// A plain zip (no ZIP64: every size below 4 GiB) of `entries`.
fn raw_zip(entries: &[RawEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for entry in entries {
        let offset = out.len() as u32;
        let method: u16 = if entry.is_deflated { 8 } else { 0 };
        // Version needed, flags, method, time, date, CRC, sizes, name length, extra length.
        let fields = |signature: u32| {
            let mut header = signature.to_le_bytes().to_vec();
            header.extend_from_slice(&20u16.to_le_bytes());
            header.extend_from_slice(&0u16.to_le_bytes());
            header.extend_from_slice(&method.to_le_bytes());
            header.extend_from_slice(&[0; 4]);
            header.extend_from_slice(&entry.crc32.to_le_bytes());
            header.extend_from_slice(&(entry.data.len() as u32).to_le_bytes());
            header.extend_from_slice(&(entry.len_bytes as u32).to_le_bytes());
            header.extend_from_slice(&(entry.name.len() as u16).to_le_bytes());
            header.extend_from_slice(&0u16.to_le_bytes());
            header
        };
        out.extend(fields(0x0403_4b50));
        out.extend_from_slice(entry.name.as_bytes());
        out.extend_from_slice(&entry.data);
        // Central entry: version made by, then the local fields, then comment length, disk,
        // attributes and the local header's offset.
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&fields(0)[4..]);
        central.extend_from_slice(&[0; 10]);
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(entry.name.as_bytes());
    }
    let central_offset = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&central_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// Storage `0` of 900 MiB of zeros, deflated, and one tensor over all of it.
fn deflated_storage() -> Vec<u8> {
    let len_elements = (900u32 << 20) / 4;
    let mut pickle = vec![opcode::PROTO, 2];
    pickle.extend_from_slice(&tensor_arguments(len_elements, [len_elements, 1], [1, 1]));
    pickle.extend_from_slice(&[opcode::BINGET, 0, opcode::BINGET, 1, opcode::REDUCE]);
    pickle.push(opcode::STOP);
    let zeros = vec![0u8; 1 << 20];
    raw_zip(&[
        RawEntry::stored("t/data.pkl", &pickle),
        RawEntry::deflated("t/data/0", &[], &zeros, 900, &[]),
    ])
}

/// A data.pkl of 680 MiB (a list of `None`s in batches), deflated.
fn deflated_pickle() -> Vec<u8> {
    let mut batch = vec![opcode::MARK];
    batch.extend(std::iter::repeat_n(opcode::NONE, BATCH_ITEMS));
    batch.push(opcode::APPENDS);
    // About 1 MiB of batches, repeated.
    let piece = batch.repeat(256);
    let head = [opcode::PROTO, 2, opcode::EMPTY_LIST];
    let count = (680 << 20) / piece.len();
    raw_zip(&[RawEntry::deflated(
        "t/data.pkl",
        &head,
        &piece,
        count,
        &[opcode::STOP],
    )])
}
