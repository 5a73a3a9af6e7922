//! [`LinePlot`]: a small line chart written as a PNG, for benchmark curves checked into `docs/`
//! (no plotting library: a few rectangles, lines, markers and a 5×7 bitmap font).

use std::io::Write;
use std::path::Path;

/// An RGB colour.
pub type Rgb = [u8; 3];

/// One line of the chart.
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Line and marker colour.
    pub colour: Rgb,
    /// Square markers (else round).
    pub is_square: bool,
    /// Points `(x, y)`, in order.
    pub points: Vec<(f64, f64)>,
}

/// A chart with a logarithmic x axis and a linear y axis.
pub struct LinePlot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

const WIDTH: usize = 1120;
const HEIGHT: usize = 600;
const LEFT: usize = 90;
const RIGHT: usize = 400;
const TOP: usize = 60;
const BOTTOM: usize = 70;
const TEXT_SCALE: usize = 2;

struct Canvas {
    pixels: Vec<u8>,
}

impl Canvas {
    fn new() -> Self {
        Self {
            pixels: vec![255; WIDTH * HEIGHT * 3],
        }
    }

    fn set(&mut self, x: i64, y: i64, colour: Rgb) {
        if x >= 0 && y >= 0 && (x as usize) < WIDTH && (y as usize) < HEIGHT {
            let i = (y as usize * WIDTH + x as usize) * 3;
            self.pixels[i..i + 3].copy_from_slice(&colour);
        }
    }

    fn rect(&mut self, x: i64, y: i64, w: i64, h: i64, colour: Rgb) {
        for dy in 0..h {
            for dx in 0..w {
                self.set(x + dx, y + dy, colour);
            }
        }
    }

    /// A line `thickness` pixels wide.
    fn line(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64), colour: Rgb, thickness: i64) {
        let steps = ((x1 - x0).abs().max((y1 - y0).abs()).ceil() as usize).max(1);
        for i in 0..=steps {
            let t = i as f64 / steps as f64;
            let (x, y) = (x0 + (x1 - x0) * t, y0 + (y1 - y0) * t);
            let r = thickness / 2;
            self.rect(
                x.round() as i64 - r,
                y.round() as i64 - r,
                thickness,
                thickness,
                colour,
            );
        }
    }

    fn marker(&mut self, (x, y): (f64, f64), colour: Rgb, is_square: bool) {
        let (cx, cy) = (x.round() as i64, y.round() as i64);
        for dy in -5..=5i64 {
            for dx in -5..=5i64 {
                if is_square || dx * dx + dy * dy <= 25 {
                    self.set(cx + dx, cy + dy, colour);
                }
            }
        }
    }

    /// Text in the bitmap font (upper-cased), its top-left at `(x, y)`; returns its width.
    fn text(&mut self, x: i64, y: i64, text: &str, colour: Rgb) -> i64 {
        let s = TEXT_SCALE as i64;
        for (index, row, column) in lit_cells(text) {
            self.rect(x + (index * 6 + column) * s, y + row * s, s, s, colour);
        }
        text_width(text)
    }

    /// Text rotated a quarter turn anticlockwise (for the y axis), its bottom-left at `(x, y)`.
    fn text_vertical(&mut self, x: i64, y: i64, text: &str, colour: Rgb) {
        let s = TEXT_SCALE as i64;
        for (index, row, column) in lit_cells(text) {
            self.rect(x + row * s, y - (index * 6 + column) * s, s, s, colour);
        }
    }
}

/// The lit cells of `text` in the bitmap font (upper-cased): (character index, row, column).
fn lit_cells(text: &str) -> impl Iterator<Item = (i64, i64, i64)> + '_ {
    text.chars().enumerate().flat_map(|(index, c)| {
        let rows = glyph(c.to_ascii_uppercase());
        (0..7).flat_map(move |row| {
            (0..5)
                .filter(move |column| rows[row] & (0b10000 >> column) != 0)
                .map(move |column| (index as i64, row as i64, column))
        })
    })
}

