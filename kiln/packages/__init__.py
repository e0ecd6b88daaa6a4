"""Problem packages `kiln judge PACKAGE_DIR` reads (kiln/judgecli.py), each known by its marker
file: Polygon (problem.xml), Kattis (problem.yaml with data/), DMOJ (init.yml). Each reader maps
its layout onto kiln/packages/common.py's types."""

from __future__ import annotations

from pathlib import Path

from kiln.packages import dmoj, kattis, polygon
from kiln.packages.common import Helper, Package, PackageError, PackageTest

READERS = (polygon, kattis, dmoj)

__all__ = ["Helper", "Package", "PackageError", "PackageTest", "reader_of"]


def reader_of(folder: Path):
    """The reader module whose marker file `folder` holds, or None (a plain tests folder)."""
    return next((reader for reader in READERS if folder.is_dir() and reader.is_package(folder)), None)
