"""Minimal safetensors reader/writer (no `safetensors` package needed).

Format: u64 little-endian header length N, then N bytes of JSON
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
then the raw little-endian data blob (offsets relative to the blob start).

bf16 is handled by reading the raw 16-bit words as int16 and re-viewing them as
torch.bfloat16 (and the reverse on write), so nothing is ever rounded on I/O.
Works with torch 1.13 and 2.x; without torch, `save` writes numpy arrays (numpy-only generators such as
make_schedule_goldens.py) and `load_numpy` reads any dtype but BF16.
"""
import json
import os
import struct

import numpy as np

try:
    import torch
except ImportError:  # numpy-only use
    torch = None

# safetensors dtype string -> numpy dtype used for the raw bytes
_NP = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.int16, "I64": np.int64,
       "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
_NP_TO_ST = {np.dtype(v): k for k, v in _NP.items() if k != "BF16"}
if torch is not None:
    # safetensors dtype string -> (numpy dtype used for raw bytes, torch dtype)
    _DTYPES = {
        "F64": (np.float64, torch.float64),
        "F32": (np.float32, torch.float32),
        "F16": (np.float16, torch.float16),
        "BF16": (np.int16, torch.bfloat16),  # raw words, re-viewed as bf16
        "I64": (np.int64, torch.int64),
        "I32": (np.int32, torch.int32),
        "I16": (np.int16, torch.int16),
        "I8": (np.int8, torch.int8),
        "U8": (np.uint8, torch.uint8),
        "BOOL": (np.bool_, torch.bool),
    }
    _TORCH_TO_ST = {v[1]: k for k, v in _DTYPES.items()}


def _tensor_from_bytes(buf, dtype, shape):
    np_dt, t_dt = _DTYPES[dtype]
    arr = np.frombuffer(buf, dtype=np.dtype(np_dt).newbyteorder("<")).copy()
    t = torch.from_numpy(arr.astype(np_dt, copy=False))
    if dtype == "BF16":
        t = t.view(torch.bfloat16)
    return t.reshape(shape)


def load_file(path):
    """Load one .safetensors file -> (dict[name, tensor], metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        out[name] = _tensor_from_bytes(data[base + b:base + e], info["dtype"], info["shape"])
    return out, meta


def load_numpy(path):
    """Load one .safetensors file as numpy arrays -> (dict[name, ndarray], metadata dict); BF16 comes back
    as the float32 arrays of the same values (exact)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        if info["dtype"] == "BF16":
            words = np.frombuffer(data[base + b:base + e], dtype="<u2").astype(np.uint32) << 16
            out[name] = words.view(np.float32).reshape(info["shape"]).copy()
            continue
        dt = np.dtype(_NP[info["dtype"]]).newbyteorder("<")
        out[name] = np.frombuffer(data[base + b:base + e], dtype=dt).reshape(info["shape"]).copy()
    return out, meta


def load(path):
    """Load a .safetensors file, a `*.safetensors.index.json`, or a folder.

    A folder is resolved to its single `*.safetensors.index.json` (sharded) or
    its single `*.safetensors` file. Returns (tensors, metadata); for a sharded
    checkpoint metadata is the index's "metadata" entry.
    """
    if os.path.isdir(path):
        idx = [f for f in os.listdir(path) if f.endswith(".safetensors.index.json")]
        if len(idx) == 1:
            return load(os.path.join(path, idx[0]))
        files = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
        if len(files) != 1:
            raise ValueError(f"{path}: expected one index.json or one .safetensors, found {files}")
        return load_file(os.path.join(path, files[0]))
    if path.endswith(".index.json"):
        with open(path) as f:
            index = json.load(f)
        folder = os.path.dirname(path)
        out = {}
        for shard in sorted(set(index["weight_map"].values())):
            t, _ = load_file(os.path.join(folder, shard))
            out.update(t)
        missing = set(index["weight_map"]) - set(out)
        if missing:
            raise ValueError(f"index lists tensors missing from shards: {sorted(missing)[:5]}")
        return out, index.get("metadata", {})
    return load_file(path)


def save(path, tensors, metadata=None):
    """Write dict[name, tensor] to `path` (tensors laid out in name order)."""
    header = {}
    blobs = []
    off = 0
    for name in sorted(tensors):
        if isinstance(tensors[name], np.ndarray):
            a = np.ascontiguousarray(tensors[name])
            if a.dtype not in _NP_TO_ST:
                raise TypeError(f"{name}: unsupported dtype {a.dtype}")
            st = _NP_TO_ST[a.dtype]
            raw = a.astype(np.dtype(_NP[st]).newbyteorder("<"), copy=False).tobytes()
            header[name] = {"dtype": st, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
            blobs.append(raw)
            off += len(raw)
            continue
        t = tensors[name].detach().cpu().contiguous()
        if t.dtype not in _TORCH_TO_ST:
            raise TypeError(f"{name}: unsupported dtype {t.dtype}")
        st = _TORCH_TO_ST[t.dtype]
        if t.dtype == torch.bfloat16:
            raw = t.view(torch.int16).numpy().astype("<i2", copy=False).tobytes()
        else:
            raw = t.numpy().astype(np.dtype(_DTYPES[st][0]).newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": st, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)  # pad header so the data blob is 8-aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for b in blobs:
            f.write(b)


def save_sharded(folder, tensors, base="diffusion_pytorch_model", max_bytes=None, metadata=None):
    """Write a sharded checkpoint + `<base>.safetensors.index.json` (for tests of the index path)."""
    names = sorted(tensors)
    shards, cur, cur_b = [], [], 0
    for n in names:
        nb = tensors[n].numel() * tensors[n].element_size()
        if cur and max_bytes is not None and cur_b + nb > max_bytes:
            shards.append(cur)
            cur, cur_b = [], 0
        cur.append(n)
        cur_b += nb
    shards.append(cur)
    wm = {}
    total = 0
    for i, sh in enumerate(shards):
        fn = f"{base}-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save(os.path.join(folder, fn), {n: tensors[n] for n in sh})
        for n in sh:
            wm[n] = fn
            total += tensors[n].numel() * tensors[n].element_size()
    md = {"total_size": total}
    if metadata:
        md.update(metadata)
    with open(os.path.join(folder, f"{base}.safetensors.index.json"), "w") as f:
        json.dump({"metadata": md, "weight_map": wm}, f, indent=2, sort_keys=True)
