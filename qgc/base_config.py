"""The base model's text config as codegen and the runtime read it: JSON (a
Qwen3.5 `config.json` or its `text_config`), no torch.

The package ships three, named for `--base-config`: `2b` (Qwen3.5-2B, the
default), `0.8b` (the Qwen3.5-0.8B shape) and `small` (the 0.8B layer shape with
two base layers and a 512-row vocabulary, for fast tests). Anything else is a
path: a JSON file or a checkpoint directory with a `config.json`. Every config
is checked against `configs/base_config.schema.json` and a few rules that
relate fields, so that a bad one is a diagnostic naming the file and the field,
never an internal error or an allocation without end."""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from qgc.diagnostics import QgcError, format_diagnostic

CONFIG_DIR = Path(__file__).parent / "configs"
#: The base configs the package ships, by the name `--base-config` takes.
NAMED_CONFIGS = {
    "2b": "qwen3_5_2b_text_config.json",
    "0.8b": "qwen3_5_0_8b_text_config.json",
    "small": "small_text_config.json",
}
#: The Qwen3.5-2B text config: the default base.
DEFAULT_CONFIG = CONFIG_DIR / NAMED_CONFIGS["2b"]
SCHEMA = CONFIG_DIR / "base_config.schema.json"
#: How `--base-config` is spelled in help texts.
CHOICES = "|".join(NAMED_CONFIGS) + "|PATH"


def default_config_path() -> Path:
    return DEFAULT_CONFIG


def resolve_config_path(name_or_path: str | Path | None = None) -> Path:
    """The file a `--base-config` value names: a shipped config by name (None is
    the 2B's), a checkpoint directory's `config.json`, else the path itself."""
    if name_or_path is None:
        return DEFAULT_CONFIG
    if str(name_or_path) in NAMED_CONFIGS:
        return CONFIG_DIR / NAMED_CONFIGS[str(name_or_path)]
    path = Path(name_or_path)
    return path / "config.json" if path.is_dir() else path


class TextConfig(SimpleNamespace):
    """A Qwen3.5 text config read from JSON (what codegen needs of it)."""

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def read_text_config(name_or_path: str | Path | None = None) -> TextConfig:
    return TextConfig(**read_config_dict(name_or_path))


def read_config_dict(name_or_path: str | Path | None = None) -> dict[str, Any]:
    """The checked text config `name_or_path` names, as a dict (a multimodal
    checkpoint's `text_config` unwrapped; `hidden_act` defaults to SiLU)."""
    path = resolve_config_path(name_or_path)
    data = _text_config_of(_parse(path), path)
    _check_schema(data, path)
    _check_relations(data, path)
    data.setdefault("hidden_act", "silu")
    return data


def config_error(path: Path | str, what: str) -> QgcError:
    return QgcError(f"error: base config '{path}': {what}", 2)


# ------------------------------------------------------------------ reading
def _parse(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if path.name == "config.json" and path.parent.is_dir():
            raise config_error(path.parent, "the directory has no config.json") from None
        raise config_error(path, "no such file (the shipped configs are "
                                 f"{', '.join(NAMED_CONFIGS)})") from None
    except OSError as err:
        raise config_error(path, f"cannot read it: {err.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise config_error(path, f"not UTF-8 text (byte 0x{raw[err.start]:02x} at offset "
                                 f"{err.start})") from None
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as err:
        raise QgcError(format_diagnostic(str(path), err.lineno, err.colno,
                                         f"base config is not JSON: {err.msg}", text), 2) from None
    except ValueError as err:   # a non-finite number, an integer of thousands of digits
        raise config_error(path, f"not JSON qgc reads: {err}") from None
    except RecursionError:
        raise config_error(path, "not JSON qgc reads: nested too deeply") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of the range of a double")
    return value


def _text_config_of(data: Any, path: Path) -> dict[str, Any]:
    """The text config itself: a multimodal checkpoint nests it."""
    if isinstance(data, dict) and "text_config" in data:
        data = data["text_config"]
        if not isinstance(data, dict):
            raise config_error(path, f"'text_config' must be a JSON object, got "
                                     f"{_json_kind(data)}")
        return data
    if not isinstance(data, dict):
        raise config_error(path, "must be a JSON object (a Qwen3.5 config.json or its "
                                 f"text_config), got {_json_kind(data)}")
    return data


def _json_kind(value: Any) -> str:
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number", type(None): "null"}
    return kinds[type(value)]


# ------------------------------------------------------------------ checking
@cache
def _validator() -> Any:
    """A draft 2020-12 validator whose integers are JSON integers only (not
    2048.0, which torch would refuse much later)."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool))
    strict = jsonschema.validators.extend(base, type_checker=checker)
    return strict(json.loads(SCHEMA.read_text()))


def _check_schema(data: dict[str, Any], path: Path) -> None:
    errors = list(_validator().iter_errors(data))
    if not errors:
        return
    missing = sorted({f for e in errors if e.validator == "required"
                      for f in e.validator_value if f not in data})
    if missing:
        names = ", ".join(f"'{f}'" for f in missing)
        raise config_error(path, f"field{'s' if len(missing) > 1 else ''} {names} "
                                 f"{'are' if len(missing) > 1 else 'is'} missing")
    from jsonschema.exceptions import best_match
    raise config_error(path, _describe(best_match(errors, key=_contains_last)))


def _contains_last(error: Any) -> Any:
    """best_match's order, but a wrong entry before a missing 'full_attention'
    one, and the first wrong entry of a list."""
    from jsonschema.exceptions import relevance
    first_entry = tuple(-p if isinstance(p, int) else 0 for p in error.path)
    return (error.validator != "contains", first_entry, relevance(error))


def _describe(error: Any) -> str:
    """One schema violation in words: the field, its value and the rule."""
    field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}"
                    for p in error.absolute_path).lstrip(".")
    if error.validator == "contains":
        return f"field '{field}' needs a 'full_attention' layer (the model's cache needs one)"
    shown = json.dumps(error.instance)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"field '{field}' is {shown}, {_rule(error)}"


def _rule(error: Any) -> str:
    bound = error.validator_value
    match error.validator:
        case "type":
            return f"not {'an' if bound == 'integer' else 'a'} {bound}"
        case "minimum":
            return f"less than the minimum {bound}"
        case "exclusiveMinimum":
            return f"not more than {bound}"
        case "maximum":
            return f"more than the limit {bound}"
        case "enum":
            return f"not one of {', '.join(map(json.dumps, bound))}"
        case "const":
            return f"not {json.dumps(bound)}"
    while error is not None:    # the schema's own words, from the field's schema up
        if "description" in error.schema:
            return error.schema["description"]
        error = error.parent
    return "not valid"


def _check_relations(data: dict[str, Any], path: Path) -> None:
    """What the schema cannot say: fields that must agree with each other."""
    layers, types = data["num_hidden_layers"], data["layer_types"]
    if len(types) != layers:
        raise config_error(path, f"field 'layer_types' has {len(types)} entries, "
                                 f"'num_hidden_layers' is {layers}")
    for heads, groups in (("num_attention_heads", "num_key_value_heads"),
                          ("linear_num_value_heads", "linear_num_key_heads")):
        if data[heads] % data[groups]:
            raise config_error(path, f"field '{heads}' ({data[heads]}) must be a multiple "
                                     f"of '{groups}' ({data[groups]})")
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        ids = data.get(name)
        for token in ids if isinstance(ids, list) else [ids]:
            if token is not None and token >= data["vocab_size"]:
                raise config_error(path, f"field '{name}' is {token}, not a row of the "
                                         f"vocabulary ('vocab_size' {data['vocab_size']})")
