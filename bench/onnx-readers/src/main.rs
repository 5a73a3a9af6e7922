//! Borrowed wire reader (stemflow-proto) vs prost-generated ONNX types, on one ONNX file.
//!
//! `prost-bench FILE TASK VARIANT RUNS` prints one line per (task, variant): median/min time
//! over RUNS (ms) and, from a counting global allocator, the peak of extra live heap during one
//! run and the bytes allocated in it (MB), beyond the file's bytes already in memory.
//! TASK: read (baseline: only read the file), sig, nodes, encode.
//! VARIANT: borrowed, borrowed-names, prost-vec, prost-bytes, prost-lite, onnx-protobuf.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Instant;

use bytes::Bytes;
use prost::Message;
use stemflow_onnx::wire::{FieldValue, Fields};

#[allow(clippy::all, dead_code)]
mod gen_vec {
    include!(concat!(env!("OUT_DIR"), "/vec/onnx.rs"));
}
#[allow(clippy::all, dead_code)]
mod gen_bytes {
    include!(concat!(env!("OUT_DIR"), "/bytes/onnx.rs"));
}
#[allow(clippy::all, dead_code)]
mod gen_lite {
    include!(concat!(env!("OUT_DIR"), "/lite/onnx_lite.rs"));
}

// ---------------------------------------------------------------- counting allocator

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static TOTAL: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            grow(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            grow(new_size);
        }
        p
    }
}

fn grow(size: usize) {
    TOTAL.fetch_add(size, Relaxed);
    let live = LIVE.fetch_add(size, Relaxed) + size;
    PEAK.fetch_max(live, Relaxed);
}

#[global_allocator]
static GLOBAL: Counting = Counting;

// ---------------------------------------------------------------- results

/// The model's signature: graph input and output names, metadata_props.
#[derive(Debug, PartialEq)]
struct Signature {
    inputs: Vec<String>,
    outputs: Vec<String>,
    metadata: Vec<(String, String)>,
    /// Initializer names (only `borrowed-names`, as the project's `GraphSignature::read` does
    /// to drop inputs that are initializers).
    initializers: usize,
}

/// One node: op_type, inputs, outputs, attribute names (borrowed from whatever holds them).
#[derive(Debug, PartialEq)]
struct Node<S> {
    op_type: S,
    inputs: Vec<S>,
    outputs: Vec<S>,
    attributes: Vec<S>,
}

fn fingerprint<S: AsRef<str>>(nodes: &[Node<S>]) -> (usize, usize) {
    let mut n = 0;
    let mut len = 0;
    for node in nodes {
        for s in std::iter::once(&node.op_type)
            .chain(&node.inputs)
            .chain(&node.outputs)
            .chain(&node.attributes)
        {
            n += 1;
            len += s.as_ref().len() * n % 7919;
        }
    }
    (n, len)
}

// ---------------------------------------------------------------- borrowed reader

type R<T> = Result<T, String>;

fn text(b: &[u8]) -> R<&str> {
    std::str::from_utf8(b).map_err(|_| "not UTF-8".to_owned())
}

/// First length-delimited field `number` of `body`.
fn first_bytes(body: &[u8], number: u32) -> R<Option<&[u8]>> {
    for f in Fields::new(body) {
        if let (n, FieldValue::Bytes(b)) = f? {
            if n == number {
                return Ok(Some(b));
            }
        }
    }
    Ok(None)
}

fn borrowed_signature(bytes: &[u8], with_initializer_names: bool) -> R<Signature> {
    let mut graph = None;
    let mut metadata = Vec::new();
    for f in Fields::new(bytes) {
        match f? {
            (7, FieldValue::Bytes(g)) => graph = Some(g),
            (14, FieldValue::Bytes(entry)) => {
                let (mut k, mut v) = ("", "");
                for f in Fields::new(entry) {
                    match f? {
                        (1, FieldValue::Bytes(t)) => k = text(t)?,
                        (2, FieldValue::Bytes(t)) => v = text(t)?,
                        _ => {}
                    }
                }
                metadata.push((k.to_owned(), v.to_owned()));
            }
            _ => {}
        }
    }
    let graph = graph.ok_or("no graph")?;
    let (mut inputs, mut outputs, mut initializers) = (Vec::new(), Vec::new(), Vec::new());
    for f in Fields::new(graph) {
        match f? {
            // initializers (5) are skipped by their length prefix unless asked for their names
            (5, FieldValue::Bytes(t)) if with_initializer_names => {
                initializers.push(text(first_bytes(t, 8)?.unwrap_or_default())?.to_owned())
            }
            (11, FieldValue::Bytes(vi)) => {
                inputs.push(text(first_bytes(vi, 1)?.unwrap_or_default())?.to_owned())
            }
            (12, FieldValue::Bytes(vi)) => {
                outputs.push(text(first_bytes(vi, 1)?.unwrap_or_default())?.to_owned())
            }
            _ => {}
        }
    }
    inputs.retain(|i| !initializers.contains(i));
    Ok(Signature {
        inputs,
        outputs,
        metadata,
        initializers: initializers.len(),
    })
}

