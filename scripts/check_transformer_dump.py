"""Replays a chapter 08 dump in torch.nn.TransformerEncoder / TransformerDecoder.

  build/release/bin/08_transformer_block --layers 3 --heads 8 --d-model 64 --norm pre --dump /tmp/d
  /usr/bin/python3 scripts/check_transformer_dump.py /tmp/d

Builds nn.TransformerEncoderLayer / TransformerDecoderLayer(d_model, heads, d_ff, dropout=0,
activation="relu", batch_first=True, norm_first from the dump), stacks the dumped number of
each (no final LayerNorm: the course's stacks have none), loads every parameter by its
state_dict name (encoder_layers_0_self_attn_in_proj_weight is layers.0.self_attn.in_proj_weight),
and runs the dumped inputs src_x [B, n_s, E] and tgt_x [B, n_t, E] with the masks turned into
PyTorch's convention (the dump's *_allowed mean 1 = may attend; PyTorch's masks mean True =
blocked): src_key_padding_mask, tgt_mask (causal), tgt_key_padding_mask,
memory_key_padding_mask. Compares memory and out. The layers run in training mode with
dropout 0, because in eval mode PyTorch 1.13's fused encoder path returns zeros at padded
positions. Exits 0 when both agree within 1e-5 (float32 through a few layers of O(1) values),
1 otherwise, 2 on an incomplete dump.

Needs Debian's python3-torch: run it with /usr/bin/python3, not the pyenv python3 on PATH.
"""
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

TOLERANCE = 1e-5


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} DUMP_DIR", file=sys.stderr)
        return 2
    folder = Path(argv[1])
    need = ["src_x", "tgt_x", "src_allowed", "tgt_allowed", "cross_allowed", "memory", "out",
            "norm_first", "heads", "encoder_layers_0_linear1_weight"]
    missing = [n for n in need if not (folder / f"{n}.npy").is_file()]
    if missing:
        print(f"{folder}: missing {', '.join(n + '.npy' for n in missing)}", file=sys.stderr)
        return 2
    load = lambda name: torch.from_numpy(np.load(folder / f"{name}.npy"))
    src, tgt, memory_ref, out_ref = load("src_x"), load("tgt_x"), load("memory"), load("out")
    E = src.shape[-1]
    H = int(load("heads")[0, 0])
    norm_first = bool(load("norm_first")[0, 0])
    F = load("encoder_layers_0_linear1_weight").shape[0]
    L = len(list(folder.glob("encoder_layers_*_linear1_weight.npy")))
    kw = dict(dim_feedforward=F, dropout=0.0, activation="relu", batch_first=True,
              norm_first=norm_first)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, **kw), L,
                                    enable_nested_tensor=False)
    decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, **kw), L)
    with torch.no_grad():
        for prefix, model in (("encoder_", encoder), ("decoder_", decoder)):
            for name, p in model.state_dict().items():
                p.copy_(load(prefix + name.replace(".", "_")).reshape(p.shape))
    encoder.train()
    decoder.train()

    # The course's masks mean True = may attend; PyTorch's mean True = blocked.
    src_pad = load("src_allowed")[:, 0, :] == 0      # [B, n_s]: a key blocked for every query
    tgt_allowed = load("tgt_allowed") != 0           # [B, n_t, n_t]: padding and causal
    n_t = tgt.shape[1]
    causal_blocked = ~torch.ones(n_t, n_t, dtype=torch.bool).tril()
    tgt_pad = (~tgt_allowed).all(dim=1)              # [B, n_t]: blocked for every query
    expected = ~(~causal_blocked.unsqueeze(0) & ~tgt_pad.unsqueeze(1))
    if not torch.equal(expected, ~tgt_allowed):
        print("tgt_allowed is not padding-and-causal: cannot express it as PyTorch masks",
              file=sys.stderr)
        return 2
    mem_pad = load("cross_allowed")[:, 0, :] == 0    # [B, n_s]

    with torch.no_grad():
        memory = encoder(src, src_key_padding_mask=src_pad)
        out = decoder(tgt, memory_ref, tgt_mask=causal_blocked, tgt_key_padding_mask=tgt_pad,
                      memory_key_padding_mask=mem_pad)
    real = ~src_pad  # padded source rows are never read; compare the real ones
    d_mem = (memory - memory_ref)[real].abs().max().item()
    d_out = (out - out_ref).abs().max().item()
    print(f"layers={L} heads={H} d_model={E} d_ff={F} norm_first={norm_first}: "
          f"max |memory - torch| = {d_mem:.2e} (real tokens), max |out - torch| = {d_out:.2e}")
    ok = max(d_mem, d_out) <= TOLERANCE
    print("agrees with PyTorch" if ok else f"DIFFERS from PyTorch by more than {TOLERANCE}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
