#!/usr/bin/env python3
"""Writes the fuzz targets' seed inputs (fuzz/seeds/<target>/): a few small
valid files of each format, so libFuzzer starts from inputs that pass the
first checks. Run from anywhere; the output is committed (every file is
under 1 KiB). Uses only the standard library (no numpy)."""
import gzip
import json
import os
import struct

ROOT = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(ROOT, target, name), "wb") as f:
        f.write(data)


def gz(data):
    return gzip.compress(data, mtime=0)


# ---- idx: magic 00 00 type ndims, big-endian u32 dims, big-endian data
def idx(code, fmt, dims, values):
    head = bytes([0, 0, code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims)
    return head + b"".join(struct.pack(">" + fmt, v) for v in values)


write("idx", "u8-3x2x2", idx(0x08, "B", [3, 2, 2], range(12)))
write("idx", "labels-u8-4", idx(0x08, "B", [4], [0, 1, 2, 9]))
write("idx", "f32-2x3", idx(0x0D, "f", [2, 3], [0.5, -1, 2, 3, 1e30, 0]))
write("idx", "i16-3", idx(0x0B, "h", [3], [-1, 2, 300]))
write("idx", "i32-2x1", idx(0x0C, "i", [2, 1], [7, -7]))
write("idx", "f64-1x2", idx(0x0E, "d", [1, 2], [1.25, 2]))
write("idx", "u8-2x2.gz", gz(idx(0x08, "B", [2, 2], [1, 2, 3, 4])))


# ---- npy: \x93NUMPY, version, header length, a Python dict padded to 64
def npy(descr, shape, payload, version=1, fortran=False):
    shape_text = "(" + "".join(f"{d}, " for d in shape).rstrip(" ") + ")" if len(shape) != 1 else f"({shape[0]},)"
    header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape_text}, }}"
    lenbytes = 2 if version == 1 else 4
    pad = (64 - (10 + lenbytes - 2 + len(header) + 1) % 64) % 64
    header = (header + " " * pad + "\n").encode()
    length = struct.pack("<H" if version == 1 else "<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + length + header + payload


write("npy", "f4-2x3.npy", npy("<f4", [2, 3], struct.pack("<6f", 1, 2, 3, 4, 5, 6)))
write("npy", "i8-3.npy", npy("<i8", [3], struct.pack("<3q", 0, 1, 2)))
write("npy", "u1-2x2.npy", npy("|u1", [2, 2], bytes([1, 2, 3, 4])))
write("npy", "f2-2-v2.npy", npy("<f2", [2], struct.pack("<2e", 0.5, -2), version=2))
write("npy", "u2-1x1x2-v3.npy", npy("<u2", [1, 1, 2], struct.pack("<2H", 7, 65535), version=3))
write("npy", "f8-2.npy.gz", gz(npy("<f8", [2], struct.pack("<2d", 1.5, -0.25))))

# ---- csv: first line = the target's options (see fuzz_csv.cc), then the file
write("csv", "header", "\nx,y,label\n1,2,0\n3.5,-4e2,1\n")
write("csv", "no-header-columns", "h c0 c2\n1,2,3\n4,5,6\n7,8,9\n")
write("csv", "skip-semicolon-quoted", 's1 d;\n# a comment line\n"a";"b"\n"1";"2"\n3;4\n')
write("csv", "whitespace-crlf", "h d \r\n1 2\t3\r\n 4  5 6\r\n")
write("csv", "bom-int", "i\n\xef\xbb\xbfid,label\n0,1\n2,3\n")
write("csv", "gzip", b"\n" + gz(b"a,b\n1,2\n3,4\n"))

# ---- gzip: .gz files (and one plain) for GzReader, text() and tokens()
write("gzip", "text.gz", gz(b"hello world\nsecond line\r\nlast line without newline"))
write("gzip", "tokens-u16.gz", gz(struct.pack("<8H", 1, 2, 3, 4, 5, 6, 7, 8)))
write("gzip", "two-members.gz", gz(b"first member\n") + gz(b"second member\n"))
write("gzip", "empty.gz", gz(b""))
write("gzip", "plain.txt", b"not compressed at all\n1 2 3\n")


# ---- safetensors: u64 header length, JSON header padded with spaces, data
def safetensors(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, payload in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


write("safetensors", "x-f32-2x2", safetensors([("x", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))]))
write("safetensors", "x-and-w-meta", safetensors(
    [("w", "BF16", [3], b"\x80\x3f\x00\x40\x40\x40"), ("x", "I64", [2, 1], struct.pack("<2q", 5, -5))],
    {"format": "pt", "step": "3"}))
write("safetensors", "x-u8-empty-and-scalar", safetensors(
    [("x", "U8", [3], b"\x01\x02\x03"), ("e", "F64", [0, 4], b""), ("s", "F16", [], b"\x00\x3c")]))
write("safetensors", "x-f8-bool", safetensors([("x", "F8_E4M3", [2], b"\x38\x7f"), ("b", "BOOL", [2], b"\x00\x01")]))
write("safetensors", "x-f32.gz", gz(safetensors([("x", "F32", [1], struct.pack("<f", 2.5))])))

# ---- train_state: state.json as trainStateJson writes it, and variations
write("train_state", "full.json",
      '{"step":10,"epoch":1,"step_in_epoch":3,"seed":1,"model":"M","global_batch":7,"world":2}\n')
write("train_state", "old-no-batch.json", '{"step": 0, "epoch": 0, "step_in_epoch": 0, "seed": 0, "model": "Net"}')
write("train_state", "escaped-model.json",
      '{"step":5,"epoch":0,"step_in_epoch":5,"seed":-3,"model":"A\\u00e9\\"b","world":1}')


# ---- store_wire: byte 0 = authed (bit 0) and the split point, then frames
def frame(op, key, value):
    key = key.encode()
    return bytes([op]) + struct.pack("<I", len(key)) + key + struct.pack("<Q", len(value)) + value


def keylist(keys):
    return struct.pack("<I", len(keys)) + b"".join(struct.pack("<I", len(k)) + k.encode() for k in keys)


write("store_wire", "handshake", bytes([0x0a]) + frame(1, "dtl-store/1", b"token-1234"))
write("store_wire", "set-get-add-wait", bytes([0x21]) + frame(2, "rank/0", b"host:1234") +
      frame(3, "rank/0", struct.pack("<Q", 1000)) + frame(4, "count", struct.pack("<q", -2)) +
      frame(5, "", struct.pack("<Q", 5) + keylist(["a", "rank/1", ""])))
write("store_wire", "counter-set-add", bytes([0x41]) + frame(2, "n", b"-42") + frame(4, "n", struct.pack("<q", 1)))
write("store_wire", "reply-timeout-keys", bytes([0x01, 1]) + struct.pack("<Q", 16) + keylist(["ab", "c"]))


# ---- region: the random region generator's choice bytes
# (tests/support/random_region.h). Any bytes make a valid region (past their
# end a stream seeded by their hash goes on), so the seeds are just bytes of
# a few lengths: the first few dozen pick the dims, inputs, ops and outputs,
# the rest the first input values.
def choice_bytes(seed, n):
    state, out = seed, bytearray()
    while len(out) < n:  # a 64-bit LCG: reproducible without `random`'s version drift
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append(state >> 56)
    return bytes(out)


write("region", "zeros-16", bytes(16))
write("region", "ones-16", b"\xff" * 16)
for seed, n in [(1, 8), (2, 24), (3, 48), (4, 96), (5, 256), (6, 600)]:
    write("region", "bytes-%d-%d" % (seed, n), choice_bytes(seed, n))
