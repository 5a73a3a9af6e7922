"""What the reference scripts (htdemucs_reference.py, roformer_reference.py) share: 32-bit float
WAVs (what `stemflow separate` reads, and the stems `stemflow separate --bit-depth 32f` writes)
and the command line's common subcommands. numpy only."""
import argparse
import struct

import numpy as np


def write_wav_f32(path, audio):
    """`audio` [channels, frames] as a 32-bit float WAV (what `stemflow separate` reads)."""
    audio = np.ascontiguousarray(np.asarray(audio, dtype="<f4").T)
    channels = audio.shape[1]
    data = audio.tobytes()
    header = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + struct.pack(
        "<IHHIIHH", 16, 3, channels, 44100, 44100 * 4 * channels, 4 * channels, 32
    ) + b"data" + struct.pack("<I", len(data))
    with open(path, "wb") as f:
        f.write(header + data)


def read_wav_f32(path):
    """A 32-bit float WAV as [channels, frames] (the stems `stemflow separate --bit-depth 32f` writes)."""
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:4] == b"RIFF" and raw[8:12] == b"WAVE", path
    pos, fmt, data = 12, None, None
    while pos + 8 <= len(raw):
        tag, size = raw[pos:pos + 4], struct.unpack("<I", raw[pos + 4:pos + 8])[0]
        body = raw[pos + 8:pos + 8 + size]
        if tag == b"fmt ":
            fmt = struct.unpack("<HHIIHH", body[:16])
        elif tag == b"data":
            data = body
        pos += 8 + size + (size & 1)
    assert fmt is not None and data is not None, path
    kind, channels, _, _, _, bits = fmt
    assert bits == 32 and kind in (3, 0xFFFE), f"{path}: write the stems with --bit-depth 32f"
    return np.frombuffer(data, dtype="<f4").reshape(-1, channels).T


def cmd_wav(args):
    x = np.load(args.input)
    write_wav_f32(args.out, x)
    print(f"{args.out}: {x.shape[1]} frames")


def command_line(doc, presets, cmd_checkpoint, cmd_input):
    """The parser of a reference script with the subcommands both have: `checkpoint --preset P
    --seed N --out FILE`, `input --seconds S --seed N --out IN.npy` and `wav --input IN.npy
    --out IN.wav`. Returns the parser, its subparsers (for the script's own commands; each sets
    `func`) and the `checkpoint` and `input` parsers (for its own options)."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    checkpoint = sub.add_parser("checkpoint")
    checkpoint.set_defaults(func=cmd_checkpoint)
    checkpoint.add_argument("--preset", choices=sorted(presets), required=True)
    checkpoint.add_argument("--seed", type=int, default=1)
    checkpoint.add_argument("--out", required=True)
    signal = sub.add_parser("input")
    signal.set_defaults(func=cmd_input)
    signal.add_argument("--seconds", type=float, required=True)
    signal.add_argument("--seed", type=int, default=7)
    signal.add_argument("--out", required=True)
    wav = sub.add_parser("wav")
    wav.set_defaults(func=cmd_wav)
    wav.add_argument("--input", required=True)
    wav.add_argument("--out", required=True)
    return parser, sub, checkpoint, signal
