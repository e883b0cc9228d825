"""Replays a checkpoint of the training chapter (09_training --save DIR) in PyTorch.

usage: /usr/bin/python3 scripts/check_training_checkpoint.py DIR

DIR is a checkpoint the chapter saved (common/course/checkpoint.hpp): the trained weights as .npy
files named by their state_dict keys, the evaluation inputs and the C++ outputs on them, and
manifest.json, written last. The script reads only what the manifest lists (course_dump.py),
builds the PyTorch module of the task, loads the weights with load_state_dict(strict=True), runs
the evaluation inputs through it and compares with what the C++ program computed.

The task is the manifest's --task option, or, when it records none or "both", read from the
keys; a DIR without a manifest but with DIR/reversal and/or DIR/induction checkpoints (one per
task, from a run of both) is checked folder by folder:
  reversal   the encoder-decoder of scripts/fixtures/train_step.py (Seq2Seq, PAD 0, BOS 1).
             Arrays: eval_src [k x n_s] and eval_tgt_in [k x n_t] (token ids, stored as
             float32), eval_logits [k, n_t, V] (the C++ logits under teacher forcing),
             eval_greedy [k x n] (the C++ greedy decoding: start from BOS, feed back the
             argmax, n steps).
  induction  the attention-only decoder (AttentionOnly below, common/attn/models/attention_only.hpp).
             Arrays: eval_ids [k x n], eval_logits [k, n, V].
The sizes come from the tensors' shapes (vocabulary, d_model, d_ff, layers, pre- or post-norm
from the final norms, tied from a missing generator.weight, the context from pos_embed); the
number of heads, which no shape shows, from the option --heads. Sizes the manifest also records
as options (--vocab, --d-model, --d-ff, --layers, --norm, --tied; --context for induction;
dashes or underscores) are compared with the shapes, and a mismatch is printed as a note: the
weights are what is loaded, and an option may mean something else (a knob of the other task).

With the training state (Adam's moments and step, saved beside the weights), the moments are
loaded into torch.optim.Adam with load_state_dict(), as a PyTorch run would resume from them,
after checking their shapes against the parameters and that no second moment is negative.

Checks (the model runs in training mode with dropout 0, as train_step.py does, so that PyTorch
1.13 takes no fused fast path):
  logits     max |torch - C++| <= 1e-5 max(1, max |C++ logits|)
  reversal   PyTorch's greedy decoding (from eval_src, n steps) equals eval_greedy exactly
  induction  the argmax of every position equals the C++ argmax, except where the two largest
             logits lie within the tolerance of each other, in either run (a near tie that
             rounding may break either way; counted and printed)

Exit status: 0 everything agrees (the results printed); 1 a check failed (the numbers printed);
2 the folder cannot be checked (not a finished checkpoint of 09_training, an array or option
missing, weights that do not fit the module): the reason on stderr.
"""
import math
import re
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "fixtures"))
from course_dump import open_dump, refuse  # noqa: E402
from train_step import BOS, Seq2Seq  # noqa: E402  (PAD 0 is masked inside Seq2Seq)

CHAPTER = "09_training"
TOL = 1e-5

# The option names the chapter may record for each size, compared without leading dashes, with
# '_' read as '-' and case ignored.
OPTION_NAMES = {
    "task": ("task",),
    "vocab": ("vocab", "vocab-size", "vocabulary"),
    "d_model": ("d-model", "dmodel", "model-dim", "embed-dim", "width"),
    "heads": ("heads", "n-heads", "num-heads"),
    "d_ff": ("d-ff", "dff", "ff", "ffn"),
    "layers": ("layers", "n-layers", "num-layers"),
    "norm": ("norm", "norm-placement"),
    "tied": ("tied", "tie", "tie-embeddings"),
    "max_len": ("max-len", "max-length", "seq-len"),
    "context": ("context", "context-len", "ctx"),
}


