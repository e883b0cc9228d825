"""A --dump folder of the course, read through its manifest.json.

    from course_dump import open_dump
    dump = open_dump("/tmp/d", "08_transformer_block")  # exits 2, saying why, unless complete
    src = dump["src_x"]                                  # a torch tensor, shape as in the manifest
    heads = int(dump.option("--heads"))                  # every option the run used
    model.load_state_dict(dump.state_dict())             # the arrays that have a state_dict key

The chapters write every array first and manifest.json last, so a folder without a manifest (an
interrupted run: INCOMPLETE.txt says so) or with arrays the manifest does not list is refused
rather than half-read. The replay scripts use only what the manifest lists, never a glob.
"""
import json
import sys
from pathlib import Path

import numpy as np
import torch


def refuse(message):
    print(message, file=sys.stderr)
    sys.exit(2)


class Dump:
    def __init__(self, folder, manifest):
        self.folder = Path(folder)
        self.manifest = manifest
        self.arrays = {a["name"]: a for a in manifest["arrays"]}

    def option(self, name):
        """The value the run used for option `name` ("--heads"), as text."""
        return self.manifest["options"][name]

    def numpy(self, name):
        if name not in self.arrays:
            refuse(f"{self.folder}: the manifest lists no array '{name}'")
        entry = self.arrays[name]
        a = np.load(self.folder / entry["file"])
        if list(a.shape) != entry["shape"] or a.dtype != np.dtype(entry["dtype"]):
            refuse(f"{self.folder / entry['file']}: {a.dtype}{list(a.shape)}, but the manifest "
                   f"says {entry['dtype']}{entry['shape']}")
        return a

    def __getitem__(self, name):
        return torch.from_numpy(self.numpy(name))

    def __contains__(self, name):
        return name in self.arrays

    def state_dict(self, prefix=""):
        """{key: tensor} for every array whose state_dict key starts with `prefix` (removed)."""
        return {a["state_dict_key"][len(prefix):]: self[a["name"]]
                for a in self.manifest["arrays"]
                if "state_dict_key" in a and a["state_dict_key"].startswith(prefix)}


def open_dump(folder, chapter, need=()):
    """The dump in `folder`, written by `chapter`, holding at least the arrays in `need`."""
    folder = Path(folder)
    manifest_path = folder / "manifest.json"
    if not manifest_path.is_file():
        why = ("the run that wrote it did not finish (see INCOMPLETE.txt)"
               if (folder / "INCOMPLETE.txt").is_file() else "not a dump of the course")
        refuse(f"{folder}: no manifest.json: {why}")
    try:
        manifest = json.loads(manifest_path.read_text())
        arrays = manifest["arrays"]
        files = {a["file"] for a in arrays}
    except (ValueError, KeyError, TypeError) as e:
        refuse(f"{manifest_path}: not a manifest of the course ({e})")
    if manifest.get("chapter") != chapter:
        refuse(f"{folder}: a dump of {manifest.get('chapter')}, not of {chapter}")
    dump = Dump(folder, manifest)
    missing = [n for n in need if n not in dump]
    if missing:
        refuse(f"{folder}: the manifest lists no {', '.join(missing)} "
               f"(written with other options?)")
    absent = sorted(f for f in files if not (folder / f).is_file())
    if absent:
        refuse(f"{folder}: files in the manifest are missing: {', '.join(absent)}")
    unlisted = sorted(p.name for p in folder.glob("*.npy") if p.name not in files)
    if unlisted:
        refuse(f"{folder}: arrays the manifest does not list: {', '.join(unlisted[:5])}"
               f"{' ...' if len(unlisted) > 5 else ''} (from another run?)")
    return dump
