//! [`load_numpy_dict`]: a restricted unpickler for a protocol-2 pickle of a `dict` of numpy
//! float32 arrays (what `torch.save({name: np.ndarray})` writes into a checkpoint's `data.pkl`).
//!
//! A pickle is a program for a stack machine that may import and call anything. This one is
//! run symbolically and never calls anything: it understands only the opcodes and the four
//! globals a dict of numpy arrays needs, interprets `REDUCE` and `BUILD` for exactly the shapes
//! numpy produces, and refuses everything else with a [`ConvertError::Pickle`] naming the
//! opcode or global and its byte offset.
//!
//! Opcodes (all others are refused):
//! - the 22 that the Spleeter checkpoints use (SPEC §2.2): `PROTO` (protocol 2 only),
//!   `EMPTY_DICT`, `MARK`, `SETITEMS`, `BINUNICODE`, `GLOBAL`, `BININT`, `BININT1`, `BININT2`,
//!   `NONE`, `NEWTRUE`, `NEWFALSE`, `TUPLE`, `TUPLE1`, `TUPLE2`, `TUPLE3`, `REDUCE`, `BUILD`,
//!   `BINPUT`, `LONG_BINPUT`, `BINGET`, `STOP`;
//! - three more that Python 3's pickler emits for other protocol-2 numpy dicts: `LONG_BINGET`
//!   (memo index ≥ 256), `SETITEM` (a dict with one entry, or a last batch of one after 1000)
//!   and `EMPTY_TUPLE` (the shape of a 0-d array).
//!
//! Not supported, by choice: protocols 3 and above (`BINBYTES`, `SHORT_BINUNICODE`, `FRAME`,
//! `STACK_GLOBAL`, `MEMOIZE`…: numpy's protocol-2 bytes are `_codecs.encode(str, 'latin1')`
//! instead), `BINFLOAT` (never in an array's pickle), `LONG1` (only for a dimension ≥ 2³¹)
//! and zero-element arrays (their empty data pickles as `__builtin__.bytes()`, a global
//! outside the list below).
//!
//! Globals (`GLOBAL module\nname\n`): `numpy.core.multiarray _reconstruct` (numpy 1),
//! `numpy._core.multiarray _reconstruct` (numpy 2), `numpy ndarray`, `numpy dtype`,
//! `_codecs encode`.
//!
//! Each value must be `_reconstruct(ndarray, (0,), b'b')` followed by `BUILD` with the state
//! `(1, shape, dtype, is_fortran, data)`, where `dtype` is `dtype(kind, False, True)` with the
//! `BUILD` state `(3, byte_order, None, None, None, elsize, alignment, flags)` and `data` is
//! `_codecs.encode(text, 'latin1')`: a string whose code points (all < 256) are the array's
//! bytes. Only little-endian float32 (`'<f4'`) arrays in C order are converted; any other
//! dtype, byte order or Fortran order (of an array with 2 or more dimensions) is refused by
//! name, and `len(data)` must be `prod(shape) * 4`.
//!
//! Every size is bounded: stack depth, mark depth, tuple nesting and memo entries by the
//! constants below, string lengths by the remaining input, shape products by overflow checks.
//! No input makes it panic or recurse deeply, and what it allocates is bounded by a small
//! multiple of the input's size. Loading a Spleeter checkpoint's 59 MB `data.pkl` takes about
//! 0.25 s in a release build.

use std::collections::HashMap;
use std::rc::Rc;

use crate::error::ConvertError;

/// Deepest tuples may nest (numpy's pickles nest 2 deep).
const MAX_TUPLE_NESTING: usize = 16;
/// Deepest the value stack may grow (a numpy dict needs about 15).
const MAX_STACK_DEPTH: usize = 4096;
/// Most nested `MARK`s (a numpy dict needs 3).
const MAX_MARK_DEPTH: usize = 256;
/// Most memo entries (the checkpoints use 680).
const MAX_MEMO_ENTRIES: usize = 1 << 20;
/// Longest `module` or `name` line of a `GLOBAL`.
const MAX_GLOBAL_LINE_BYTES: usize = 256;
/// Most dimensions an array may have (numpy 2 allows 64).
const MAX_NUM_DIMS: usize = 64;
/// The only pickle protocol accepted.
const PICKLE_PROTOCOL: u8 = 2;
/// Size of one float32.
const F32_SIZE_BYTES: usize = 4;
/// Version of numpy's `ndarray.__setstate__` state tuple.
const NDARRAY_STATE_VERSION: i64 = 1;
/// Version of numpy's `dtype.__setstate__` state tuple (without metadata).
const DTYPE_STATE_VERSION: i64 = 3;

/// A float32 array from the pickle, in C (row-major) order.
#[derive(Debug, Clone, PartialEq)]
pub struct NdArray {
    /// Dimensions, outermost first; empty for a 0-d (scalar) array.
    pub shape: Vec<usize>,
    /// `shape.iter().product()` values, last dimension fastest.
    pub data: Vec<f32>,
}