fn borrowed_nodes(bytes: &[u8]) -> R<Vec<Node<&str>>> {
    let graph = first_bytes(bytes, 7)?.ok_or("no graph")?;
    let mut nodes = Vec::new();
    for f in Fields::new(graph) {
        let (1, FieldValue::Bytes(body)) = f? else {
            continue;
        };
        let mut node = Node {
            op_type: "",
            inputs: Vec::new(),
            outputs: Vec::new(),
            attributes: Vec::new(),
        };
        for f in Fields::new(body) {
            match f? {
                (1, FieldValue::Bytes(t)) => node.inputs.push(text(t)?),
                (2, FieldValue::Bytes(t)) => node.outputs.push(text(t)?),
                (4, FieldValue::Bytes(t)) => node.op_type = text(t)?,
                (5, FieldValue::Bytes(a)) => {
                    node.attributes.push(text(first_bytes(a, 1)?.unwrap_or_default())?)
                }
                _ => {}
            }
        }
        nodes.push(node);
    }
    Ok(nodes)
}

/// Re-encodes the model as a rewriter that leaves fields unchanged would: every model field
/// copied as is, the graph rebuilt from its fields' bytes (each copied as is) behind a new
/// key and length. One copy of the input.
fn borrowed_copy_through(bytes: &[u8]) -> R<Vec<u8>> {
    use stemflow_onnx::wire::{key_len, put_key, put_varint, varint_len, WIRE_LEN};
    let mut out = Vec::with_capacity(bytes.len());
    let mut model = Fields::new(bytes);
    while let Some(f) = model.next_with_bytes() {
        match f? {
            (7, FieldValue::Bytes(graph), _) => {
                let mut parts = Vec::new();
                let mut fields = Fields::new(graph);
                while let Some(g) = fields.next_with_bytes() {
                    parts.push(g?.2);
                }
                let len: usize = parts.iter().map(|p| p.len()).sum();
                out.reserve(key_len(7) + varint_len(len as u64) + len);
                put_key(&mut out, 7, WIRE_LEN);
                put_varint(&mut out, len as u64);
                for p in parts {
                    out.extend_from_slice(p);
                }
            }
            (_, _, raw) => out.extend_from_slice(raw),
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------- prost

macro_rules! prost_signature {
    ($model:expr) => {(|| -> R<_> {
        let mut m = $model;
        let g = m.graph.take().ok_or("no graph")?;
        Ok::<_, String>(Signature {
            inputs: g.input.into_iter().map(|v| v.name.unwrap_or_default()).collect(),
            outputs: g.output.into_iter().map(|v| v.name.unwrap_or_default()).collect(),
            metadata: m
                .metadata_props
                .into_iter()
                .map(|e| (e.key.unwrap_or_default(), e.value.unwrap_or_default()))
                .collect(),
            initializers: 0,
        })
    })()};
}

macro_rules! prost_nodes {
    ($model:expr) => {(|| -> R<_> {
        let mut m = $model;
        let g = m.graph.take().ok_or("no graph")?;
        Ok::<_, String>(
            g.node
                .into_iter()
                .map(|n| Node {
                    op_type: n.op_type.unwrap_or_default(),
                    inputs: n.input,
                    outputs: n.output,
                    attributes: n
                        .attribute
                        .into_iter()
                        .map(|a| a.name.unwrap_or_default())
                        .collect(),
                })
                .collect::<Vec<_>>(),
        )
    })()};
}

/// The same with the `onnx-protobuf` crate (rust-protobuf 3, proto3 strings, Vec<u8> bytes).
fn rp_decode(input: &[u8]) -> onnx_protobuf::ModelProto {
    <onnx_protobuf::ModelProto as onnx_protobuf::Message>::parse_from_bytes(input).unwrap()
}

fn rp_signature(mut m: onnx_protobuf::ModelProto) -> Signature {
    let g = m.graph.take().unwrap();
    Signature {
        inputs: g.input.into_iter().map(|v| v.name).collect(),
        outputs: g.output.into_iter().map(|v| v.name).collect(),
        metadata: m.metadata_props.into_iter().map(|e| (e.key, e.value)).collect(),
        initializers: 0,
    }
}

fn rp_nodes(mut m: onnx_protobuf::ModelProto) -> Vec<Node<String>> {
    let g = m.graph.take().unwrap();
    g.node
        .into_iter()
        .map(|n| Node {
            op_type: n.op_type,
            inputs: n.input,
            outputs: n.output,
            attributes: n.attribute.into_iter().map(|a| a.name).collect(),
        })
        .collect()
}

fn err(e: prost::DecodeError) -> String {
    e.to_string()
}

// ---------------------------------------------------------------- harness

struct Stats {
    ms: Vec<f64>,
    peak: usize,
    total: usize,
}

fn measure<T>(runs: usize, mut op: impl FnMut() -> T) -> (Stats, T) {
    let mut stats = Stats {
        ms: Vec::new(),
        peak: 0,
        total: 0,
    };
    let mut last = None;
    for _ in 0..runs {
        drop(last.take());
        let base = LIVE.load(Relaxed);
        PEAK.store(base, Relaxed);
        let total0 = TOTAL.load(Relaxed);
        let t = Instant::now();
        let r = black_box(op());
        stats.ms.push(t.elapsed().as_secs_f64() * 1e3);
        stats.peak = stats.peak.max(PEAK.load(Relaxed) - base);
        stats.total = stats.total.max(TOTAL.load(Relaxed) - total0);
        last = Some(r);
    }
    (stats, last.unwrap())
}

fn report(file: &str, task: &str, variant: &str, s: &Stats, note: &str) {
    let mut ms = s.ms.clone();
    ms.sort_by(f64::total_cmp);
    println!(
        "{file}\t{task}\t{variant}\truns={}\tmedian_ms={:.3}\tmin_ms={:.3}\tfirst_ms={:.3}\tpeak_extra_MB={:.2}\talloc_MB={:.2}\t{note}",
        ms.len(),
        ms[ms.len() / 2],
        ms[0],
        s.ms[0],
        s.peak as f64 / 1e6,
        s.total as f64 / 1e6,
    );
}

fn main() -> R<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, task, variant, runs] = &args[..] else {
        return Err("usage: prost-bench FILE TASK VARIANT RUNS".into());
    };
    let runs: usize = runs.parse().map_err(|_| "RUNS")?;
    let file = std::path::Path::new(path)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let data = std::fs::read(path).map_err(|e| e.to_string())?;
    let (t, v) = (task.as_str(), variant.as_str());
    // Bytes::from(Vec) takes the allocation over: no copy.
    let (data, shared) = if v == "prost-bytes" {
        (Vec::new(), Bytes::from(data))
    } else {
        (data, Bytes::new())
    };
    let input: &[u8] = if v == "prost-bytes" { &shared } else { &data };

    // The reference answers, computed once from the borrowed reader, to check each variant.
    let want_sig = borrowed_signature(input, false)?;
    let want_nodes = fingerprint(&borrowed_nodes(input)?);

    match (t, v) {
        ("read", _) => {
            // baseline for /usr/bin/time: the file read (and the reference reads above)
            println!("{file}\tread\t{v}\tbytes={}", input.len());
        }
        ("sig", "borrowed") | ("sig", "borrowed-names") => {
            let names = v == "borrowed-names";
            let (s, r) = measure(runs, || borrowed_signature(input, names).unwrap());
            assert_eq!(r.inputs, want_sig.inputs);
            report(&file, t, v, &s, &format!("initializer names read: {}", r.initializers));
        }
        ("sig", "prost-vec") => {
            let (s, r) = measure(runs, || {
                prost_signature!(gen_vec::ModelProto::decode(input).map_err(err)?).unwrap()
            });
            assert_eq!(r, want_sig);
            report(&file, t, v, &s, "");
        }
        ("sig", "prost-bytes") => {
            let (s, r) = measure(runs, || {
                prost_signature!(gen_bytes::ModelProto::decode(shared.clone()).map_err(err)?)
                    .unwrap()
            });
            assert_eq!(r, want_sig);
            report(&file, t, v, &s, "");
        }
        ("sig", "prost-lite") => {
            let (s, r) = measure(runs, || {
                prost_signature!(gen_lite::ModelProto::decode(input).map_err(err)?).unwrap()
            });
            assert_eq!(r, want_sig);
            report(&file, t, v, &s, "");
        }
        ("nodes", "borrowed") => {
            let (s, r) = measure(runs, || borrowed_nodes(input).unwrap());
            assert_eq!(fingerprint(&r), want_nodes);
            report(&file, t, v, &s, &format!("{} nodes", r.len()));
        }
        ("nodes", "prost-vec") => {
            let (s, r) = measure(runs, || {
                prost_nodes!(gen_vec::ModelProto::decode(input).map_err(err)?).unwrap()
            });
            assert_eq!(fingerprint(&r), want_nodes);
            report(&file, t, v, &s, &format!("{} nodes", r.len()));
        }
        ("nodes", "prost-bytes") => {
            let (s, r) = measure(runs, || {
                prost_nodes!(gen_bytes::ModelProto::decode(shared.clone()).map_err(err)?).unwrap()
            });
            assert_eq!(fingerprint(&r), want_nodes);
            report(&file, t, v, &s, &format!("{} nodes", r.len()));
        }
        ("nodes", "prost-lite") => {
            let (s, r) = measure(runs, || {
                prost_nodes!(gen_lite::ModelProto::decode(input).map_err(err)?).unwrap()
            });
            assert_eq!(fingerprint(&r), want_nodes);
            report(&file, t, v, &s, &format!("{} nodes", r.len()));
        }
        ("sig", "onnx-protobuf") => {
            let (s, r) = measure(runs, || rp_signature(rp_decode(input)));
            assert_eq!(r, want_sig);
            report(&file, t, v, &s, "");
        }
        ("nodes", "onnx-protobuf") => {
            let (s, r) = measure(runs, || rp_nodes(rp_decode(input)));
            assert_eq!(fingerprint(&r), want_nodes);
            report(&file, t, v, &s, &format!("{} nodes", r.len()));
        }
        ("decode", "prost-bytes-slice") => {
            // Bytes-typed fields but decoding from a borrowed &[u8]: every bytes field is copied
            let (s, _m) = measure(runs, || gen_bytes::ModelProto::decode(input).unwrap());
            report(&file, t, v, &s, "decode only, from &[u8]");
        }
        ("decode", "onnx-protobuf") => {
            let (s, _m) = measure(runs, || rp_decode(input));
            report(&file, t, v, &s, "decode only");
        }
        ("encode", "onnx-protobuf") => {
            use onnx_protobuf::Message as _;
            let model = rp_decode(input);
            let (s, out) = measure(runs, || model.write_to_bytes().unwrap());
            report(&file, "encode-only", v, &s, &format!("identical={}", out == input));
            drop((model, out));
            let (s, out) = measure(runs, || rp_decode(input).write_to_bytes().unwrap());
            let note = format!("identical={} (len {} vs {})", out == input, out.len(), input.len());
            report(&file, "decode+encode", v, &s, &note);
        }
        ("unknown-fields", _) => {
            // A model field this schema version does not know (number 1000, a varint) and one
            // inside the graph (number 1001): which re-encoding keeps them?
            use stemflow_onnx::wire::{put_int64, put_bytes};
            let mut model = Vec::new();
            let mut fields = Fields::new(input);
            while let Some(f) = fields.next_with_bytes() {
                match f? {
                    (7, FieldValue::Bytes(g), _) => {
                        let mut graph = g.to_vec();
                        put_int64(&mut graph, 1001, 7);
                        put_bytes(&mut model, 7, &graph);
                    }
                    (_, _, raw) => model.extend_from_slice(raw),
                }
            }
            put_int64(&mut model, 1000, 7);
            let borrowed = borrowed_copy_through(&model)?;
            let prost = gen_bytes::ModelProto::decode(Bytes::from(model.clone())).unwrap().encode_to_vec();
            use onnx_protobuf::Message as _;
            let rp = rp_decode(&model).write_to_bytes().unwrap();
            println!(
                "{file}\tunknown-fields\tinput={} bytes\tborrowed copy-through={} (identical={})\tprost={} (identical={})\tonnx-protobuf={} (identical={})",
                model.len(), borrowed.len(), borrowed == model, prost.len(), prost == model, rp.len(), rp == model
            );
        }
        ("encode", "borrowed") => {
            let (s, out) = measure(runs, || borrowed_copy_through(input).unwrap());
            report(&file, t, v, &s, &format!("identical={}", out == input));
        }
        ("encode", "prost-vec") | ("encode", "prost-bytes") => {
            // decode once outside the timing, then time encode_to_vec alone; then decode+encode
            macro_rules! run {
                ($decode:expr) => {{
                    let model = $decode;
                    let (s, out) = measure(runs, || model.encode_to_vec());
                    report(&file, "encode-only", v, &s, &format!("identical={}", out == input));
                    drop((model, out));
                    let (s, out) = measure(runs, || {
                        let m = $decode;
                        m.encode_to_vec()
                    });
                    report(&file, "decode+encode", v, &s, &format!("identical={}", out == input));
                }};
            }
            if v == "prost-vec" {
                run!(gen_vec::ModelProto::decode(input).unwrap())
            } else {
                run!(gen_bytes::ModelProto::decode(shared.clone()).unwrap())
            }
        }
        ("decode", "prost-vec") => {
            let (s, _m) = measure(runs, || gen_vec::ModelProto::decode(input).unwrap());
            report(&file, t, v, &s, "decode only");
        }
        ("decode", "prost-bytes") => {
            let (s, _m) = measure(runs, || gen_bytes::ModelProto::decode(shared.clone()).unwrap());
            report(&file, t, v, &s, "decode only");
        }
        _ => return Err(format!("unknown task/variant {t} {v}")),
    }
    Ok(())
}
