//! One function per [`Target`](crate::Target): arbitrary bytes through a parser, and the checks
//! a successful parse must pass.

use std::io::Write;
use std::path::{Path, PathBuf};

use stemflow_convert::torch::{load_numpy_dict, load_torch_checkpoint_within, ReadBudget};
use stemflow_convert::zip::ZipArchive;
use stemflow_onnx::view::raw_fields;
use stemflow_onnx::{AttributeView, GraphPart, ModelView};

use stemflow_audio::AudioDecoder;
use stemflow_plugin_state::SavedState;

/// Most bytes one zip entry is inflated to here (the checkpoint reader has its own budget).
const MAX_ENTRY_BYTES: u64 = 16 << 20;
/// Most frames decoded from one audio input: enough for every structure, short enough that a
/// header claiming hours of silence does not time the fuzzer out.
const MAX_DECODED_FRAMES: u64 = 4 << 20;

/// A checkpoint read within its budget; a tensor's bytes must match its shape.
pub fn torch(data: &[u8]) {
    let budget = ReadBudget::for_file(data.len());
    let Ok(checkpoint) = load_torch_checkpoint_within(data, &budget) else {
        return;
    };
    assert!(budget.used_bytes() <= budget.limit_bytes());
    for tensor in &checkpoint.tensors {
        assert_eq!(
            tensor.data.len(),
            tensor.num_elements() * tensor.dtype.size_bytes(),
            "tensor of shape {:?} and dtype {}",
            tensor.shape,
            tensor.dtype
        );
        if let Ok(values) = tensor.to_f32() {
            assert_eq!(values.len(), tensor.num_elements());
        }
    }
    let _ = checkpoint.state_dict(&checkpoint.root);
}

/// A numpy dict: each array's values must match its shape.
pub fn numpy_dict(data: &[u8]) {
    let Ok(arrays) = load_numpy_dict(data) else {
        return;
    };
    for (key, array) in arrays {
        assert_eq!(
            array.data.len(),
            array.shape.iter().product::<usize>(),
            "array {key:?}"
        );
    }
}

/// A zip: every entry read (bounded), found again by its name, and as long as it says.
pub fn zip(data: &[u8]) {
    let Ok(archive) = ZipArchive::parse(data) else {
        return;
    };
    for entry in archive.entries() {
        let found = archive
            .find(&entry.name)
            .expect("an entry is found by its name");
        assert_eq!(found.name, entry.name);
        if let Ok(bytes) = archive.read(entry, MAX_ENTRY_BYTES) {
            assert_eq!(
                bytes.len() as u64,
                entry.uncompressed_size,
                "{}",
                entry.name
            );
        }
    }
    let budget = ReadBudget::for_file(data.len());
    for entry in archive.entries() {
        let _ = archive.read_within(entry, &budget, "an entry");
    }
    let _ = archive.find_suffix("/data.pkl");
}

/// An ONNX model: its graph's parts, nodes' attributes, tensors' values, metadata and external
/// data; rebuilt around its own graph, it reads back the same.
pub fn onnx(data: &[u8]) {
    let _ = stemflow_onnx::external_data::external_data_locations(data);
    let Ok(model) = ModelView::read(data) else {
        return;
    };
    let _ = model.default_opset();
    let _ = model.metadata();
    let _ = model.metadata_value("stemflow.stems");
    let Ok(graph) = model.graph() else {
        return;
    };
    let Ok(fields) = raw_fields(graph) else {
        return;
    };
    for field in &fields {
        match GraphPart::read(field) {
            Ok(GraphPart::Node(node)) => {
                for attribute in &node.attributes {
                    let _ = AttributeView::read(attribute);
                }
            }
            Ok(GraphPart::Initializer(tensor)) => {
                if let Some(values) = tensor.f32_values() {
                    let _ = values.len();
                }
            }
            _ => {}
        }
    }
    let rebuilt = model.with_graph(graph, None);
    let again = ModelView::read(&rebuilt).expect("a rebuilt model reads back");
    assert_eq!(again.graph().expect("its graph"), graph);
    assert_eq!(again.fields.len(), model.fields.len());
}

/// MSST YAML (and demucs bags) through the one YAML reader, and the RoFormer config built from
/// a config.
pub fn msst_yaml(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = stemflow_convert::yaml::read_yaml(&text);
    let _ = stemflow_convert::yaml::read_msst_yaml(&text);
    for is_band_split in [false, true] {
        if let Ok(config) =
            stemflow_convert::roformer::config::RoFormerConfig::from_yaml(&text, is_band_split)
        {
            let _ = (config.frames(), config.num_bins());
        }
    }
}

/// An audio file, its container chosen by the first byte (the rest is the file): opened and
/// decoded to its end or [`MAX_DECODED_FRAMES`].
pub fn audio(data: &[u8]) {
    let Some((&selector, file)) = data.split_first() else {
        return;
    };
    let extension = ["wav", "aiff", "flac", "mp3", "ogg", "m4a"][usize::from(selector) % 6];
    let path = scratch_file(extension, file);
    if let Ok(mut decoder) = AudioDecoder::open(&path) {
        let info = decoder.info().clone();
        assert!(
            (1..=2).contains(&info.num_channels),
            "{} channels",
            info.num_channels
        );
        let mut frames = 0u64;
        while let Ok(Some([left, right])) = decoder.next_block() {
            assert_eq!(left.len(), right.len());
            frames += left.len() as u64;
            if frames > MAX_DECODED_FRAMES {
                break;
            }
        }
    }
    let _ = std::fs::remove_file(&path);
}

/// `data` written to this process's scratch file with `extension` (the decoders read files, as
/// `stemflow separate` does). In memory where the system has a RAM disk.
fn scratch_file(extension: &str, data: &[u8]) -> PathBuf {
    let folder = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let path = folder.join(format!(
        "stemflow-fuzz-{}-{:?}.{extension}",
        std::process::id(),
        std::thread::current().id()
    ));
    let mut file = std::fs::File::create(&path).expect("a scratch file");
    file.write_all(data).expect("writing the scratch file");
    path
}

/// Manifest lines, each parsed as `stemflow separate --manifest` does.
pub fn manifest(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for (index, line) in text.lines().enumerate() {
        if let Some(Ok(job)) = stemflow_manifest::parse_line(line, index + 1, Path::new("/base")) {
            assert!(!job.given.is_empty());
        }
    }
}

/// The plugin's saved state: what loads without a notice saves and loads back the same.
pub fn plugin_state(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let (state, notice) = SavedState::from_json(&value);
    if notice.is_none() {
        let saved = serde_json::to_value(&state).expect("saved state serialises");
        let (again, notice) = SavedState::from_json(&saved);
        assert_eq!(again, state);
        assert_eq!(notice, None);
    } else {
        assert_eq!(state.version, stemflow_plugin_state::SAVED_STATE_VERSION);
    }
}
