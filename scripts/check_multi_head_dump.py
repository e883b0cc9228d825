"""Replays a chapter 06 dump in torch.nn.MultiheadAttention and torch.nn.LayerNorm.

  build/release/bin/06_multi_head --heads 4 --d-model 64 --seq-len 7 --mask causal --dump /tmp/d
  /usr/bin/python3 scripts/check_multi_head_dump.py /tmp/d

Loads in_proj_weight [3E, E], in_proj_bias, out_proj_weight, out_proj_bias into
nn.MultiheadAttention(E, H, batch_first=True), the dumped X [B, n, E] as query, key and value,
and the mask. The dump's `allowed` [B, n, n] means 1 = may attend (the course's convention);
PyTorch's attn_mask for this module means True = blocked, so the script passes its negation,
repeated per head ([B*H, n, n]). Compares out, the per-head and averaged weights, and
LayerNorm(out + X) with the dumped ln_weight and ln_bias. Also prints the distance of both
sides from a float64 evaluation. Exits 0 when PyTorch agrees within 1e-5 (2e-5 for d_model
above 256: float32 sums of that many terms), 1 otherwise, 2 on an incomplete dump.
Rows with no allowed key are NaN in PyTorch 1.13 and zeros in the course; they are skipped.

Needs Debian's python3-torch: run it with /usr/bin/python3, not the pyenv python3 on PATH.
"""
import sys

import torch
import torch.nn as nn

from course_dump import open_dump

NAMES = ["in_proj_weight", "in_proj_bias", "out_proj_weight", "out_proj_bias", "X", "allowed",
         "out", "weights_avg", "weights_heads", "ln_weight", "ln_bias", "y"]


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} DUMP_DIR", file=sys.stderr)
        return 2
    dump = open_dump(argv[1], "06_multi_head", need=NAMES)
    a = {n: dump[n] for n in NAMES}
    x = a["X"]
    B, n, E = x.shape
    H = a["weights_heads"].shape[1]
    mha = nn.MultiheadAttention(E, H, batch_first=True)
    ln = nn.LayerNorm(E)
    with torch.no_grad():
        mha.in_proj_weight.copy_(a["in_proj_weight"])
        mha.in_proj_bias.copy_(a["in_proj_bias"].reshape(-1))
        mha.out_proj.weight.copy_(a["out_proj_weight"])
        mha.out_proj.bias.copy_(a["out_proj_bias"].reshape(-1))
        ln.weight.copy_(a["ln_weight"].reshape(-1))
        ln.bias.copy_(a["ln_bias"].reshape(-1))
        blocked = (a["allowed"] == 0).repeat_interleave(H, dim=0)  # [B*H, n, n], True = blocked
        out, w_heads = mha(x, x, x, attn_mask=blocked, need_weights=True,
                           average_attn_weights=False)
        _, w_avg = mha(x, x, x, attn_mask=blocked, need_weights=True)
        y = ln(out + x)
    ok_rows = (a["allowed"] != 0).any(dim=-1)  # [B, n]
    diffs = {
        "out": (out - a["out"])[ok_rows].abs().max().item(),
        "weights per head": (w_heads - a["weights_heads"]).permute(0, 2, 1, 3)[ok_rows]
        .abs().max().item(),
        "weights averaged": (w_avg - a["weights_avg"])[ok_rows].abs().max().item(),
        "LayerNorm(out + X)": (y - a["y"])[ok_rows].abs().max().item(),
    }
    for what, d in diffs.items():
        print(f"max |{what} - torch| = {d:.2e}")
    # Both against float64, to see whose rounding the difference is.
    d64 = lambda t: t.double()
    with torch.no_grad():
        mha64 = mha.double()
        out64, _ = mha64(d64(x), d64(x), d64(x), attn_mask=blocked, need_weights=False)
    print(f"distance from float64: course {(a['out'].double() - out64)[ok_rows].abs().max():.2e}, "
          f"torch float32 {(out.double() - out64)[ok_rows].abs().max():.2e}")
    tolerance = 2e-5 if E > 256 else 1e-5
    ok = max(diffs.values()) <= tolerance
    print(f"B={B} n={n} E={E} H={H}: " + ("agrees with PyTorch" if ok else
                                           f"DIFFERS from PyTorch by more than {tolerance}"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