fn text_width(text: &str) -> i64 {
    (text.chars().count() * 6 * TEXT_SCALE) as i64
}

impl LinePlot {
    /// Draws the chart and writes it to `path` as a PNG.
    pub fn write_png(&self, path: &Path) -> Result<(), String> {
        let canvas = self.draw();
        write_png(path, &canvas.pixels).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    fn draw(&self) -> Canvas {
        let mut canvas = Canvas::new();
        let black = [0, 0, 0];
        let grey = [220, 220, 220];
        let points = self.series.iter().flat_map(|s| s.points.iter());
        let (mut x_min, mut x_max, mut y_min, mut y_max) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in points {
            if x > 0.0 && x.is_finite() && y.is_finite() {
                x_min = x_min.min(x);
                x_max = x_max.max(x);
                y_min = y_min.min(y);
                y_max = y_max.max(y);
            }
        }
        if x_min > x_max {
            (x_min, x_max, y_min, y_max) = (0.1, 10.0, 0.0, 1.0);
        }
        // Decades around the data; y in whole steps of 2.
        let (lx_min, lx_max) = (
            x_min.log10().floor(),
            // A little past the last point, not the next decade.
            (x_max * 1.5).log10().max(x_min.log10().floor() + 1.0),
        );
        let (y_lo, y_hi) = (
            (y_min / 2.0).floor() * 2.0,
            ((y_max / 2.0).ceil() * 2.0).max((y_min / 2.0).floor() * 2.0 + 2.0),
        );
        let (w, h) = (
            (WIDTH - LEFT - RIGHT) as f64,
            (HEIGHT - TOP - BOTTOM) as f64,
        );
        let to_px = |x: f64, y: f64| {
            (
                LEFT as f64 + (x.log10() - lx_min) / (lx_max - lx_min) * w,
                TOP as f64 + (y_hi - y) / (y_hi - y_lo) * h,
            )
        };
        // Grid and tick labels.
        let mut decade = lx_min;
        while decade <= lx_max {
            for factor in [1.0, 2.0, 5.0] {
                let x = 10f64.powf(decade) * factor;
                if x.log10() > lx_max + 1e-9 {
                    continue;
                }
                let (px, _) = to_px(x, y_lo);
                canvas.line((px, TOP as f64), (px, (HEIGHT - BOTTOM) as f64), grey, 1);
                let label = format_tick(x);
                canvas.text(
                    px as i64 - text_width(&label) / 2,
                    (HEIGHT - BOTTOM + 8) as i64,
                    &label,
                    black,
                );
            }
            decade += 1.0;
        }
        let mut y = y_lo;
        while y <= y_hi + 1e-9 {
            let (_, py) = to_px(10f64.powf(lx_min), y);
            canvas.line((LEFT as f64, py), ((WIDTH - RIGHT) as f64, py), grey, 1);
            let label = format!("{y:.0}");
            canvas.text(
                LEFT as i64 - 8 - text_width(&label),
                py as i64 - 7,
                &label,
                black,
            );
            y += 2.0;
        }
        // Frame, title, axis labels.
        let (l, r, t, b) = (
            LEFT as f64,
            (WIDTH - RIGHT) as f64,
            TOP as f64,
            (HEIGHT - BOTTOM) as f64,
        );
        for (a, c) in [
            ((l, t), (r, t)),
            ((r, t), (r, b)),
            ((r, b), (l, b)),
            ((l, b), (l, t)),
        ] {
            canvas.line(a, c, black, 2);
        }
        canvas.text(LEFT as i64, 20, &self.title, black);
        canvas.text(
            LEFT as i64 + (w as i64 - text_width(&self.x_label)) / 2,
            (HEIGHT - BOTTOM + 36) as i64,
            &self.x_label,
            black,
        );
        canvas.text_vertical(
            20,
            TOP as i64 + (h as i64 + text_width(&self.y_label)) / 2,
            &self.y_label,
            black,
        );
        // Series and legend.
        for (i, series) in self.series.iter().enumerate() {
            let pixels: Vec<(f64, f64)> = series
                .points
                .iter()
                .filter(|(x, y)| *x > 0.0 && x.is_finite() && y.is_finite())
                .map(|&(x, y)| to_px(x, y))
                .collect();
            for pair in pixels.windows(2) {
                canvas.line(pair[0], pair[1], series.colour, 3);
            }
            for &p in &pixels {
                canvas.marker(p, series.colour, series.is_square);
            }
            let ly = TOP as f64 + 10.0 + i as f64 * 26.0;
            let lx = (WIDTH - RIGHT + 16) as f64;
            canvas.line((lx, ly + 6.0), (lx + 28.0, ly + 6.0), series.colour, 3);
            canvas.marker((lx + 14.0, ly + 6.0), series.colour, series.is_square);
            canvas.text(lx as i64 + 36, ly as i64, &series.label, black);
        }
        canvas
    }
}

/// "0.2", "1", "10".
fn format_tick(x: f64) -> String {
    if x >= 1.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}").trim_end_matches('0').to_owned()
    }
}

