//! [`TorchCheckpoint`]: a `torch.save` file as a [`Value`] tree and its [`Tensor`]s, and what
//! both layouts share: running their pickles and materialising their tensors.
//!
//! The zip layout (torch ≥ 1.6) is read in `zip_layout.rs`, the legacy one (torch < 1.6) in
//! `legacy.rs`; `load.rs` tells them apart.

use std::borrow::Cow;

use super::machine::{Machine, PersistentIds};
use super::numpy::array_tensor;
use super::tensor::{DType, StridedLayout, Tensor};
use super::value::{TensorSource, TreeBuilder, Value};
use crate::budget::ReadBudget;
use crate::error::ConvertError;

/// Which layout a checkpoint has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointLayout {
    /// A zip archive whose entries sit under `archive_name/`.
    Zip {
        /// The archive's top folder (torch names it after the file).
        archive_name: String,
    },
    /// A sequence of pickles followed by the raw storages.
    Legacy,
}

/// A loaded checkpoint: the pickled object and its tensors.
#[derive(Debug, Clone, PartialEq)]
pub struct TorchCheckpoint<'a> {
    /// The object `torch.save` was given, tensors replaced by [`Value::Tensor`] indices into
    /// [`tensors`](Self::tensors).
    pub root: Value,
    /// Every tensor in the object, in pickle order.
    pub tensors: Vec<Tensor<'a>>,
    /// The file's layout.
    pub layout: CheckpointLayout,
}

impl<'a> TorchCheckpoint<'a> {
    /// The tensor `value` stands for, if it is a [`Value::Tensor`]. Realtime-safe.
    pub fn tensor(&self, value: &Value) -> Option<&Tensor<'a>> {
        match value {
            Value::Tensor(index) => self.tensors.get(*index),
            _ => None,
        }
    }

    /// `value` as a state dict: its `(name, tensor)` pairs in insertion order.
    ///
    /// For a bare state dict (MSST's RoFormer checkpoints) pass [`root`](Self::root); for one
    /// inside a package, the value under its key (demucs: `root.get("state")`, Lightning:
    /// `root.get("state_dict")`). Fails with [`ConvertError::Layout`] when `value` is not a dict,
    /// a key is not a `str` or a value is not a tensor (naming the key). Not realtime-safe:
    /// allocates the list.
    pub fn state_dict<'c>(
        &'c self,
        value: &'c Value,
    ) -> Result<Vec<(&'c str, &'c Tensor<'a>)>, ConvertError> {
        let items = value.as_dict().ok_or_else(|| {
            ConvertError::Layout(format!(
                "expected a state dict (a dict of tensors), found {}",
                value.describe()
            ))
        })?;
        items
            .iter()
            .map(|(key, item)| {
                let name = key.as_str().ok_or_else(|| {
                    ConvertError::Layout(format!(
                        "a state dict key is {}, not a str",
                        key.describe()
                    ))
                })?;
                let tensor = self.tensor(item).ok_or_else(|| {
                    ConvertError::Layout(format!(
                        "state dict entry {name:?} is {}, not a tensor",
                        item.describe()
                    ))
                })?;
                Ok((name, tensor))
            })
            .collect()
    }
}