/// Loads a protocol-2 pickle of a `dict` of little-endian float32 numpy arrays (a torch
/// checkpoint's `data.pkl`), returning `(key, array)` in the dict's insertion order.
///
/// Runs the pickle symbolically; never imports or calls anything. Fails with
/// [`ConvertError::Pickle`] naming the opcode and byte offset for: an opcode other than the
/// 25 listed in the [module docs](self), a global other than the five allowed (the message
/// names it, e.g. `os.system`), a `REDUCE` or `BUILD` of a shape numpy does not produce,
/// truncated input, bytes after `STOP`, a top-level object that is not a dict of arrays,
/// duplicate keys, a dtype other than `'<f4'`, Fortran order, or data whose length is not
/// `prod(shape) * 4` bytes. Not realtime-safe: allocates the arrays (about the size of the
/// pickle).
pub fn load_numpy_dict(pickle: &[u8]) -> Result<Vec<(String, NdArray)>, ConvertError> {
    let mut machine = Machine::new(pickle);
    let dict = machine.run().map_err(ConvertError::Pickle)?;
    machine.into_arrays(dict).map_err(ConvertError::Pickle)
}

/// Pickle opcodes (CPython `Lib/pickle.py`); the test writers use them too.
pub(crate) mod opcode {
    pub const MARK: u8 = b'(';
    pub const STOP: u8 = b'.';
    pub const BININT: u8 = b'J';
    pub const BININT1: u8 = b'K';
    pub const BININT2: u8 = b'M';
    pub const NONE: u8 = b'N';
    pub const REDUCE: u8 = b'R';
    pub const BINUNICODE: u8 = b'X';
    pub const BUILD: u8 = b'b';
    pub const GLOBAL: u8 = b'c';
    pub const EMPTY_DICT: u8 = b'}';
    pub const BINGET: u8 = b'h';
    pub const LONG_BINGET: u8 = b'j';
    pub const BINPUT: u8 = b'q';
    pub const LONG_BINPUT: u8 = b'r';
    pub const SETITEM: u8 = b's';
    pub const TUPLE: u8 = b't';
    pub const EMPTY_TUPLE: u8 = b')';
    pub const SETITEMS: u8 = b'u';
    pub const PROTO: u8 = 0x80;
    pub const TUPLE1: u8 = 0x85;
    pub const TUPLE2: u8 = 0x86;
    pub const TUPLE3: u8 = 0x87;
    pub const NEWTRUE: u8 = 0x88;
    pub const NEWFALSE: u8 = 0x89;

    /// The name CPython gives `code`, for error messages.
    pub fn name(code: u8) -> &'static str {
        match code {
            b'(' => "MARK",
            b'.' => "STOP",
            b'0' => "POP",
            b'1' => "POP_MARK",
            b'2' => "DUP",
            b'F' => "FLOAT",
            b'I' => "INT",
            b'J' => "BININT",
            b'K' => "BININT1",
            b'L' => "LONG",
            b'M' => "BININT2",
            b'N' => "NONE",
            b'P' => "PERSID",
            b'Q' => "BINPERSID",
            b'R' => "REDUCE",
            b'S' => "STRING",
            b'T' => "BINSTRING",
            b'U' => "SHORT_BINSTRING",
            b'V' => "UNICODE",
            b'X' => "BINUNICODE",
            b'a' => "APPEND",
            b'b' => "BUILD",
            b'c' => "GLOBAL",
            b'd' => "DICT",
            b'}' => "EMPTY_DICT",
            b'e' => "APPENDS",
            b'g' => "GET",
            b'h' => "BINGET",
            b'i' => "INST",
            b'j' => "LONG_BINGET",
            b'l' => "LIST",
            b']' => "EMPTY_LIST",
            b'o' => "OBJ",
            b'p' => "PUT",
            b'q' => "BINPUT",
            b'r' => "LONG_BINPUT",
            b's' => "SETITEM",
            b't' => "TUPLE",
            b')' => "EMPTY_TUPLE",
            b'u' => "SETITEMS",
            b'G' => "BINFLOAT",
            0x80 => "PROTO",
            0x81 => "NEWOBJ",
            0x82 => "EXT1",
            0x83 => "EXT2",
            0x84 => "EXT4",
            0x85 => "TUPLE1",
            0x86 => "TUPLE2",
            0x87 => "TUPLE3",
            0x88 => "NEWTRUE",
            0x89 => "NEWFALSE",
            0x8a => "LONG1",
            0x8b => "LONG4",
            b'B' => "BINBYTES",
            b'C' => "SHORT_BINBYTES",
            0x8c => "SHORT_BINUNICODE",
            0x8d => "BINUNICODE8",
            0x8e => "BINBYTES8",
            0x8f => "EMPTY_SET",
            0x90 => "ADDITEMS",
            0x91 => "FROZENSET",
            0x92 => "NEWOBJ_EX",
            0x93 => "STACK_GLOBAL",
            0x94 => "MEMOIZE",
            0x95 => "FRAME",
            0x96 => "BYTEARRAY8",
            0x97 => "NEXT_BUFFER",
            0x98 => "READONLY_BUFFER",
            _ => "an unknown opcode",
        }
    }
}

/// The globals the pickle may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Global {
    /// `numpy.core.multiarray._reconstruct` (or numpy 2's `numpy._core.multiarray`).
    Reconstruct,
    /// `numpy.ndarray`.
    NdArrayType,
    /// `numpy.dtype`.
    Dtype,
    /// `_codecs.encode`.
    CodecsEncode,
}

impl Global {
    /// The allowed global `module.name`, or `None`.
    fn from_names(module: &str, name: &str) -> Option<Self> {
        match (module, name) {
            ("numpy.core.multiarray" | "numpy._core.multiarray", "_reconstruct") => {
                Some(Self::Reconstruct)
            }
            ("numpy", "ndarray") => Some(Self::NdArrayType),
            ("numpy", "dtype") => Some(Self::Dtype),
            ("_codecs", "encode") => Some(Self::CodecsEncode),
            _ => None,
        }
    }