class Options:
    """The manifest's options, looked up by any of the spellings above."""

    def __init__(self, dump):
        self.dump = dump
        self.raw = dump.manifest.get("options", {})
        self.by_norm = {self.normal(k): (k, v) for k, v in self.raw.items()}

    @staticmethod
    def normal(name):
        return name.lstrip("-").replace("_", "-").lower()

    def get(self, what):
        """(the option as recorded, its value) or (None, None)."""
        for name in OPTION_NAMES[what]:
            if name in self.by_norm:
                return self.by_norm[name]
        return None, None

    def integer(self, what):
        """(the option as recorded, its value as an int, or the text when it is not one)."""
        name, value = self.get(what)
        if name is None:
            return None, None
        try:
            return name, int(value)
        except ValueError:
            return name, value

    def boolean(self, what):
        name, value = self.get(what)
        if name is None:
            return None, None
        v = value.strip().lower()
        if v in ("true", "1", "yes", "on", "tied"):
            return name, True
        if v in ("false", "0", "no", "off", "untied"):
            return name, False
        return name, value

    def heads(self):
        name, H = self.integer("heads")
        if name is None:
            refuse(f"{self.dump.folder}/manifest.json records no --heads (options: "
                   f"{self.described()}): the number of heads shows in no tensor's shape")
        if not isinstance(H, int) or H < 1:
            refuse(f"{self.dump.folder}/manifest.json: {name} is '{self.raw[name]}', not a "
                   f"number of heads")
        return H

    def described(self):
        return ", ".join(f"{k} {v}" for k, v in self.raw.items()) or "none"


def option_note(opts, what, from_shapes, shown_as):
    """A note (or None) when the manifest records option `what` with a value the tensors
    contradict. The tensors are what is loaded; an option may mean something else than this
    script guesses (--vocab without PAD and BOS, a knob of the other task), so a mismatch is
    said, not fatal."""
    if what == "tied":
        name, value = opts.boolean(what)
    elif what == "norm":
        name, value = opts.get(what)
        value = None if name is None else value.strip().lower()
    else:
        name, value = opts.integer(what)
    if name is None or value == from_shapes:
        return None
    return (f"  note: the manifest records {name} {opts.raw[name]}, but the weights say "
            f"{shown_as}; the weights are used")


def layer_count(sd, prefix):
    found = {int(m.group(1)) for k in sd for m in [re.match(re.escape(prefix) + r"(\d+)\.", k)]
             if m}
    if found != set(range(len(found))):
        refuse(f"the checkpoint's {prefix}N keys have gaps: {sorted(found)}")
    return len(found)


def need(dump, sd, keys):
    missing = [k for k in keys if k not in sd]
    if missing:
        refuse(f"{dump.folder}: the checkpoint has no {', '.join(missing)}: not a model of this "
               f"task (manifest options: {Options(dump).described()})")


def ids_of(dump, name, V):
    """An array of token ids the chapter stored as float32, as int64, checked."""
    if name not in dump:
        refuse(f"{dump.folder}: the manifest lists no array '{name}' (the chapter writes it into "
               f"the checkpoint beside the weights)")
    a = dump.numpy(name)
    if a.ndim != 2:
        refuse(f"{dump.folder}/{dump.arrays[name]['file']}: {name} is {list(a.shape)}, "
               f"expected [k x n]")
    if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
        refuse(f"{dump.folder}/{dump.arrays[name]['file']}: {name} holds values that are not "
               f"token ids")
    ids = torch.from_numpy(a.astype(np.int64))
    if ids.numel() and (ids.min() < 0 or ids.max() >= V):
        refuse(f"{dump.folder}/{dump.arrays[name]['file']}: {name} holds ids outside [0, {V})")
    return ids


def logits_of(dump, shape):
    if "eval_logits" not in dump:
        refuse(f"{dump.folder}: the manifest lists no array 'eval_logits' (the C++ logits)")
    a = dump["eval_logits"]
    if list(a.shape) != list(shape):
        refuse(f"{dump.folder}: eval_logits is {list(a.shape)}, but the inputs make "
               f"{list(shape)}")
    return a


def load_weights(dump, model, sd):
    try:
        model.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        refuse(f"{dump.folder}: the weights do not fit the PyTorch module: {e}")


