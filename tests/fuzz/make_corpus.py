"""Writes the seed corpus for fuzz_npy into tests/fuzz/corpus_npy (committed, a few KB).

    /usr/bin/python3 tests/fuzz/make_corpus.py

Debian's Python, which has python3-numpy (the pyenv python3 on PATH does not). The valid seeds
are written by NumPy itself (every dtype, order and header version the reader supports); the
near-misses are NumPy's bytes with one fault each, so the fuzzer starts next to every check.
Deterministic: running it again rewrites the same bytes.
"""
import io
import pathlib
import struct

import numpy as np

OUT = pathlib.Path(__file__).resolve().parent / "corpus_npy"


def npy(array, version=None):
    f = io.BytesIO()
    np.lib.format.write_array(f, array, version=version, allow_pickle=False)
    return f.getvalue()


def handmade(header, payload=b"", major=1, pad=True):
    """A file with a literal header dict (padded like NumPy's, unless pad is False)."""
    pre = 10 if major == 1 else 12
    h = header.encode("latin-1")
    if pad:
        h += b" " * (-(pre + len(h) + 1) % 64) + b"\n"
    size = struct.pack("<H" if major == 1 else "<I", len(h))
    return b"\x93NUMPY" + bytes([major, 0]) + size + h + payload


m = np.array([[1.25, -2.5, 3.0], [4.0, 5.5, -6.0]])
specials = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4e38], np.float32)
f4_2 = np.array([1.0, 2.0], np.float32).tobytes()

seeds = {
    # Valid: what NumPy writes.
    "v1_f4_c_2x3": npy(m.astype(np.float32)),
    "v1_f8_fortran_2x3": npy(np.asfortranarray(m)),
    "v1_f4_fortran_2x2x2": npy(np.asfortranarray(np.arange(8, dtype=np.float32).reshape(2, 2, 2))),
    "v1_i4_1x3": npy(np.array([[-7, 8, 2**31 - 1]], np.int32)),
    "v1_i8_2x1x2": npy(np.array([-(2**63), 2**53 + 1, 0, 2**63 - 1], np.int64).reshape(2, 1, 2)),
    "v1_f8_scalar": npy(np.float64(2.75)),
    "v1_f4_empty_0x3": npy(np.zeros((0, 3), np.float32)),
    "v1_f8_empty_0": npy(np.zeros((0,), np.float64)),
    "v1_f4_specials": npy(specials),
    "v2_f4_2x3": npy(m.astype(np.float32), version=(2, 0)),
    "v3_f8_2x3": npy(m, version=(3, 0)),
    # Valid: hand-written variants the reader accepts.
    "v1_odd_spacing": handmade("{ \"shape\" :(2,),'fortran_order':False ,'descr':'<f4'}", f4_2),
    "v1_python2_longs":
        handmade("{'descr': '=f4', 'fortran_order': False, 'shape': (1L, 2L), }", f4_2),
    "v1_unpadded": handmade("{'descr':'<f4','fortran_order':False,'shape':(2,)}", f4_2, pad=False),
    "v1_fortran_64_dims":
        handmade("{'descr': '<f4', 'fortran_order': True, 'shape': (" + "1, " * 63 + "2), }", f4_2),
    # Near-misses: one fault each.
    "bad_big_endian": handmade("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f4_2),
    "bad_complex": handmade("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", f4_2),
    "bad_missing_key": handmade("{'descr': '<f4', 'shape': (2,), }", f4_2),
    "bad_duplicate_key":
        handmade("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", f4_2),
    "bad_fortran_value": handmade("{'descr': '<f4', 'fortran_order': 1, 'shape': (2,), }", f4_2),
    "bad_negative_dim":
        handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", f4_2),
    "bad_overflowing_shape":
        handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"),
    "bad_trailing_text":
        handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", f4_2),
    "bad_short_payload":
        handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f4_2[:7]),
    "bad_version_4": b"\x93NUMPY\x04\x00" + npy(np.float32(1.0))[8:],
    "bad_header_too_long": npy(np.float32(1.0))[:8] + b"\xff\x7f" + npy(np.float32(1.0))[10:],
    "bad_truncated_v2": npy(np.float32(1.0), version=(2, 0))[:11],
    "bad_65_dims":
        handmade("{'descr': '<f4', 'fortran_order': False, 'shape': (" + "1, " * 65 + "), }"),
    "bad_control_chars":
        handmade("{'descr': '\x1b[2J\x00\xff', 'fortran_order': False, 'shape': (1,), }", f4_2[:4]),
}

OUT.mkdir(exist_ok=True)
for old in OUT.glob("*.npy"):
    old.unlink()
for name, data in seeds.items():
    (OUT / f"{name}.npy").write_bytes(data)
print(f"{len(seeds)} seeds, {sum(map(len, seeds.values()))} bytes in {OUT}")
