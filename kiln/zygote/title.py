"""Process titles: `ps` and `kiln slots` read what a slot is doing from them."""

from __future__ import annotations

import prctl


def set_title(title: str) -> None:
    prctl.set_proctitle(title)
    prctl.set_name(title[:15])
