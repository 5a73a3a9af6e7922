//! [`load_numpy_dict`]: the pickle `torch.save({name: np.ndarray})` writes (the Spleeter
//! checkpoints' `data.pkl`), as float32 arrays; and numpy arrays met in a torch checkpoint's tree.
//!
//! Each array must be `_reconstruct(ndarray, (0,), b'b')` followed by `BUILD` with the state
//! `(1, shape, dtype, is_fortran, data)`, where `dtype` is `dtype(kind, False, True)` with the
//! `BUILD` state `(3, byte_order, None, None, None, elsize, alignment, flags)` and `data` is
//! `_codecs.encode(text, 'latin1')` (protocol 2: a string whose code points, all < 256, are the
//! array's bytes) or a `bytes` object (protocol 3 and above). Only little-endian float32
//! (`'<f4'`) arrays in C order are converted; any other dtype, byte order or Fortran order (of an
//! array with 2 or more dimensions) is refused by name, and `len(data)` must be
//! `prod(shape) * 4`. Zero-element arrays are refused: CPython pickles their empty data as
//! `__builtin__.bytes()`, a call outside the allow-list.

use std::borrow::Cow;

use super::item::{ArrayData, ArrayState, Item, Object};
use super::latin1::decode_latin1;
use super::machine::{Machine, PersistentIds};
use super::tensor::{DType, Tensor};
use crate::budget::ReadBudget;
use crate::error::ConvertError;

/// Size of one float32.
const F32_SIZE_BYTES: usize = 4;

/// A float32 array from the pickle, in C (row-major) order.
#[derive(Debug, Clone, PartialEq)]
pub struct NdArray {
    /// Dimensions, outermost first; empty for a 0-d (scalar) array.
    pub shape: Vec<usize>,
    /// `shape.iter().product()` values, last dimension fastest.
    pub data: Vec<f32>,
}

/// Loads a pickle of a `dict` of little-endian float32 numpy arrays (a Spleeter checkpoint's
/// `data.pkl`), returning `(key, array)` in the dict's insertion order.
///
/// Runs the pickle with the restricted machine ([module docs](super)); never imports or calls
/// anything. Fails with [`ConvertError::Pickle`] naming the opcode and byte offset for: an
/// unsupported opcode, a call outside the allow-list (the message names it, e.g.
/// `posix.system`), a `REDUCE` or `BUILD` of a shape numpy does not produce, a persistent id,
/// truncated input, bytes after `STOP`; and, naming the key, for a top-level object that is not
/// a dict of arrays, duplicate or non-`str` keys, a dtype other than `'<f4'`, Fortran order, or
/// data whose length is not `prod(shape) * 4` bytes. Not realtime-safe: allocates the arrays
/// (about the size of the pickle). Loading a Spleeter checkpoint's 59 MB `data.pkl` takes about
/// 0.25 s in a release build.
pub fn load_numpy_dict(pickle: &[u8]) -> Result<Vec<(String, NdArray)>, ConvertError> {
    let budget = ReadBudget::for_file(pickle.len());
    let mut machine = Machine::new(pickle, 0, PersistentIds::Refused, &budget);
    let result = machine.run().map_err(ConvertError::Pickle)?;
    let trailing = pickle.len() - machine.position();
    if trailing > 0 {
        return Err(ConvertError::Pickle(format!(
            "{trailing} bytes follow STOP at byte {}: damaged pickle",
            machine.position() - 1
        )));
    }
    into_arrays(&machine, &result).map_err(ConvertError::Pickle)
}

