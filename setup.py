"""Package discovery: the library lives in commopt/, the CLI in cli/ and the file-format models
in schemas/ (the layout the user fixed); pyproject.toml maps the last two under the commopt
namespace. setuptools cannot combine automatic discovery with that mapping in pyproject.toml
alone, so the package list is computed here."""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["commopt", "commopt.*"])
    + ["commopt.cli", "commopt.schemas"],
)
