//! [`Machine`]: the restricted pickle machine. It runs a pickle symbolically: data opcodes build
//! values, and the opcodes that would import or call code (`REDUCE`, `BUILD`, `NEWOBJ`,
//! `BINPERSID`) are interpreted only for the allow-listed globals, with the arguments those
//! globals take in torch's and numpy's pickles. Nothing is ever imported or called.
//!
//! A `GLOBAL` (or `STACK_GLOBAL`) outside the allow-list is kept as an opaque name: a class used
//! as a value (demucs' `"klass"`) is data. Calling it, instantiating it or giving it a state is
//! refused, naming it.

use std::collections::HashMap;
use std::rc::Rc;

use super::latin1::{latin1_len_bytes, utf8};
use super::opcode;
use super::tensor::{DType, StridedLayout};

/// Deepest tuples may nest (numpy's pickles nest 2 deep, torch's 3).
pub const MAX_TUPLE_NESTING: usize = 16;
/// Deepest the value stack may grow (a checkpoint needs a few dozen).
pub const MAX_STACK_DEPTH: usize = 4096;
/// Most nested `MARK`s (a checkpoint needs 3 or 4).
pub const MAX_MARK_DEPTH: usize = 256;
/// Most memo entries (the Spleeter checkpoints use 680).
pub const MAX_MEMO_ENTRIES: usize = 1 << 20;
/// Longest `module` or `name` of a global.
const MAX_GLOBAL_NAME_BYTES: usize = 256;
/// Most dimensions an array or tensor may have (numpy 2 allows 64).
pub const MAX_NUM_DIMS: usize = 64;
/// Lowest pickle protocol accepted (`torch.save` writes 2).
const MIN_PROTOCOL: u8 = 2;
/// Highest pickle protocol there is.
const MAX_PROTOCOL: u8 = 5;
/// Longest `LONG1` int accepted, in bytes (torch's legacy magic number takes 10).
const MAX_LONG_BYTES: usize = 16;
/// Version of numpy's `ndarray.__setstate__` state tuple.
const NDARRAY_STATE_VERSION: i64 = 1;
/// Version of numpy's `dtype.__setstate__` state tuple (without metadata).
const DTYPE_STATE_VERSION: i64 = 3;

/// What the allow-list says the pickle may call, in the words of the refusal message.
const ALLOWED_CALLS: &str = "collections.OrderedDict, torch._utils._rebuild_tensor_v2, \
     torch._utils._rebuild_parameter, fractions.Fraction, numpy's _reconstruct and dtype, \
     _codecs.encode";

/// Which persistent ids (`BINPERSID`) a pickle may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersistentIds {
    /// None: a plain pickle (a numpy dict, a legacy checkpoint's header pickles).
    Refused,
    /// `('storage', type, key, location, numel)`: a zip checkpoint's `data.pkl`.
    TorchZip,
    /// `('storage', type, key, location, numel, view)` and `('module', class, file, source)`:
    /// the main pickle of a legacy checkpoint.
    TorchLegacy,
}

/// The globals the machine interprets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// `numpy.core.multiarray._reconstruct` (or numpy 2's `numpy._core.multiarray`).
    Reconstruct,
    /// `numpy.ndarray`.
    NdArrayType,
    /// `numpy.dtype`.
    NumpyDtype,
    /// `_codecs.encode`.
    CodecsEncode,
    /// `collections.OrderedDict`.
    OrderedDict,
    /// `torch._utils._rebuild_tensor_v2`.
    RebuildTensorV2,
    /// `torch._utils._rebuild_parameter`.
    RebuildParameter,
    /// `fractions.Fraction`.
    Fraction,
    /// A storage class (`torch.FloatStorage`, `torch.cuda.HalfStorage`, `torch.UntypedStorage`
    /// …): only meaningful inside a persistent id.
    Storage(DType),
}

impl Known {
    /// The allowed global `module.name`, or `None`.
    fn from_names(module: &str, name: &str) -> Option<Self> {
        Some(match (module, name) {
            ("numpy.core.multiarray" | "numpy._core.multiarray", "_reconstruct") => {
                Self::Reconstruct
            }
            ("numpy", "ndarray") => Self::NdArrayType,
            ("numpy", "dtype") => Self::NumpyDtype,
            ("_codecs", "encode") => Self::CodecsEncode,
            ("collections", "OrderedDict") => Self::OrderedDict,
            ("torch._utils", "_rebuild_tensor_v2") => Self::RebuildTensorV2,
            ("torch._utils", "_rebuild_parameter") => Self::RebuildParameter,
            ("fractions", "Fraction") => Self::Fraction,
            ("torch" | "torch.cuda", storage) => Self::Storage(DType::from_storage_class(storage)?),
            _ => return None,
        })
    }
}

/// A global the pickle named.
#[derive(Debug, Clone, Copy)]
pub struct GlobalRef<'a> {
    /// Module, e.g. `torch._utils`.
    pub module: &'a str,
    /// Name in the module, e.g. `_rebuild_tensor_v2`.
    pub name: &'a str,
    /// What it is when the machine interprets it.
    pub known: Option<Known>,
}

