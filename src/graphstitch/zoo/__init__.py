"""Model zoo registries for ``graphstitch sweep``: enumerate models, build each one small.

Three registries, one module each, all imported lazily:

- ``transformers`` (:mod:`graphstitch.zoo.transformers`): every model class of the auto
  mappings (base models, causal LMs, seq2seq / speech seq2seq, image-text-to-text,
  multimodal LMs, text-to-waveform), built from its config class, shrunk, with inputs
  synthesized from the model's ``forward`` signature. Never downloads anything.
- ``diffusers`` (:mod:`graphstitch.zoo.diffusers`): the main UNet / VAE / DiT-style
  transformer classes from small configs with synthesized latents, timesteps and encoder
  states.
- ``torch_geometric`` (:mod:`graphstitch.zoo.pyg`): GNN models and convolutions on a small
  random graph.

This module imports neither torch nor any model library: listing is cheap and a sweep's
parent process can stay light. ``build()`` imports the registry's library (and torch) in
the process that calls it, which is meant to be an isolated worker, one per model.

The calls ``build()`` returns are graphstitch TARGET calls: a list of ``(fn, args,
kwargs)``. Mode ``eval``: the model is in ``eval()`` and the caller runs the calls under
``torch.no_grad()``. Mode ``train``: the model is in ``train()``, the inputs carry labels
where the head takes them, and the caller runs with grad.
"""
from __future__ import annotations

import fnmatch
import importlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

REGISTRIES = ("transformers", "diffusers", "torch_geometric")
MODES = ("eval", "train")

# registry -> module (relative to this package) that implements it
_MODULES = {"transformers": ".transformers", "diffusers": ".diffusers", "torch_geometric": ".pyg"}

Call = tuple  # (fn, args, kwargs)


class CreateError(Exception):
    """The model cannot be built: its config, a missing optional dependency, a needed hub
    download, inputs that cannot be synthesized, ... ``reason`` is a one-line summary that
    groups alike failures (no addresses, no shapes where avoidable); ``detail`` is free text."""

    def __init__(self, reason: str, detail: str | None = None):
        super().__init__(reason if not detail else f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, order=True)
class ZooEntry:
    registry: str
    name: str
    mode: str

    @property
    def id(self) -> str:
        return f"{self.registry}/{self.name}@{self.mode}"


def _module(registry: str) -> Any:
    if registry not in _MODULES:
        raise ValueError(f"unknown registry {registry!r}; known: {', '.join(REGISTRIES)}")
    return importlib.import_module(_MODULES[registry], __name__)


def _matches(entry: ZooEntry, patterns: Iterable[str]) -> bool:
    keys = (entry.name, entry.id, f"{entry.registry}/{entry.name}")
    return any(fnmatch.fnmatchcase(k, p) for p in patterns for k in keys)


def list_names(registry: str) -> list[str]:
    """The model names a registry knows, sorted. Constructs nothing, imports no torch."""
    return sorted(set(_module(registry).list_names()))


def list_models(registry: str, only: Iterable[str] = (), exclude: Iterable[str] = (),
                modes: Iterable[str] = ("eval",)) -> list[ZooEntry]:
    """The registry's models as entries, one per (name, mode), sorted by name then mode.

    ``only`` / ``exclude`` are fnmatch globs (case-sensitive) matched against the name
    (``BertModel``), the id (``transformers/BertModel@eval``) and ``registry/name``; an entry
    is kept when it matches some ``only`` pattern (or ``only`` is empty) and no ``exclude``
    pattern."""
    only, exclude, modes = tuple(only), tuple(exclude), tuple(modes)
    for m in modes:
        if m not in MODES:
            raise ValueError(f"unknown mode {m!r}; known: {', '.join(MODES)}")
    out = []
    for name in list_names(registry):
        for mode in modes:
            e = ZooEntry(registry, name, mode)
            if only and not _matches(e, only):
                continue
            if exclude and _matches(e, exclude):
                continue
            out.append(e)
    return out


def parse_id(entry_id: str) -> ZooEntry:
    """``transformers/BertModel@eval`` -> ZooEntry (mode defaults to eval)."""
    reg, _, rest = entry_id.partition("/")
    name, _, mode = rest.partition("@")
    if reg not in REGISTRIES or not name:
        raise ValueError(f"bad zoo id {entry_id!r}")
    return ZooEntry(reg, name, mode or "eval")


def seed_all(seed: int = 0) -> None:
    """Seed Python, numpy (when present) and torch."""
    import random

    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass
    import torch

    torch.manual_seed(seed)


def offline() -> None:
    """No hub access from here on: set the offline switches (and flip huggingface_hub's
    constant when it was imported before the variables were set)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import sys

    const = sys.modules.get("huggingface_hub.constants")
    if const is not None and hasattr(const, "HF_HUB_OFFLINE"):
        setattr(const, "HF_HUB_OFFLINE", True)  # noqa: B010 - a module attribute mypy cannot see


def build(registry: str, name: str, mode: str = "eval") -> list[Call]:
    """Build one model small, with synthesized inputs, and return its calls
    ``[(fn, args, kwargs), ...]``. Deterministic (seeded). Raises :class:`CreateError`
    when the model cannot be built; any other exception is a bug in the registry."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    offline()
    mod = _module(registry)
    if name not in set(mod.list_names()):
        raise CreateError("unknown model", f"{registry} has no model {name!r}")
    seed_all(0)
    try:
        calls = mod.build(name, mode)
    except CreateError:
        raise
    except ImportError as e:  # an optional dependency of the registry or of the model
        raise CreateError("missing dependency", _missing_name(e)) from e
    if not isinstance(calls, list):
        calls = [calls]
    return calls


def _missing_name(e: ImportError) -> str:
    """The missing package, as short as the error allows (``timm``, ``scipy``)."""
    import re

    if e.name:
        return e.name
    msg = " ".join(str(e).split())
    m = re.search(r"requires the (\S+) library", msg) or re.search(r"requires '([^']+)'", msg)
    return m.group(1) if m else msg[:200]


def factory(registry: str, name: str, mode: str = "eval") -> Callable[[], list[Call]]:
    """A graphstitch TARGET factory for one zoo model (``FACTORY()`` -> calls)."""
    def _factory() -> list[Call]:
        return build(registry, name, mode)

    _factory.__name__ = f"zoo_{registry}_{name}_{mode}".replace(".", "_")
    return _factory


__all__ = ["REGISTRIES", "MODES", "CreateError", "ZooEntry", "list_names", "list_models",
           "parse_id", "build", "factory", "seed_all", "offline"]