/// The dict `result` as `(key, array)` pairs, checking dtype, order and length.
fn into_arrays(machine: &Machine<'_>, result: &Item<'_>) -> Result<Vec<(String, NdArray)>, String> {
    let items = match result {
        Item::Object(id) => match machine.objects.get(*id) {
            Some(Object::Dict { items, .. }) => items,
            _ => return Err(not_a_dict(machine, result)),
        },
        _ => return Err(not_a_dict(machine, result)),
    };
    let mut is_used = vec![false; machine.objects.len()];
    let mut keys = std::collections::HashSet::with_capacity(items.len());
    let mut arrays = Vec::with_capacity(items.len());
    for (key, value) in items {
        let Item::Str(key) = key else {
            return Err(format!(
                "a dict key is {}, not a str",
                machine.describe(key)
            ));
        };
        let key = std::str::from_utf8(key)
            .map_err(|error| format!("a dict key is not valid UTF-8: {error}"))?;
        if !keys.insert(key) {
            return Err(format!("the dict holds the key {key:?} twice"));
        }
        let not_an_array = || {
            format!(
                "the value for key {key:?} is {}, not a numpy array",
                machine.describe(value)
            )
        };
        let Item::Object(id) = value else {
            return Err(not_an_array());
        };
        let state = match machine.objects.get(*id) {
            Some(Object::Array(Some(state))) => state,
            Some(Object::Array(None)) => {
                return Err(format!("array {key:?} never received its state (no BUILD)"))
            }
            _ => return Err(not_an_array()),
        };
        if std::mem::replace(&mut is_used[*id], true) {
            return Err(format!("key {key:?} shares its array with an earlier key"));
        }
        let bytes = float32_bytes(machine, key, state)?;
        machine
            .budget()
            .charge(bytes.len() as u64, "the arrays' float32 values")?;
        let data = bytes
            .chunks_exact(F32_SIZE_BYTES)
            .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
            .collect();
        arrays.push((
            key.to_string(),
            NdArray {
                shape: state.shape.clone(),
                data,
            },
        ));
    }
    Ok(arrays)
}

fn not_a_dict(machine: &Machine<'_>, result: &Item<'_>) -> String {
    format!(
        "the pickle holds {}, not a dict of numpy arrays",
        machine.describe(result)
    )
}

/// The numpy array object `id` as a float32 [`Tensor`] (arrays met in a torch checkpoint's
/// tree); `what` names it in errors.
pub fn array_tensor(
    machine: &Machine<'_>,
    id: usize,
    what: &str,
) -> Result<Tensor<'static>, String> {
    let Some(Object::Array(Some(state))) = machine.objects.get(id) else {
        return Err(format!("{what} is not a numpy array with its state"));
    };
    Ok(Tensor {
        dtype: DType::F32,
        shape: state.shape.clone(),
        data: Cow::Owned(float32_bytes(machine, what, state)?),
    })
}

/// The array's bytes, checked to be little-endian float32 in C order of the right length.
fn float32_bytes(
    machine: &Machine<'_>,
    key: &str,
    state: &ArrayState<'_>,
) -> Result<Vec<u8>, String> {
    let Some(Object::Dtype(dtype)) = machine.objects.get(state.dtype) else {
        return Err(format!("array {key:?} has no dtype"));
    };
    let Some(byte_order) = dtype.byte_order else {
        return Err(format!(
            "the dtype of array {key:?} never received its state (no BUILD)"
        ));
    };
    if dtype.kind != "f4" || byte_order != "<" {
        return Err(format!(
            "array {key:?} has dtype {} ('{byte_order}{}'); only little-endian float32 \
             ('<f4') is supported",
            dtype_name(dtype.kind, byte_order),
            dtype.kind
        ));
    }
    if state.is_fortran && state.shape.len() > 1 {
        return Err(format!(
            "array {key:?} is stored in Fortran (column-major) order; only C order is \
             supported"
        ));
    }
    let expected_bytes = state.num_elements * F32_SIZE_BYTES;
    let found_bytes = state.data.len_bytes();
    if found_bytes != expected_bytes {
        return Err(format!(
            "array {key:?} has shape {:?} = {} float32 values ({expected_bytes} bytes) but \
             its data holds {found_bytes} bytes",
            state.shape, state.num_elements
        ));
    }
    machine
        .budget()
        .charge(expected_bytes as u64, "the arrays' bytes")?;
    Ok(match state.data {
        ArrayData::Latin1 { utf8, len_bytes } => decode_latin1(utf8, len_bytes),
        ArrayData::Raw(bytes) => bytes.to_vec(),
    })
}

