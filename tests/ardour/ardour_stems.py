#!/usr/bin/env python3
"""Headless real-DAW test: render a stereo WAV through a VST3 (or Lua DSP) plugin in Ardour 7.

Pipeline (Debian bookworm, Ardour 7.3, no display, no sound card):
  1. install Ardour if missing (apt-get install --no-install-recommends ardour)
  2. private XDG config/cache dirs; scan the VST3 bundle with ardour-vst3-scanner
  3. ardour7-lua: create a session (Dummy backend) with one stereo track "Mix"
  4. write the WAV into interchange/<name>/audiofiles as two mono float files and add
     Source/Region/Playlist/session-range entries to the .ardour XML (no headless import)
  5. ardour7-lua: insert the plugin (strict I/O off, custom output count = N channels),
     track outputs 1..N -> master inputs 1..N, master bus N channels
  6. ardour7-export (float WAV, retried on crash) -> one N-channel WAV of the master bus
     (or --exporter lua: Session:simple_export() inside the ardour7-lua run of step 5)
  7. split into main (ch 1-2) and stems (pairs 3-4, 5-6, ...), check the plugin ran

Only the Python standard library is used.
"""
from __future__ import annotations

import argparse
import hashlib
import array
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
LUA_DIR = HERE / "lua"
SUPERCLOCK_RATE = 282240000  # Temporal::superclock_ticks_per_second in Ardour 7
SCANNER = "/usr/lib/ardour7/ardour-vst3-scanner"
FLOAT_PRESET_ID = "8f1d3c5e-2b7a-4c1e-9d3f-5a6b7c8d9e02"  # export/stemflow-float.preset


def log(msg: str) -> None:
    print(f"[ardour-stems] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- WAV I/O
def read_wav(path: Path) -> tuple[int, list[array.array]]:
    """Return (rate, channels) with float samples; PCM 16/24/32 and float32/64, incl. EXTENSIBLE."""
    data = path.read_bytes()
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError(f"{path}: not a RIFF/WAVE file")
    pos, fmt, raw = 12, None, None
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = data[pos + 8:pos + 8 + size]
        if cid == b"fmt ":
            fmt = body
        elif cid == b"data":
            raw = body
        pos += 8 + size + (size & 1)
    if fmt is None or raw is None:
        raise ValueError(f"{path}: missing fmt or data chunk")
    tag, nch, rate, _, _, bits = struct.unpack("<HHIIHH", fmt[:16])
    if tag == 0xFFFE:
        tag = struct.unpack("<H", fmt[24:26])[0]
    width = bits // 8
    n = len(raw) // (width * nch)
    raw = raw[: n * width * nch]
    if tag == 3 and bits == 32:
        flat = array.array("f", raw)
    elif tag == 3 and bits == 64:
        flat = array.array("d", raw)
    elif tag == 1 and bits == 16:
        ints = array.array("h", raw)
        flat = array.array("f", (v / 32768.0 for v in ints))
    elif tag == 1 and bits == 32:
        ints = array.array("i", raw)
        flat = array.array("f", (v / 2147483648.0 for v in ints))
    elif tag == 1 and bits == 24:
        flat = array.array("f", (
            int.from_bytes(raw[i:i + 3], "little", signed=True) / 8388608.0
            for i in range(0, len(raw), 3)))
    else:
        raise ValueError(f"{path}: unsupported WAV format tag={tag} bits={bits}")
    if sys.byteorder != "little":
        flat.byteswap()
    chans = [array.array("f", flat[c::nch]) for c in range(nch)]
    return rate, chans


def write_wav_float(path: Path, rate: int, chans: list[array.array]) -> None:
    """Write 32-bit float WAV (WAVE_FORMAT_IEEE_FLOAT; EXTENSIBLE for > 2 channels)."""
    nch, n = len(chans), len(chans[0])
    inter = array.array("f", bytes(4 * n * nch))
    for c, ch in enumerate(chans):
        inter[c::nch] = array.array("f", ch)
    if sys.byteorder != "little":
        inter.byteswap()
    payload = inter.tobytes()
    if nch <= 2:
        fmt = struct.pack("<HHIIHHH", 3, nch, rate, rate * 4 * nch, 4 * nch, 32, 0)
    else:
        guid = struct.pack("<IHH", 3, 0x0000, 0x0010) + bytes.fromhex("800000aa00389b71")
        fmt = struct.pack("<HHIIHHHHI", 0xFFFE, nch, rate, rate * 4 * nch, 4 * nch, 32, 22, 32, 0) + guid
    fact = struct.pack("<I", n)
    body = (b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
            + b"fact" + struct.pack("<I", 4) + fact
            + b"data" + struct.pack("<I", len(payload)) + payload)
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)


