//! [`GraphIo`]: the inputs and outputs a graph is run with.

/// A graph's inputs (name and shape, in the order a codec fills them) and outputs (names, in
/// the order it reads them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphIo {
    /// Input names and shapes.
    pub inputs: Vec<(String, Vec<usize>)>,
    /// Output names.
    pub outputs: Vec<String>,
}

impl GraphIo {
    /// One input of `input_shape` and one output.
    pub fn single(input_name: &str, output_name: &str, input_shape: Vec<usize>) -> Self {
        GraphIo {
            inputs: vec![(input_name.to_owned(), input_shape)],
            outputs: vec![output_name.to_owned()],
        }
    }
}
