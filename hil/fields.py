"""Documented field tables of the YAML files hil reads (manifests, inventories): one table per
mapping, read both by the code that validates the file (its allowed names) and by the
reference generator (docs/reference/manifest.md, inventory.md), so a field cannot be accepted
without being documented."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Field:
    """One field of a YAML mapping."""

    name: str
    kind: str
    """What it takes, as the reference shows it (`string`, `list of strings`, ...)."""
    description: str
    required: bool = False
    default: str = ""
    """The default as the reference shows it; empty: none (the field is absent)."""


def names(fields: Iterable[Field]) -> frozenset[str]:
    """The names of `fields`: what the validation allows."""
    return frozenset(field.name for field in fields)
