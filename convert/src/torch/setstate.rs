//! `BUILD` (`__setstate__`) for what accepts a state: numpy arrays (`(1, shape, dtype,
//! is_fortran, data)`), numpy dtypes (`(3, byte_order, None, None, None, elsize, alignment,
//! flags)`) and an OrderedDict's attribute dict (a state dict's `_metadata`, dropped).

use super::item::{as_flag, as_size, ArrayData, ArrayState, Item, Object};
use super::latin1::utf8;
use super::machine::{Machine, MAX_NUM_DIMS};

/// Version of numpy's `ndarray.__setstate__` state tuple.
const NDARRAY_STATE_VERSION: i64 = 1;
/// Version of numpy's `dtype.__setstate__` state tuple (without metadata).
const DTYPE_STATE_VERSION: i64 = 3;

impl<'a> Machine<'a> {
    /// `target.__setstate__(state)` for numpy arrays and dtypes, and an OrderedDict's
    /// attributes (a state dict's `_metadata`, dropped).
    pub(super) fn build(&mut self, target: Item<'a>, state: Item<'a>) -> Result<(), String> {
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
}