/// A PNG of `WIDTH × HEIGHT` RGB pixels.
fn write_png(path: &Path, rgb: &[u8]) -> std::io::Result<()> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(kind);
        crc.update(data);
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        out.extend_from_slice(&crc.finalize().to_be_bytes());
    }
    let mut raw = Vec::with_capacity((WIDTH * 3 + 1) * HEIGHT);
    for row in rgb.chunks(WIDTH * 3) {
        raw.push(0); // no filter
        raw.extend_from_slice(row);
    }
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&raw)?;
    let compressed = encoder.finish()?;
    let mut header = Vec::new();
    header.extend_from_slice(&(WIDTH as u32).to_be_bytes());
    header.extend_from_slice(&(HEIGHT as u32).to_be_bytes());
    header.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit RGB, no interlace
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut png, b"IHDR", &header);
    chunk(&mut png, b"IDAT", &compressed);
    chunk(&mut png, b"IEND", &[]);
    let partial = path.with_extension("png.partial");
    std::fs::write(&partial, &png)?;
    std::fs::rename(&partial, path)
}

/// The 5×7 bitmap of `c` (rows top to bottom, bit 4 = left column); unknown characters are a
/// box.
fn glyph(c: char) -> [u8; 7] {
    match c {
        ' ' => [0; 7],
        '0' => [
            0b01110, 0b10001, 0b10011, 0b10101, 0b11001, 0b10001, 0b01110,
        ],
        '1' => [
            0b00100, 0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110,
        ],
        '2' => [
            0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b01000, 0b11111,
        ],
        '3' => [
            0b11111, 0b00010, 0b00100, 0b00010, 0b00001, 0b10001, 0b01110,
        ],
        '4' => [
            0b00010, 0b00110, 0b01010, 0b10010, 0b11111, 0b00010, 0b00010,
        ],
        '5' => [
            0b11111, 0b10000, 0b11110, 0b00001, 0b00001, 0b10001, 0b01110,
        ],
        '6' => [
            0b00110, 0b01000, 0b10000, 0b11110, 0b10001, 0b10001, 0b01110,
        ],
        '7' => [
            0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b01000, 0b01000,
        ],
        '8' => [
            0b01110, 0b10001, 0b10001, 0b01110, 0b10001, 0b10001, 0b01110,
        ],
        '9' => [
            0b01110, 0b10001, 0b10001, 0b01111, 0b00001, 0b00010, 0b01100,
        ],
        'A' => [
            0b01110, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001,
        ],
        'B' => [
            0b11110, 0b10001, 0b10001, 0b11110, 0b10001, 0b10001, 0b11110,
        ],
        'C' => [
            0b01110, 0b10001, 0b10000, 0b10000, 0b10000, 0b10001, 0b01110,
        ],
        'D' => [
            0b11100, 0b10010, 0b10001, 0b10001, 0b10001, 0b10010, 0b11100,
        ],
        'E' => [
            0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b11111,
        ],
        'F' => [
            0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b10000,
        ],
        'G' => [
            0b01110, 0b10001, 0b10000, 0b10111, 0b10001, 0b10001, 0b01111,
        ],
        'H' => [
            0b10001, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001,
        ],
        'I' => [
            0b01110, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110,
        ],
        'J' => [
            0b00111, 0b00010, 0b00010, 0b00010, 0b00010, 0b10010, 0b01100,
        ],
        'K' => [
            0b10001, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010, 0b10001,
        ],
        'L' => [
            0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b11111,
        ],
        'M' => [
            0b10001, 0b11011, 0b10101, 0b10101, 0b10001, 0b10001, 0b10001,
        ],
        'N' => [
            0b10001, 0b10001, 0b11001, 0b10101, 0b10011, 0b10001, 0b10001,
        ],
        'O' => [
            0b01110, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110,
        ],
        'P' => [
            0b11110, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000, 0b10000,
        ],
        'Q' => [
            0b01110, 0b10001, 0b10001, 0b10001, 0b10101, 0b10010, 0b01101,
        ],
        'R' => [
            0b11110, 0b10001, 0b10001, 0b11110, 0b10100, 0b10010, 0b10001,
        ],
        'S' => [
            0b01111, 0b10000, 0b10000, 0b01110, 0b00001, 0b00001, 0b11110,
        ],
        'T' => [
            0b11111, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100,
        ],
        'U' => [
            0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110,
        ],
        'V' => [
            0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100,
        ],
        'W' => [
            0b10001, 0b10001, 0b10001, 0b10101, 0b10101, 0b10101, 0b01010,
        ],
        'X' => [
            0b10001, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001, 0b10001,
        ],
        'Y' => [
            0b10001, 0b10001, 0b10001, 0b01010, 0b00100, 0b00100, 0b00100,
        ],
        'Z' => [
            0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b11111,
        ],
        '.' => [0, 0, 0, 0, 0, 0b01100, 0b01100],
        ',' => [0, 0, 0, 0, 0b01100, 0b00100, 0b01000],
        ':' => [0, 0b01100, 0b01100, 0, 0b01100, 0b01100, 0],
        '-' => [0, 0, 0, 0b11111, 0, 0, 0],
        '+' => [0, 0b00100, 0b00100, 0b11111, 0b00100, 0b00100, 0],
        '/' => [0, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0],
        '(' => [
            0b00010, 0b00100, 0b01000, 0b01000, 0b01000, 0b00100, 0b00010,
        ],
        ')' => [
            0b01000, 0b00100, 0b00010, 0b00010, 0b00010, 0b00100, 0b01000,
        ],
        '×' => [0, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001, 0],
        '=' => [0, 0, 0b11111, 0, 0b11111, 0, 0],
        _ => [
            0b11111, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b11111,
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_png_that_decodes_to_the_drawn_pixels() {
        let plot = LinePlot {
            title: "test".into(),
            x_label: "latency (s)".into(),
            y_label: "sdr (db)".into(),
            series: vec![Series {
                label: "vocals".into(),
                colour: [200, 0, 0],
                is_square: false,
                points: vec![(0.25, 1.0), (1.0, 4.0), (12.0, 8.0)],
            }],
        };
        let dir = std::env::temp_dir().join(format!("stemflow-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("plot.png");
        plot.write_png(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // The IDAT stream inflates to the canvas, row filters included.
        let idat_at = bytes.windows(4).position(|w| w == b"IDAT").unwrap();
        let len = u32::from_be_bytes(bytes[idat_at - 4..idat_at].try_into().unwrap()) as usize;
        let mut raw = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::ZlibDecoder::new(&bytes[idat_at + 4..idat_at + 4 + len]),
            &mut raw,
        )
        .unwrap();
        assert_eq!(raw.len(), (WIDTH * 3 + 1) * HEIGHT);
        let canvas = plot.draw();
        let red = canvas
            .pixels
            .chunks(3)
            .filter(|p| *p == [200, 0, 0])
            .count();
        assert!(red > 500, "the series is drawn: {red} pixels");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
