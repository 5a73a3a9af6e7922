//! [`Machine`]: the restricted pickle machine. It runs a pickle symbolically: data opcodes build
//! values, and the opcodes that would import or call code (`REDUCE`, `BUILD`, `NEWOBJ`,
//! `BINPERSID`) are interpreted only for the allow-listed globals, with the arguments those
//! globals take in torch's and numpy's pickles (`calls.rs`, `setstate.rs`, `persistent.rs`).
//! Nothing is ever imported or called.
//!
//! A `GLOBAL` (or `STACK_GLOBAL`) outside the allow-list is kept as an opaque name: a class used
//! as a value (demucs' `"klass"`) is data. Calling it, instantiating it or giving it a state is
//! refused, naming it.
//!
//! Every item that outlives the stack (in a list, dict, tuple, the memo or an object) is charged
//! to the read's [`ReadBudget`] before it is stored.

use std::collections::HashMap;
use std::mem::size_of;

use super::item::{
    global, global_name, long_item, make_tuple, pairs, Item, Object, MAX_GLOBAL_NAME_BYTES,
};
use super::opcode;
pub use super::storage_refs::{PersistentIds, StorageRef, StorageView, TensorRef};
use crate::budget::ReadBudget;

/// Deepest the value stack may grow (a checkpoint needs a few dozen).
pub const MAX_STACK_DEPTH: usize = 4096;
/// Most nested `MARK`s (a checkpoint needs 3 or 4).
pub const MAX_MARK_DEPTH: usize = 256;
/// Most memo entries (the Spleeter checkpoints use 680).
pub const MAX_MEMO_ENTRIES: usize = 1 << 20;
/// Most dimensions an array or tensor may have (numpy 2 allows 64).
pub const MAX_NUM_DIMS: usize = 64;
/// Lowest pickle protocol accepted (`torch.save` writes 2).
const MIN_PROTOCOL: u8 = 2;
/// Highest pickle protocol there is.
const MAX_PROTOCOL: u8 = 5;
/// Longest `LONG1` int accepted, in bytes (torch's legacy magic number takes 10).
const MAX_LONG_BYTES: usize = 16;
/// What a memo entry costs besides its item (the key and the hash table's slot).
const MEMO_ENTRY_OVERHEAD_BYTES: usize = 16;

/// The symbolic pickle machine.
pub struct Machine<'a> {
    /// The whole input (a file may hold several pickles).
    input: &'a [u8],
    /// Offset of the next byte to read.
    position: usize,
    /// Which persistent ids are allowed.
    pub(super) persistent: PersistentIds,
    /// The read's memory budget, charged for everything that outlives the stack.
    pub(super) budget: &'a ReadBudget,
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
    pub(super) storage_index: HashMap<&'a str, usize>,
    /// What each storage persistent id gave.
    pub storage_views: Vec<StorageView>,
    /// Tensors made by `_rebuild_tensor_v2`.
    pub tensors: Vec<TensorRef>,
}

