"""Replays a chapter 08 dump in torch.nn.TransformerEncoder / TransformerDecoder.

  build/release/bin/08_transformer_block --layers 3 --heads 8 --d-model 64 --norm pre --dump /tmp/d
  /usr/bin/python3 scripts/check_transformer_dump.py /tmp/d

Reads the dump through its manifest.json (scripts/course_dump.py): the options the run used
give nn.TransformerEncoderLayer / TransformerDecoderLayer(d_model, --heads, --d-ff, dropout=0,
activation="relu", batch_first=True, norm_first = --norm pre), stacked --layers deep (no final
LayerNorm: the course's stacks have none), and model.load_state_dict() takes every parameter by
the state_dict key the manifest records (encoder.layers.0.self_attn.in_proj_weight, ...). Then
it runs the dumped inputs src_x [B, n_s, E] and tgt_x [B, n_t, E] with the masks turned into
PyTorch's convention (the dump's *_allowed mean 1 = may attend; PyTorch's masks mean True =
blocked): src_key_padding_mask, tgt_mask (causal), tgt_key_padding_mask,
memory_key_padding_mask. Compares memory and out. The layers run in training mode with
dropout 0, because in eval mode PyTorch 1.13's fused encoder path returns zeros at padded
positions. Exits 0 when both agree within 1e-5 (float32 through a few layers of O(1) values),
1 otherwise, 2 on an incomplete dump.

Needs Debian's python3-torch: run it with /usr/bin/python3, not the pyenv python3 on PATH.
"""
import sys

import torch
import torch.nn as nn

from course_dump import open_dump

TOLERANCE = 1e-5


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} DUMP_DIR", file=sys.stderr)
        return 2
    dump = open_dump(argv[1], "08_transformer_block",
                     need=["src_x", "tgt_x", "src_allowed", "tgt_allowed", "cross_allowed",
                           "memory", "out"])
    load = lambda name: dump[name]
    src, tgt, memory_ref, out_ref = load("src_x"), load("tgt_x"), load("memory"), load("out")
    E = src.shape[-1]
    H = int(dump.option("--heads"))
    L = int(dump.option("--layers"))
    F = int(dump.option("--d-ff"))
    norm_first = dump.option("--norm") == "pre"
    kw = dict(dim_feedforward=F, dropout=0.0, activation="relu", batch_first=True,
              norm_first=norm_first)
    model = nn.ModuleDict({
        "encoder": nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, **kw), L,
                                         enable_nested_tensor=False),
        "decoder": nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, **kw), L),
    })
    # Every parameter by its state_dict key, as the manifest records it. strict: a key missing
    # from the dump, one too many, or a shape that differs is an error, not a silent default.
    model.load_state_dict(dump.state_dict(), strict=True)
    encoder, decoder = model["encoder"], model["decoder"]
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