    /// Python's spelling.
    fn python_name(self) -> &'static str {
        match self {
            Self::Reconstruct => "numpy.core.multiarray._reconstruct",
            Self::NdArrayType => "numpy.ndarray",
            Self::Dtype => "numpy.dtype",
            Self::CodecsEncode => "_codecs.encode",
        }
    }
}

/// A value on the stack or in the memo. Cheap to clone (strings borrow the input).
#[derive(Debug, Clone)]
enum Value<'a> {
    None,
    Bool(bool),
    Int(i64),
    /// A `BINUNICODE` string's UTF-8 bytes, checked where the string is used (dict key, dtype
    /// field, `_codecs.encode` argument), so that a 13 MB data string is scanned once.
    Str(&'a [u8]),
    /// A `bytes` object from `_codecs.encode(text, 'latin1')`: `utf8` is `text`, checked to be
    /// UTF-8 whose code points are all < 256; those code points are the `len_bytes` bytes.
    Latin1Bytes {
        utf8: &'a [u8],
        len_bytes: usize,
    },
    Tuple(Rc<TupleValue<'a>>),
    Global(Global),
    /// Index into [`Machine::objects`]: objects are shared (memo) and mutated by `BUILD`.
    Object(usize),
}

impl Value<'_> {
    /// What this is, for error messages.
    fn describe(&self, objects: &[Object<'_>]) -> String {
        match self {
            Value::None => "None".to_string(),
            Value::Bool(value) => format!("the bool {}", if *value { "True" } else { "False" }),
            Value::Int(value) => format!("the int {value}"),
            Value::Str(text) => format!("a str of {} bytes", text.len()),
            Value::Latin1Bytes { len_bytes, .. } => format!("a bytes object of {len_bytes} bytes"),
            Value::Tuple(items) => format!("a tuple of {} items", items.len()),
            Value::Global(global) => format!("the global {}", global.python_name()),
            Value::Object(id) => match objects.get(*id) {
                Some(Object::Dict(_)) => "a dict".to_string(),
                Some(Object::Array(_)) => "a numpy array".to_string(),
                Some(Object::Dtype(_)) => "a numpy dtype".to_string(),
                None => "a missing object".to_string(),
            },
        }
    }
}

/// A tuple's items and how deeply tuples nest in it (bounded, so that dropping a value never
/// recurses deeply).
#[derive(Debug)]
struct TupleValue<'a> {
    /// The items.
    items: Vec<Value<'a>>,
    /// 1 + the deepest nesting among the items (0 for non-tuples).
    nesting: usize,
}

impl<'a> std::ops::Deref for TupleValue<'a> {
    type Target = [Value<'a>];

    fn deref(&self) -> &[Value<'a>] {
        &self.items
    }
}

/// An object made by `EMPTY_DICT` or `REDUCE`.
#[derive(Debug)]
enum Object<'a> {
    /// Keys and values in insertion order.
    Dict(Vec<(&'a str, Value<'a>)>),
    /// From `_reconstruct`; `None` until `BUILD` gives it its state.
    Array(Option<ArrayState<'a>>),
    /// From `dtype(kind, False, True)`.
    Dtype(DtypeState<'a>),
}

/// An array's `BUILD` state, checked for shape but not yet for dtype or length.
#[derive(Debug)]
struct ArrayState<'a> {
    /// Dimensions.
    shape: Vec<usize>,
    /// Product of `shape` (checked for overflow).
    num_elements: usize,
    /// Index of the [`Object::Dtype`].
    dtype: usize,
    /// Column-major order.
    is_fortran: bool,
    /// The data as UTF-8 of code points < 256 (checked).
    data_utf8: &'a [u8],
    /// The number of bytes `data_utf8` stands for.
    data_len_bytes: usize,
}

/// A dtype: its kind from the constructor, its byte order from `BUILD`.
#[derive(Debug)]
struct DtypeState<'a> {
    /// numpy's type code without byte order, e.g. `f4`.
    kind: &'a str,
    /// `<`, `>`, `|` or `=`; `None` until `BUILD`.
    byte_order: Option<&'a str>,
}

/// The symbolic pickle machine.
struct Machine<'a> {
    /// The whole pickle.
    input: &'a [u8],
    /// Offset of the next byte to read.
    position: usize,
    /// Value stack.
    stack: Vec<Value<'a>>,
    /// Stack lengths at each open `MARK`.
    marks: Vec<usize>,
    /// Memo entries by index.
    memo: HashMap<u32, Value<'a>>,
    /// Objects made by `EMPTY_DICT` and `REDUCE`.
    objects: Vec<Object<'a>>,
}

impl<'a> Machine<'a> {
    fn new(input: &'a [u8]) -> Self {
        Self {
            input,
            position: 0,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            objects: Vec::new(),
        }
    }

    /// Runs to `STOP`; returns the index of the top-level dict.
    fn run(&mut self) -> Result<usize, String> {
        loop {
            let at = self.position;
            let Some(&code) = self.input.get(at) else {
                return Err(format!(
                    "the pickle ends at byte {at} without STOP: truncated or not a pickle"
                ));
            };
            self.position += 1;
            let outcome = self
                .step(code)
                .map_err(|message| format!("{message} ({} at byte {at})", opcode::name(code)))?;
            if let Some(result) = outcome {
                let trailing = self.input.len() - self.position;
                if trailing > 0 {
                    return Err(format!(
                        "{trailing} bytes follow STOP at byte {at}: damaged pickle"
                    ));
                }
                return match result {
                    Value::Object(id) if matches!(self.objects.get(id), Some(Object::Dict(_))) => {
                        Ok(id)
                    }
                    other => Err(format!(
                        "the pickle holds {}, not a dict of numpy arrays",
                        other.describe(&self.objects)
                    )),
                };
            }
        }
    }

