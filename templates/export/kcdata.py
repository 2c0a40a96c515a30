"""The captured memory of a kerncap export, read with the Python standard library alone.

kerncap-export.json lists every region (VA, bytes, element type) with its stored chunks: a region
is cut into chunks of `chunkBytes`; data/memory/before.bin holds its non-zero chunks before the
launch, data/memory/after.bin the chunks the launch changed, each as runs of chunks stored back to
back: an extent [first chunk, chunk count, byte offset in the file]. A chunk in neither file was
zero (before) or unchanged (after). repro.py builds its tensors from these bytes and judges the
result with `judge`; a test can call both without Triton or PyTorch. Before any of it, `verify`
checks every data file against the sizes and kc64 checksums the export recorded (`dataFiles`,
`dataDigests`: the same tables as capture.h's, for the C program).
"""
import json
import math
import os
import struct

ELEMENT = {"fp64": ("d", 8), "fp32": ("f", 4), "fp16": ("e", 2), "bf16": (None, 2), "i64": ("q", 8), "u64": ("Q", 8),
           "i32": ("i", 4), "u32": ("I", 4), "i16": ("h", 2), "u16": ("H", 2), "i8": ("b", 1), "u8": ("B", 1), "i1": ("B", 1)}
FLOATS = {"fp64", "fp32", "fp16", "bf16"}


def shown(text):
    """Text from the capture as it may reach a terminal: printable ASCII as it is, every other
    character escaped (\\xNN, \\uNNNN), so that an escape sequence or a bidi override in a received
    capture is shown, never obeyed."""
    return "".join(c if " " <= c <= "~" else f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}" for c in str(text))


M32 = 0xFFFFFFFF


def _fmix32(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M32
    return h ^ (h >> 16)


def kc64(b):
    """kc64 ("kc64/1"), kerncap's memory-chunk checksum, of bytes b, as an int: words w_j, the
    little-endian u32 of bytes [4j, 4j+4) zero-padded past the end; t_j = fmix32(w_j ^ (j*0x9E3779B1 +
    0x7F4A7C15)); A = sum t_j, B = sum t_j*(2j+1) (mod 2^32); kc64 = fmix32(A ^ len) << 32 |
    fmix32(B + len*0x85EBCA6B). Against accidental damage, not a forger. With numpy (a few hundred
    MB/s) when it imports, else in plain Python (a few MB/s)."""
    n = len(b)
    padded = bytes(b) + b"\0" * (-n % 4)
    try:
        import numpy as np
    except ImportError:
        np = None
    if np is not None:
        u = np.uint32
        with np.errstate(over="ignore"):
            w = np.frombuffer(padded, dtype="<u4").astype(u)
            j = np.arange(len(w), dtype=u)
            t = w ^ (j * u(0x9E3779B1) + u(0x7F4A7C15))
            t ^= t >> u(16)
            t *= u(0x85EBCA6B)
            t ^= t >> u(13)
            t *= u(0xC2B2AE35)
            t ^= t >> u(16)
            a = int(t.sum(dtype=np.uint64)) & M32
            b2 = int((t * (j * u(2) + u(1))).sum(dtype=np.uint64)) & M32
    else:
        a = b2 = 0
        for j, (w,) in enumerate(struct.iter_unpack("<I", padded)):
            t = _fmix32(w ^ ((j * 0x9E3779B1 + 0x7F4A7C15) & M32))
            a = (a + t) & M32
            b2 = (b2 + t * (2 * j + 1)) & M32
    return (_fmix32(a ^ (n & M32)) << 32) | _fmix32((b2 + n * 0x85EBCA6B) & M32)


class Damaged(Exception):
    """A data file of the export differs from what the export recorded: str(e) names the file and how."""


class Export:
    def __init__(self, root):
        self.root = root
        with open(os.path.join(root, "kerncap-export.json")) as f:
            self.doc = json.load(f)
        self.chunk = self.doc["chunkBytes"]
        self.regions = self.doc["regions"]

    def path(self, rel):
        """The file `rel` (a path kerncap-export.json names) inside the export: relative, no `..`, no
        link on the way out of the folder; anything else raises Damaged (a crafted or damaged
        kerncap-export.json), never opened."""
        if not isinstance(rel, str) or not rel or os.path.isabs(rel) or ".." in rel.replace("\\", "/").split("/"):
            raise Damaged(f"kerncap-export.json names {shown(rel)}, which is no file inside the export")
        root = os.path.realpath(self.root)
        full = os.path.realpath(os.path.join(root, rel))
        if os.path.commonpath([root, full]) != root:
            raise Damaged(f"kerncap-export.json names {shown(rel)}, which leads out of the export")
        return full

    def _read(self, rel, offset, n):
        with open(self.path(rel), "rb") as f:
            f.seek(offset)
            b = f.read(n)
        if len(b) != n:
            raise IOError(f"{rel} ends before byte {offset + n}")
        return b

    def verify(self):
        """Every data file against the size and kc64 checksums the export recorded, before anything
        reads them; raises Damaged naming the first file that differs (an empty memory image may be
        absent). Reads every stored byte once."""
        files = self.doc.get("dataFiles")
        digests = self.doc.get("dataDigests")
        if files is None or digests is None:
            raise Damaged("kerncap-export.json records no data checksums (dataFiles, dataDigests): export the capture again with this kerncap")
        whole = lambda x: isinstance(x, int) and not isinstance(x, bool) and x >= 0  # noqa: E731
        if not isinstance(files, list) or not isinstance(digests, list) or not all(isinstance(f, dict) and whole(f.get("bytes")) for f in files):
            raise Damaged("kerncap-export.json's dataFiles is not a list of {path, bytes} (a size a whole number of bytes)")
        for rel in (self.doc.get("files") or {}).values():
            if rel:
                self.path(rel)  # every file the script reads lies inside the export
        by_file = {}
        for d in digests:
            if not (isinstance(d, list) and len(d) == 4 and whole(d[0]) and d[0] < len(files) and whole(d[1]) and whole(d[2])
                    and isinstance(d[3], str) and len(d[3]) == 16 and all(c in "0123456789abcdef" for c in d[3])):
                raise Damaged(f"kerncap-export.json's dataDigests holds {shown(d)}, not [file, offset, length, 16 hex digits]")
            if d[1] + d[2] > files[d[0]]["bytes"]:
                raise Damaged(f"kerncap-export.json's dataDigests holds {shown(d)}, past the end of its file")
            by_file.setdefault(d[0], []).append(d)
        for i, f in enumerate(files):
            path = self.path(f.get("path"))
            if not os.path.exists(path) and f["bytes"] == 0:
                continue
            if os.path.islink(path) or not os.path.isfile(path):
                raise Damaged(f"{shown(f['path'])} is missing or not a regular file")
            size = os.path.getsize(path)
            if size != f["bytes"]:
                how = "truncated" if size < f["bytes"] else "appended to"
                raise Damaged(f"{shown(f['path'])}: {size} bytes, the export recorded {f['bytes']} ({how})")
            with open(path, "rb") as fh:
                for _, offset, length, want in by_file.get(i, []):
                    fh.seek(offset)
                    got = kc64(fh.read(length))
                    if got != int(want, 16):
                        raise Damaged(f"{shown(f['path'])}: bytes {offset}..{offset + length} differ from their checksum (kc64 {got:016x}, recorded {shown(want)})")

    def region_bytes(self, i, state):
        """Region i as it was before the launch ("before") or as the app left it ("after")."""
        r = self.regions[i]
        out = bytearray(r["size"])
        files = self.doc["files"]
        for which in (["before", "after"] if state == "after" else ["before"]):
            for first, count, offset in r[which]:
                start = first * self.chunk
                n = min(r["size"], (first + count) * self.chunk) - start
                out[start:start + n] = self._read(files[which], offset, n)
        return out

    def tensor_args(self):
        """(argument, region index, byte offset, element count, element type) of each pointer argument."""
        return [(a, a["region"], a["offset"], a["numel"], a["dtype"]) for a in self.doc["triton"]["args"] if a["kind"] == "tensor"]


def _values(b, dtype):
    fmt, size = ELEMENT.get(dtype, ("B", 1))
    n = len(b) // size
    if dtype == "bf16":
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for (h,) in struct.iter_unpack("<H", b[:n * 2])]
    return [v for (v,) in struct.iter_unpack("<" + fmt, b[:n * size])]


