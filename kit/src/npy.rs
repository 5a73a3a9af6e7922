//! Reading numpy's `.npy` files: the reference outputs that PyTorch and numpy wrote once and the
//! tests compare with.

use std::path::Path;

/// A float32 `.npy` file (C order): its shape and values.
///
/// Panics with the path on a file that is not one (a test fixture is broken).
pub fn read_npy(path: &Path) -> (Vec<usize>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..6], b"\x93NUMPY", "{}", path.display());
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        _ => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
    };
    let header = std::str::from_utf8(&bytes[start..start + header_len]).unwrap();
    assert!(header.contains("'descr': '<f4'"), "{header}");
    assert!(header.contains("'fortran_order': False"), "{header}");
    let shape_text = header.split("'shape': (").nth(1).unwrap();
    let shape: Vec<usize> = shape_text[..shape_text.find(')').unwrap()]
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let values: Vec<f32> = bytes[start + header_len..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(values.len(), shape.iter().product::<usize>());
    (shape, values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_npy_file_reads_back_with_its_shape() {
        let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
        let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
        bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
        bytes.extend_from_slice(header.as_bytes());
        let values = [0.5f32, -1.0, 2.0, 3.25, 0.0, -0.125];
        for v in values {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let path = std::env::temp_dir().join(format!("stemflow-npy-{}.npy", std::process::id()));
        std::fs::write(&path, &bytes).unwrap();
        let (shape, read) = read_npy(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(shape, [2, 3]);
        assert_eq!(read, values);
    }
}
