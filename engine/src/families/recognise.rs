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
    if !input.is_f32 || !output.is_f32 {
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
    let family = families
        .iter()
        .find(|family| (family.claims)(&recognition))
        .ok_or_else(mismatch)?;
    // A dynamic batch dimension runs with batch 1; a family's graph with another batch is
    // refused as such.
    let is_batch_ok =
        |tensor: &TensorSignature| tensor.dims.first().is_some_and(|&d| d == 1 || d < 0);
    if let Some(tensor) = [input, output].into_iter().find(|t| !is_batch_ok(t)) {
        return Err(ModelError::OutOfRange {
            model: model_name.to_owned(),
            message: format!(
                "its batch is {} ({tensor}); Stemflow runs graphs whose batch is 1 or symbolic",
                tensor
                    .dims
                    .first()
                    .map_or("missing".to_owned(), i64::to_string)
            ),
        });
    }
    (family.describe)(&recognition).map(|description| ModelDescription {
        is_float16: signature.metadata.contains_key(FLOAT16_METADATA_KEY),
        ..description
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(name: &str, dims: &[i64]) -> TensorSignature {
        TensorSignature {
            name: name.to_owned(),
            is_f32: true,
            dims: dims.to_vec(),
        }
    }

    /// What recognising a graph of these inputs and outputs says, for a model with no sidecar.
    fn recognised(inputs: &[(&str, &[i64])], outputs: &[(&str, &[i64])]) -> ModelError {
        let signature = GraphSignature {
            inputs: inputs.iter().map(|(n, d)| tensor(n, d)).collect(),
            outputs: outputs.iter().map(|(n, d)| tensor(n, d)).collect(),
            metadata: BTreeMap::new(),
        };
        let path = Path::new("/no/such/folder/model.onnx");
        describe_signature(&signature, path, "model.onnx", &[]).expect_err("the graph is refused")
    }

    /// Asserts `error` is an out-of-range refusal whose message holds each of `words`.
    fn assert_out_of_range(error: ModelError, words: &[&str]) {
        let text = error.to_string();
        assert!(matches!(error, ModelError::OutOfRange { .. }), "{text}");
        for word in words {
            assert!(text.contains(word), "{word}: {text}");
        }
    }

    #[test]
    fn a_dimension_out_of_range_is_named_with_its_value_and_the_limit() {
        let long = 1i64 << 40;
        // HTDemucs as demucs-onnx exports it (the model).
        assert_out_of_range(
            recognised(&[("mix", &[1, 2, long])], &[("stems", &[1, 4, 2, long])]),
            &[
                "model.onnx: its segment is 1099511627776 samples (`mix` [1, 2, 1099511627776])",
                "longer than the 4194304 samples Stemflow accepts",
            ],
        );
        assert_out_of_range(
            recognised(&[("mix", &[1, 2, 0])], &[("stems", &[1, 4, 2, 0])]),
            &["its segment is 0 samples", "at least 1"],
        );
        assert_out_of_range(
            recognised(&[("mix", &[1, 2, 44100])], &[("stems", &[1, 17, 2, 44100])]),
            &["its number of stems is 17 stems", "more than the 16 stems"],
        );
        // Converted HTDemucs: segment, bins, frames.
        let converted = |t: i64, bins: i64, frames: i64| {
            recognised(
                &[("mix", &[1, 2, t]), ("spec", &[1, 4, bins, frames])],
                &[
                    ("wave_stems", &[1, 4, 2, t]),
                    ("spec_stems", &[1, 4, 4, bins, frames]),
                ],
            )
        };
        assert_out_of_range(converted(long, 2048, 336), &["segment is 1099511627776"]);
        assert_out_of_range(
            converted(343980, 1 << 15, 336),
            &["frequency bins is 32768 bins", "the 16384 bins"],
        );
        assert_out_of_range(
            converted(343980, 2048, 1 << 20),
            &["STFT frames is 1048576 frames", "the 16384 frames"],
        );
        // MDX-Net, RoFormer and Spleeter.
        assert_out_of_range(
            recognised(
                &[("input", &[1, 4, 3072, 1 << 15])],
                &[("output", &[1, 4, 3072, 1 << 15])],
            ),
            &["STFT frames is 32768"],
        );
        assert_out_of_range(
            recognised(
                &[("spec", &[1, 1 << 16, 256, 2])],
                &[("mask", &[1, 1, 1 << 16, 256, 2])],
            ),
            &["spectrum rows", "is 65536 rows", "the 32768 rows"],
        );
        assert_out_of_range(
            recognised(
                &[("magnitude", &[1, 2, 1 << 15, 1024])],
                &[("masked", &[1, 2, 2, 1 << 15, 1024])],
            ),
            &["STFT frames is 32768"],
        );
        // A batch other than 1 or symbolic.
        assert_out_of_range(
            recognised(&[("mix", &[3, 2, 44100])], &[("stems", &[3, 4, 2, 44100])]),
            &["its batch is 3 (`mix` [3, 2, 44100])"],
        );
    }

    #[test]
    fn a_graph_of_no_family_and_a_symbolic_segment_are_still_mismatches() {
        let mismatch = |error: ModelError| {
            assert!(
                matches!(error, ModelError::SignatureMismatch { .. }),
                "{error}"
            )
        };
        // Dynamic T: Stemflow needs the segment fixed in the graph.
        mismatch(recognised(
            &[("mix", &[1, 2, -1])],
            &[("stems", &[1, 4, 2, -1])],
        ));
        // Wrong names with a huge T: not the family's graph, so not its range.
        mismatch(recognised(
            &[("x", &[1, 2, 1 << 40])],
            &[("y", &[1, 4, 2, 1 << 40])],
        ));
        // Output length differs from the input's.
        mismatch(recognised(
            &[("mix", &[1, 2, 1 << 40])],
            &[("stems", &[1, 4, 2, 7])],
        ));
        mismatch(recognised(&[("a", &[5])], &[("b", &[5])]));
    }
}