/// numpy's name for dtype `kind` with `byte_order`, e.g. "float64" or "float32, big-endian".
fn dtype_name(kind: &str, byte_order: &str) -> String {
    let base = match kind {
        "f2" => "float16",
        "f4" => "float32",
        "f8" => "float64",
        "f16" => "float128",
        "i1" => "int8",
        "i2" => "int16",
        "i4" => "int32",
        "i8" => "int64",
        "u1" => "uint8",
        "u2" => "uint16",
        "u4" => "uint32",
        "u8" => "uint64",
        "b1" => "bool",
        "c8" => "complex64",
        "c16" => "complex128",
        _ => "an unsupported type",
    };
    match byte_order {
        ">" => format!("{base}, big-endian"),
        "=" => format!("{base}, native byte order"),
        _ => base.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{
        write_array_dict, write_numpy_dict, write_pickle_with_global, ArrayEncoding,
    };
    use crate::torch::machine::{MAX_MARK_DEPTH, MAX_MEMO_ENTRIES, MAX_STACK_DEPTH};
    use crate::torch::opcode;

    fn pickle_message(result: Result<impl std::fmt::Debug, ConvertError>) -> String {
        match result {
            Err(ConvertError::Pickle(message)) => message,
            other => panic!("expected ConvertError::Pickle, got {other:?}"),
        }
    }

    fn assert_pickle_error(pickle: &[u8], needles: &[&str]) {
        let message = pickle_message(load_numpy_dict(pickle));
        for needle in needles {
            assert!(
                message.contains(needle),
                "message {message:?} does not contain {needle:?}"
            );
        }
    }

    /// Values whose bytes include 0x00, 0x7F, 0x80 and 0xFF.
    fn awkward_values(len: usize) -> Vec<f32> {
        let specials = [
            -1.5,
            0.1,
            f32::MIN_POSITIVE,
            -0.0,
            1e30,
            f32::from_bits(0x7fc0_0001),
            f32::from_bits(0x8080_8080),
            f32::MAX,
            f32::from_bits(0xffff_ffff),
            f32::from_bits(0x007f_ff80),
        ];
        (0..len)
            .map(|i| specials.get(i).copied().unwrap_or(i as f32 * -0.37))
            .collect()
    }

    fn bits(values: &[f32]) -> Vec<u32> {
        values.iter().map(|value| value.to_bits()).collect()
    }

    use stemflow_kit::testing::XorShift64;

    #[test]
    fn round_trip_keeps_order_shapes_and_bits() {
        let shapes: Vec<(&str, Vec<usize>)> = vec![
            ("down1_conv.1.weight", vec![16, 2, 5, 5]),
            ("scalar", vec![]),
            ("one", vec![1]),
            ("down1_conv.1.bias", vec![16]),
            ("wide", vec![3, 300]),
            ("big_dims", vec![70_000, 1]),
            ("up7.0.weight", vec![2, 1, 4, 4]),
        ];
        let values: Vec<Vec<f32>> = shapes
            .iter()
            .map(|(_, shape)| awkward_values(shape.iter().product()))
            .collect();
        let arrays: Vec<(&str, &[usize], &[f32])> = shapes
            .iter()
            .zip(&values)
            .map(|((key, shape), data)| (*key, shape.as_slice(), data.as_slice()))
            .collect();
        let pickle = write_numpy_dict(&arrays);
        let loaded = load_numpy_dict(&pickle).unwrap();
        assert_eq!(loaded.len(), arrays.len());
        for ((key, array), (expected_key, shape, data)) in loaded.iter().zip(&arrays) {
            assert_eq!(key, expected_key);
            assert_eq!(array.shape, *shape);
            assert_eq!(bits(&array.data), bits(data), "{key}");
        }
    }

    #[test]
    fn writer_matches_the_checkpoint_opcode_stream() {
        // The first bytes of testcheckpoint0.ckpt's data.pkl (SPEC §2.2 census, offsets 0..223).
        let data = awkward_values(16 * 2 * 5 * 5);
        let pickle = write_numpy_dict(&[("down1_conv.1.weight", &[16, 2, 5, 5], &data)]);
        let mut expected = vec![0x80, 2, b'}', b'q', 0];
        // A one-item dict uses SETITEM, so no MARK here (the checkpoint has 74 items and a MARK).
        expected.extend_from_slice(b"X\x13\x00\x00\x00down1_conv.1.weightq\x01");
        expected.extend_from_slice(b"cnumpy.core.multiarray\n_reconstruct\nq\x02");
        expected.extend_from_slice(b"cnumpy\nndarray\nq\x03K\x00\x85q\x04");
        expected.extend_from_slice(b"c_codecs\nencode\nq\x05X\x01\x00\x00\x00bq\x06");
        expected.extend_from_slice(b"X\x06\x00\x00\x00latin1q\x07\x86q\x08Rq\x09\x87q\x0aRq\x0b");
        expected.extend_from_slice(b"(K\x01(K\x10K\x02K\x05K\x05tq\x0c");
        expected.extend_from_slice(
            b"cnumpy\ndtype\nq\x0dX\x02\x00\x00\x00f4q\x0e\x89\x88\x87q\x0fRq\x10",
        );
        expected.extend_from_slice(
            b"(K\x03X\x01\x00\x00\x00<q\x11NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tq\x12b",
        );
        expected.extend_from_slice(b"\x89h\x05X");
        assert_eq!(&pickle[..expected.len()], &expected[..]);
        // ... data string, then BINPUT 19, BINGET 7 ('latin1'), TUPLE2, REDUCE, TUPLE, BUILD.
        let tail = b"q\x13h\x07\x86q\x14Rq\x15tq\x16bs.";
        assert_eq!(&pickle[pickle.len() - tail.len()..], tail);
    }

    #[test]
    fn every_byte_value_survives_the_latin1_encoding() {
        let raw: Vec<u8> = (0..=255u8).rev().chain(0..=255).collect();
        let pickle = write_array_dict(&[("bytes", &[2, 64], &raw)], &ArrayEncoding::default());
        let loaded = load_numpy_dict(&pickle).unwrap();
        let expected: Vec<u32> = raw
            .chunks_exact(4)
            .map(|word| u32::from_le_bytes([word[0], word[1], word[2], word[3]]))
            .collect();
        assert_eq!(bits(&loaded[0].1.data), expected);
    }

    #[test]
    fn invalid_utf8_is_refused() {
        // A data string ending in a lone lead byte, and one with a stray continuation byte.
        for text in [
            &b"abc\xc3"[..],
            &b"\x80abc"[..],
            &b"a\xc3\xc3b"[..],
            &b"\xc1\x81ab"[..],
        ] {
            let mut pickle = b"\x80\x02c_codecs\nencode\nX".to_vec();
            pickle.extend_from_slice(&(text.len() as u32).to_le_bytes());
            pickle.extend_from_slice(text);
            pickle.extend_from_slice(b"X\x06\x00\x00\x00latin1\x86R.");
            assert_pickle_error(&pickle, &["not valid UTF-8", "REDUCE"]);
        }
        // A key that is not UTF-8.
        let mut pickle = write_numpy_dict(&[("k\u{e9}y", &[1], &[1.0])]);
        let key = pickle
            .windows(2)
            .position(|w| w == "\u{e9}".as_bytes())
            .unwrap();
        pickle[key] = 0xFF;
        assert_pickle_error(&pickle, &["a dict key is not valid UTF-8"]);
    }

    #[test]
    fn empty_single_and_many_item_dicts_load() {
        assert!(load_numpy_dict(&write_numpy_dict(&[])).unwrap().is_empty());
        let one = write_numpy_dict(&[("only", &[2], &[1.0, 2.0])]);
        assert!(one.contains(&opcode::SETITEM));
        assert_eq!(load_numpy_dict(&one).unwrap()[0].1.data, [1.0, 2.0]);
        // 1001 arrays: a batch of 1000 (MARK … SETITEMS), then SETITEM; memo indices ≥ 256.
        let keys: Vec<String> = (0..1001).map(|i| format!("key{i}")).collect();
        let values: Vec<[f32; 1]> = (0..1001).map(|i| [i as f32]).collect();
        let arrays: Vec<(&str, &[usize], &[f32])> = keys
            .iter()
            .zip(&values)
            .map(|(key, value)| (key.as_str(), &[1usize][..], &value[..]))
            .collect();
        let pickle = write_numpy_dict(&arrays);
        assert!(pickle.contains(&opcode::LONG_BINPUT));
        let loaded = load_numpy_dict(&pickle).unwrap();
        assert_eq!(loaded.len(), 1001);
        assert_eq!(loaded[1000].0, "key1000");
        assert_eq!(loaded[1000].1.data, [1000.0]);
    }

    #[test]
    fn numpy_2_module_spelling_is_accepted() {
        let encoding = ArrayEncoding {
            reconstruct_module: "numpy._core.multiarray",
            ..ArrayEncoding::default()
        };
        let pickle = write_array_dict(&[("x", &[1], &1.0f32.to_le_bytes())], &encoding);
        assert_eq!(load_numpy_dict(&pickle).unwrap()[0].1.data, [1.0]);
    }

    #[test]
    fn long_binget_and_memo_limits() {
        // EMPTY_DICT, LONG_BINPUT 1000, LONG_BINGET 1000, STOP: the dict comes back.
        let pickle = b"\x80\x02}r\xe8\x03\x00\x00j\xe8\x03\x00\x00.";
        assert!(load_numpy_dict(pickle).unwrap().is_empty());
        let pickle = b"\x80\x02}r\xff\xff\xff\xffj\xff\xff\xff\xff.";
        assert!(load_numpy_dict(pickle).unwrap().is_empty());
        let mut many = b"\x80\x02}".to_vec();
        for index in 0..=MAX_MEMO_ENTRIES as u32 {
            many.push(opcode::LONG_BINPUT);
            many.extend_from_slice(&index.to_le_bytes());
        }
        assert_pickle_error(&many, &["more than 1048576 memo entries", "LONG_BINPUT"]);
        assert_pickle_error(
            b"\x80\x02}h\x05.",
            &["memo slot 5 was never set", "BINGET at byte 3"],
        );
    }

    #[test]
    fn foreign_globals_are_refused_by_name_when_called() {
        for (module, name) in [
            ("os", "system"),
            ("builtins", "eval"),
            ("__builtin__", "exec"),
            ("posix", "system"),
            ("numpy.core.multiarray", "scalar"),
            ("torch._utils", "_rebuild_tensor_v3"),
            ("torch", "load"),
        ] {
            let pickle = write_pickle_with_global(module, name);
            assert_pickle_error(
                &pickle,
                &[
                    &format!("refused global {module}.{name}: REDUCE would call it"),
                    "this checkpoint may be malicious",
                    "(REDUCE at byte",
                ],
            );
        }
        // Allowed globals called with other arguments are refused too.
        for (module, name) in [
            ("numpy", "dtype"),
            ("collections", "OrderedDict"),
            ("torch._utils", "_rebuild_tensor_v2"),
            ("torch._utils", "_rebuild_parameter"),
            ("fractions", "Fraction"),
        ] {
            assert_pickle_error(
                &write_pickle_with_global(module, name),
                &[&format!(
                    "{module}.{name}(a str of 16 bytes) is not a call torch's or numpy's \
                     pickles make"
                )],
            );
        }
        assert_pickle_error(
            &write_pickle_with_global("numpy", "ndarray"),
            &["REDUCE calls numpy.ndarray directly"],
        );
        assert_pickle_error(
            &write_pickle_with_global("torch", "FloatStorage"),
            &["storages come from persistent ids only"],
        );
        // A global used as a value is data: here the dict's value, so not an array.
        let mut value = b"\x80\x02}X\x01\x00\x00\x00kcos\nsystem\ns.".to_vec();
        assert_pickle_error(
            &value,
            &["the value for key \"k\" is the global os.system, not a numpy array"],
        );
        // NEWOBJ and BUILD on a global are refused like REDUCE.
        value = b"\x80\x02cos\nsystem\n)\x81.".to_vec();
        assert_pickle_error(
            &value,
            &[
                "refused global os.system: NEWOBJ would instantiate it",
                "NEWOBJ at byte 14",
            ],
        );
        value = b"\x80\x02cos\nsystem\n}b.".to_vec();
        assert_pickle_error(
            &value,
            &[
                "refused global os.system: BUILD would set its state",
                "BUILD at byte 14",
            ],
        );
    }

    #[test]
    fn foreign_opcodes_are_refused_by_name_and_offset() {
        // STACK_GLOBAL: 'os' 'system' pushed as strings, then 0x93: refused when called.
        let stack_global =
            b"\x80\x04X\x02\x00\x00\x00osX\x06\x00\x00\x00system\x93X\x01\x00\x00\x00x\x85R.";
        assert_pickle_error(
            stack_global,
            &["refused global os.system", "REDUCE at byte 28"],
        );
        // INST: (i os\nsystem\n
        assert_pickle_error(b"\x80\x02(ios\nsystem\n.", &["INST (0x69)", "at byte 3"]);
        // BINPERSID after a persistent id string: not in a numpy dict.
        assert_pickle_error(
            b"\x80\x02X\x01\x00\x00\x00xQ.",
            &["a persistent id (a str of 1 bytes)", "BINPERSID at byte 8"],
        );
        for code in [
            b'o', 0x82, 0x83, 0x84, 0x8b, 0x8f, 0x90, 0x91, 0x96, 0x97, 0x98, b'P', b'I', b'L',
            b'S', b'T', b'U', b'V', b'F', b'g', b'p', b'2', 0xb6,
        ] {
            let pickle = [0x80, 2, code, b'.'];
            let message = pickle_message(load_numpy_dict(&pickle));
            assert!(message.contains("unsupported pickle opcode"), "{message}");
            assert!(message.contains(opcode::name(code)), "{message}");
            assert!(message.contains("at byte 2"), "{message}");
        }
        for protocol in [0, 1, 6] {
            assert_pickle_error(
                &[0x80, protocol, b'}', b'.'],
                &[&format!("pickle protocol {protocol}"), "PROTO at byte 0"],
            );
        }
    }

    #[test]
    fn truncated_pickles_are_refused() {
        let data = awkward_values(40);
        let pickle = write_numpy_dict(&[("a", &[2, 20], &data), ("b", &[40], &data)]);
        for cut in 0..pickle.len() {
            let message = pickle_message(load_numpy_dict(&pickle[..cut]));
            assert!(
                message.contains("truncated") || message.contains("without STOP"),
                "cut at {cut}: {message}"
            );
        }
        let mut trailing = pickle.clone();
        trailing.push(b'N');
        assert_pickle_error(&trailing, &["1 bytes follow STOP"]);
    }

    #[test]
    fn wrong_data_length_is_refused() {
        let pickle = write_numpy_dict(&[("w", &[2, 2], &[1.0, 2.0, 3.0])]);
        assert_pickle_error(&pickle, &["array \"w\" has shape [2, 2] = 4 float32 values (16 bytes) but its data holds 12 bytes"]);
        // Not a multiple of 4 bytes either.
        let pickle = write_array_dict(
            &[("odd", &[1], &[1, 2, 3, 4, 5])],
            &ArrayEncoding::default(),
        );
        assert_pickle_error(&pickle, &["its data holds 5 bytes"]);
    }

    #[test]
    fn other_dtypes_orders_and_empty_arrays_are_refused_by_name() {
        let eight = [0u8; 8];
        let cases = [
            (
                ArrayEncoding {
                    dtype_kind: "f8",
                    ..ArrayEncoding::default()
                },
                "dtype float64 ('<f8')",
            ),
            (
                ArrayEncoding {
                    byte_order: ">",
                    ..ArrayEncoding::default()
                },
                "dtype float32, big-endian ('>f4')",
            ),
            (
                ArrayEncoding {
                    dtype_kind: "i8",
                    ..ArrayEncoding::default()
                },
                "dtype int64 ('<i8')",
            ),
            (
                ArrayEncoding {
                    is_fortran: true,
                    ..ArrayEncoding::default()
                },
                "Fortran (column-major) order",
            ),
        ];
        for (encoding, needle) in cases {
            let pickle = write_array_dict(&[("x", &[2, 1], &eight)], &encoding);
            assert_pickle_error(&pickle, &["array \"x\"", needle]);
        }
        let pickle = write_array_dict(&[("empty", &[0], &[])], &ArrayEncoding::default());
        assert_pickle_error(
            &pickle,
            &["refused global __builtin__.bytes", "zero-element array"],
        );
    }

    #[test]
    fn bad_shapes_keys_and_structure_are_refused() {
        // Shape product overflow: three dimensions of 2^31 - 1.
        let huge = (1usize << 31) - 1;
        let pickle = write_numpy_dict(&[("h", &[huge, huge, huge], &[1.0])]);
        assert_pickle_error(&pickle, &["shape's product overflows", "BUILD"]);
        // Negative dimension: patch BININT1 2 into BININT -2 is awkward; use a hand-made state.
        let mut pickle = write_numpy_dict(&[("n", &[7], &[0.0; 7])]);
        let dim = pickle
            .windows(3)
            .position(|w| w == [b'K', 7, 0x85])
            .unwrap();
        pickle.splice(dim..dim + 2, *b"J\xf9\xff\xff\xff");
        assert_pickle_error(&pickle, &["array dimension is the int -7, not a size"]);
        // Duplicate keys.
        let pickle = write_numpy_dict(&[("k", &[1], &[1.0]), ("k", &[1], &[2.0])]);
        assert_pickle_error(&pickle, &["the key \"k\" twice"]);
        // A non-str key: EMPTY_DICT, BININT1 1, NONE, SETITEM.
        assert_pickle_error(b"\x80\x02}K\x01Ns.", &["dict key is the int 1, not a str"]);
        // A dict value that is not an array.
        assert_pickle_error(
            b"\x80\x02}X\x01\x00\x00\x00kNs.",
            &["the value for key \"k\" is None, not a numpy array"],
        );
        // A top level that is not a dict.
        assert_pickle_error(b"\x80\x02N.", &["the pickle holds None, not a dict"]);
        // Stack underflow across a MARK.
        assert_pickle_error(b"\x80\x02N(\x85.", &["stack underflow", "TUPLE1 at byte 4"]);
        // Non-latin-1 data string.
        assert_pickle_error(
            b"\x80\x02c_codecs\nencode\nX\x02\x00\x00\x00\xc4\x80X\x06\x00\x00\x00latin1\x86R.",
            &["U+0100 at character 0"],
        );
    }

    #[test]
    fn depth_limits_hold() {
        let mut marks = vec![0x80, 2];
        marks.extend(std::iter::repeat_n(b'(', MAX_MARK_DEPTH + 1));
        assert_pickle_error(&marks, &["nested MARKs"]);
        let mut nones = vec![0x80, 2];
        nones.extend(std::iter::repeat_n(b'N', MAX_STACK_DEPTH + 1));
        assert_pickle_error(&nones, &["deeper than 4096"]);
        let mut nested = vec![0x80, 2, b'N'];
        nested.extend(std::iter::repeat_n(opcode::TUPLE1, 100_000));
        assert_pickle_error(
            &nested,
            &["tuples nest deeper than 16", "TUPLE1 at byte 19"],
        );
        let mut long_name = b"\x80\x02cos\n".to_vec();
        long_name.extend(std::iter::repeat_n(b'a', 1000));
        assert_pickle_error(&long_name, &["longer than 256 bytes"]);
    }

    #[test]
    fn fuzzed_pickles_never_panic() {
        let data = awkward_values(24);
        let valid = write_numpy_dict(&[
            ("a", &[2, 3, 4], &data),
            ("b", &[], &[1.5]),
            ("c", &[24], &data),
        ]);
        let mut rng = XorShift64::new(0x2545_f491_4f6c_dd1d);
        for round in 0..20_000 {
            let mut pickle = valid.clone();
            if round % 4 == 3 {
                // Pure noise after the protocol header.
                let len = (rng.next_u64() % 64) as usize;
                pickle.truncate(2);
                pickle.extend((0..len).map(|_| rng.next_u64() as u8));
            } else {
                for _ in 0..1 + rng.next_u64() % 3 {
                    let at = (rng.next_u64() % pickle.len() as u64) as usize;
                    pickle[at] = rng.next_u64() as u8;
                }
                if round % 4 == 1 {
                    let cut = (rng.next_u64() % pickle.len() as u64) as usize;
                    pickle.truncate(cut);
                }
            }
            let _ = load_numpy_dict(&pickle);
        }
    }
}