def check_optimizer_state(dump, model):
    """Loads the checkpoint's training state, if it has one, into torch.optim.Adam the way
    optimizer.load_state_dict() receives PyTorch's own (state by parameter index, in
    named_parameters() order), after checking each moment's shape against its parameter and
    that the second moments are >= 0. Returns False when a check fails."""
    t = dump.manifest.get("training")
    if t is None:
        print("  training state: none saved (the weights alone)")
        return True
    where = f"{dump.folder}/manifest.json: the training state"
    counts = {}
    for name in ("step", "steps", "adam_step"):
        value = t.get(name) if isinstance(t, dict) else None
        if not isinstance(value, int) or isinstance(value, bool):
            refuse(f"{where} has no whole number \"{name}\"")
        counts[name] = value
    if not 1 <= counts["step"] <= counts["steps"] or counts["adam_step"] != counts["step"]:
        refuse(f"{where} says step {counts['step']} of {counts['steps']} with Adam at step "
               f"{counts['adam_step']}")
    step = counts["adam_step"]
    state, ok = {}, True
    for i, (key, p) in enumerate(model.named_parameters()):
        moments = {}
        for moment in ("exp_avg", "exp_avg_sq"):
            files = t.get(moment)
            file = files.get(key) if isinstance(files, dict) else None
            name = file.removesuffix(".npy") if isinstance(file, str) else None
            if name is None or name not in dump or "state_dict_key" in dump.arrays[name]:
                refuse(f"{where} names no array of its own for the {moment} of {key}")
            try:
                moments[moment] = dump[name]
            except (ValueError, OSError, SyntaxError) as e:
                refuse(f"{dump.folder / file}: not a readable .npy file ({e})")
            if tuple(moments[moment].shape) != tuple(p.shape):
                print(f"  {moment} of {key}: {list(moments[moment].shape)}, but the parameter is "
                      f"{list(p.shape)}: FAILED")
                ok = False
            elif not bool(torch.isfinite(moments[moment]).all()):
                print(f"  {moment} of {key} is not finite everywhere: FAILED")
                ok = False
        if ok and bool((moments["exp_avg_sq"] < 0).any()):
            print(f"  exp_avg_sq of {key} has a negative entry: FAILED")
            ok = False
        state[i] = {"step": torch.tensor(float(step)), **moments}
    if not ok:
        return False
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    group = {k: v for k, v in optimizer.state_dict()["param_groups"][0].items()}
    optimizer.load_state_dict({"state": state, "param_groups": [group]})
    print(f"  training state: step {t['step']} of {t['steps']}; Adam's exp_avg and exp_avg_sq of "
          f"all {len(state)} tensors loaded into torch.optim.Adam at step {step}: ok")
    return True


def compare_logits(what, torch_logits, cpp_logits):
    """Prints the comparison; returns (ok, tolerance)."""
    t, c = torch_logits.double(), cpp_logits.double()
    diff = (t - c).abs()
    worst = diff.max().item() if diff.numel() else 0.0
    scale = c.abs().max().item() if c.numel() else 0.0
    tol = TOL * max(1.0, scale)
    ok = worst <= tol  # False for NaN too
    shape = " x ".join(str(s) for s in cpp_logits.shape)
    print(f"  logits ({what}) [{shape}]: max |torch - C++| = {worst:.3e}, max |logits| = "
          f"{scale:.4g}, tolerance {tol:.3e}: {'ok' if ok else 'FAILED'}")
    if not ok and diff.numel():
        at = np.unravel_index(int(torch.nan_to_num(diff, nan=math.inf).argmax()), diff.shape)
        print(f"    worst at {list(int(i) for i in at)}: torch {t[at].item():.8g}, "
              f"C++ {c[at].item():.8g}")
    return ok, tol


# ---- reversal: the encoder-decoder -----------------------------------------------------------------

