//! Test support the workspace's tests share (shipped code never calls it): the fixtures folder
//! that `cargo xtask test` writes, fresh scratch folders, the raw `f32` fixtures, the hybrid
//! route the family tests build around a fixture model, WAV files of any channel count and
//! sample format, a seeded generator for test noise, and a loopback HTTP server for the
//! download tests.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The folder of generated test fixtures: `STEMFLOW_FIXTURES_DIR`, which `cargo xtask test`
/// sets after writing it with `models/make_test_models.py --fixtures`.
///
/// Panics, saying how to run the tests, when the variable is not set or the folder holds no
/// `fixtures.json`: tests that need fixtures fail without them, they never skip.
pub fn fixtures_dir() -> PathBuf {
    dir_from_env(
        "STEMFLOW_FIXTURES_DIR",
        "fixtures.json",
        "run the tests with `cargo xtask test`, which writes the fixtures",
    )
}

/// The folder the environment variable `var` names, which a task of `cargo xtask` filled and
/// which holds the file `marker`. Panics with `how_to_run` (how to run the tests so that it is
/// set) when the variable is not set or the folder lacks `marker`.
pub fn dir_from_env(var: &str, marker: &str, how_to_run: &str) -> PathBuf {
    let dir = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{var} is not set: {how_to_run}"));
    assert!(
        dir.join(marker).is_file(),
        "{} holds no {marker}: {how_to_run}",
        dir.display()
    );
    dir
}

/// A fresh, empty folder for one test: `stemflow-{name}-{process id}` in the system's temporary
/// folder (what an earlier run left there is removed first). Panics when it cannot be made.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stemflow-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("scratch folder {}: {e}", dir.display()));
    dir
}

/// Reads a fixture of `frames` stereo frames stored as raw little-endian `f32`, the left
/// channel's frames then the right's (as `models/make_test_models.py` writes them). Panics,
/// naming the file, when it cannot be read or has another length.
pub fn read_stereo_f32(path: &Path, frames: usize) -> [Vec<f32>; 2] {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(bytes.len(), frames * 2 * 4, "{}", path.display());
    let values: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    [values[..frames].to_vec(), values[frames..].to_vec()]
}

/// Writes `hybrid.stemflow-route` into `dir`: vocals from the model at `vocals_model`, the rest
/// split by the built-in separator. Returns the route's path. Panics when it cannot be written.
pub fn write_vocals_route(dir: &Path, vocals_model: &Path) -> PathBuf {
    let route = dir.join("hybrid.stemflow-route");
    let text = format!(
        r#"{{"name": "test hybrid", "stages": [{{"separator": "{}", "stems": ["vocals"]}}, {{"separator": "builtin"}}]}}"#,
        vocals_model.display()
    );
    std::fs::write(&route, text).unwrap_or_else(|e| panic!("{}: {e}", route.display()));
    route
}

