//! Recognising a model: its graph's signature matched against each family in turn.

use std::collections::BTreeMap;
use std::path::Path;

use parking_lot::Mutex;

use super::description::{ModelDescription, Recognition, EXPECTED_SIGNATURES};
use super::{htdemucs_stft_outside, mdx_net, params, roformer, spleeter, waveform};
use crate::model_error::ModelError;
use crate::runtime::model_file::ModelBytes;
use crate::runtime::session::with_spare_cpu_session;
use crate::runtime::signature::{GraphSignature, TensorSignature};

/// Checks a model file's graph against the families and reads its parameters. Reads the graph's
/// signature from the file itself, so recognising a model costs no ONNX Runtime session (whose
/// optimisation of HTDemucs takes seconds); only when the file leaves output
/// dimensions to shape inference (as `torch.onnx` exports do) does it ask a CPU session, built
/// through the optimised-graph cache that the model's own session then loads. Not
/// realtime-safe.
pub fn describe_model(path: &Path, model: &ModelBytes) -> Result<ModelDescription, ModelError> {
    let mut signature =
        GraphSignature::read(&model.bytes).map_err(|reason| ModelError::NotOnnx {
            path: path.to_path_buf(),
            reason: format!("not a readable ONNX graph: {reason}"),
        })?;
    let is_inferred = |t: &TensorSignature| t.dims.is_empty() || t.dims.iter().any(|&d| d < 0);
    if signature.outputs.iter().any(is_inferred) {
        signature = session_signature(path, model)?;
    }
    describe_signature(&signature, path, &model.name, &model.bytes)
}

/// The metadata entry `stemflow quantize --fp16` writes into the models it converts.
pub const FLOAT16_METADATA_KEY: &str = "stemflow.float16";

/// Signatures that needed a session, by model SHA-256: a second plugin instance of the model
/// builds no session (and leaves no freed gigabyte behind in the allocator) to recognise it.
static SESSION_SIGNATURES: Mutex<BTreeMap<String, GraphSignature>> = Mutex::new(BTreeMap::new());

/// The signature ONNX Runtime infers for `model` (once per model and process).
fn session_signature(path: &Path, model: &ModelBytes) -> Result<GraphSignature, ModelError> {
    if let Some(signature) = SESSION_SIGNATURES.lock().get(&model.sha256) {
        return Ok(signature.clone());
    }
    let signature = with_spare_cpu_session(model, GraphSignature::of).map_err(|reason| {
        if crate::runtime::runtime().is_err() {
            ModelError::Runtime(reason)
        } else {
            ModelError::NotOnnx {
                path: path.to_path_buf(),
                reason: format!("ONNX Runtime cannot load it: {reason}"),
            }
        }
    })?;
    SESSION_SIGNATURES
        .lock()
        .insert(model.sha256.clone(), signature.clone());
    Ok(signature)
}

/// A family as recognising sees it: whether a signature is the family's (by its ranks, names or
/// tag), and the description it derives from one that is.
struct FamilyRecogniser {
    claims: fn(&Recognition<'_>) -> bool,
    describe: fn(&Recognition<'_>) -> Result<ModelDescription, ModelError>,
}

/// Converted HTDemucs: the one family whose graphs take two inputs.
const TWO_INPUT_FAMILIES: [FamilyRecogniser; 1] = [FamilyRecogniser {
    claims: htdemucs_stft_outside::claims,
    describe: htdemucs_stft_outside::describe,
}];

/// The one-input families, in the order they are asked. Waveform graphs first: a GPU graph
/// carries its family's tag (Spleeter's too).
const ONE_INPUT_FAMILIES: [FamilyRecogniser; 4] = [
    FamilyRecogniser {
        claims: waveform::claims,
        describe: waveform::describe,
    },
    FamilyRecogniser {
        claims: spleeter::claims,
        describe: spleeter::describe,
    },
    FamilyRecogniser {
        claims: mdx_net::claims,
        describe: mdx_net::describe,
    },
    FamilyRecogniser {
        claims: roformer::claims,
        describe: roformer::describe,
    },
];

/// Matches a signature to a family and derives the processing from it and the parameters.
pub fn describe_signature(
    signature: &GraphSignature,
    path: &Path,
    model_name: &str,
    bytes: &[u8],
) -> Result<ModelDescription, ModelError> {
    let mismatch = || ModelError::SignatureMismatch {
        model: model_name.to_owned(),
        expected: EXPECTED_SIGNATURES.to_owned(),
        found: signature.to_string(),
    };
    // One input and one output, except converted HTDemucs (two of each, the first named
    // `mix` and `wave_stems` looked at here, the others by its recogniser).
    let (input, output) = match (signature.inputs.as_slice(), signature.outputs.as_slice()) {
        ([input], [output]) => (input, output),
        ([_, _], [_, _]) => {
            let input = signature.inputs.iter().find(|t| t.name == "mix");
            let output = signature.outputs.iter().find(|t| t.name == "wave_stems");
            input.zip(output).ok_or_else(mismatch)?
        }
        _ => return Err(mismatch()),
    };
    // A dynamic batch dimension runs with batch 1.
    let is_batch_ok = |dims: &[i64]| dims.first().is_some_and(|&d| d == 1 || d < 0);
    if !input.is_f32 || !output.is_f32 || !is_batch_ok(&input.dims) || !is_batch_ok(&output.dims) {
        return Err(mismatch());
    }
    let sidecar = params::read_sidecar(path).map_err(|message| ModelError::Params {
        model: model_name.to_owned(),
        message,
    })?;
    let recognition = Recognition {
        signature,
        input,
        output,
        path,
        model_name,
        bytes,
        sidecar,
    };
    let families: &[FamilyRecogniser] = if signature.inputs.len() == 2 {
        &TWO_INPUT_FAMILIES
    } else {
        &ONE_INPUT_FAMILIES
    };
    families
        .iter()
        .find(|family| (family.claims)(&recognition))
        .map_or_else(|| Err(mismatch()), |family| (family.describe)(&recognition))
        .map(|description| ModelDescription {
            is_float16: signature.metadata.contains_key(FLOAT16_METADATA_KEY),
            ..description
        })
}