def check_reversal(dump, opts, sd):
    need(dump, sd, ["src_embed.weight", "tgt_embed.weight", "encoder.layers.0.linear1.weight",
                    "generator.bias"])
    V, E = sd["src_embed.weight"].shape
    L = layer_count(sd, "encoder.layers.")
    if layer_count(sd, "decoder.layers.") != L:
        refuse(f"{dump.folder}: {L} encoder layers but {layer_count(sd, 'decoder.layers.')} "
               f"decoder layers")
    F = sd["encoder.layers.0.linear1.weight"].shape[0]
    norm_first = "encoder.norm.weight" in sd
    tied = "generator.weight" not in sd
    H = opts.heads()
    notes = [option_note(opts, "vocab", V, f"V = {V} (src_embed.weight is [{V} x {E}])"),
             option_note(opts, "d_model", E, f"d_model = {E}"),
             option_note(opts, "d_ff", F, f"d_ff = {F}"),
             option_note(opts, "layers", L, f"{L} layers"),
             option_note(opts, "norm", "pre" if norm_first else "post",
                         "pre (there is an encoder.norm)" if norm_first
                         else "post (no encoder.norm)"),
             option_note(opts, "tied", tied,
                         "tied (no generator.weight)" if tied else "untied (a generator.weight)")]
    if E % H:
        refuse(f"{dump.folder}: --heads {H} does not divide d_model = {E}")

    src = ids_of(dump, "eval_src", V)
    tgt_in = ids_of(dump, "eval_tgt_in", V)
    greedy_cpp = ids_of(dump, "eval_greedy", V)
    k, n_t = tgt_in.shape
    if src.shape[0] != k or greedy_cpp.shape[0] != k:
        refuse(f"{dump.folder}: eval_src has {src.shape[0]} rows, eval_tgt_in {k}, eval_greedy "
               f"{greedy_cpp.shape[0]}: one per sequence")
    cpp_logits = logits_of(dump, (k, n_t, V))
    _, max_len = opts.integer("max_len")  # the positional table: at least every length used
    max_len = max(max_len if isinstance(max_len, int) else 0, src.shape[1], n_t,
                  greedy_cpp.shape[1])

    model = Seq2Seq(V, E, H, F, L, norm_first, tied, max_len)
    if tied:  # state_dict() lists the shared tensor under both names; the checkpoint once
        sd = dict(sd)
        sd["generator.weight"] = sd["tgt_embed.weight"]
    load_weights(dump, model, sd)
    model.train()  # dropout is 0; training mode avoids 1.13's fused fast path
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{CHAPTER} checkpoint {dump.folder}: reversal, Seq2Seq V={V} E={E} H={H} F={F} "
          f"L={L} {'pre' if norm_first else 'post'}-norm {'tied' if tied else 'untied'}; "
          f"{len(list(model.parameters()))} tensors, {n_params} numbers loaded (strict)")
    for note in filter(None, notes):
        print(note)

    with torch.no_grad():
        ok_logits, _ = compare_logits(f"teacher forcing, {k} sequences",
                                      model(src, tgt_in), cpp_logits)

        n = greedy_cpp.shape[1]
        tgt = torch.full((k, 1), BOS, dtype=torch.int64)
        gaps = []
        for _ in range(n):
            last = model(src, tgt)[:, -1]  # [k x V]
            top2 = last.topk(2, dim=-1).values if V >= 2 else None
            gaps.append(top2[:, 0] - top2[:, 1] if top2 is not None else torch.zeros(k))
            tgt = torch.cat([tgt, last.argmax(-1, keepdim=True)], dim=1)
        greedy = tgt[:, 1:]
    same = torch.equal(greedy, greedy_cpp)
    print(f"  greedy decoding from BOS, {k} sequences x {n} steps: "
          f"{'identical to the C++ tokens: ok' if same else 'DIFFERS from the C++ tokens: FAILED'}")
    if not same:
        for b in range(k):
            if not torch.equal(greedy[b], greedy_cpp[b]):
                step = int((greedy[b] != greedy_cpp[b]).nonzero()[0])
                print(f"    sequence {b}: torch {greedy[b].tolist()}, C++ "
                      f"{greedy_cpp[b].tolist()}; first difference at step {step}, where "
                      f"torch's two largest logits are {gaps[step][b].item():.3e} apart")
    return check_optimizer_state(dump, model) and ok_logits and same


# ---- induction: the attention-only decoder ---------------------------------------------------------

class AttentionOnlyLayer(nn.Module):
    def __init__(self, E, H):
        super().__init__()
        self.norm = nn.LayerNorm(E)
        self.attn = nn.MultiheadAttention(E, H, bias=True, batch_first=True)


class AttentionOnly(nn.Module):
    """common/attn/models/attention_only.hpp in PyTorch, under its state_dict names:
    x = tok_embed(ids) sqrt(E) + pos_embed[:n]; per layer x = x + attn(LN(x)) with a causal
    mask; logits = unembed(norm(x))."""

    def __init__(self, V, E, H, L, T):
        super().__init__()
        self.E = E
        self.pos_embed = nn.Parameter(torch.zeros(T, E))
        self.tok_embed = nn.Embedding(V, E)
        self.layers = nn.ModuleList([AttentionOnlyLayer(E, H) for _ in range(L)])
        self.norm = nn.LayerNorm(E)
        self.unembed = nn.Linear(E, V)

    def forward(self, ids):
        n = ids.shape[1]
        causal = torch.ones(n, n, dtype=torch.bool).triu(1)  # True = blocked (PyTorch's meaning)
        x = self.tok_embed(ids) * math.sqrt(self.E) + self.pos_embed[:n]
        for layer in self.layers:
            h = layer.norm(x)
            x = x + layer.attn(h, h, h, attn_mask=causal, need_weights=False)[0]
        return self.unembed(self.norm(x))


