"""The base model's text config as codegen and the runtime read it: JSON (a
Qwen3.5 `config.json` or its `text_config`), no torch. The default is the
Qwen3.5-2B text config the package ships (`qgc/configs/`)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from qgc.diagnostics import QgcError

#: The Qwen3.5-2B text config, shipped with the package: the default base.
DEFAULT_CONFIG = Path(__file__).parent / "configs" / "qwen3_5_2b_text_config.json"


def default_config_path() -> Path:
    return DEFAULT_CONFIG


class TextConfig(SimpleNamespace):
    """A Qwen3.5 text config read from JSON (what codegen needs of it)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def read_text_config(path: str | Path | None = None) -> TextConfig:
    path = Path(path) if path is not None else default_config_path()
    if path.is_dir():
        path = path / "config.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise QgcError(f"error: cannot read the base config '{path}': {err}", 2) from None
    data = data.get("text_config", data)
    data.setdefault("hidden_act", "silu")
    return TextConfig(**data)
