"""Replays a chapter 01 dump in PyTorch's own nn.RNN and compares the hidden states.

  build/release/bin/01_rnn --seed 777 --input-size 5 --hidden 7 --steps 9 --dump /tmp/d
  /usr/bin/python3 scripts/check_rnn_dump.py /tmp/d

Loads weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0 into a torch.nn.RNN(tanh, one layer),
runs it on the dumped x [T, I] from the dumped h0 [1, H], and compares its output with the
dumped hidden_states [T, H] (and h_n, when dumped). Prints the largest absolute difference and
exits 0 when it is at most 1e-5 (float32 rounding of O(1) values; see tests/attn/layers/test_rnn.cpp),
1 when it is larger, 2 when the dump is incomplete or inconsistent.

Needs Debian's python3-torch: run it with /usr/bin/python3, not the pyenv python3 on PATH.
"""
import sys

import torch

from course_dump import open_dump

TOLERANCE = 1e-5
NAMES = ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "x", "h0", "hidden_states"]


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} DUMP_DIR", file=sys.stderr)
        return 2
    dump = open_dump(argv[1], "01_rnn", need=NAMES)
    folder = dump.folder
    a = {n: dump[n] for n in NAMES}
    H, I = a["weight_ih_l0"].shape
    T = a["x"].shape[0]
    expected = {"weight_hh_l0": (H, H), "bias_ih_l0": (H,), "bias_hh_l0": (H,), "x": (T, I),
                "h0": (1, H), "hidden_states": (T, H)}
    for name, shape in expected.items():
        if tuple(a[name].shape) != shape:
            print(f"{name} is {list(a[name].shape)}, expected {list(shape)} "
                  f"(from weight_ih_l0 [{H}, {I}] and x [{T}, ...])", file=sys.stderr)
            return 2

    rnn = torch.nn.RNN(input_size=I, hidden_size=H, num_layers=1, nonlinearity="tanh")
    with torch.no_grad():
        for name in NAMES[:4]:
            getattr(rnn, name).copy_(a[name])
        states, h_n = rnn(a["x"], a["h0"])  # unbatched: x [T, I], h0 [1, H] -> [T, H], [1, H]

    diff = (states - a["hidden_states"]).abs().max().item()
    print(f"PyTorch nn.RNN replay of {folder}: I = {I}, H = {H}, T = {T}")
    print(f"max |hidden_states - torch| = {diff:.3e}")
    if "h_n" in dump:
        diff_n = (h_n - dump["h_n"]).abs().max().item()
        print(f"max |h_n - torch|           = {diff_n:.3e}")
        diff = max(diff, diff_n)
    ok = diff <= TOLERANCE
    print(f"{'OK' if ok else 'FAIL'}: tolerance {TOLERANCE:g}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