impl<'a> Machine<'a> {
    /// A machine that reads the pickle starting at `start` in `input`, charging `budget`; byte
    /// offsets in its errors count from the start of `input`.
    pub fn new(
        input: &'a [u8],
        start: usize,
        persistent: PersistentIds,
        budget: &'a ReadBudget,
    ) -> Self {
        Self {
            input,
            position: start.min(input.len()),
            persistent,
            budget,
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

    /// The read's budget (the value tree charges it too).
    pub fn budget(&self) -> &'a ReadBudget {
        self.budget
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
        if code == opcode::STOP {
            return self.pop().map(Some);
        }
        let is_known = self.step_stack(code)?
            || self.step_container(code)?
            || self.step_scalar(code)?
            || self.step_call(code)?;
        if is_known {
            Ok(None)
        } else {
            Err(format!(
                "unsupported pickle opcode {} (0x{code:02x}): torch checkpoints never need it; \
                 this file may be malicious or from another writer",
                opcode::name(code)
            ))
        }
    }

    /// Protocol, framing, marks, pops and the memo; `false` for other opcodes.
    fn step_stack(&mut self, code: u8) -> Result<bool, String> {
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
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Dicts, lists and tuples; `false` for other opcodes. Every item that enters a container
    /// is charged.
    fn step_container(&mut self, code: u8) -> Result<bool, String> {
        match code {
            opcode::EMPTY_DICT => self.push_object(Object::Dict {
                items: Vec::new(),
                is_ordered: false,
            })?,
            opcode::DICT => {
                let items = self.pop_to_mark()?;
                self.charge_items(items.len())?;
                let pairs = pairs(items)?;
                self.push_object(Object::Dict {
                    items: pairs,
                    is_ordered: false,
                })?;
            }
            opcode::SETITEMS => {
                let items = self.pop_to_mark()?;
                self.charge_items(items.len())?;
                let items = pairs(items)?;
                let dict = self.top()?.clone();
                self.dict_mut(&dict)?.extend(items);
            }
            opcode::SETITEM => {
                let value = self.pop()?;
                let key = self.pop()?;
                self.charge_items(2)?;
                let dict = self.top()?.clone();
                self.dict_mut(&dict)?.push((key, value));
            }
            opcode::EMPTY_LIST => self.push_object(Object::List(Vec::new()))?,
            opcode::LIST => {
                let items = self.pop_to_mark()?;
                self.charge_items(items.len())?;
                self.push_object(Object::List(items))?;
            }
            opcode::APPEND => {
                let item = self.pop()?;
                self.charge_items(1)?;
                let list = self.top()?.clone();
                self.list_mut(&list)?.push(item);
            }
            opcode::APPENDS => {
                let items = self.pop_to_mark()?;
                self.charge_items(items.len())?;
                let list = self.top()?.clone();
                self.list_mut(&list)?.extend(items);
            }
            opcode::EMPTY_TUPLE => self.push(make_tuple(Vec::new())?)?,
            opcode::TUPLE => {
                let items = self.pop_to_mark()?;
                self.charge_items(items.len() + 1)?;
                self.push(make_tuple(items)?)?;
            }
            opcode::TUPLE1 | opcode::TUPLE2 | opcode::TUPLE3 => {
                let len = usize::from(code - opcode::TUPLE1) + 1;
                let items = self.pop_n(len)?;
                self.charge_items(len + 1)?;
                self.push(make_tuple(items)?)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Strings, bytes, ints, floats, bools and None; `false` for other opcodes. A string is a
    /// slice of the input: nothing to charge.
    fn step_scalar(&mut self, code: u8) -> Result<bool, String> {
        let item = match code {
            opcode::BINUNICODE | opcode::SHORT_BINUNICODE | opcode::BINUNICODE8 => {
                let len_bytes = self.read_len(code)?;
                Item::Str(self.read_bytes(len_bytes)?)
            }
            opcode::BINBYTES | opcode::SHORT_BINBYTES | opcode::BINBYTES8 => {
                let len_bytes = self.read_len(code)?;
                Item::Bytes(self.read_bytes(len_bytes)?)
            }
            opcode::BININT => {
                let bytes = self.read_bytes(4)?;
                Item::Int(i64::from(i32::from_le_bytes([
                    bytes[0], bytes[1], bytes[2], bytes[3],
                ])))
            }
            opcode::BININT1 => Item::Int(i64::from(self.read_u8()?)),
            opcode::BININT2 => {
                let bytes = self.read_bytes(2)?;
                Item::Int(i64::from(u16::from_le_bytes([bytes[0], bytes[1]])))
            }
            opcode::LONG1 => {
                let len_bytes = usize::from(self.read_u8()?);
                if len_bytes > MAX_LONG_BYTES {
                    return Err(format!(
                        "an int of {len_bytes} bytes; at most {MAX_LONG_BYTES} are supported"
                    ));
                }
                long_item(self.read_bytes(len_bytes)?)
            }
            opcode::BINFLOAT => {
                let mut array = [0u8; 8];
                array.copy_from_slice(self.read_bytes(8)?);
                Item::Float(f64::from_be_bytes(array))
            }
            opcode::NONE => Item::None,
            opcode::NEWTRUE => Item::Bool(true),
            opcode::NEWFALSE => Item::Bool(false),
            _ => return Ok(false),
        };
        self.push(item)?;
        Ok(true)
    }

    /// Globals, calls, instantiations, states and persistent ids; `false` for other opcodes.
    fn step_call(&mut self, code: u8) -> Result<bool, String> {
        match code {
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
            opcode::BINPERSID => {
                let id = self.pop()?;
                let loaded = self.persistent_load(id)?;
                self.push(loaded)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Charges `count` items entering a container.
    fn charge_items(&self, count: usize) -> Result<(), String> {
        self.budget
            .charge_each(count, size_of::<Item<'a>>(), "the pickle's containers")
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
        let item = self.new_object(object)?;
        self.push(item)
    }

    /// Charges and stores `object`; returns the item that points to it.
    pub(super) fn new_object(&mut self, object: Object<'a>) -> Result<Item<'a>, String> {
        self.budget
            .charge_each(1, size_of::<Object<'a>>(), "the pickle's objects")?;
        self.objects.push(object);
        Ok(Item::Object(self.objects.len() - 1))
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
        if !self.memo.contains_key(&index) {
            self.budget.charge_each(
                1,
                size_of::<Item<'a>>() + MEMO_ENTRY_OVERHEAD_BYTES,
                "the pickle's memo",
            )?;
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
}
