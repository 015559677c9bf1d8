"""Exit 0 when qgc is installed from this checkout with everything
pyproject.toml asks for (its dependencies and the `test` extra, at the
versions it names); `make install` installs otherwise."""

import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in
            project["dependencies"] + project["optional-dependencies"]["test"]]


def satisfied(req: Requirement) -> bool:
    if req.marker is not None and not req.marker.evaluate():
        return True                   # not for this platform
    try:
        return req.specifier.contains(metadata.version(req.name), prereleases=True)
    except metadata.PackageNotFoundError:
        return False


def from_this_checkout() -> bool:
    try:
        import qgc
    except ImportError:
        return False
    return Path(qgc.__file__).resolve().parent == ROOT / "qgc"


if __name__ == "__main__":
    sys.exit(0 if all(map(satisfied, requirements())) and from_this_checkout() else 1)