    /// Executes one opcode; returns the result on `STOP`.
    fn step(&mut self, code: u8) -> Result<Option<Value<'a>>, String> {
        match code {
            opcode::PROTO => {
                let protocol = self.read_u8()?;
                if protocol != PICKLE_PROTOCOL {
                    return Err(format!(
                        "pickle protocol {protocol}; only protocol {PICKLE_PROTOCOL} (numpy \
                         arrays saved by torch.save) is supported"
                    ));
                }
            }
            opcode::EMPTY_DICT => {
                let id = self.new_object(Object::Dict(Vec::new()));
                self.push(Value::Object(id))?;
            }
            opcode::EMPTY_TUPLE => self.push(make_tuple(Vec::new())?)?,
            opcode::MARK => {
                if self.marks.len() >= MAX_MARK_DEPTH {
                    return Err(format!("more than {MAX_MARK_DEPTH} nested MARKs"));
                }
                self.marks.push(self.stack.len());
            }
            opcode::BINUNICODE => {
                let len_bytes = self.read_u32()? as usize;
                let utf8 = self.read_bytes(len_bytes)?;
                self.push(Value::Str(utf8))?;
            }
            opcode::GLOBAL => {
                let module = self.read_line()?;
                let name = self.read_line()?;
                let global = Global::from_names(module, name).ok_or_else(|| {
                    let why = if (module, name) == ("__builtin__", "bytes") {
                        "CPython pickles empty bytes this way, so the checkpoint holds a \
                         zero-element array, which is not supported"
                    } else {
                        "only numpy float arrays may be loaded (allowed: \
                         numpy.core.multiarray._reconstruct or numpy._core.multiarray.\
                         _reconstruct, numpy.ndarray, numpy.dtype, _codecs.encode); this \
                         checkpoint may be malicious"
                    };
                    format!("refused global {module}.{name}: {why}")
                })?;
                self.push(Value::Global(global))?;
            }
            opcode::BININT => {
                let bytes = self.read_bytes(4)?;
                let value = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                self.push(Value::Int(i64::from(value)))?;
            }
            opcode::BININT1 => {
                let value = self.read_u8()?;
                self.push(Value::Int(i64::from(value)))?;
            }
            opcode::BININT2 => {
                let bytes = self.read_bytes(2)?;
                self.push(Value::Int(i64::from(u16::from_le_bytes([
                    bytes[0], bytes[1],
                ]))))?;
            }
            opcode::NONE => self.push(Value::None)?,
            opcode::NEWTRUE => self.push(Value::Bool(true))?,
            opcode::NEWFALSE => self.push(Value::Bool(false))?,
            opcode::TUPLE => {
                let items = self.pop_to_mark()?;
                self.push(make_tuple(items)?)?;
            }
            opcode::TUPLE1 | opcode::TUPLE2 | opcode::TUPLE3 => {
                let len = usize::from(code - opcode::TUPLE1) + 1;
                let items = self.pop_n(len)?;
                self.push(make_tuple(items)?)?;
            }
            opcode::REDUCE => {
                let arguments = self.pop()?;
                let callable = self.pop()?;
                let result = self.reduce(callable, arguments)?;
                self.push(result)?;
            }
            opcode::BUILD => {
                let state = self.pop()?;
                let target = self.top()?.clone();
                self.build(target, state)?;
            }
            opcode::SETITEMS => {
                let items = self.pop_to_mark()?;
                if items.len() % 2 != 0 {
                    return Err(format!(
                        "SETITEMS has an odd number of items ({}): a key without a value",
                        items.len()
                    ));
                }
                let dict = self.top()?.clone();
                let mut items = items.into_iter();
                while let (Some(key), Some(value)) = (items.next(), items.next()) {
                    self.set_item(&dict, key, value)?;
                }
            }
            opcode::SETITEM => {
                let value = self.pop()?;
                let key = self.pop()?;
                let dict = self.top()?.clone();
                self.set_item(&dict, key, value)?;
            }
            opcode::BINPUT => {
                let index = u32::from(self.read_u8()?);
                self.memo_put(index)?;
            }
            opcode::LONG_BINPUT => {
                let index = self.read_u32()?;
                self.memo_put(index)?;
            }
            opcode::BINGET => {
                let index = u32::from(self.read_u8()?);
                self.memo_get(index)?;
            }
            opcode::LONG_BINGET => {
                let index = self.read_u32()?;
                self.memo_get(index)?;
            }
            opcode::STOP => return self.pop().map(Some),
            other => {
                return Err(format!(
                    "unsupported pickle opcode {} (0x{other:02x}): a dict of numpy arrays never \
                     needs it; this checkpoint may be malicious or from another writer",
                    opcode::name(other)
                ))
            }
        }
        Ok(None)
    }

    /// Reads `len` bytes.
    fn read_bytes(&mut self, len: usize) -> Result<&'a [u8], String> {
        let remaining = self.input.len() - self.position;
        if len > remaining {
            return Err(format!(
                "truncated pickle: the argument needs {len} bytes but only {remaining} remain"
            ));
        }
        let bytes = &self.input[self.position..self.position + len];
        self.position += len;
        Ok(bytes)
    }

    fn read_u8(&mut self) -> Result<u8, String> {
        Ok(self.read_bytes(1)?[0])
    }

    fn read_u32(&mut self) -> Result<u32, String> {
        let bytes = self.read_bytes(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// Reads a `\n`-terminated ASCII line (a `GLOBAL` argument), without the `\n`.
    fn read_line(&mut self) -> Result<&'a str, String> {
        let rest = &self.input[self.position..];
        let window = &rest[..rest.len().min(MAX_GLOBAL_LINE_BYTES + 1)];
        let Some(len) = window.iter().position(|&byte| byte == b'\n') else {
            return Err(if rest.len() <= MAX_GLOBAL_LINE_BYTES {
                "truncated pickle: the GLOBAL name has no end of line".to_string()
            } else {
                format!("a GLOBAL name is longer than {MAX_GLOBAL_LINE_BYTES} bytes")
            });
        };
        let line = std::str::from_utf8(&window[..len])
            .ok()
            .filter(|line| line.is_ascii())
            .ok_or_else(|| "a GLOBAL name is not ASCII".to_string())?;
        self.position += len + 1;
        Ok(line)
    }

    fn push(&mut self, value: Value<'a>) -> Result<(), String> {
        if self.stack.len() >= MAX_STACK_DEPTH {
            return Err(format!(
                "the stack grows deeper than {MAX_STACK_DEPTH} values"
            ));
        }
        self.stack.push(value);
        Ok(())
    }

    /// Lowest stack index the current opcode may touch (Python starts a fresh stack at MARK).
    fn stack_floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn pop(&mut self) -> Result<Value<'a>, String> {
        if self.stack.len() <= self.stack_floor() {
            return Err("stack underflow: the opcode needs a value the pickle did not push".into());
        }
        self.stack
            .pop()
            .ok_or_else(|| "stack underflow".to_string())
    }

    fn top(&self) -> Result<&Value<'a>, String> {
        if self.stack.len() <= self.stack_floor() {
            return Err("stack underflow: the opcode needs a value the pickle did not push".into());
        }
        self.stack
            .last()
            .ok_or_else(|| "stack underflow".to_string())
    }

    /// Pops the top `len` values, oldest first.
    fn pop_n(&mut self, len: usize) -> Result<Vec<Value<'a>>, String> {
        let available = self.stack.len().saturating_sub(self.stack_floor());
        if available < len {
            return Err(format!(
                "stack underflow: needs {len} values, {available} are above the last MARK"
            ));
        }
        Ok(self.stack.split_off(self.stack.len() - len))
    }

    /// Pops everything above the last `MARK`, oldest first, and the mark.
    fn pop_to_mark(&mut self) -> Result<Vec<Value<'a>>, String> {
        let mark = self
            .marks
            .pop()
            .ok_or_else(|| "no MARK to collect values from".to_string())?;
        Ok(self.stack.split_off(mark.min(self.stack.len())))
    }

    fn new_object(&mut self, object: Object<'a>) -> usize {
        self.objects.push(object);
        self.objects.len() - 1
    }

    fn memo_put(&mut self, index: u32) -> Result<(), String> {
        let value = self.top()?.clone();
        if self.memo.len() >= MAX_MEMO_ENTRIES && !self.memo.contains_key(&index) {
            return Err(format!("more than {MAX_MEMO_ENTRIES} memo entries"));
        }
        self.memo.insert(index, value);
        Ok(())
    }

    fn memo_get(&mut self, index: u32) -> Result<(), String> {
        let value = self
            .memo
            .get(&index)
            .cloned()
            .ok_or_else(|| format!("memo slot {index} was never set"))?;
        self.push(value)
    }

    fn describe(&self, value: &Value<'_>) -> String {
        value.describe(&self.objects)
    }

    /// `callable(*arguments)` for the three calls numpy's pickles make.
    fn reduce(&mut self, callable: Value<'a>, arguments: Value<'a>) -> Result<Value<'a>, String> {
        let Value::Global(global) = callable else {
            return Err(format!(
                "REDUCE calls {}; only the allowed numpy globals may be called",
                self.describe(&callable)
            ));
        };
        let Value::Tuple(arguments) = arguments else {
            return Err(format!(
                "REDUCE passes {} to {}, not an argument tuple",
                self.describe(&arguments),
                global.python_name()
            ));
        };
        let unexpected = |machine: &Self| {
            let described: Vec<String> = arguments
                .iter()
                .map(|value| machine.describe(value))
                .collect();
            format!(
                "{}({}) is not a call numpy's pickles make",
                global.python_name(),
                described.join(", ")
            )
        };
        match global {
            Global::Reconstruct => match &arguments[..] {
                [Value::Global(Global::NdArrayType), Value::Tuple(base_shape), Value::Latin1Bytes { utf8: b"b", .. }]
                    if matches!(&base_shape[..], [Value::Int(0)]) =>
                {
                    Ok(Value::Object(self.new_object(Object::Array(None))))
                }
                _ => Err(unexpected(self)),
            },
            Global::Dtype => match &arguments[..] {
                [Value::Str(kind), align, copy]
                    if as_flag(align) == Some(false) && as_flag(copy) == Some(true) =>
                {
                    let dtype = DtypeState {
                        kind: utf8(kind, "the dtype kind")?,
                        byte_order: None,
                    };
                    Ok(Value::Object(self.new_object(Object::Dtype(dtype))))
                }
                _ => Err(unexpected(self)),
            },
            Global::CodecsEncode => match &arguments[..] {
                [Value::Str(text), Value::Str(b"latin1")] => Ok(Value::Latin1Bytes {
                    utf8: text,
                    len_bytes: latin1_len_bytes(text)?,
                }),
                _ => Err(unexpected(self)),
            },
            Global::NdArrayType => Err(format!(
                "REDUCE calls numpy.ndarray directly; it is only accepted as the first argument \
                 of _reconstruct ({})",
                unexpected(self)
            )),
        }
    }

    /// `target.__setstate__(state)` for arrays and dtypes.
    fn build(&mut self, target: Value<'a>, state: Value<'a>) -> Result<(), String> {
        let id = match target {
            Value::Object(id) => id,
            other => {
                return Err(format!(
                    "BUILD on {}, not a numpy object",
                    self.describe(&other)
                ))
            }
        };
        let Value::Tuple(state) = state else {
            return Err(format!(
                "BUILD state is {}, not a tuple",
                self.describe(&state)
            ));
        };
        match self.objects.get(id) {
            Some(Object::Array(None)) => {
                let array = self.array_state(&state)?;
                self.objects[id] = Object::Array(Some(array));
                Ok(())
            }
            Some(Object::Array(Some(_))) => {
                Err("BUILD on an array that already has its state".into())
            }
            Some(Object::Dtype(dtype)) if dtype.byte_order.is_some() => {
                Err("BUILD on a dtype that already has its state".into())
            }
            Some(Object::Dtype(_)) => {
                let byte_order = self.dtype_byte_order(&state)?;
                if let Some(Object::Dtype(dtype)) = self.objects.get_mut(id) {
                    dtype.byte_order = Some(byte_order);
                }
                Ok(())
            }
            Some(Object::Dict(_)) | None => Err("BUILD on a dict, not a numpy object".into()),
        }
    }

    /// Checks an `ndarray.__setstate__` tuple `(1, shape, dtype, is_fortran, data)`.
    fn array_state(&self, state: &[Value<'a>]) -> Result<ArrayState<'a>, String> {
        let [version, Value::Tuple(dims), Value::Object(dtype), fortran, Value::Latin1Bytes {
            utf8: data_utf8,
            len_bytes: data_len_bytes,
        }] = state
        else {
            let described: Vec<String> = state.iter().map(|value| self.describe(value)).collect();
            return Err(format!(
                "array state ({}) is not numpy's (version, shape, dtype, is_fortran, data)",
                described.join(", ")
            ));
        };
        if !matches!(version, Value::Int(NDARRAY_STATE_VERSION)) {
            return Err(format!(
                "array state version is {}, numpy writes {NDARRAY_STATE_VERSION}",
                self.describe(version)
            ));
        }
        if !matches!(self.objects.get(*dtype), Some(Object::Dtype(_))) {
            return Err(format!(
                "array dtype is {}, not a numpy dtype",
                self.describe(&Value::Object(*dtype))
            ));
        }
        let is_fortran = as_flag(fortran)
            .ok_or_else(|| format!("array is_fortran is {}, not a bool", self.describe(fortran)))?;
        if dims.len() > MAX_NUM_DIMS {
            return Err(format!(
                "array has {} dimensions, more than {MAX_NUM_DIMS}",
                dims.len()
            ));
        }
        let mut shape = Vec::with_capacity(dims.len());
        let mut num_elements = 1usize;
        for dim in dims.iter() {
            let size = match dim {
                Value::Int(size) => usize::try_from(*size).ok(),
                _ => None,
            }
            .ok_or_else(|| format!("array dimension is {}, not a size", self.describe(dim)))?;
            num_elements = num_elements
                .checked_mul(size)
                .filter(|count| count.checked_mul(F32_SIZE_BYTES).is_some())
                .ok_or_else(|| "array shape's product overflows".to_string())?;
            shape.push(size);
        }
        Ok(ArrayState {
            shape,
            num_elements,
            dtype: *dtype,
            is_fortran,
            data_utf8,
            data_len_bytes: *data_len_bytes,
        })
    }

    /// Checks a `dtype.__setstate__` tuple `(3, byte_order, None, None, None, elsize,
    /// alignment, flags)` and returns the byte order.
    fn dtype_byte_order(&self, state: &[Value<'a>]) -> Result<&'a str, String> {
        match state {
            [Value::Int(DTYPE_STATE_VERSION), Value::Str(byte_order), Value::None, Value::None, Value::None, Value::Int(_), Value::Int(_), Value::Int(_)] => {
                utf8(byte_order, "the dtype byte order")
            }
            _ => {
                let described: Vec<String> =
                    state.iter().map(|value| self.describe(value)).collect();
                Err(format!(
                    "dtype state ({}) is not a plain numeric dtype's (3, byte order, None, None, \
                     None, size, alignment, flags); structured, subarray and metadata dtypes are \
                     not supported",
                    described.join(", ")
                ))
            }
        }
    }

    /// `dict[key] = value`, refusing non-str and duplicate keys.
    fn set_item(
        &mut self,
        dict: &Value<'a>,
        key: Value<'a>,
        value: Value<'a>,
    ) -> Result<(), String> {
        let Value::Str(key) = key else {
            return Err(format!("dict key is {}, not a str", self.describe(&key)));
        };
        let key = utf8(key, "a dict key")?;
        let described = self.describe(dict);
        match dict {
            Value::Object(id) => match self.objects.get_mut(*id) {
                Some(Object::Dict(items)) => {
                    if items.iter().any(|(existing, _)| *existing == key) {
                        return Err(format!("the dict holds the key {key:?} twice"));
                    }
                    items.push((key, value));
                    Ok(())
                }
                _ => Err(format!("SETITEM(S) on {described}, not a dict")),
            },
            _ => Err(format!("SETITEM(S) on {described}, not a dict")),
        }
    }

    /// Converts the dict's values to arrays, checking dtype, order and length.
    fn into_arrays(mut self, dict: usize) -> Result<Vec<(String, NdArray)>, String> {
        let items = match self.objects.get_mut(dict) {
            Some(Object::Dict(items)) => std::mem::take(items),
            _ => return Err("the pickle holds no dict".to_string()),
        };
        let mut is_used = vec![false; self.objects.len()];
        let mut arrays = Vec::with_capacity(items.len());
        for (key, value) in items {
            let array = match &value {
                Value::Object(id) => match self.objects.get(*id) {
                    Some(Object::Array(Some(state))) => {
                        if std::mem::replace(&mut is_used[*id], true) {
                            return Err(format!(
                                "key {key:?} shares its array with an earlier key"
                            ));
                        }
                        self.convert(key, state)?
                    }
                    Some(Object::Array(None)) => {
                        return Err(format!("array {key:?} never received its state (no BUILD)"))
                    }
                    _ => {
                        return Err(format!(
                            "the value for key {key:?} is {}, not a numpy array",
                            self.describe(&value)
                        ))
                    }
                },
                other => {
                    return Err(format!(
                        "the value for key {key:?} is {}, not a numpy array",
                        self.describe(other)
                    ))
                }
            };
            arrays.push((key.to_string(), array));
        }
        Ok(arrays)
    }

    /// Converts one array to float32 values.
    fn convert(&self, key: &str, state: &ArrayState<'a>) -> Result<NdArray, String> {
        let Some(Object::Dtype(dtype)) = self.objects.get(state.dtype) else {
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
        let found_bytes = state.data_len_bytes;
        if found_bytes != expected_bytes {
            return Err(format!(
                "array {key:?} has shape {:?} = {} float32 values ({expected_bytes} bytes) but \
                 its data holds {found_bytes} bytes",
                state.shape, state.num_elements
            ));
        }
        Ok(NdArray {
            shape: state.shape.clone(),
            data: decode_latin1_f32_le(state.data_utf8, state.num_elements),
        })
    }
}

/// A tuple of `items`, refusing nesting deeper than [`MAX_TUPLE_NESTING`].
fn make_tuple(items: Vec<Value<'_>>) -> Result<Value<'_>, String> {
    let deepest = items
        .iter()
        .map(|item| match item {
            Value::Tuple(tuple) => tuple.nesting,
            _ => 0,
        })
        .max()
        .unwrap_or(0);
    if deepest >= MAX_TUPLE_NESTING {
        return Err(format!("tuples nest deeper than {MAX_TUPLE_NESTING}"));
    }
    Ok(Value::Tuple(Rc::new(TupleValue {
        items,
        nesting: deepest + 1,
    })))
}

/// `True`/`False` or the ints 1/0 (older numpy) as a bool.
fn as_flag(value: &Value<'_>) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(*flag),
        Value::Int(0) => Some(false),
        Value::Int(1) => Some(true),
        _ => None,
    }
}

/// `bytes` as a `&str`, or an error saying that `what` is not UTF-8.
fn utf8<'b>(bytes: &'b [u8], what: &str) -> Result<&'b str, String> {
    std::str::from_utf8(bytes).map_err(|error| format!("{what} is not valid UTF-8: {error}"))
}

/// Checks that `utf8_text` is UTF-8 whose code points are all < 256, i.e. that
/// `text.encode('latin1')` gives bytes, and returns how many bytes that is.
///
/// Such UTF-8 is a sequence of bytes < 0x80 and pairs (0xC2 or 0xC3, 0x80..=0xBF): no byte is
/// 0xC0, 0xC1 or ≥ 0xC4, a byte is a continuation (0x80..=0xBF) exactly when the byte before it
/// is 0xC2 or 0xC3, and the text neither starts with a continuation nor ends with a lead byte.
/// These checks look at neighbouring bytes only, so the loop has no data-dependent branch or
/// index and the compiler vectorises it; a failure is explained on the slow path.
fn latin1_len_bytes(utf8_text: &[u8]) -> Result<usize, String> {
    let is_continuation = |byte: u8| (byte & 0xC0) == 0x80;
    let is_pair_lead = |byte: u8| (byte & 0xFE) == 0xC2;
    let mut is_invalid = false;
    let mut num_continuations = 0usize;
    for (&before, &byte) in utf8_text.iter().zip(utf8_text.iter().skip(1)) {
        is_invalid |= is_continuation(byte) != is_pair_lead(before);
        num_continuations += usize::from(is_continuation(byte));
    }
    for &byte in utf8_text {
        is_invalid |= (byte >= 0xC4) | ((byte & 0xFE) == 0xC0);
    }
    if let (Some(&first), Some(&last)) = (utf8_text.first(), utf8_text.last()) {
        is_invalid |= is_continuation(first) | is_pair_lead(last);
    }
    if !is_invalid {
        return Ok(utf8_text.len() - num_continuations);
    }
    let text = utf8(utf8_text, "the _codecs.encode argument")?;
    let (index, character) = text
        .chars()
        .enumerate()
        .find(|&(_, character)| u32::from(character) > 0xFF)
        .unwrap_or((0, '\u{FFFD}'));
    Err(format!(
        "_codecs.encode(…, 'latin1') of a string with U+{:04X} at character {index}: latin-1 \
         bytes must be below U+0100",
        u32::from(character)
    ))
}

/// Decodes `num_elements` little-endian float32 values from `utf8_text`, UTF-8 of code points
/// < 256 (checked by [`latin1_len_bytes`]) that stands for their bytes; zeros past its end.
fn decode_latin1_f32_le(utf8_text: &[u8], num_elements: usize) -> Vec<f32> {
    let len_bytes = num_elements * F32_SIZE_BYTES;
    // Every input byte writes at `filled`, which only advances on a byte that starts a code
    // point (a continuation's write is overwritten): no branch, no serial index chain. One
    // byte of slack takes the last continuation's write.
    let mut bytes = vec![0u8; len_bytes + 1];
    let mut filled = 0usize;
    let nexts = utf8_text.iter().skip(1).chain(std::iter::once(&0));
    for (&lead, &next) in utf8_text.iter().zip(nexts) {
        let pair_value = (lead << 6) | (next & 0x3F);
        let Some(slot) = bytes.get_mut(filled) else {
            break;
        };
        *slot = if lead < 0x80 { lead } else { pair_value };
        filled += usize::from((lead & 0xC0) != 0x80);
    }
    bytes[..len_bytes]
        .chunks_exact(F32_SIZE_BYTES)
        .map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]))
        .collect()
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

    use crate::test_rng::XorShift;

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
        assert_pickle_error(&pickle, &["a dict key is not valid UTF-8", "SETITEM"]);
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
    fn foreign_globals_are_refused_by_name() {
        for (module, name) in [
            ("os", "system"),
            ("builtins", "eval"),
            ("torch._utils", "_rebuild_tensor_v2"),
            ("posix", "system"),
            ("numpy.core.multiarray", "scalar"),
            ("collections", "OrderedDict"),
        ] {
            let pickle = write_pickle_with_global(module, name);
            assert_pickle_error(
                &pickle,
                &[
                    &format!("refused global {module}.{name}"),
                    "GLOBAL at byte 2",
                ],
            );
        }
        // An allowed global called with other arguments is refused too.
        assert_pickle_error(
            &write_pickle_with_global("numpy", "dtype"),
            &[
                "numpy.dtype(a str of 16 bytes) is not a call numpy's pickles make",
                "REDUCE",
            ],
        );
        assert_pickle_error(
            &write_pickle_with_global("numpy", "ndarray"),
            &["REDUCE calls numpy.ndarray directly"],
        );
    }

    #[test]
    fn foreign_opcodes_are_refused_by_name_and_offset() {
        // STACK_GLOBAL: 'os' 'system' pushed as strings, then 0x93 at byte 20.
        let stack_global =
            b"\x80\x02X\x02\x00\x00\x00osX\x06\x00\x00\x00system\x93X\x01\x00\x00\x00x\x85R.";
        assert_pickle_error(
            stack_global,
            &[
                "unsupported pickle opcode STACK_GLOBAL (0x93)",
                "at byte 20",
            ],
        );
        // INST: (i os\nsystem\n
        assert_pickle_error(b"\x80\x02(ios\nsystem\n.", &["INST (0x69)", "at byte 3"]);
        // BINPERSID after a persistent id string.
        assert_pickle_error(
            b"\x80\x02X\x01\x00\x00\x00xQ.",
            &["BINPERSID (0x51)", "at byte 8"],
        );
        for code in [
            b'o',
            0x81,
            0x82,
            0x8c,
            b'B',
            b'G',
            0x8a,
            0x95,
            0x94,
            b'R' + 100,
        ] {
            let pickle = [0x80, 2, code, b'.'];
            let message = pickle_message(load_numpy_dict(&pickle));
            assert!(message.contains("unsupported pickle opcode"), "{message}");
            assert!(message.contains(opcode::name(code)), "{message}");
            assert!(message.contains("at byte 2"), "{message}");
        }
        assert_pickle_error(
            &[0x80, 3, b'}', b'.'],
            &["pickle protocol 3", "PROTO at byte 0"],
        );
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
        assert_pickle_error(&pickle, &["the key \"k\" twice", "SETITEMS"]);
        // A non-str key: EMPTY_DICT, BININT1 1, NONE, SETITEM.
        assert_pickle_error(
            b"\x80\x02}K\x01Ns.",
            &["dict key is the int 1, not a str", "SETITEM at byte 6"],
        );
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
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        for round in 0..20_000 {
            let mut pickle = valid.clone();
            if round % 4 == 3 {
                // Pure noise after the protocol header.
                let len = (rng.next() % 64) as usize;
                pickle.truncate(2);
                pickle.extend((0..len).map(|_| rng.next() as u8));
            } else {
                for _ in 0..1 + rng.next() % 3 {
                    let at = (rng.next() % pickle.len() as u64) as usize;
                    pickle[at] = rng.next() as u8;
                }
                if round % 4 == 1 {
                    let cut = (rng.next() % pickle.len() as u64) as usize;
                    pickle.truncate(cut);
                }
            }
            let _ = load_numpy_dict(&pickle);
        }
    }
}
