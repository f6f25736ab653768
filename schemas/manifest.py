"""``manifest.json``, written last by ``commopt optimize`` into its output directory.

The manifest is what makes an output set complete: it names every other file of the set
with its size and SHA-256 digest, and it is written only after all of them. A run moves
the previous manifest aside before it writes anything, so a directory without ``manifest.json``
(a killed or failed run) holds no complete set, and a directory with one holds exactly the
files it lists, byte for byte (see docs/outputs.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ManifestFile(BaseModel):
    """One file of the output set, as it was written."""

    name: str = Field(description="file name inside the output directory (no directory part)")
    bytes: int = Field(ge=0, description="size in bytes")
    sha256: str = Field(pattern="^[0-9a-f]{64}$", description="SHA-256 of the file's bytes, hex")


class Manifest(BaseModel):
    """The complete output set of one ``commopt optimize`` run."""

    format: Literal["commopt-manifest"] = "commopt-manifest"
    version: Literal[1] = 1
    files: list[ManifestFile] = Field(
        description="every file of the set except manifest.json itself, in writing order")


ROOT_MODEL = Manifest