def rms(x) -> float:
    return math.sqrt(sum(v * v for v in x) / max(1, len(x)))


def peak(x) -> float:
    return max((abs(v) for v in x), default=0.0)


# --------------------------------------------------------------------------- Ardour helpers
def ensure_ardour() -> float:
    """Install Debian's ardour package if ardour7-lua is missing. Returns seconds spent."""
    if shutil.which("ardour7-lua") and shutil.which("ardour7-export") and Path(SCANNER).exists():
        return 0.0
    if os.geteuid() != 0:
        sys.exit("ardour7-lua missing and not root: apt-get install --no-install-recommends ardour")
    t0 = time.time()
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", "ardour"],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    dt = time.time() - t0
    log(f"installed ardour in {dt:.1f} s")
    return dt


def ardour_env(work: Path, vst3_dirs: list[Path]) -> dict:
    home = work / "home"
    env = dict(os.environ)
    for k in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        d = home / k.lower()
        d.mkdir(parents=True, exist_ok=True)
        env[k] = str(d)
    env["HOME"] = str(home)
    # Used by Ardour when plugin-path-vst3 is @default@ (fresh config): extra VST3 search path.
    env["VST3_PATH"] = ":".join(str(d) for d in vst3_dirs)
    env.pop("DISPLAY", None)
    env.pop("JACK_DEFAULT_SERVER", None)
    env["LC_ALL"] = "C"
    return env


def lua_scripts_dir(env: dict) -> Path:
    return Path(env["XDG_CONFIG_HOME"]) / "ardour7" / "scripts"


def run(cmd: list[str], env: dict, timeout: float, check: bool = True) -> subprocess.CompletedProcess:
    t0 = time.time()
    # stdbuf: luasession's print() is buffered; keep it when the process crashes
    p = subprocess.run(["stdbuf", "-oL", "-eL", *cmd], env=env, capture_output=True, text=True,
                       timeout=timeout)
    log(f"{Path(cmd[0]).name} {' '.join(Path(c).name if '/' in c else c for c in cmd[1:])} "
        f"-> rc={p.returncode} in {time.time() - t0:.1f} s")
    if check and p.returncode != 0:
        sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
        raise RuntimeError(f"{cmd[0]} failed with rc={p.returncode}")
    return p


def lua(script: str, args: list[str], env: dict, timeout: float = 120) -> dict:
    p = run(["ardour7-lua", str(LUA_DIR / script), *args], env, timeout)
    out: dict[str, list[str]] = {}
    for line in p.stdout.splitlines():
        m = re.match(r"@@ ([\w]+)=(.*)", line)
        if m:
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


def vst3_module(bundle: Path) -> Path:
    """Ardour's module path for a bundle: <b>.vst3/Contents/x86_64-linux/<b>.so (names must match)."""
    mod = bundle / "Contents" / "x86_64-linux" / (bundle.name[:-len(".vst3")] + ".so")
    if not mod.is_file():
        raise RuntimeError(f"{mod} missing: the .so must be named like the bundle")
    return mod


def vst3_cache_file(bundle: Path, env: dict) -> Path:
    # Ardour names the cache after sha1(module path string): scan with the same absolute path
    # that Ardour finds through VST3_PATH (a relative or symlinked path gives another file).
    h = hashlib.sha1(str(vst3_module(bundle)).encode()).hexdigest()
    return Path(env["XDG_CACHE_HOME"]) / "ardour7" / "vst" / f"{h}.v3i"


def scan_vst3(bundle: Path, env: dict) -> None:
    """Scan the bundle into the private cache (must be redone whenever the binary changes)."""
    senv = dict(env, LD_LIBRARY_PATH="/usr/lib/ardour7")  # the scanner has no wrapper script
    p = run([SCANNER, "-f", "-v", str(bundle)], senv, 120, check=False)
    cache = vst3_cache_file(bundle, env)
    if p.returncode != 0 or not cache.is_file():
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        raise RuntimeError(f"VST3 scan of {bundle} failed (rc={p.returncode}, no {cache.name})")
    # Ardour accepts the cache only if int(mtime(module)) < int(mtime(cache)) (whole seconds,
    # strict). The scanner sets the cache mtime to max(module, cache) so a scan in the same
    # second as the build yields a "stale" cache and the plugin silently disappears. Bump it.
    mod_s = int(vst3_module(bundle).stat().st_mtime)
    st = cache.stat()
    if int(st.st_mtime) <= mod_s:
        os.utime(cache, (st.st_atime, mod_s + 1))
        log(f"bumped {cache.name} mtime to module mtime + 1 s")
    text = cache.read_text(errors="replace")
    log(f"scan cache {cache.name}: " + " ".join(re.findall(r'(?:name|n_outputs|n_aux_outputs)="[^"]*"', text)))