def check_induction(dump, opts, sd):
    need(dump, sd, ["tok_embed.weight", "pos_embed", "layers.0.attn.in_proj_weight",
                    "norm.weight", "unembed.weight"])
    V, E = sd["tok_embed.weight"].shape
    T = sd["pos_embed"].shape[0]
    L = layer_count(sd, "layers.")
    H = opts.heads()
    notes = [option_note(opts, "vocab", V, f"V = {V} (tok_embed.weight is [{V} x {E}])"),
             option_note(opts, "d_model", E, f"d_model = {E}"),
             option_note(opts, "layers", L, f"{L} layers"),
             option_note(opts, "context", T, f"a context of {T} (pos_embed is [{T} x {E}])")]
    if E % H:
        refuse(f"{dump.folder}: --heads {H} does not divide d_model = {E}")

    ids = ids_of(dump, "eval_ids", V)
    k, n = ids.shape
    if n > T:
        refuse(f"{dump.folder}: eval_ids has {n} positions, more than the context {T}")
    cpp_logits = logits_of(dump, (k, n, V))

    model = AttentionOnly(V, E, H, L, T)
    load_weights(dump, model, sd)
    model.train()  # no dropout in it; training mode keeps nn.MultiheadAttention off its fast path
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{CHAPTER} checkpoint {dump.folder}: induction, attention-only V={V} E={E} H={H} "
          f"L={L} T={T}; {len(list(model.parameters()))} tensors, {n_params} numbers loaded "
          f"(strict)")
    for note in filter(None, notes):
        print(note)
    with torch.no_grad():
        logits = model(ids)
    ok_logits, tol = compare_logits(f"{k} sequences", logits, cpp_logits)
    ok_logits = check_optimizer_state(dump, model) and ok_logits

    if V >= 2:
        t2 = logits.double().topk(2, dim=-1).values
        c2 = cpp_logits.double().topk(2, dim=-1).values
        decisive = ((t2[..., 0] - t2[..., 1]) > tol) & ((c2[..., 0] - c2[..., 1]) > tol)
    else:
        decisive = torch.ones(k, n, dtype=torch.bool)
    agree = logits.argmax(-1) == cpp_logits.argmax(-1)
    wrong = decisive & ~agree
    ok_argmax = not bool(wrong.any())
    print(f"  argmax on {int(decisive.sum())} of {k * n} positions (skipped "
          f"{int((~decisive).sum())} whose two largest logits lie within {tol:.1e}): "
          f"{'all equal: ok' if ok_argmax else f'{int(wrong.sum())} differ: FAILED'}")
    if not ok_argmax:
        for b, i in wrong.nonzero().tolist()[:5]:
            print(f"    sequence {b} position {i}: torch {int(logits[b, i].argmax())}, "
                  f"C++ {int(cpp_logits[b, i].argmax())}")
    return ok_logits and ok_argmax


def check_folder(folder):
    """Checks one checkpoint folder; returns the exit status (refusals exit 2 at once)."""
    dump = open_dump(folder, CHAPTER)
    opts = Options(dump)
    sd = dump.state_dict()
    if not sd:
        refuse(f"{dump.folder}: the manifest lists no array with a state_dict key: a dump, not "
               f"a checkpoint (save one with --save)")
    from_keys = ("reversal" if "src_embed.weight" in sd
                 else "induction" if "tok_embed.weight" in sd else None)
    name, task = opts.get("task")
    task = (task or "").strip().lower()
    if task not in ("reversal", "induction"):  # not recorded, or "both": the keys tell
        task = from_keys
    if task is None:
        refuse(f"{dump.folder}: neither src_embed nor tok_embed among the keys: not a model of "
               f"the reversal or the induction task")
    if from_keys is not None and from_keys != task:
        refuse(f"{dump.folder}: the manifest records {name} {task}, but the keys are those of the "
               f"{from_keys} model")
    ok = check_reversal(dump, opts, sd) if task == "reversal" else check_induction(dump, opts, sd)
    print("agree" if ok else "DISAGREE")
    return 0 if ok else 1


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    folder = Path(argv[1])
    # A run of both tasks may save one checkpoint per task, in DIR/reversal and DIR/induction.
    if not (folder / "manifest.json").exists() and not (folder / "INCOMPLETE.txt").exists():
        tasks = [folder / t for t in ("reversal", "induction")
                 if (folder / t / "manifest.json").exists()
                 or (folder / t / "INCOMPLETE.txt").exists()]
        if tasks:
            return max(check_folder(t) for t in tasks)
    return check_folder(folder)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
