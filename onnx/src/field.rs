//! The field numbers of `onnx.proto` (onnx 1.23, proto2 syntax) that Stemflow reads or writes,
//! one module per message, and the enum values it uses. Every other file names them from here.

/// `ModelProto`.
pub mod model {
    /// `ir_version` (int64).
    pub const IR_VERSION: u32 = 1;
    /// `producer_name` (string).
    pub const PRODUCER_NAME: u32 = 2;
    /// `producer_version` (string).
    pub const PRODUCER_VERSION: u32 = 3;
    /// `graph` (`GraphProto`).
    pub const GRAPH: u32 = 7;
    /// `opset_import` (repeated `OperatorSetIdProto`).
    pub const OPSET_IMPORT: u32 = 8;
    /// `metadata_props` (repeated `StringStringEntryProto`).
    pub const METADATA_PROPS: u32 = 14;
}

/// `GraphProto`.
pub mod graph {
    /// `node` (repeated `NodeProto`).
    pub const NODE: u32 = 1;
    /// `name` (string).
    pub const NAME: u32 = 2;
    /// `initializer` (repeated `TensorProto`).
    pub const INITIALIZER: u32 = 5;
    /// `input` (repeated `ValueInfoProto`).
    pub const INPUT: u32 = 11;
    /// `output` (repeated `ValueInfoProto`).
    pub const OUTPUT: u32 = 12;
    /// `value_info` (repeated `ValueInfoProto`): shapes of intermediate values.
    pub const VALUE_INFO: u32 = 13;
    /// `sparse_initializer` (repeated `SparseTensorProto`).
    pub const SPARSE_INITIALIZER: u32 = 15;
}

/// `NodeProto`.
pub mod node {
    /// `input` (repeated string).
    pub const INPUT: u32 = 1;
    /// `output` (repeated string).
    pub const OUTPUT: u32 = 2;
    /// `name` (string).
    pub const NAME: u32 = 3;
    /// `op_type` (string).
    pub const OP_TYPE: u32 = 4;
    /// `attribute` (repeated `AttributeProto`).
    pub const ATTRIBUTE: u32 = 5;
    /// `domain` (string).
    pub const DOMAIN: u32 = 7;
}

/// `AttributeProto`.
pub mod attribute {
    /// `name` (string).
    pub const NAME: u32 = 1;
    /// `f` (float).
    pub const F: u32 = 2;
    /// `i` (int64).
    pub const I: u32 = 3;
    /// `s` (bytes).
    pub const S: u32 = 4;
    /// `t` (`TensorProto`).
    pub const T: u32 = 5;
    /// `g` (`GraphProto`).
    pub const G: u32 = 6;
    /// `floats` (repeated float).
    pub const FLOATS: u32 = 7;
    /// `ints` (repeated int64).
    pub const INTS: u32 = 8;
    /// `strings` (repeated bytes).
    pub const STRINGS: u32 = 9;
    /// `tensors` (repeated `TensorProto`).
    pub const TENSORS: u32 = 10;
    /// `graphs` (repeated `GraphProto`).
    pub const GRAPHS: u32 = 11;
    /// `type` (`AttributeType`).
    pub const TYPE: u32 = 20;
    /// `sparse_tensor` (`SparseTensorProto`).
    pub const SPARSE_TENSOR: u32 = 22;
    /// `sparse_tensors` (repeated `SparseTensorProto`).
    pub const SPARSE_TENSORS: u32 = 23;
}

/// `TensorProto`.
pub mod tensor {
    /// `dims` (repeated int64).
    pub const DIMS: u32 = 1;
    /// `data_type` (`DataType`).
    pub const DATA_TYPE: u32 = 2;
    /// `float_data` (repeated float, packed).
    pub const FLOAT_DATA: u32 = 4;
    /// `name` (string).
    pub const NAME: u32 = 8;
    /// `raw_data` (bytes, little-endian values).
    pub const RAW_DATA: u32 = 9;
    /// `external_data` (repeated `StringStringEntryProto`).
    pub const EXTERNAL_DATA: u32 = 13;
    /// `data_location` (`DataLocation`).
    pub const DATA_LOCATION: u32 = 14;
}

/// `SparseTensorProto`.
pub mod sparse_tensor {
    /// `values` (`TensorProto`).
    pub const VALUES: u32 = 1;
    /// `indices` (`TensorProto`).
    pub const INDICES: u32 = 2;
}

/// `ValueInfoProto`.
pub mod value_info {
    /// `name` (string).
    pub const NAME: u32 = 1;
    /// `type` (`TypeProto`).
    pub const TYPE: u32 = 2;
}

/// `TypeProto`.
pub mod type_proto {
    /// `tensor_type` (`TypeProto.Tensor`).
    pub const TENSOR_TYPE: u32 = 1;
}

/// `TypeProto.Tensor`.
pub mod tensor_type {
    /// `elem_type` (`DataType`).
    pub const ELEM_TYPE: u32 = 1;
    /// `shape` (`TensorShapeProto`).
    pub const SHAPE: u32 = 2;
}

/// `TensorShapeProto`.
pub mod shape {
    /// `dim` (repeated `Dimension`).
    pub const DIM: u32 = 1;
}

/// `TensorShapeProto.Dimension`.
pub mod dimension {
    /// `dim_value` (int64).
    pub const DIM_VALUE: u32 = 1;
    /// `dim_param` (string).
    pub const DIM_PARAM: u32 = 2;
}

/// `OperatorSetIdProto`.
pub mod opset_id {
    /// `domain` (string; "" or "ai.onnx" is the default domain).
    pub const DOMAIN: u32 = 1;
    /// `version` (int64).
    pub const VERSION: u32 = 2;
}

/// `StringStringEntryProto`.
pub mod string_entry {
    /// `key` (string).
    pub const KEY: u32 = 1;
    /// `value` (string).
    pub const VALUE: u32 = 2;
}

/// `TensorProto.DataType` values.
pub mod data_type {
    /// float32.
    pub const FLOAT: i64 = 1;
    /// uint8.
    pub const UINT8: i64 = 2;
    /// int8.
    pub const INT8: i64 = 3;
    /// uint16.
    pub const UINT16: i64 = 4;
    /// int16.
    pub const INT16: i64 = 5;
    /// int32.
    pub const INT32: i64 = 6;
    /// int64.
    pub const INT64: i64 = 7;
    /// bool.
    pub const BOOL: i64 = 9;
    /// float16.
    pub const FLOAT16: i64 = 10;
    /// float64 (`DOUBLE`).
    pub const DOUBLE: i64 = 11;
    /// uint32.
    pub const UINT32: i64 = 12;
    /// uint64.
    pub const UINT64: i64 = 13;
    /// bfloat16.
    pub const BFLOAT16: i64 = 16;
}

/// `AttributeProto.AttributeType` values.
pub mod attribute_type {
    /// `FLOAT`.
    pub const FLOAT: i64 = 1;
    /// `INT`.
    pub const INT: i64 = 2;
    /// `STRING`.
    pub const STRING: i64 = 3;
    /// `TENSOR`.
    pub const TENSOR: i64 = 4;
    /// `FLOATS`.
    pub const FLOATS: i64 = 6;
    /// `INTS`.
    pub const INTS: i64 = 7;
}

/// `TensorProto.DataLocation.EXTERNAL`: the values are in another file.
pub const DATA_LOCATION_EXTERNAL: u64 = 1;