/// A tree's tensor before its storage is read.
pub(super) enum Pending {
    /// Owned already (a numpy array).
    Ready(Tensor<'static>),
    /// A view of storage `storage`.
    Strided {
        /// Index into [`Unpickled::storages`].
        storage: usize,
        /// Where its elements lie.
        layout: StridedLayout,
    },
}

/// What a pickle left once its input is gone.
pub(super) struct Unpickled {
    /// The object.
    pub root: Value,
    /// The storages its persistent ids named: key, element type, length in elements.
    pub storages: Vec<(String, DType, usize)>,
    /// The tree's tensors, in order.
    pub pending: Vec<Pending>,
    /// Offset of the byte after `STOP`.
    pub end: usize,
}

/// Runs the pickle at `start` in `input` and converts its result, charging `budget`.
pub(super) fn unpickle(
    input: &[u8],
    start: usize,
    persistent: PersistentIds,
    budget: &ReadBudget,
) -> Result<Unpickled, ConvertError> {
    let mut machine = Machine::new(input, start, persistent, budget);
    let item = machine.run().map_err(ConvertError::Pickle)?;
    let end = machine.position();
    let mut builder = TreeBuilder::new(&machine);
    let root = builder.convert(&item).map_err(ConvertError::Pickle)?;
    let pending = builder
        .tensors
        .iter()
        .enumerate()
        .map(|(index, source)| match source {
            TensorSource::Torch(tensor) => {
                let tensor = &machine.tensors[*tensor];
                Ok(Pending::Strided {
                    storage: tensor.storage,
                    layout: tensor.layout.clone(),
                })
            }
            TensorSource::Numpy(id) => {
                array_tensor(&machine, *id, &format!("numpy array {index}")).map(Pending::Ready)
            }
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(ConvertError::Pickle)?;
    let storages = machine
        .storages
        .iter()
        .map(|storage| (storage.key.to_string(), storage.dtype, storage.len))
        .collect();
    Ok(Unpickled {
        root,
        storages,
        pending,
        end,
    })
}

/// The tensors over their storages' bytes; each copy (a gathered view, or any view of an
/// inflated storage) is charged to `budget` before anything is copied.
pub(super) fn materialise<'a>(
    pending: Vec<Pending>,
    storages: &[Cow<'a, [u8]>],
    budget: &ReadBudget,
) -> Result<Vec<Tensor<'a>>, ConvertError> {
    for (index, tensor) in pending.iter().enumerate() {
        if let Pending::Strided { storage, layout } = tensor {
            let is_borrowed = matches!(storages[*storage], Cow::Borrowed(_));
            budget
                .charge(
                    layout.copy_bytes(is_borrowed),
                    &format!("a copy of tensor {index} (a strided view, or a view of an inflated storage)"),
                )
                .map_err(ConvertError::Layout)?;
        }
    }
    pending
        .into_iter()
        .enumerate()
        .map(|(index, tensor)| match tensor {
            Pending::Ready(tensor) => Ok(tensor),
            Pending::Strided { storage, layout } => layout
                .materialise(&storages[storage])
                .map_err(|why| ConvertError::Layout(format!("tensor {index}: {why}"))),
        })
        .collect()
}

/// `len` elements of `dtype` in bytes, refusing overflow.
pub(super) fn storage_bytes(key: &str, dtype: DType, len: usize) -> Result<usize, ConvertError> {
    len.checked_mul(dtype.size_bytes()).ok_or_else(|| {
        ConvertError::Layout(format!(
            "storage {key} of {len} {dtype} elements is larger than memory"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::super::load::load_torch_checkpoint;
    use super::*;
    use crate::testing::{
        write_torch_checkpoint_with_storages, write_torch_state_dict, write_torch_zip,
        TorchTensorSpec,
    };

    /// A float32 tensor spec over storage `key` of `len` elements.
    fn spec<'a>(name: &'a str, key: &'a str, len: i64, shape: &'a [i64]) -> TorchTensorSpec<'a> {
        let stride: &'static [i64] = match shape.len() {
            1 => &[1],
            2 => &[3, 1],
            _ => &[],
        };
        TorchTensorSpec {
            name,
            storage_class: "FloatStorage",
            storage_key: key,
            storage_len: len,
            offset: 0,
            shape,
            stride,
        }
    }

    fn floats(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// A zip checkpoint `t/` of `data_pkl` and `t/data/<key>` records.
    fn checkpoint(data_pkl: &[u8], storages: &[(&str, &[u8])]) -> Vec<u8> {
        write_torch_checkpoint_with_storages("t", data_pkl, storages)
    }

    fn error(bytes: &[u8]) -> String {
        load_torch_checkpoint(bytes).unwrap_err().to_string()
    }

    fn assert_error(bytes: &[u8], needles: &[&str]) {
        let message = error(bytes);
        for needle in needles {
            assert!(message.contains(needle), "{message:?} lacks {needle:?}");
        }
    }

    #[test]
    fn a_written_state_dict_loads() {
        let data = floats(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let pickle = write_torch_state_dict(&[
            spec("w", "0", 6, &[2, 3]),
            TorchTensorSpec {
                offset: 4,
                ..spec("tail", "0", 6, &[2])
            },
        ]);
        let bytes = checkpoint(&pickle, &[("0", &data)]);
        let loaded = load_torch_checkpoint(&bytes).unwrap();
        assert_eq!(
            loaded.layout,
            CheckpointLayout::Zip {
                archive_name: "t".into()
            }
        );
        let state = loaded.state_dict(&loaded.root).unwrap();
        assert_eq!(state[0].0, "w");
        assert_eq!(state[0].1.shape, [2, 3]);
        assert_eq!(state[1].1.to_f32().unwrap(), [5.0, 6.0]);
    }

    #[test]
    fn storages_must_exist_and_match_the_pickle() {
        let data = floats(&[0.0; 6]);
        let pickle = write_torch_state_dict(&[spec("w", "0", 6, &[2, 3])]);
        assert_error(
            &checkpoint(&pickle, &[]),
            &["names storage 0, but the archive has no t/data/0"],
        );
        assert_error(
            &checkpoint(&pickle, &[("0", &data[..20])]),
            &["t/data/0 holds 20 bytes, but the pickle says 6 float32 elements (24 bytes)"],
        );
        // One key named with two dtypes or lengths.
        let pickle = write_torch_state_dict(&[
            spec("a", "0", 6, &[6]),
            TorchTensorSpec {
                storage_class: "HalfStorage",
                ..spec("b", "0", 6, &[6])
            },
        ]);
        assert_error(
            &checkpoint(&pickle, &[("0", &data)]),
            &["storage 0 is named as 6 float16 elements and as 6 float32 elements"],
        );
        // Quantized and unknown storage classes.
        for class in ["QInt8Storage", "EvilStorage"] {
            let pickle = write_torch_state_dict(&[TorchTensorSpec {
                storage_class: class,
                ..spec("q", "0", 6, &[6])
            }]);
            assert_error(
                &checkpoint(&pickle, &[("0", &data)]),
                &[&format!(
                    "the storage type is the global torch.{class}, not one of"
                )],
            );
        }
    }

    #[test]
    fn tensors_outside_their_storage_are_refused() {
        let data = floats(&[0.0; 6]);
        for (tensor, needle) in [
            (
                spec("big", "0", 6, &[3, 3]),
                "reaches element 8 of a storage of 6",
            ),
            (
                TorchTensorSpec {
                    offset: 5,
                    ..spec("shifted", "0", 6, &[2])
                },
                "reaches element 6",
            ),
            (
                TorchTensorSpec {
                    stride: &[1 << 30, 1],
                    ..spec("strided", "0", 6, &[2, 2])
                },
                "reaches element 1073741825",
            ),
            (
                TorchTensorSpec {
                    offset: -1,
                    ..spec("negative", "0", 6, &[2])
                },
                "the storage offset is not a size",
            ),
            (
                TorchTensorSpec {
                    stride: &[1],
                    ..spec("mismatched", "0", 6, &[2, 3])
                },
                "the size has 2 dimensions and the stride 1",
            ),
        ] {
            let pickle = write_torch_state_dict(&[tensor]);
            assert_error(
                &checkpoint(&pickle, &[("0", &data)]),
                &[needle, "REDUCE at byte"],
            );
        }
        // Sizes whose product overflows, with a storage that claims to be huge.
        let huge: &[i64] = &[i32::MAX as i64, i32::MAX as i64, i32::MAX as i64];
        let pickle = write_torch_state_dict(&[TorchTensorSpec {
            stride: &[0, 0, 0],
            ..spec("huge", "0", i32::MAX as i64, huge)
        }]);
        assert_error(&checkpoint(&pickle, &[("0", &data)]), &["overflow"]);
    }

    #[test]
    fn archive_structure_is_checked() {
        let data = floats(&[0.0; 6]);
        let pickle = write_torch_state_dict(&[spec("w", "0", 6, &[6])]);
        // No data.pkl, or one at the wrong depth.
        assert_error(
            &write_torch_zip("t", &[("version", b"3\n")]),
            &["with 0 <archive>/data.pkl entries"],
        );
        assert_error(
            &write_torch_zip("t", &[("sub/data.pkl", &pickle)]),
            &["with 0 <archive>/data.pkl entries"],
        );
        // A big-endian checkpoint.
        let big_endian = write_torch_zip(
            "t",
            &[
                ("data.pkl", &pickle),
                ("byteorder", b"big"),
                ("data/0", &data),
            ],
        );
        assert_error(&big_endian, &["byte order is \"big\""]);
        // Bytes after STOP.
        let mut trailing = pickle.clone();
        trailing.push(b'N');
        assert_error(
            &checkpoint(&trailing, &[("0", &data)]),
            &["1 bytes follow STOP", "t/data.pkl"],
        );
        // A tar file (torch < 0.4).
        let mut tar = vec![0u8; 600];
        tar[257..262].copy_from_slice(b"ustar");
        assert_error(&tar, &["tar checkpoint"]);
    }

    #[test]
    fn trees_are_bounded() {
        // Lists nested 201 deep: 201 EMPTY_LISTs, then 200 APPENDs, each putting the top list
        // into the one below it.
        let mut deep = vec![0x80, 2];
        deep.extend(std::iter::repeat_n(b']', 201));
        deep.extend(std::iter::repeat_n(b'a', 200));
        deep.push(b'.');
        assert_error(&checkpoint(&deep, &[]), &["nest deeper than 100"]);
        // A list that contains itself: EMPTY_LIST, BINPUT 0, BINGET 0, APPEND.
        let cycle = b"\x80\x02]q\x00h\x00a.";
        assert_error(&checkpoint(cycle, &[]), &["nest deeper than 100"]);
        // Sharing through the memo: each level is a list holding the previous one 8 times, 20
        // levels deep: 8^20 values from a few hundred bytes.
        let mut shared = vec![0x80, 2, b']', b'q', 0];
        for level in 1..=20u8 {
            shared.extend_from_slice(&[b']', b'q', level, b'(']);
            for _ in 0..8 {
                shared.extend_from_slice(&[b'h', level - 1]);
            }
            shared.push(b'e');
        }
        shared.push(b'.');
        assert_error(
            &checkpoint(&shared, &[]),
            &["would allocate more than", "value tree"],
        );
    }

    #[test]
    fn fractions_parameters_and_metadata() {
        // Fraction('39/5'), Fraction(6, 4), Fraction(1, 0); _rebuild_parameter; conj metadata.
        let fraction = |arguments: &[u8]| {
            let mut pickle = b"\x80\x02cfractions\nFraction\n".to_vec();
            pickle.extend_from_slice(arguments);
            pickle.extend_from_slice(b"R.");
            load_torch_checkpoint(&checkpoint(&pickle, &[])).map(|c| c.root)
        };
        assert_eq!(
            fraction(b"X\x04\x00\x00\x0039/5\x85").unwrap(),
            Value::Fraction {
                numerator: 39,
                denominator: 5
            }
        );
        assert_eq!(
            fraction(b"K\x06K\x04\x86").unwrap(),
            Value::Fraction {
                numerator: 3,
                denominator: 2
            }
        );
        assert!(fraction(b"K\x01K\x00\x86")
            .unwrap_err()
            .to_string()
            .contains("fractions.Fraction(the int 1, the int 0) is not a call"));

        let data = floats(&[1.0, 2.0]);
        let tensor = write_torch_state_dict(&[spec("w", "0", 2, &[2])]);
        // Wrap the dict's tensor in _rebuild_parameter(tensor, True, OrderedDict()): replace the
        // dict by the parameter of its only value.
        let body = &tensor[..tensor.len() - 2]; // without SETITEMS STOP
        let mut parameter = b"\x80\x02ctorch._utils\n_rebuild_parameter\n".to_vec();
        // The state dict pickle pushes OrderedDict, MARK, key, tensor: skip to the tensor.
        let tensor_start = body.windows(12).position(|w| w == b"torch._utils").unwrap() - 1;
        parameter.extend_from_slice(&body[tensor_start..]);
        parameter.extend_from_slice(b"\x88ccollections\nOrderedDict\n)R\x87R.");
        let bytes = checkpoint(&parameter, &[("0", &data)]);
        let loaded = load_torch_checkpoint(&bytes).unwrap();
        assert_eq!(loaded.root, Value::Tensor(0));
        assert_eq!(loaded.tensors[0].to_f32().unwrap(), [1.0, 2.0]);

        // The 7th argument, metadata: {'conj': False} loads, {'conj': True} is refused.
        let hooks_end = tensor.windows(3).rposition(|w| w == b")Rt").unwrap() + 2;
        for (flag, is_ok) in [(0x89u8, true), (0x88, false)] {
            let mut pickle = tensor[..hooks_end].to_vec();
            pickle.extend_from_slice(b"}X\x04\x00\x00\x00conj");
            pickle.extend_from_slice(&[flag, b's']);
            pickle.extend_from_slice(&tensor[hooks_end..]);
            let bytes = checkpoint(&pickle, &[("0", &data)]);
            match load_torch_checkpoint(&bytes) {
                Ok(loaded) => assert!(is_ok, "{:?}", loaded.root),
                Err(error) => {
                    assert!(!is_ok);
                    assert!(
                        error.to_string().contains("conjugate or negative bit"),
                        "{error}"
                    );
                }
            }
        }
    }
}
