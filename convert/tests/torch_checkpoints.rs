//! Real `torch.save` files, in both layouts, read back exactly: the fixtures in
//! `fixtures/torch/` were written by torch itself (`make_fixtures.py`, which also wrote the
//! expected values in `expected.json`). Never downloads.

use std::borrow::Cow;
use std::path::PathBuf;

use stemflow_convert::torch::{load_torch_checkpoint, CheckpointLayout, DType, Tensor, Value};
use stemflow_convert::ConvertError;
use stemflow_kit::testing::XorShift64;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/torch")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn expected() -> serde_json::Value {
    serde_json::from_slice(&fixture("expected.json")).unwrap()
}

/// The two files of a fixture: `(layout name, bytes)`.
fn both_layouts(files: &serde_json::Value) -> Vec<(&'static str, Vec<u8>)> {
    ["zip", "legacy"]
        .into_iter()
        .map(|layout| (layout, fixture(files[layout].as_str().unwrap())))
        .collect()
}

/// A value read back, to compare exactly: floats as float32 (float16 and bfloat16 convert to it
/// exactly), ints as int64.
#[derive(Debug, PartialEq)]
enum Number {
    Float(f32),
    Int(i64),
}

fn values(tensor: &Tensor<'_>) -> Vec<Number> {
    let data = &tensor.data;
    match tensor.dtype {
        DType::F32 | DType::F16 | DType::BF16 => tensor
            .to_f32()
            .unwrap()
            .into_iter()
            .map(Number::Float)
            .collect(),
        DType::I64 => data
            .chunks_exact(8)
            .map(|w| Number::Int(i64::from_le_bytes(w.try_into().unwrap())))
            .collect(),
        DType::I32 => data
            .chunks_exact(4)
            .map(|w| Number::Int(i64::from(i32::from_le_bytes(w.try_into().unwrap()))))
            .collect(),
        other => panic!("no fixture has dtype {other}"),
    }
}

fn assert_tensor(tensor: &Tensor<'_>, expected: &serde_json::Value, what: &str) {
    assert_eq!(
        tensor.dtype.torch_name(),
        expected["dtype"].as_str().unwrap(),
        "{what}"
    );
    let shape: Vec<usize> = expected["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(tensor.shape, shape, "{what}");
    assert_eq!(
        tensor.data.len(),
        tensor.num_elements() * tensor.dtype.size_bytes(),
        "{what}"
    );
    // Exact: the JSON holds each float as the float64 torch gave; parsed (perhaps off by an
    // ulp of float64) and rounded to float32, it is the dtype's value again.
    let want: Vec<Number> = expected["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| match v.as_i64() {
            Some(int) => Number::Int(int),
            None => Number::Float(v.as_f64().unwrap() as f32),
        })
        .collect();
    assert_eq!(values(tensor), want, "{what}");
}

/// Whether the tensor's data points into `file`.
fn borrows_from(tensor: &Tensor<'_>, file: &[u8]) -> bool {
    match &tensor.data {
        Cow::Borrowed(slice) => {
            let range = file.as_ptr_range();
            range.contains(&slice.as_ptr()) || (slice.is_empty())
        }
        Cow::Owned(_) => false,
    }
}