/// A value on the stack or in the memo. Cheap to clone (strings borrow the input).
#[derive(Debug, Clone)]
pub enum Item<'a> {
    None,
    Bool(bool),
    Int(i64),
    /// A `LONG1` int that does not fit an `i64`.
    BigInt(i128),
    Float(f64),
    /// A str's UTF-8 bytes, checked where the string is used, so that a 13 MB latin-1 data
    /// string is scanned once.
    Str(&'a [u8]),
    /// A `bytes` object (`BINBYTES`, protocol 3 and above).
    Bytes(&'a [u8]),
    /// A `bytes` object from `_codecs.encode(text, 'latin1')` (protocol 2): `utf8` is `text`,
    /// checked to be UTF-8 whose code points are all < 256; those are the `len_bytes` bytes.
    Latin1Bytes {
        utf8: &'a [u8],
        len_bytes: usize,
    },
    Tuple(Rc<TupleItems<'a>>),
    Global(GlobalRef<'a>),
    /// `fractions.Fraction(numerator, denominator)`, reduced, denominator > 0.
    Fraction(i64, i64),
    /// Index into [`Machine::objects`]: objects are shared (memo) and mutated (`SETITEMS`,
    /// `APPENDS`, `BUILD`).
    Object(usize),
    /// Index into [`Machine::storage_views`].
    Storage(usize),
    /// Index into [`Machine::tensors`].
    Tensor(usize),
}

/// A tuple's items and how deeply tuples nest in it (bounded, so that dropping a value never
/// recurses deeply).
#[derive(Debug)]
pub struct TupleItems<'a> {
    /// The items.
    pub items: Vec<Item<'a>>,
    /// 1 + the deepest nesting among the items (0 for non-tuples).
    nesting: usize,
}

impl<'a> std::ops::Deref for TupleItems<'a> {
    type Target = [Item<'a>];

    fn deref(&self) -> &[Item<'a>] {
        &self.items
    }
}

/// A mutable object.
#[derive(Debug)]
pub enum Object<'a> {
    /// A `dict` or `collections.OrderedDict`: keys and values in insertion order (duplicate
    /// keys are found when the tree is read).
    Dict {
        /// The items.
        items: Vec<(Item<'a>, Item<'a>)>,
        /// Made by `collections.OrderedDict()`.
        is_ordered: bool,
    },
    /// A `list`.
    List(Vec<Item<'a>>),
    /// From numpy's `_reconstruct`; `None` until `BUILD` gives it its state.
    Array(Option<ArrayState<'a>>),
    /// From `numpy.dtype(kind, False, True)`.
    Dtype(DtypeState<'a>),
}

/// A numpy array's `BUILD` state, checked for shape but not yet for dtype or length.
#[derive(Debug)]
pub struct ArrayState<'a> {
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Product of `shape` (checked for overflow, also times 8).
    pub num_elements: usize,
    /// Index of the [`Object::Dtype`].
    pub dtype: usize,
    /// Column-major order.
    pub is_fortran: bool,
    /// The data.
    pub data: ArrayData<'a>,
}

/// A numpy array's data bytes.
#[derive(Debug, Clone, Copy)]
pub enum ArrayData<'a> {
    /// Protocol 2: UTF-8 of code points < 256 (checked) standing for `len_bytes` bytes.
    Latin1 {
        /// The text.
        utf8: &'a [u8],
        /// The number of bytes it stands for.
        len_bytes: usize,
    },
    /// Protocol 3 and above: the bytes.
    Raw(&'a [u8]),
}

impl ArrayData<'_> {
    /// Number of bytes.
    pub fn len_bytes(&self) -> usize {
        match self {
            Self::Latin1 { len_bytes, .. } => *len_bytes,
            Self::Raw(bytes) => bytes.len(),
        }
    }
}

/// A numpy dtype: its kind from the constructor, its byte order from `BUILD`.
#[derive(Debug)]
pub struct DtypeState<'a> {
    /// numpy's type code without byte order, e.g. `f4`.
    pub kind: &'a str,
    /// `<`, `>`, `|` or `=`; `None` until `BUILD`.
    pub byte_order: Option<&'a str>,
}

/// A storage a persistent id named: its key, element type and length in elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageRef<'a> {
    /// The key: `data/<key>` in a zip checkpoint, the order key of a legacy one.
    pub key: &'a str,
    /// Element type.
    pub dtype: DType,
    /// Length in elements.
    pub len: usize,
}

/// What a persistent id gives a tensor: a storage, or (legacy) a window of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageView {
    /// Index into [`Machine::storages`].
    pub storage: usize,
    /// First element of the window.
    pub offset: usize,
    /// Elements in the window.
    pub len: usize,
}

/// A tensor made by `_rebuild_tensor_v2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorRef {
    /// Index into [`Machine::storages`].
    pub storage: usize,
    /// Where its elements lie in the storage (offset from the storage's start, not the
    /// view's), checked against the view.
    pub layout: StridedLayout,
}

/// The symbolic pickle machine.
pub struct Machine<'a> {
    /// The whole input (a file may hold several pickles).
    input: &'a [u8],
    /// Offset of the next byte to read.
    position: usize,
    /// Which persistent ids are allowed.
    persistent: PersistentIds,
    /// Value stack.
    stack: Vec<Item<'a>>,
    /// Stack lengths at each open `MARK`.
    marks: Vec<usize>,
    /// Memo entries by index.
    memo: HashMap<u32, Item<'a>>,
    /// Objects made by the pickle.
    pub objects: Vec<Object<'a>>,
    /// Storages named by persistent ids, each key once.
    pub storages: Vec<StorageRef<'a>>,
    /// Index into `storages` by key.
    storage_index: HashMap<&'a str, usize>,
    /// What each storage persistent id gave.
    pub storage_views: Vec<StorageView>,
    /// Tensors made by `_rebuild_tensor_v2`.
    pub tensors: Vec<TensorRef>,
}

