"""The built wheel installs everything under the commopt namespace: no top-level `cli` or
`schemas` package lands in site-packages, and the generated JSON Schemas ship with it."""

import subprocess
import sys
import zipfile

import pytest


@pytest.mark.slow
def test_wheel_has_only_the_commopt_package(repo_root, tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "-w", str(tmp_path), str(repo_root)], check=True, cwd=tmp_path)
    (wheel,) = tmp_path.glob("commopt-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"commopt"}
    assert "commopt/cli/main.py" in names and "commopt/schemas/graph.py" in names
    assert "commopt/schemas/graph.schema.json" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "commopt = commopt.cli.main:run" in zipfile.ZipFile(wheel).read(entry_points).decode()