def multiset_difference(a, b, size):
    """Elements of a without a partner in b plus those of b without one in a: both compared as
    sorted multisets of size-byte bit patterns (-0 is not +0, a NaN equals the same NaN bits); a
    trailing partial element is compared bytewise and counts as one element of each. kerncap's own
    count (src/replay/envelope.ts multisetDifference)."""
    n = len(a) // size
    x = sorted(a[k * size:(k + 1) * size] for k in range(n))
    y = sorted(b[k * size:(k + 1) * size] for k in range(len(b) // size))
    # sorted as bytes, not as numbers: any one order of both gives the same count
    i = j = unmatched = 0
    while i < len(x) and j < len(y):
        if x[i] == y[j]:
            i, j = i + 1, j + 1
        elif x[i] < y[j]:
            unmatched, i = unmatched + 1, i + 1
        else:
            unmatched, j = unmatched + 1, j + 1
    unmatched += len(x) - i + len(y) - j
    if a[n * size:] != b[len(y) * size:]:
        unmatched += 2
    return unmatched


def judge(got, want, before, changed, dtype, atol=0.0, rtol=0.0, multiset=False):
    """Compare a region's replayed bytes with the app's after state.

    Returns (verdict, detail): "bit-exact", "within-tolerance", "multiset-equal" or "mismatch".
    Float elements count as equal within atol + rtol * |expected|; others bit for bit. A region the
    app changed that the replay left as it was is a mismatch whatever the tolerance. With multiset
    (kerncap judge --multiset), the region's elements are compared as a multiset: the app's
    elements in any order match, as kerncap judges it.
    """
    got, want = bytes(got), bytes(want)
    if multiset:
        if got == want:
            return "bit-exact", ""
        d = multiset_difference(got, want, ELEMENT.get(dtype, ("B", 1))[1])
        if d:
            return "mismatch", f"{d} elements without a partner in the app's (as a multiset)"
        return "multiset-equal", "the app's elements in another order"
    if changed and got == bytes(before) and got != want:
        return "mismatch", "the app changed it, the replay left it as it was"
    if got == want:
        return "bit-exact", ""
    size = ELEMENT.get(dtype, ("B", 1))[1]
    first = next(i for i in range(len(got)) if got[i] != want[i])
    if dtype not in FLOATS:
        return "mismatch", f"bytes differ from offset {first}"
    over, worst = 0, 0.0
    for g, e in zip(_values(got, dtype), _values(want, dtype)):
        if g == e or (math.isnan(g) and math.isnan(e)):
            continue
        err = abs(g - e)
        worst = max(worst, err) if not math.isnan(err) else math.inf
        if not err <= atol + rtol * abs(e):
            over += 1
    if over:
        return "mismatch", f"{over} elements over tolerance from offset {first}, max abs error {worst:g}"
    return "within-tolerance", f"max abs error {worst:g}"