/// Writes `channels` (equally long; any number of them) as a WAV file of `bits`-bit samples,
/// float (`is_float`, 32 bits) or integer: `x · 2^(bits−1)`, rounded and clamped to the
/// format's range. Panics when it cannot be written.
pub fn write_wav(
    path: &Path,
    sample_rate_hz: u32,
    channels: &[Vec<f32>],
    bits: u16,
    is_float: bool,
) {
    let spec = hound::WavSpec {
        channels: channels.len() as u16,
        sample_rate: sample_rate_hz,
        bits_per_sample: bits,
        sample_format: if is_float {
            hound::SampleFormat::Float
        } else {
            hound::SampleFormat::Int
        },
    };
    let written = (|| {
        let mut writer = hound::WavWriter::create(path, spec)?;
        let full_scale = (1i64 << (bits - 1)) as f32;
        let num_frames = channels.first().map_or(0, Vec::len);
        for frame in 0..num_frames {
            for channel in channels {
                if is_float {
                    writer.write_sample(channel[frame])?;
                } else {
                    let x = (channel[frame] * full_scale).round();
                    writer.write_sample(x.clamp(-full_scale, full_scale - 1.0) as i32)?;
                }
            }
        }
        writer.finalize()
    })();
    written.unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

/// Reads a WAV file of any channel count as `(spec, [channel][frame])`: float samples as they
/// are, integer samples scaled to ±1. Panics when it cannot be read.
pub fn read_wav(path: &Path) -> (hound::WavSpec, Vec<Vec<f32>>) {
    let read = (|| {
        let mut reader = hound::WavReader::open(path)?;
        let spec = reader.spec();
        let interleaved: Vec<f32> = match spec.sample_format {
            hound::SampleFormat::Float => reader.samples::<f32>().collect::<Result<_, _>>()?,
            hound::SampleFormat::Int => {
                let scale = 1.0 / (1i64 << (spec.bits_per_sample - 1)) as f32;
                reader
                    .samples::<i32>()
                    .map(|s| s.map(|s| s as f32 * scale))
                    .collect::<Result<_, _>>()?
            }
        };
        let n = usize::from(spec.channels);
        let channels = (0..n)
            .map(|c| interleaved.iter().skip(c).step_by(n).copied().collect())
            .collect();
        Ok::<_, hound::Error>((spec, channels))
    })();
    read.unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// A tiny xorshift64* generator: deterministic, dependency-free, good enough for test noise and
/// block sizes (not for anything statistical).
#[derive(Debug, Clone)]
pub struct XorShift64 {
    state: u64,
}

impl XorShift64 {
    /// A generator for `seed`; seed 0 is remapped because xorshift must not start at 0.
    pub fn new(seed: u64) -> Self {
        Self {
            state: if seed == 0 {
                0x9E37_79B9_7F4A_7C15
            } else {
                seed
            },
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[0, 1)`.
    pub fn next_unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in `[-1, 1)`.
    pub fn next_bipolar(&mut self) -> f32 {
        self.next_unit() * 2.0 - 1.0
    }

    /// `len` samples uniform in `[-peak, peak)`: test noise.
    pub fn samples(&mut self, len: usize, peak: f32) -> Vec<f32> {
        (0..len).map(|_| self.next_bipolar() * peak).collect()
    }

    /// Uniform in `low..=high`.
    pub fn next_in(&mut self, low: usize, high: usize) -> usize {
        assert!(low <= high, "empty range {low}..={high}");
        let span = (high - low) as u64 + 1;
        low + (self.next_u64() % span) as usize
    }
}

/// One request a loopback server ([`serve_http`]) received.
#[derive(Debug, Clone, Default)]
pub struct HttpRequest {
    /// The path asked for (`/models/m.onnx`); empty when the request line has none.
    pub path: String,
    /// The header lines as `(name, value)`, the value trimmed, in the order they came.
    pub headers: Vec<(String, String)>,
}

impl HttpRequest {
    /// The value of the last header called `name` (in any case); empty when there is none.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .rev()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map_or("", |(_, value)| value.as_str())
    }
}

/// An HTTP/1.1 server on a loopback port, for tests that download: reads each connection's
/// request (its line and headers, up to the blank line) and hands it with the connection to
/// `answer`, one connection after another on a thread of its own. Returns its address,
/// `http://127.0.0.1:PORT`. Panics when no loopback port can be bound.
pub fn serve_http(mut answer: impl FnMut(HttpRequest, TcpStream) + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            let _ = reader.read_line(&mut request_line);
            let mut request = HttpRequest {
                path: request_line.split(' ').nth(1).unwrap_or("").to_owned(),
                headers: Vec::new(),
            };
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':') {
                    request
                        .headers
                        .push((name.to_owned(), value.trim().to_owned()));
                }
            }
            answer(request, stream);
        }
    });
    url
}

/// Writes a response's head: `HTTP/1.1 {status}`, the `headers` (each line ending in `\r\n`),
/// `Content-Length: {content_length}` and `Connection: close`. A client that has gone is no
/// error here.
pub fn write_http_head(stream: &mut TcpStream, status: &str, headers: &str, content_length: u64) {
    let head = format!(
        "HTTP/1.1 {status}\r\n{headers}Content-Length: {content_length}\r\nConnection: close\r\n\r\n"
    );
    let _ = stream.write_all(head.as_bytes());
}

/// Writes `body` in pieces of `piece_bytes`, each flushed and followed by a pause of `pause`:
/// a slow download. Stops early, returning `false`, when the client has gone.
pub fn write_trickle(
    stream: &mut TcpStream,
    body: &[u8],
    piece_bytes: usize,
    pause: Duration,
) -> bool {
    for piece in body.chunks(piece_bytes) {
        if stream
            .write_all(piece)
            .and_then(|()| stream.flush())
            .is_err()
        {
            return false;
        }
        std::thread::sleep(pause);
    }
    true
}

