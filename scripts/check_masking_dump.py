"""Replays a chapter 05 dump in PyTorch and compares the masked attention.

  build/release/bin/05_masking --ids 3,1,0/2,2,2/4,0,0 --mask causal --d-model 32 --dump /tmp/d
  /usr/bin/python3 scripts/check_masking_dump.py /tmp/d

Loads X [B, n, d], allowed [B, n, n] (1 = may attend) and scale [1, 1], computes
softmax(masked_fill(X X^T * scale, ~allowed, -inf)) X in PyTorch (float32), sets rows with no
allowed key to zero as the course defines them, and compares with the dumped weights and out.
Where no row is empty it also runs PyTorch's own kernel (F._scaled_dot_product_attention in
1.13, whose boolean attn_mask means True = may attend too) on X pre-scaled so that its
1/sqrt(d) equals the dump's scale. Prints the largest differences; exits 0 when they are at
most 1e-4 (scores of ~100 from 512-term float32 dot products carry ~3e-5 of rounding; see
tests/chapters/test_05_masking.cpp), 1 when larger, 2 when the dump is incomplete. A dump made with
--fill -1e9 is replayed with -1e9: the script reads the options from the dump's manifest.json.

Needs Debian's python3-torch: run it with /usr/bin/python3, not the pyenv python3 on PATH.
"""
import math
import sys

import torch
import torch.nn.functional as F

from course_dump import open_dump

TOLERANCE = 1e-4
NAMES = ["X", "allowed", "scale", "weights", "out"]


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} DUMP_DIR", file=sys.stderr)
        return 2
    dump = open_dump(argv[1], "05_masking", need=NAMES)
    fill = -1e9 if dump.option("--fill") == "-1e9" else float("-inf")
    a = {n: dump[n] for n in NAMES}
    x, allowed, scale = a["X"], a["allowed"] != 0, float(a["scale"][0, 0])
    B, n, d = x.shape
    if tuple(allowed.shape) != (B, n, n):
        print(f"allowed is {list(allowed.shape)}, expected {[B, n, n]}", file=sys.stderr)
        return 2

    scores = (x @ x.transpose(-2, -1)) * scale
    weights = torch.softmax(scores.masked_fill(~allowed, fill), dim=-1)
    if fill == float("-inf"):
        empty = ~allowed.any(dim=-1, keepdim=True)
        weights = weights.masked_fill(empty.expand_as(weights), 0.0)
    out = weights @ x
    dw = (weights - a["weights"]).abs().max().item()
    do = (out - a["out"]).abs().max().item()
    print(f"B={B} n={n} d={d} scale={scale:.6g}: max |weights - torch| = {dw:.2e}, "
          f"max |out - torch| = {do:.2e}")
    worst = max(dw, do)
    if allowed.any(dim=-1).all() and fill == float("-inf"):
        q = x * (scale * math.sqrt(d))  # the kernel divides by sqrt(d); this makes it `scale`
        o_k, w_k = F._scaled_dot_product_attention(q, x, x, attn_mask=allowed,
                                                    need_attn_weights=True)
        dk = max((w_k - a["weights"]).abs().max().item(), (o_k - a["out"]).abs().max().item())
        print(f"PyTorch's own kernel: max difference {dk:.2e}")
        worst = max(worst, dk)
    ok = worst <= TOLERANCE
    print("agrees with PyTorch" if ok else f"DIFFERS from PyTorch by more than {TOLERANCE}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