#[test]
fn state_dicts_load_exactly_in_both_layouts() {
    let expected = expected();
    let state = &expected["state_dict"];
    let keys: Vec<&str> = state["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    for (layout, bytes) in both_layouts(&state["files"]) {
        let checkpoint = load_torch_checkpoint(&bytes).unwrap();
        match (&checkpoint.layout, layout) {
            (CheckpointLayout::Zip { archive_name }, "zip") => {
                assert_eq!(archive_name, "state_dict_zip")
            }
            (CheckpointLayout::Legacy, "legacy") => {}
            (other, _) => panic!("{layout} read as {other:?}"),
        }
        let tensors = checkpoint.state_dict(&checkpoint.root).unwrap();
        let names: Vec<&str> = tensors.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, keys, "{layout}: keys in insertion order");
        for (name, tensor) in &tensors {
            assert_tensor(
                tensor,
                &state["tensors"][*name],
                &format!("{layout} {name}"),
            );
        }
        let tensor = |name: &str| tensors.iter().find(|(n, _)| *n == name).unwrap().1;
        // Contiguous tensors are slices of the file; views are gathered copies.
        for name in [
            "0.weight",
            "layout.contiguous",
            "layout.shared_whole",
            "layout.tail",
            "layout.scalar",
            "dtype.float16",
            "dtype.bfloat16",
            "1.num_batches_tracked",
        ] {
            assert!(
                borrows_from(tensor(name), &bytes),
                "{layout} {name} is copied"
            );
        }
        for name in [
            "layout.shared_window",
            "layout.transposed",
            "dtype.float16_transposed",
        ] {
            assert!(
                matches!(tensor(name).data, Cow::Owned(_)),
                "{layout} {name}"
            );
        }
        // The window and the whole matrix share one storage: the window's first element is
        // the whole's element [1, 2] (shape [4, 5]).
        let whole = tensor("layout.shared_whole").to_f32().unwrap();
        let window = tensor("layout.shared_window").to_f32().unwrap();
        assert_eq!(window[0], whole[5 + 2]);
    }
}

#[test]
fn a_demucs_package_gives_its_class_name_kwargs_and_float16_state() {
    let expected = expected();
    let demucs = &expected["demucs"];
    for (layout, bytes) in both_layouts(&demucs["files"]) {
        let checkpoint = load_torch_checkpoint(&bytes).unwrap();
        let root = &checkpoint.root;
        assert_eq!(
            root.get("klass"),
            Some(&Value::Global {
                module: "demucs.htdemucs".into(),
                name: "HTDemucs".into()
            }),
            "{layout}"
        );
        assert_eq!(root.get("args"), Some(&Value::Tuple(vec![])), "{layout}");
        let kwargs = root.get("kwargs").unwrap();
        let sources: Vec<&str> = kwargs
            .get("sources")
            .and_then(Value::as_items)
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect();
        assert_eq!(sources, ["drums", "bass", "other", "vocals"], "{layout}");
        assert_eq!(
            kwargs.get("audio_channels").and_then(Value::as_i64),
            Some(2)
        );
        assert_eq!(
            kwargs.get("samplerate").and_then(Value::as_i64),
            Some(44100)
        );
        assert_eq!(
            kwargs.get("segment"),
            Some(&Value::Fraction {
                numerator: 39,
                denominator: 5
            })
        );
        assert_eq!(kwargs.get("segment").and_then(Value::as_f64), Some(7.8));
        assert_eq!(kwargs.get("t_dropout"), Some(&Value::Float(0.0)));
        assert_eq!(kwargs.get("use_train_segment"), Some(&Value::Bool(true)));
        assert_eq!(kwargs.get("norm_starts"), Some(&Value::None));
        let training = root.get("training_args").unwrap();
        assert_eq!(
            training.get("optim").and_then(|o| o.get("lr")),
            Some(&Value::Float(0.0003))
        );
        assert_eq!(
            training
                .get("dset")
                .and_then(|d| d.get("name"))
                .and_then(Value::as_str),
            Some("musdb")
        );
        let state = checkpoint.state_dict(root.get("state").unwrap()).unwrap();
        assert_eq!(state.len(), demucs["state"].as_object().unwrap().len());
        for (name, tensor) in state {
            assert_eq!(tensor.dtype, DType::F16);
            assert_tensor(tensor, &demucs["state"][name], &format!("{layout} {name}"));
            assert!(borrows_from(tensor, &bytes), "{layout} {name}");
        }
        // Not a state dict: the error names what it found.
        let error = checkpoint.state_dict(root).unwrap_err().to_string();
        assert!(
            error.contains("\"klass\" is the global demucs.htdemucs.HTDemucs, not a tensor"),
            "{error}"
        );
    }
}

#[test]
fn pickles_that_call_code_are_refused_by_name() {
    let expected = expected();
    for (case, global) in [
        ("os_system", "posix.system"),
        // Protocol 2 spells Python 3's `builtins` as `__builtin__`.
        ("builtins_eval", "__builtin__.eval"),
    ] {
        for (layout, bytes) in both_layouts(&expected["evil"][case]) {
            let error = load_torch_checkpoint(&bytes).unwrap_err();
            let ConvertError::Pickle(message) = &error else {
                panic!("{case} {layout}: {error:?}");
            };
            assert!(
                message.contains(&format!("refused global {global}")) && message.contains("REDUCE"),
                "{case} {layout}: {message}"
            );
        }
    }
}