/// A loopback port that nothing listens on (bound, then let go): a server that cannot be
/// reached.
pub fn unused_loopback_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_dir_is_fresh_and_empty() {
        let dir = scratch_dir("kit-scratch");
        std::fs::create_dir(dir.join("left over")).unwrap();
        assert_eq!(scratch_dir("kit-scratch"), dir);
        assert!(
            std::fs::read_dir(&dir).unwrap().next().is_none(),
            "not emptied"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn test_wavs_round_trip_in_every_format_and_integers_clamp() {
        let dir = scratch_dir("kit-test-wav");
        let channels = vec![
            vec![0.0, 0.5, -0.25, 1.0, -1.0],
            vec![0.125, -0.5, 0.75, 2.0, -2.0],
            vec![1e-7, 0.0, -0.0, 0.3, -0.3],
        ];
        let path = dir.join("float.wav");
        write_wav(&path, 22_050, &channels, 32, true);
        let (spec, read) = read_wav(&path);
        assert_eq!((spec.channels, spec.sample_rate), (3, 22_050));
        assert_eq!(read, channels, "float samples are exact");

        let path = dir.join("int16.wav");
        write_wav(&path, 48_000, &channels, 16, false);
        let (spec, read) = read_wav(&path);
        assert_eq!(
            (spec.bits_per_sample, spec.sample_format),
            (16, hound::SampleFormat::Int)
        );
        let largest = 32_767.0 / 32_768.0;
        for (written, read) in channels.iter().zip(&read) {
            for (&w, &r) in written.iter().zip(read) {
                let expected = ((w * 32_768.0).round() / 32_768.0).clamp(-1.0, largest);
                assert_eq!(r, expected, "{w} as 16 bits");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_folder_from_the_environment_must_hold_its_marker() {
        let dir = scratch_dir("kit-env");
        std::env::set_var("STEMFLOW_KIT_TEST_DIR", &dir);
        let lacking = std::panic::catch_unwind(|| {
            dir_from_env("STEMFLOW_KIT_TEST_DIR", "marker", "run it right")
        });
        assert!(lacking.is_err());
        std::fs::write(dir.join("marker"), b"").unwrap();
        assert_eq!(
            dir_from_env("STEMFLOW_KIT_TEST_DIR", "marker", "run it right"),
            dir
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_stereo_fixture_is_left_then_right() {
        let dir = scratch_dir("kit-f32");
        let path = dir.join("x.f32");
        let bytes: Vec<u8> = [1.0f32, 2.0, -1.0, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(
            read_stereo_f32(&path, 2),
            [vec![1.0, 2.0], vec![-1.0, -2.0]]
        );
        let wrong_length = std::panic::catch_unwind(|| read_stereo_f32(&path, 3));
        assert!(wrong_length.is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_vocals_route_names_the_model_and_the_builtin() {
        let dir = scratch_dir("kit-route");
        let route = write_vocals_route(&dir, Path::new("/models/vocals.onnx"));
        let text = std::fs::read_to_string(&route).unwrap();
        assert!(text.contains(r#""separator": "/models/vocals.onnx", "stems": ["vocals"]"#));
        assert!(text.contains(r#"{"separator": "builtin"}"#));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_loopback_server_hands_over_the_path_and_the_headers() {
        let url = serve_http(|request, mut stream| {
            let body = format!("{} {}", request.path, request.header("RANGE"));
            write_http_head(&mut stream, "200 OK", "", body.len() as u64);
            write_trickle(&mut stream, body.as_bytes(), 2, Duration::ZERO);
        });
        let mut stream = TcpStream::connect(url.trim_start_matches("http://")).unwrap();
        stream
            .write_all(b"GET /m.onnx HTTP/1.1\r\nrange: bytes=5-\r\n\r\n")
            .unwrap();
        let mut response = String::new();
        std::io::Read::read_to_string(&mut stream, &mut response).unwrap();
        assert_eq!(
            response,
            "HTTP/1.1 200 OK\r\nContent-Length: 16\r\nConnection: close\r\n\r\n/m.onnx bytes=5-"
        );
        assert_ne!(unused_loopback_port(), 0);
    }
}