def check_vst3_cache(bundle: Path, env: dict) -> None:
    cache = vst3_cache_file(bundle, env)
    if not cache.is_file() or int(cache.stat().st_mtime) <= int(vst3_module(bundle).stat().st_mtime):
        raise RuntimeError("VST3 scan cache is missing or older than the plugin binary")


# --------------------------------------------------------------------------- session XML
def add_region_xml(sess_dir: Path, name: str, rate: int, chans: list[array.array]) -> None:
    """Put the audio into the session as if it had been recorded: mono float sources + region."""
    # interchange/<folder>/audiofiles: Ardour names it after the session *folder*
    (afdir,) = [d / "audiofiles" for d in (sess_dir / "interchange").iterdir() if d.is_dir()]
    n = len(chans[0])
    base = "input"
    files = [f"{base}%L.wav", f"{base}%R.wav"]
    for fn, ch in zip(files, chans):
        write_wav_float(afdir / fn, rate, [ch])
    if SUPERCLOCK_RATE % rate:
        raise ValueError("sample rate does not divide the superclock rate")
    sc = SUPERCLOCK_RATE // rate
    length = f"a{n * sc}@a0"
    xml_path = sess_dir / f"{name}.ardour"
    tree = ET.parse(xml_path)
    root = tree.getroot()
    next_id = int(root.get("id-counter"))

    def new_id() -> str:
        nonlocal next_id
        next_id += 1
        return str(next_id)

    src_ids = []
    sources = root.find("Sources")
    for fn in files:
        sid = new_id()
        src_ids.append(sid)
        ET.SubElement(sources, "Source", {
            "name": fn, "take-id": "", "type": "audio", "flags": "", "id": sid,
            "natural-position": "a0", "channel": "0", "origin": "", "gain": "1"})

    def region_attrs(rname: str, whole: bool) -> dict:
        a = {
            "name": rname, "muted": "0", "opaque": "1", "locked": "0", "video-locked": "0",
            "automatic": "1" if whole else "0", "whole-file": "1" if whole else "0",
            "import": "0", "external": "0", "sync-marked": "0", "left-of-split": "0",
            "right-of-split": "0", "hidden": "0", "position-locked": "0", "valid-transients": "0",
            "start": "a0", "length": length, "sync-position": "a0", "ancestral-start": "a0",
            "ancestral-length": "a0@a0", "stretch": "1", "shift": "1", "layering-index": "0",
            "tags": "", "contents": "0", "envelope-active": "0", "default-fade-in": "0",
            "default-fade-out": "0", "fade-in-active": "0", "fade-out-active": "0",
            "scale-amplitude": "1", "id": new_id(), "type": "audio", "first-edit": "nothing",
            "channels": "2"}
        for i, sid in enumerate(src_ids):
            a[f"source-{i}"] = sid
            a[f"master-source-{i}"] = sid
        return a

    regions = root.find("Regions")
    ET.SubElement(regions, "Region", region_attrs(base, True))
    route = next(r for r in root.find("Routes") if r.get("name") == "Mix")
    pl_id = route.get("audio-playlist")
    playlist = next(p for p in root.find("Playlists") if p.get("id") == pl_id)
    reg = ET.SubElement(playlist, "Region", region_attrs(f"{base}.1", False))
    ET.SubElement(reg, "Envelope", {"default": "yes"})
    locs = root.find("Locations")
    ET.SubElement(locs, "Location", {
        "id": new_id(), "name": "session", "start": "a0", "end": f"a{n * sc}",
        "flags": "IsSessionRange", "locked": "0", "timestamp": str(int(time.time())), "cue": "0"})
    root.set("id-counter", str(next_id + 1))
    tree.write(xml_path, encoding="UTF-8", xml_declaration=True)


