//! Writes the crafted checkpoints of issue 45 (`stemflow_convert::testing::crafted`) into a
//! folder, as `<name>.th` and `<name>.ckpt` (with an empty `<name>.yaml` beside it), for
//! measuring what `stemflow models import` does with them (docs/models.md):
//!
//! ```sh
//! cargo run --release -p stemflow-convert --features test-writers --example write_crafted -- DIR
//! ```

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let folder = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "crafted".into()));
    std::fs::create_dir_all(&folder)?;
    for crafted in stemflow_convert::testing::crafted::crafted_checkpoints() {
        for extension in ["th", "ckpt"] {
            let path = folder.join(format!("{}.{extension}", crafted.name));
            std::fs::write(&path, &crafted.bytes)?;
        }
        std::fs::write(folder.join(format!("{}.yaml", crafted.name)), "")?;
        println!(
            "{}: {} bytes: {}",
            crafted.name,
            crafted.bytes.len(),
            crafted.attack
        );
    }
    Ok(())
}