impl<'a> Machine<'a> {
    /// A machine that reads the pickle starting at `start` in `input`; byte offsets in its
    /// errors count from the start of `input`.
    pub fn new(input: &'a [u8], start: usize, persistent: PersistentIds) -> Self {
        Self {
            input,
            position: start.min(input.len()),
            persistent,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            objects: Vec::new(),
            storages: Vec::new(),
            storage_index: HashMap::new(),
            storage_views: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// Offset of the byte after the last one read (after `STOP` once [`run`](Self::run)
    /// succeeded).
    pub fn position(&self) -> usize {
        self.position
    }

    /// Runs to `STOP`; returns the pickled value. Errors name the opcode and its byte offset.
    pub fn run(&mut self) -> Result<Item<'a>, String> {
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
                return Ok(result);
            }
        }
    }

    /// Executes one opcode; returns the result on `STOP`.
    fn step(&mut self, code: u8) -> Result<Option<Item<'a>>, String> {
        match code {
            opcode::PROTO => {
                let protocol = self.read_u8()?;
                if !(MIN_PROTOCOL..=MAX_PROTOCOL).contains(&protocol) {
                    return Err(format!(
                        "pickle protocol {protocol}; only protocols {MIN_PROTOCOL} to \
                         {MAX_PROTOCOL} (torch.save writes {MIN_PROTOCOL}) are supported"
                    ));
                }
            }
            opcode::FRAME => {
                // Framing only groups opcodes for buffered reading.
                self.read_bytes(8)?;
            }
            opcode::EMPTY_DICT => self.push_object(Object::Dict {
                items: Vec::new(),
                is_ordered: false,
            })?,
            opcode::DICT => {
                let items = self.pop_to_mark()?;
                let pairs = pairs(items)?;
                self.push_object(Object::Dict {
                    items: pairs,
                    is_ordered: false,
                })?;
            }
            opcode::EMPTY_LIST => self.push_object(Object::List(Vec::new()))?,
            opcode::LIST => {
                let items = self.pop_to_mark()?;
                self.push_object(Object::List(items))?;
            }
            opcode::APPEND => {
                let item = self.pop()?;
                let list = self.top()?.clone();
                self.list_mut(&list)?.push(item);
            }
            opcode::APPENDS => {
                let items = self.pop_to_mark()?;
                let list = self.top()?.clone();
                self.list_mut(&list)?.extend(items);
            }
            opcode::EMPTY_TUPLE => self.push(make_tuple(Vec::new())?)?,
            opcode::TUPLE => {
                let items = self.pop_to_mark()?;
                self.push(make_tuple(items)?)?;
            }
            opcode::TUPLE1 | opcode::TUPLE2 | opcode::TUPLE3 => {
                let len = usize::from(code - opcode::TUPLE1) + 1;
                let items = self.pop_n(len)?;
                self.push(make_tuple(items)?)?;
            }
            opcode::MARK => {
                if self.marks.len() >= MAX_MARK_DEPTH {
                    return Err(format!("more than {MAX_MARK_DEPTH} nested MARKs"));
                }
                self.marks.push(self.stack.len());
            }
            opcode::POP => {
                if self.stack.len() > self.stack_floor() {
                    self.stack.pop();
                } else {
                    self.pop_to_mark()?;
                }
            }
            opcode::POP_MARK => {
                self.pop_to_mark()?;
            }
            opcode::BINUNICODE | opcode::SHORT_BINUNICODE | opcode::BINUNICODE8 => {
                let len_bytes = self.read_len(code)?;
                let text = self.read_bytes(len_bytes)?;
                self.push(Item::Str(text))?;
            }
            opcode::BINBYTES | opcode::SHORT_BINBYTES | opcode::BINBYTES8 => {
                let len_bytes = self.read_len(code)?;
                let bytes = self.read_bytes(len_bytes)?;
                self.push(Item::Bytes(bytes))?;
            }
            opcode::GLOBAL => {
                let module = self.read_line()?;
                let name = self.read_line()?;
                self.push(Item::Global(global(module, name)))?;
            }
            opcode::STACK_GLOBAL => {
                let name = self.pop()?;
                let module = self.pop()?;
                let (Item::Str(module), Item::Str(name)) = (&module, &name) else {
                    return Err(format!(
                        "STACK_GLOBAL names {} in {}, not a str in a str",
                        self.describe(&name),
                        self.describe(&module)
                    ));
                };
                let module = global_name(module)?;
                let name = global_name(name)?;
                self.push(Item::Global(global(module, name)))?;
            }
            opcode::BININT => {
                let bytes = self.read_bytes(4)?;
                let value = i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                self.push(Item::Int(i64::from(value)))?;
            }
            opcode::BININT1 => {
                let value = self.read_u8()?;
                self.push(Item::Int(i64::from(value)))?;
            }
            opcode::BININT2 => {
                let bytes = self.read_bytes(2)?;
                let value = u16::from_le_bytes([bytes[0], bytes[1]]);
                self.push(Item::Int(i64::from(value)))?;
            }
            opcode::LONG1 => {
                let len_bytes = usize::from(self.read_u8()?);
                if len_bytes > MAX_LONG_BYTES {
                    return Err(format!(
                        "an int of {len_bytes} bytes; at most {MAX_LONG_BYTES} are supported"
                    ));
                }
                let bytes = self.read_bytes(len_bytes)?;
                self.push(long_item(bytes))?;
            }
            opcode::BINFLOAT => {
                let bytes = self.read_bytes(8)?;
                let mut array = [0u8; 8];
                array.copy_from_slice(bytes);
                self.push(Item::Float(f64::from_be_bytes(array)))?;
            }
            opcode::NONE => self.push(Item::None)?,
            opcode::NEWTRUE => self.push(Item::Bool(true))?,
            opcode::NEWFALSE => self.push(Item::Bool(false))?,
            opcode::REDUCE => {
                let arguments = self.pop()?;
                let callable = self.pop()?;
                let result = self.reduce(callable, arguments)?;
                self.push(result)?;
            }
            opcode::NEWOBJ => {
                let _arguments = self.pop()?;
                let class = self.pop()?;
                return Err(self.refused(&class, "NEWOBJ would instantiate it"));
            }
            opcode::NEWOBJ_EX => {
                let _keywords = self.pop()?;
                let _arguments = self.pop()?;
                let class = self.pop()?;
                return Err(self.refused(&class, "NEWOBJ_EX would instantiate it"));
            }
            opcode::BUILD => {
                let state = self.pop()?;
                let target = self.top()?.clone();
                self.build(target, state)?;
            }
            opcode::SETITEMS => {
                let items = self.pop_to_mark()?;
                let items = pairs(items)?;
                let dict = self.top()?.clone();
                self.dict_mut(&dict)?.extend(items);
            }
            opcode::SETITEM => {
                let value = self.pop()?;
                let key = self.pop()?;
                let dict = self.top()?.clone();
                self.dict_mut(&dict)?.push((key, value));
            }
            opcode::BINPUT => {
                let index = u32::from(self.read_u8()?);
                self.memo_put(index)?;
            }
            opcode::LONG_BINPUT => {
                let index = self.read_u32()?;
                self.memo_put(index)?;
            }
            opcode::MEMOIZE => {
                let index = u32::try_from(self.memo.len()).unwrap_or(u32::MAX);
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
            opcode::BINPERSID => {
                let id = self.pop()?;
                let loaded = self.persistent_load(id)?;
                self.push(loaded)?;
            }
            opcode::STOP => return self.pop().map(Some),
            other => {
                return Err(format!(
                    "unsupported pickle opcode {} (0x{other:02x}): torch checkpoints never \
                     need it; this file may be malicious or from another writer",
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

    /// The length argument of a string or bytes opcode: 1, 4 or 8 bytes.
    fn read_len(&mut self, code: u8) -> Result<usize, String> {
        Ok(match code {
            opcode::SHORT_BINUNICODE | opcode::SHORT_BINBYTES => usize::from(self.read_u8()?),
            opcode::BINUNICODE8 | opcode::BINBYTES8 => {
                let bytes = self.read_bytes(8)?;
                let mut array = [0u8; 8];
                array.copy_from_slice(bytes);
                // Longer than the input is refused by `read_bytes`.
                usize::try_from(u64::from_le_bytes(array)).unwrap_or(usize::MAX)
            }
            _ => self.read_u32()? as usize,
        })
    }

    /// Reads a `\n`-terminated ASCII line (a `GLOBAL` argument), without the `\n`.
    fn read_line(&mut self) -> Result<&'a str, String> {
        let rest = &self.input[self.position..];
        let window = &rest[..rest.len().min(MAX_GLOBAL_NAME_BYTES + 1)];
        let Some(len) = window.iter().position(|&byte| byte == b'\n') else {
            return Err(if rest.len() <= MAX_GLOBAL_NAME_BYTES {
                "truncated pickle: the GLOBAL name has no end of line".to_string()
            } else {
                format!("a GLOBAL name is longer than {MAX_GLOBAL_NAME_BYTES} bytes")
            });
        };
        let line = global_name(&window[..len])?;
        self.position += len + 1;
        Ok(line)
    }

    fn push(&mut self, item: Item<'a>) -> Result<(), String> {
        if self.stack.len() >= MAX_STACK_DEPTH {
            return Err(format!(
                "the stack grows deeper than {MAX_STACK_DEPTH} values"
            ));
        }
        self.stack.push(item);
        Ok(())
    }

    fn push_object(&mut self, object: Object<'a>) -> Result<(), String> {
        self.objects.push(object);
        self.push(Item::Object(self.objects.len() - 1))
    }

    /// Lowest stack index the current opcode may touch (Python starts a fresh stack at MARK).
    fn stack_floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn pop(&mut self) -> Result<Item<'a>, String> {
        if self.stack.len() <= self.stack_floor() {
            return Err("stack underflow: the opcode needs a value the pickle did not push".into());
        }
        self.stack
            .pop()
            .ok_or_else(|| "stack underflow".to_string())
    }

    fn top(&self) -> Result<&Item<'a>, String> {
        if self.stack.len() <= self.stack_floor() {
            return Err("stack underflow: the opcode needs a value the pickle did not push".into());
        }
        self.stack
            .last()
            .ok_or_else(|| "stack underflow".to_string())
    }

    /// Pops the top `len` values, oldest first.
    fn pop_n(&mut self, len: usize) -> Result<Vec<Item<'a>>, String> {
        let available = self.stack.len().saturating_sub(self.stack_floor());
        if available < len {
            return Err(format!(
                "stack underflow: needs {len} values, {available} are above the last MARK"
            ));
        }
        Ok(self.stack.split_off(self.stack.len() - len))
    }

    /// Pops everything above the last `MARK`, oldest first, and the mark.
    fn pop_to_mark(&mut self) -> Result<Vec<Item<'a>>, String> {
        let mark = self
            .marks
            .pop()
            .ok_or_else(|| "no MARK to collect values from".to_string())?;
        Ok(self.stack.split_off(mark.min(self.stack.len())))
    }

    fn memo_put(&mut self, index: u32) -> Result<(), String> {
        let item = self.top()?.clone();
        if self.memo.len() >= MAX_MEMO_ENTRIES && !self.memo.contains_key(&index) {
            return Err(format!("more than {MAX_MEMO_ENTRIES} memo entries"));
        }
        self.memo.insert(index, item);
        Ok(())
    }

    fn memo_get(&mut self, index: u32) -> Result<(), String> {
        let item = self
            .memo
            .get(&index)
            .cloned()
            .ok_or_else(|| format!("memo slot {index} was never set"))?;
        self.push(item)
    }

    /// The list `item` is, for `APPEND(S)`.
    fn list_mut(&mut self, item: &Item<'a>) -> Result<&mut Vec<Item<'a>>, String> {
        let described = self.describe(item);
        match item {
            Item::Object(id) => match self.objects.get_mut(*id) {
                Some(Object::List(items)) => Ok(items),
                _ => Err(format!("APPEND(S) on {described}, not a list")),
            },
            _ => Err(format!("APPEND(S) on {described}, not a list")),
        }
    }

    /// The dict `item` is, for `SETITEM(S)`.
    fn dict_mut(&mut self, item: &Item<'a>) -> Result<&mut Vec<(Item<'a>, Item<'a>)>, String> {
        let described = self.describe(item);
        match item {
            Item::Object(id) => match self.objects.get_mut(*id) {
                Some(Object::Dict { items, .. }) => Ok(items),
                _ => Err(format!("SETITEM(S) on {described}, not a dict")),
            },
            _ => Err(format!("SETITEM(S) on {described}, not a dict")),
        }
    }

    /// What `item` is, for error messages.
    pub fn describe(&self, item: &Item<'_>) -> String {
        match item {
            Item::None => "None".to_string(),
            Item::Bool(value) => format!("the bool {}", if *value { "True" } else { "False" }),
            Item::Int(value) => format!("the int {value}"),
            Item::BigInt(value) => format!("the int {value}"),
            Item::Float(value) => format!("the float {value}"),
            Item::Str(text) => format!("a str of {} bytes", text.len()),
            Item::Bytes(bytes) => format!("a bytes object of {} bytes", bytes.len()),
            Item::Latin1Bytes { len_bytes, .. } => format!("a bytes object of {len_bytes} bytes"),
            Item::Tuple(items) => format!("a tuple of {} items", items.len()),
            Item::Global(global) => format!("the global {}.{}", global.module, global.name),
            Item::Fraction(numerator, denominator) => {
                format!("the fraction {numerator}/{denominator}")
            }
            Item::Object(id) => match self.objects.get(*id) {
                Some(Object::Dict {
                    is_ordered: true, ..
                }) => "an OrderedDict".to_string(),
                Some(Object::Dict { .. }) => "a dict".to_string(),
                Some(Object::List(_)) => "a list".to_string(),
                Some(Object::Array(_)) => "a numpy array".to_string(),
                Some(Object::Dtype(_)) => "a numpy dtype".to_string(),
                None => "a missing object".to_string(),
            },
            Item::Storage(_) => "a torch storage".to_string(),
            Item::Tensor(_) => "a tensor".to_string(),
        }
    }

    /// The refusal for calling, instantiating or setting the state of `item`.
    fn refused(&self, item: &Item<'a>, action: &str) -> String {
        match item {
            Item::Global(global) => {
                let why = if matches!(global.name, "bytes")
                    && matches!(global.module, "__builtin__" | "builtins")
                {
                    "CPython pickles empty bytes this way, so the checkpoint holds a \
                     zero-element array, which is not supported"
                        .to_string()
                } else {
                    format!("only {ALLOWED_CALLS} may be called; this checkpoint may be malicious")
                };
                format!(
                    "refused global {}.{}: {action}, and {why}",
                    global.module, global.name
                )
            }
            other => format!(
                "{action} on {}, which is not an allowed global",
                self.describe(other)
            ),
        }
    }

    /// `callable(*arguments)` for the calls torch's and numpy's pickles make.
    fn reduce(&mut self, callable: Item<'a>, arguments: Item<'a>) -> Result<Item<'a>, String> {
        let Item::Global(global) = callable else {
            return Err(self.refused(&callable, "REDUCE would call it"));
        };
        let Some(known) = global.known else {
            return Err(self.refused(&callable, "REDUCE would call it"));
        };
        let Item::Tuple(arguments) = arguments else {
            return Err(format!(
                "REDUCE passes {} to {}.{}, not an argument tuple",
                self.describe(&arguments),
                global.module,
                global.name
            ));
        };
        let unexpected = |machine: &Self| {
            let described: Vec<String> = arguments
                .iter()
                .map(|item| machine.describe(item))
                .collect();
            format!(
                "{}.{}({}) is not a call torch's or numpy's pickles make",
                global.module,
                global.name,
                described.join(", ")
            )
        };
        match known {
            Known::Reconstruct => match &arguments[..] {
                [Item::Global(GlobalRef {
                    known: Some(Known::NdArrayType),
                    ..
                }), Item::Tuple(base_shape), base]
                    if matches!(&base_shape[..], [Item::Int(0)])
                        && matches!(
                            base,
                            Item::Latin1Bytes { utf8: b"b", .. } | Item::Bytes(b"b")
                        ) =>
                {
                    self.objects.push(Object::Array(None));
                    Ok(Item::Object(self.objects.len() - 1))
                }
                _ => Err(unexpected(self)),
            },
            Known::NumpyDtype => match &arguments[..] {
                [Item::Str(kind), align, copy]
                    if as_flag(align) == Some(false) && as_flag(copy) == Some(true) =>
                {
                    let dtype = DtypeState {
                        kind: utf8(kind, "the dtype kind")?,
                        byte_order: None,
                    };
                    self.objects.push(Object::Dtype(dtype));
                    Ok(Item::Object(self.objects.len() - 1))
                }
                _ => Err(unexpected(self)),
            },
            Known::CodecsEncode => match &arguments[..] {
                [Item::Str(text), Item::Str(b"latin1")] => Ok(Item::Latin1Bytes {
                    utf8: text,
                    len_bytes: latin1_len_bytes(text)?,
                }),
                _ => Err(unexpected(self)),
            },
            Known::NdArrayType => Err(format!(
                "REDUCE calls numpy.ndarray directly; it is only accepted as the first argument \
                 of _reconstruct ({})",
                unexpected(self)
            )),
            Known::OrderedDict => match &arguments[..] {
                [] => {
                    self.objects.push(Object::Dict {
                        items: Vec::new(),
                        is_ordered: true,
                    });
                    Ok(Item::Object(self.objects.len() - 1))
                }
                _ => Err(unexpected(self)),
            },
            Known::RebuildTensorV2 => self
                .rebuild_tensor(&arguments)
                .map_err(|why| format!("{why}, in {}", unexpected(self))),
            Known::RebuildParameter => match &arguments[..] {
                [Item::Tensor(tensor), requires_grad, hooks]
                    if as_flag(requires_grad).is_some() && self.is_empty_hooks(hooks) =>
                {
                    Ok(Item::Tensor(*tensor))
                }
                _ => Err(unexpected(self)),
            },
            Known::Fraction => {
                let fraction = match &arguments[..] {
                    [Item::Int(numerator), Item::Int(denominator)] => {
                        reduce_fraction(*numerator, *denominator)
                    }
                    [Item::Int(numerator)] => reduce_fraction(*numerator, 1),
                    [Item::Str(text)] => parse_fraction(text),
                    _ => None,
                };
                let (numerator, denominator) = fraction.ok_or_else(|| unexpected(self))?;
                Ok(Item::Fraction(numerator, denominator))
            }
            Known::Storage(_) => Err(format!(
                "REDUCE calls the storage class {}.{}; storages come from persistent ids only",
                global.module, global.name
            )),
        }
    }

    /// `_rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
    /// backward_hooks[, metadata])`, checked against the storage's length.
    fn rebuild_tensor(&mut self, arguments: &[Item<'a>]) -> Result<Item<'a>, String> {
        let (storage, offset, size, stride, requires_grad, hooks, metadata) = match arguments {
            [storage, offset, size, stride, requires_grad, hooks] => {
                (storage, offset, size, stride, requires_grad, hooks, None)
            }
            [storage, offset, size, stride, requires_grad, hooks, metadata] => (
                storage,
                offset,
                size,
                stride,
                requires_grad,
                hooks,
                Some(metadata),
            ),
            _ => return Err(format!("{} arguments instead of 6 or 7", arguments.len())),
        };
        let Item::Storage(view) = storage else {
            return Err(format!("the storage is {}", self.describe(storage)));
        };
        let view = self.storage_views[*view].clone();
        let offset = as_size(offset).ok_or("the storage offset is not a size")?;
        let shape = self.sizes(size).ok_or("the size is not a tuple of sizes")?;
        let stride = self
            .sizes(stride)
            .ok_or("the stride is not a tuple of sizes")?;
        if shape.len() != stride.len() {
            return Err(format!(
                "the size has {} dimensions and the stride {}",
                shape.len(),
                stride.len()
            ));
        }
        if as_flag(requires_grad).is_none() {
            return Err("requires_grad is not a bool".to_string());
        }
        if !self.is_empty_hooks(hooks) {
            return Err("the tensor has backward hooks".to_string());
        }
        if let Some(metadata) = metadata {
            if !self.is_plain_metadata(metadata) {
                return Err(
                    "the tensor's metadata sets a conjugate or negative bit (not supported)"
                        .to_string(),
                );
            }
        }
        let dtype = self.storages[view.storage].dtype;
        // A window of a legacy storage: check against the window, store from the storage.
        let layout = StridedLayout::new(dtype, offset, shape, stride, view.len)?;
        let layout = StridedLayout {
            offset: layout.offset + view.offset,
            ..layout
        };
        self.tensors.push(TensorRef {
            storage: view.storage,
            layout,
        });
        Ok(Item::Tensor(self.tensors.len() - 1))
    }

    /// A tuple of non-negative ints, at most [`MAX_NUM_DIMS`] of them.
    fn sizes(&self, item: &Item<'a>) -> Option<Vec<usize>> {
        let Item::Tuple(items) = item else {
            return None;
        };
        if items.len() > MAX_NUM_DIMS {
            return None;
        }
        items.iter().map(as_size).collect()
    }

    /// Whether `item` is `None` or an empty dict (a tensor's `backward_hooks`).
    fn is_empty_hooks(&self, item: &Item<'a>) -> bool {
        match item {
            Item::None => true,
            Item::Object(id) => matches!(
                self.objects.get(*id),
                Some(Object::Dict { items, .. }) if items.is_empty()
            ),
            _ => false,
        }
    }

    /// Whether a tensor's metadata (`{'conj': bool, 'neg': bool}`) sets no bit.
    fn is_plain_metadata(&self, item: &Item<'a>) -> bool {
        match item {
            Item::None => true,
            Item::Object(id) => match self.objects.get(*id) {
                Some(Object::Dict { items, .. }) => {
                    items.iter().all(|(_, value)| as_flag(value) == Some(false))
                }
                _ => false,
            },
            _ => false,
        }
    }

    /// `target.__setstate__(state)` for numpy arrays and dtypes, and an OrderedDict's
    /// attributes (a state dict's `_metadata`, dropped).
    fn build(&mut self, target: Item<'a>, state: Item<'a>) -> Result<(), String> {
        let id = match target {
            Item::Object(id) => id,
            other => return Err(self.refused(&other, "BUILD would set its state")),
        };
        if let Some(Object::Dict {
            is_ordered: true, ..
        }) = self.objects.get(id)
        {
            // An OrderedDict subclass instance's __dict__, e.g. `{'_metadata': …}`.
            return match &state {
                Item::Object(state_id)
                    if matches!(self.objects.get(*state_id), Some(Object::Dict { .. })) =>
                {
                    Ok(())
                }
                other => Err(format!(
                    "BUILD gives an OrderedDict the state {}, not a dict of attributes",
                    self.describe(other)
                )),
            };
        }
        let Item::Tuple(state) = state else {
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
            _ => Err(format!(
                "BUILD on {}; only numpy arrays, dtypes and OrderedDicts take a state",
                self.describe(&Item::Object(id))
            )),
        }
    }

    /// Checks an `ndarray.__setstate__` tuple `(1, shape, dtype, is_fortran, data)`.
    fn array_state(&self, state: &[Item<'a>]) -> Result<ArrayState<'a>, String> {
        let [version, Item::Tuple(dims), Item::Object(dtype), fortran, data] = state else {
            let described: Vec<String> = state.iter().map(|item| self.describe(item)).collect();
            return Err(format!(
                "array state ({}) is not numpy's (version, shape, dtype, is_fortran, data)",
                described.join(", ")
            ));
        };
        let data = match data {
            Item::Latin1Bytes { utf8, len_bytes } => ArrayData::Latin1 {
                utf8,
                len_bytes: *len_bytes,
            },
            Item::Bytes(bytes) => ArrayData::Raw(bytes),
            other => return Err(format!("array data is {}, not bytes", self.describe(other))),
        };
        if !matches!(version, Item::Int(NDARRAY_STATE_VERSION)) {
            return Err(format!(
                "array state version is {}, numpy writes {NDARRAY_STATE_VERSION}",
                self.describe(version)
            ));
        }
        if !matches!(self.objects.get(*dtype), Some(Object::Dtype(_))) {
            return Err(format!(
                "array dtype is {}, not a numpy dtype",
                self.describe(&Item::Object(*dtype))
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
            let size = as_size(dim)
                .ok_or_else(|| format!("array dimension is {}, not a size", self.describe(dim)))?;
            num_elements = num_elements
                .checked_mul(size)
                .filter(|count| count.checked_mul(8).is_some())
                .ok_or_else(|| "array shape's product overflows".to_string())?;
            shape.push(size);
        }
        Ok(ArrayState {
            shape,
            num_elements,
            dtype: *dtype,
            is_fortran,
            data,
        })
    }

    /// Checks a `dtype.__setstate__` tuple `(3, byte_order, None, None, None, elsize,
    /// alignment, flags)` and returns the byte order.
    fn dtype_byte_order(&self, state: &[Item<'a>]) -> Result<&'a str, String> {
        match state {
            [Item::Int(DTYPE_STATE_VERSION), Item::Str(byte_order), Item::None, Item::None, Item::None, Item::Int(_), Item::Int(_), Item::Int(_)] => {
                utf8(byte_order, "the dtype byte order")
            }
            _ => {
                let described: Vec<String> = state.iter().map(|item| self.describe(item)).collect();
                Err(format!(
                    "dtype state ({}) is not a plain numeric dtype's (3, byte order, None, None, \
                     None, size, alignment, flags); structured, subarray and metadata dtypes are \
                     not supported",
                    described.join(", ")
                ))
            }
        }
    }

    /// torch's `persistent_load`: a storage, or (legacy) an `nn.Module` class kept as a name.
    fn persistent_load(&mut self, id: Item<'a>) -> Result<Item<'a>, String> {
        if self.persistent == PersistentIds::Refused {
            return Err(format!(
                "a persistent id ({}) outside a torch checkpoint's main pickle",
                self.describe(&id)
            ));
        }
        let Item::Tuple(fields) = &id else {
            return Err(format!(
                "the persistent id is {}, not a tuple",
                self.describe(&id)
            ));
        };
        match (&fields[..], self.persistent) {
            (
                [Item::Str(b"storage"), storage_type, Item::Str(key), Item::Str(location), numel],
                PersistentIds::TorchZip,
            ) => self.load_storage(storage_type, key, location, numel, &Item::None),
            (
                [Item::Str(b"storage"), storage_type, Item::Str(key), Item::Str(location), numel, view],
                PersistentIds::TorchLegacy,
            ) => self.load_storage(storage_type, key, location, numel, view),
            (
                [Item::Str(b"module"), module @ Item::Global(_), _source_file, _source],
                PersistentIds::TorchLegacy,
            ) => Ok(module.clone()),
            _ => {
                let described: Vec<String> =
                    fields.iter().map(|item| self.describe(item)).collect();
                Err(format!(
                    "the persistent id ({}) is not a torch storage's",
                    described.join(", ")
                ))
            }
        }
    }

    /// Registers the storage `key` (each key once, with one dtype and length) and returns the
    /// storage or the window of it that `view` names.
    fn load_storage(
        &mut self,
        storage_type: &Item<'a>,
        key: &'a [u8],
        location: &'a [u8],
        numel: &Item<'a>,
        view: &Item<'a>,
    ) -> Result<Item<'a>, String> {
        let dtype = match storage_type {
            Item::Global(GlobalRef {
                known: Some(Known::Storage(dtype)),
                ..
            }) => *dtype,
            other => {
                return Err(format!(
                    "the storage type is {}, not one of torch's storage classes (quantized \
                     storages are not supported)",
                    self.describe(other)
                ))
            }
        };
        let key = utf8(key, "a storage key")?;
        utf8(location, "a storage location")?;
        let len = as_size(numel).ok_or_else(|| {
            format!(
                "storage {key}'s length is {}, not a size",
                self.describe(numel)
            )
        })?;
        let storage = match self.storage_index.get(key) {
            Some(&index) => {
                let known = &self.storages[index];
                if (known.dtype, known.len) != (dtype, len) {
                    return Err(format!(
                        "storage {key} is named as {len} {dtype} elements and as {} {} elements",
                        known.len, known.dtype
                    ));
                }
                index
            }
            None => {
                self.storages.push(StorageRef { key, dtype, len });
                self.storage_index.insert(key, self.storages.len() - 1);
                self.storages.len() - 1
            }
        };
        let window = match view {
            Item::None => StorageView {
                storage,
                offset: 0,
                len,
            },
            Item::Tuple(fields) => match &fields[..] {
                [Item::Str(_), offset, view_len] => {
                    let (Some(offset), Some(view_len)) = (as_size(offset), as_size(view_len))
                    else {
                        return Err(format!("storage {key}'s view is not (key, offset, size)"));
                    };
                    if offset.checked_add(view_len).is_none_or(|end| end > len) {
                        return Err(format!(
                            "storage {key}'s view of {view_len} elements at {offset} lies past \
                             its {len} elements"
                        ));
                    }
                    StorageView {
                        storage,
                        offset,
                        len: view_len,
                    }
                }
                _ => return Err(format!("storage {key}'s view is not (key, offset, size)")),
            },
            other => {
                return Err(format!(
                    "storage {key}'s view is {}, not None or a tuple",
                    self.describe(other)
                ))
            }
        };
        self.storage_views.push(window);
        Ok(Item::Storage(self.storage_views.len() - 1))
    }
}

/// The global `module.name`, classified.
fn global<'a>(module: &'a str, name: &'a str) -> GlobalRef<'a> {
    GlobalRef {
        module,
        name,
        known: Known::from_names(module, name),
    }
}

/// A global's module or name: ASCII (Python identifiers and dots), at most
/// [`MAX_GLOBAL_NAME_BYTES`] long.
fn global_name(bytes: &[u8]) -> Result<&str, String> {
    if bytes.len() > MAX_GLOBAL_NAME_BYTES {
        return Err(format!(
            "a global's name is longer than {MAX_GLOBAL_NAME_BYTES} bytes"
        ));
    }
    std::str::from_utf8(bytes)
        .ok()
        .filter(|name| name.is_ascii())
        .ok_or_else(|| "a global's name is not ASCII".to_string())
}

/// A `LONG1` int from its little-endian two's-complement bytes (at most 16).
fn long_item(bytes: &[u8]) -> Item<'static> {
    let mut value: i128 = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        value |= i128::from(byte) << (8 * index);
    }
    // Sign-extend from the last byte's top bit.
    let bits = 8 * bytes.len() as u32;
    if (1..128).contains(&bits) && value >> (bits - 1) & 1 == 1 {
        value -= 1i128 << bits;
    }
    match i64::try_from(value) {
        Ok(value) => Item::Int(value),
        Err(_) => Item::BigInt(value),
    }
}

/// Key-value pairs from a flat list (`SETITEMS`, `DICT`).
fn pairs(items: Vec<Item<'_>>) -> Result<Vec<(Item<'_>, Item<'_>)>, String> {
    if !items.len().is_multiple_of(2) {
        return Err(format!(
            "an odd number of items ({}): a key without a value",
            items.len()
        ));
    }
    let mut pairs = Vec::with_capacity(items.len() / 2);
    let mut items = items.into_iter();
    while let (Some(key), Some(value)) = (items.next(), items.next()) {
        pairs.push((key, value));
    }
    Ok(pairs)
}

/// A tuple of `items`, refusing nesting deeper than [`MAX_TUPLE_NESTING`].
fn make_tuple(items: Vec<Item<'_>>) -> Result<Item<'_>, String> {
    let deepest = items
        .iter()
        .map(|item| match item {
            Item::Tuple(tuple) => tuple.nesting,
            _ => 0,
        })
        .max()
        .unwrap_or(0);
    if deepest >= MAX_TUPLE_NESTING {
        return Err(format!("tuples nest deeper than {MAX_TUPLE_NESTING}"));
    }
    Ok(Item::Tuple(Rc::new(TupleItems {
        items,
        nesting: deepest + 1,
    })))
}

/// `True`/`False` or the ints 1/0 (older numpy and torch) as a bool.
pub fn as_flag(item: &Item<'_>) -> Option<bool> {
    match item {
        Item::Bool(flag) => Some(*flag),
        Item::Int(0) => Some(false),
        Item::Int(1) => Some(true),
        _ => None,
    }
}

/// A non-negative int as a `usize`.
fn as_size(item: &Item<'_>) -> Option<usize> {
    match item {
        Item::Int(value) => usize::try_from(*value).ok(),
        _ => None,
    }
}

/// `numerator / denominator` in lowest terms with a positive denominator, or `None` for a zero
/// denominator or an overflow.
fn reduce_fraction(numerator: i64, denominator: i64) -> Option<(i64, i64)> {
    if denominator == 0 {
        return None;
    }
    let (mut a, mut b) = (numerator.unsigned_abs(), denominator.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    let divisor = i64::try_from(a.max(1)).ok()?;
    let sign = if denominator < 0 { -1 } else { 1 };
    Some((
        (numerator / divisor).checked_mul(sign)?,
        (denominator / divisor).checked_mul(sign)?,
    ))
}

/// `Fraction('n/d')` or `Fraction('n')`, as `str(Fraction)` writes them (older Pythons pickle
/// a fraction as its string).
fn parse_fraction(text: &[u8]) -> Option<(i64, i64)> {
    let text = std::str::from_utf8(text).ok()?;
    let (numerator, denominator) = text.split_once('/').unwrap_or((text, "1"));
    reduce_fraction(numerator.parse().ok()?, denominator.parse().ok()?)
}