# --------------------------------------------------------------------------- main flow
def export_with_retry(sess_dir: Path, name: str, out: Path, env: dict, tries: int,
                      expect_ch: int, expect_len: int,
                      failures: list[str]) -> tuple[int, list[array.array], float]:
    """Exports until a run exits cleanly with the expected shape; appends why each failed
    attempt failed to `failures` (reported in the JSON, so retries are never silent)."""
    last = ""
    for attempt in range(1, tries + 1):
        if out.exists():
            out.unlink()
        t0 = time.time()
        p = run(["ardour7-export", "-b", "float", "-o", str(out), str(sess_dir), name],
                env, 600, check=False)
        dt = time.time() - t0
        last = (p.stdout[-3000:] + p.stderr[-3000:])
        if p.returncode == 0 and out.exists():
            try:
                rate, chans = read_wav(out)
                if len(chans) == expect_ch and len(chans[0]) >= expect_len:
                    return rate, chans, dt
                last += f"\nunexpected export shape: {len(chans)} ch x {len(chans[0])}"
            except ValueError as e:
                last += f"\n{e}"
        log(f"export attempt {attempt} failed (rc={p.returncode}); retrying")
        failures.append(f"rc={p.returncode}")
        if out.exists():
            out.unlink()  # never keep a crashed run's file
    sys.stderr.write(last)
    raise RuntimeError("ardour7-export failed repeatedly")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True, type=Path, help="stereo WAV (session rate = its rate)")
    ap.add_argument("--out-dir", required=True, type=Path)
    ap.add_argument("--vst3", type=Path, help="path to a .vst3 bundle (scanned into a private cache)")
    ap.add_argument("--plugin", required=True, help="plugin name (or unique id) as Ardour lists it")
    ap.add_argument("--type", default="VST3", choices=["VST3", "LV2", "Lua", "none"])
    ap.add_argument("--lua-dsp", type=Path, action="append", default=[],
                    help="Lua DSP script(s) to install into the private config (for --type Lua)")
    ap.add_argument("--channels", type=int, default=0,
                    help="plugin output channels to route (0 = all natural outputs)")
    ap.add_argument("--stems", default="", help="comma-separated names of the stereo pairs after main")
    ap.add_argument("--work", type=Path, help="work dir (default: <out-dir>/work)")
    ap.add_argument("--tries", type=int, default=3)
    # ardour7-export crashes by itself (heap corruption in ExportGraphBuilder's teardown: "munmap_chunk():
    # invalid pointer", SIGABRT/SIGSEGV after "Exporting Audio 0.0%"), with no plugin inserted at all:
    # 6 of 14 runs of one plugin-less session here. Three tries lost a whole export ~6 % of the time.
    ap.add_argument("--export-tries", type=int, default=10)
    ap.add_argument("--exporter", default="cli", choices=["cli", "lua"],
                    help="cli: separate ardour7-export run; lua: SimpleExport inside the ardour7-lua "
                         "process that inserted the plugin")
    ap.add_argument("--expect-latency", type=int, default=-1, help="fail unless the plugin reports this latency")
    ap.add_argument("--allow-dry", action="store_true",
                    help="do not fail when every aux pair is silent (plugin probably not loaded)")
    args = ap.parse_args()

    timings = {"install_s": ensure_ardour()}
    rate, src = read_wav(args.input)
    if len(src) == 1:
        src = [src[0], src[0]]
    if len(src) != 2:
        sys.exit("input must be mono or stereo")
    n = len(src[0])
    work = (args.work or args.out_dir / "work").resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    vst_dirs = [args.vst3.resolve().parent] if args.vst3 else []
    env = ardour_env(work, vst_dirs)
    exp_dir = Path(env["XDG_CONFIG_HOME"]) / "ardour7" / "export"
    exp_dir.mkdir(parents=True, exist_ok=True)
    for f in (HERE / "export").iterdir():  # float-WAV export format + preset for SimpleExport
        shutil.copy(f, exp_dir / f.name)
    if args.lua_dsp:
        lua_scripts_dir(env).mkdir(parents=True, exist_ok=True)
        for s in args.lua_dsp:
            shutil.copy(s, lua_scripts_dir(env) / s.name)

    t0 = time.time()
    if args.vst3:
        scan_vst3(args.vst3.resolve(), env)
    timings["scan_s"] = round(time.time() - t0, 2)

    multi = args.out_dir / "master_all.wav"
    export_failures: list[str] = []
    t_all = time.time()
    for attempt in range(1, args.tries + 1):
        name = f"stemtest{attempt}"
        sess_dir = work / name
        t0 = time.time()
        try:
            # Ardour itself (no plugin loaded yet) was seen to crash now and then while tearing
            # down after creating the session (rc=-11 after "@@ created"): a fresh try is fair.
            lua("create_session.lua", [str(sess_dir), name, str(rate)], env)
        except RuntimeError:
            if attempt < args.tries:
                log(f"attempt {attempt}: creating the session crashed Ardour; retrying")
                continue
            raise
        add_region_xml(sess_dir, name, rate, src)
        timings["create_s"] = round(time.time() - t0, 2)
        setup_args = [str(sess_dir), name, args.type, args.plugin, str(args.channels)]
        if args.exporter == "lua":
            # one process: insert plugin, save, export (the plugin is known to be loaded here)
            if multi.exists():
                multi.unlink()
            setup_args += [str(args.out_dir), multi.stem, FLOAT_PRESET_ID]
        t0 = time.time()
        try:
            info = lua("setup_routing.lua", setup_args, env, timeout=900)
        except RuntimeError:
            if args.exporter == "lua" and attempt < args.tries:
                log(f"attempt {attempt}: ardour7-lua failed; retrying")
                continue
            raise
        timings["setup_s" if args.exporter == "cli" else "setup_and_export_s"] = round(time.time() - t0, 2)
        break
    for k in ("regions", "region", "session_range", "plugin", "natural_in", "natural_out", "latency",
              "customize", "plugin_out_streams", "output_map", "track_outputs", "master_io",
              "export_preset", "export_ok"):
        for v in info.get(k, []):
            log(f"  {k}: {v}")
    for v in info.get("out_port", []):
        log(f"  out_port: {v}")
    if info.get("regions") != ["1"]:
        raise RuntimeError(f"region not loaded: {info.get('regions')}")
    nch = int(info["channels"][0])
    if args.type != "none" and info.get("customize") != ["true"]:
        raise RuntimeError("customize_plugin_insert failed")
    latency = int(info.get("latency", ["0"])[0])
    if args.expect_latency >= 0 and latency != args.expect_latency:
        raise RuntimeError(f"plugin latency {latency} != expected {args.expect_latency}")

    if args.exporter == "cli":
        # The scan cache must be newer than the binary or the export silently drops the plugin.
        if args.vst3:
            scan_vst3(args.vst3.resolve(), env)
            check_vst3_cache(args.vst3.resolve(), env)
        if os.environ.get("ARDOUR_STEMS_SIMULATE_STALE") and args.vst3:
            # negative control: a "rebuild" after the scan makes Ardour drop the plugin silently
            time.sleep(1.1)
            os.utime(vst3_module(args.vst3.resolve()))
            log("simulated a rebuild after the scan (ARDOUR_STEMS_SIMULATE_STALE)")
        erate, chans, dt = export_with_retry(sess_dir, name, multi, env, args.export_tries, nch, n,
                                             export_failures)
        timings["export_s"] = round(dt, 2)
    else:
        if info.get("export_preset") != ["true"] or info.get("export_ok") != ["true"]:
            raise RuntimeError("in-process export failed (preset missing or run_export false)")
        erate, chans = read_wav(multi)
        if len(chans) != nch or len(chans[0]) < n:
            raise RuntimeError(f"unexpected export shape {len(chans)} x {len(chans[0])}")
    timings["total_ardour_s"] = round(time.time() - t_all, 2)
    export_frames = len(chans[0])
    chans = [c[:n] for c in chans]

    stem_names = ["main"] + [s for s in args.stems.split(",") if s]
    while len(stem_names) < nch // 2:
        stem_names.append(f"aux{len(stem_names)}")
    report = {"rate": erate, "frames": n, "export_frames": export_frames, "channels": nch, "plugin": info.get("plugin", [""])[0],
              "latency": latency, "timings": timings, "export_failed_attempts": export_failures,
              "outputs": {}}
    in_rms = (rms(src[0]) + rms(src[1])) / 2
    for k in range(nch // 2):
        pair = chans[2 * k:2 * k + 2]
        path = args.out_dir / f"{k:02d}_{stem_names[k]}.wav"
        write_wav_float(path, erate, pair)
        report["outputs"][stem_names[k]] = {
            "file": path.name, "rms": [round(rms(c), 6) for c in pair],
            "peak": [round(peak(c), 6) for c in pair]}
    diff_main = max(max(abs(a - b) for a, b in zip(chans[c], src[c])) for c in range(2))
    report["main_max_abs_diff_vs_input"] = diff_main
    report["input_rms"] = round(in_rms, 6)
    aux_live = any(max(v["rms"]) > 1e-6 for k, v in report["outputs"].items() if k != "main")
    report["aux_non_silent"] = aux_live
    (args.out_dir / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    # A plugin that Ardour could not load at export time leaves an UnknownProcessor: the main
    # pair is the dry input and every aux pair is digital silence.
    if nch > 2 and in_rms > 0 and not aux_live and not args.allow_dry:
        log("FAIL: every aux pair is silent: the plugin was probably not in the signal path")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