#[test]
fn damaged_checkpoints_fail_cleanly() {
    let expected = expected();
    for (layout, bytes) in both_layouts(&expected["demucs"]["files"]) {
        // Every truncation is an error, never a panic.
        for cut in 0..bytes.len() {
            assert!(
                load_torch_checkpoint(&bytes[..cut]).is_err(),
                "{layout} cut at {cut}"
            );
        }
        // Flipped bytes: errors or (rarely, in padding or data) a checkpoint; never a panic.
        let mut rng = XorShift64::new(0x9e37_79b9_7f4a_7c15);
        let mut next = || rng.next_u64();
        for _ in 0..3000 {
            let mut damaged = bytes.clone();
            for _ in 0..1 + next() % 3 {
                let at = (next() % damaged.len() as u64) as usize;
                damaged[at] = next() as u8;
            }
            let _ = load_torch_checkpoint(&damaged);
        }
    }
    // Trailing bytes after a legacy checkpoint's last storage.
    let mut legacy = fixture(expected["state_dict"]["files"]["legacy"].as_str().unwrap());
    legacy.push(0);
    let error = load_torch_checkpoint(&legacy).unwrap_err().to_string();
    assert!(error.contains("1 bytes follow the last storage"), "{error}");
    // Neither layout.
    let error = load_torch_checkpoint(b"hello").unwrap_err().to_string();
    assert!(error.contains("not a torch checkpoint"), "{error}");
}

#[test]
fn plain_values_load_in_protocols_2_and_4() {
    let int = |value: i64| Value::Int(value);
    let text = |value: &str| Value::Str(value.to_string());
    for protocol in [2, 4] {
        let bytes = fixture(&format!("values_protocol{protocol}.pt"));
        let checkpoint = load_torch_checkpoint(&bytes).unwrap();
        let root = &checkpoint.root;
        let ints: Vec<i64> = root
            .get("ints")
            .and_then(Value::as_items)
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(
            ints,
            [
                0,
                1,
                -1,
                255,
                256,
                65535,
                65536,
                -(1 << 31),
                1 << 31,
                i64::MAX,
                i64::MIN
            ],
            "protocol {protocol}"
        );
        assert_eq!(
            root.get("floats"),
            Some(&Value::List(vec![
                Value::Float(0.5),
                Value::Float(-1e300),
                Value::Float(f64::INFINITY)
            ]))
        );
        assert_eq!(
            root.get("bytes"),
            Some(&Value::Bytes(vec![0, 0x80, 0xff])),
            "protocol {protocol}"
        );
        assert_eq!(root.get("text"), Some(&text("héllo ☃")));
        assert_eq!(
            root.get("nested"),
            Some(&Value::Tuple(vec![
                Value::Tuple(vec![int(1), int(2)]),
                Value::List(vec![int(3), Value::Dict(vec![(text("a"), Value::None)])])
            ]))
        );
        assert_eq!(
            root.get("int_keys"),
            Some(&Value::Dict(vec![
                (int(1), text("one")),
                (int(2), text("two"))
            ]))
        );
        assert_eq!(
            root.get("fraction"),
            Some(&Value::Fraction {
                numerator: -3,
                denominator: 2
            })
        );
        let tensor = checkpoint.tensor(root.get("tensor").unwrap()).unwrap();
        assert_eq!(tensor.to_f32().unwrap(), [1.0, -2.0]);
    }
}

#[test]
fn a_legacy_storage_view_is_honoured() {
    // torch < 0.4's view metadata: a tensor at offset 1 of the view of elements 2..5.
    let bytes = fixture("legacy_view.pt");
    let checkpoint = load_torch_checkpoint(&bytes).unwrap();
    let tensor = checkpoint
        .tensor(checkpoint.root.get("view").unwrap())
        .unwrap();
    assert_eq!(tensor.shape, [2]);
    assert_eq!(tensor.to_f32().unwrap(), [3.0, 4.0]);
    assert!(borrows_from(tensor, &bytes));
}
