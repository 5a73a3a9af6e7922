//! Recognising a model: its graph's signature matched against each family in turn.

use std::path::Path;

use super::description::{ModelDescription, Recognition, EXPECTED_SIGNATURES};
use super::{htdemucs, mdx_net, params, roformer, spleeter};
use crate::model_error::ModelError;
use crate::runtime::build::build_session;
use crate::runtime::devices::DeviceId;
use crate::runtime::model_file::ModelBytes;
use crate::runtime::signature::GraphSignature;

/// Checks a model file's graph against the families and reads its parameters. Needs a loaded
/// runtime. Not realtime-safe: builds a CPU session.
pub fn describe_model(path: &Path, model: &ModelBytes) -> Result<ModelDescription, ModelError> {
    let session = build_session(DeviceId::CPU, &model.bytes, 1).map_err(|reason| {
        if crate::runtime::runtime().is_err() {
            ModelError::Runtime(reason)
        } else {
            ModelError::NotOnnx {
                path: path.to_path_buf(),
                reason: format!("ONNX Runtime cannot load it: {reason}"),
            }
        }
    })?;
    let signature = GraphSignature::of(&session);
    describe_signature(&signature, path, &model.name, &model.bytes)
}

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
    let ([input], [output]) = (signature.inputs.as_slice(), signature.outputs.as_slice()) else {
        return Err(mismatch());
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
    [
        spleeter::recognise,
        htdemucs::recognise,
        mdx_net::recognise,
        roformer::recognise,
    ]
    .iter()
    .find_map(|recognise| recognise(&recognition))
    .unwrap_or_else(|| Err(mismatch()))
}
