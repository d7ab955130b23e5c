"""Build the GPU bundle from scratch (``scripts/build-gpu-bundle``; not part of the product).

Downloads ``gpu_bundle/requirements.txt`` as cp312 manylinux x86_64 wheels (no deps, only
binaries), writes ``manifest.json`` (name, version, file, bytes, sha256 of each) and splits
the wheels into ``part1/`` and ``part2/`` so that each part plus the repository fits one
transfer (``--part-mib``, default 56 of the 64 MiB: the repository itself is ~4.6 MiB). The output directory lies outside the
repository (default ``~/.cache/specconsole-gpu-bundle``); ``--check DIR`` re-verifies a
built bundle (sizes, hashes, parts) without downloading.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
PLATFORMS = (
    "manylinux_2_39_x86_64",
    "manylinux_2_35_x86_64",
    "manylinux_2_34_x86_64",
    "manylinux_2_31_x86_64",
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)
MIB = 1 << 20


def default_out() -> Path:
    return Path(os.environ.get("SPECCONSOLE_GPU_BUNDLE") or Path.home() / ".cache" / "specconsole-gpu-bundle")


def requirements(path: Path = REQUIREMENTS) -> list[str]:
    out = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            if "==" not in line:
                raise ValueError(f"{path}: {line!r} is not pinned (name==version)")
            out.append(line)
    return out


def download(reqs: list[str], dest: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.12",
        "--implementation",
        "cp",
        "--abi",
        "cp312",
        "--abi",
        "abi3",
        "--abi",
        "none",
        "-d",
        str(dest),
    ]
    for p in PLATFORMS:
        cmd += ["--platform", p]
    subprocess.run([*cmd, *reqs], check=True)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(MIB), b""):
            h.update(block)
    return h.hexdigest()


def _dist(file: str) -> tuple[str, str]:
    name, version = file.split("-")[:2]
    return name, version


def split(sizes: dict[str, int], budget: int) -> list[list[str]]:
    """First-fit decreasing into two parts of at most ``budget`` bytes each."""
    parts: list[list[str]] = [[], []]
    used = [0, 0]
    for file in sorted(sizes, key=lambda f: -sizes[f]):
        for i in (0, 1):
            if used[i] + sizes[file] <= budget:
                parts[i].append(file)
                used[i] += sizes[file]
                break
        else:
            raise SystemExit(
                f"{file} ({sizes[file] / MIB:.1f} MiB) fits in neither part "
                f"(used {used[0] / MIB:.1f} + {used[1] / MIB:.1f} MiB of "
                f"{budget / MIB:.0f} each)"
            )
    return parts


def build(out: Path, part_mib: float) -> dict:
    reqs = requirements()
    wheels = out / "wheels"
    if out.exists():
        shutil.rmtree(out)
    wheels.mkdir(parents=True)
    download(reqs, wheels)
    files = sorted(p.name for p in wheels.glob("*.whl"))
    got = {_dist(f)[0].lower().replace("_", "-") for f in files}
    want = {r.split("==")[0].lower().replace("_", "-").replace(".", "-") for r in reqs}
    if got != want:
        raise SystemExit(f"downloaded {sorted(got ^ want)} unlike requirements.txt")
    sizes = {f: (wheels / f).stat().st_size for f in files}
    parts = split(sizes, int(part_mib * MIB))
    entries: list[dict[str, Any]] = []
    for i, names in enumerate(parts, start=1):
        (out / f"part{i}").mkdir()
        for f in names:
            (wheels / f).rename(out / f"part{i}" / f)
            name, version = _dist(f)
            entries.append(
                {
                    "name": name,
                    "version": version,
                    "file": f,
                    "part": i,
                    "bytes": sizes[f],
                    "sha256": sha256(out / f"part{i}" / f),
                }
            )
    wheels.rmdir()
    manifest = {
        "python": "3.12",
        "platform": "manylinux x86_64",
        "part_mib": part_mib,
        "parts": {str(i): sum(e["bytes"] for e in entries if e["part"] == i) for i in (1, 2)},
        "wheels": sorted(entries, key=lambda e: e["name"].lower()),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def check(out: Path) -> list[str]:
    """Problems of a built bundle (empty: sound)."""
    try:
        manifest = json.loads((out / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        return [f"{out}/manifest.json: {exc}"]
    problems = []
    budget = manifest["part_mib"] * MIB
    for part, total in manifest["parts"].items():
        if total > budget:
            problems.append(f"part{part}: {total / MIB:.1f} MiB > {manifest['part_mib']} MiB")
    for e in manifest["wheels"]:
        path = out / f"part{e['part']}" / e["file"]
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif path.stat().st_size != e["bytes"] or sha256(path) != e["sha256"]:
            problems.append(f"{path}: size or sha256 differs from manifest.json")
    return problems


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="scripts/build-gpu-bundle", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, default=default_out())
    p.add_argument("--part-mib", type=float, default=56.0)
    p.add_argument("--check", action="store_true", help="verify --out, download nothing")
    opts = p.parse_args(argv)
    if opts.check:
        problems = check(opts.out)
        print("\n".join(problems) or f"{opts.out}: sound")
        return 1 if problems else 0
    manifest = build(opts.out, opts.part_mib)
    n = len(manifest["wheels"])
    print(f"{opts.out}: {n} wheels; part1 {manifest['parts']['1'] / MIB:.1f} MiB, part2 {manifest['parts']['2'] / MIB:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
