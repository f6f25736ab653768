"""The real-model corpus the corpus tests run on: sample_graphs/corpus/ plus llama_tp.

A corpus graph is (name, world size, archive path, runnable): ``runnable`` graphs are the
world-size-2/4 exports the tests execute for real with gloo; world-size-8 ones are analysed only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_graphs"
CORPUS = SAMPLES / "corpus"


@dataclass(frozen=True)
class CorpusGraph:
    """One exported corpus graph."""

    name: str
    world_size: int
    path: Path
    runnable: bool
    param_dtype: str = "float32"

    @property
    def id(self) -> str:
        """Test id: name and world size."""
        return f"{self.name}-ws{self.world_size}"


def corpus_graphs() -> list[CorpusGraph]:
    """Every corpus graph listed in the manifests, ws2 (runnable) sets first."""
    out = []
    doc = json.loads((CORPUS / "MANIFEST.json").read_text(encoding="utf-8"))
    for e in doc["graphs"]:
        folder = e["files"][0].split("/")[0]
        out.append(CorpusGraph(e["name"], e["world_size"], CORPUS / e["files"][0], folder == "ws2",
                               e.get("param_dtype", "float32")))
    samples = json.loads((SAMPLES / "MANIFEST.json").read_text(encoding="utf-8"))
    for e in samples["samples"]:
        if e["name"] == "llama_tp":  # the first real-model graph, made by make_samples.py
            folder = e["files"][0].split("/")[0]
            out.append(CorpusGraph(e["name"], e["world_size"], SAMPLES / e["files"][0], folder == "ws2"))
    return sorted(out, key=lambda g: (not g.runnable, g.name, g.world_size))


def runnable(world_size: int) -> list[CorpusGraph]:
    """The graphs that run for real at ``world_size`` ranks."""
    return [g for g in corpus_graphs() if g.runnable and g.world_size == world_size]


def is_simple_fsdp(name: str) -> bool:
    """SimpleFSDP graphs (their own all_gather/reduce_scatter per parameter)."""
    return "fsdp" in name or name.endswith("_2d")
