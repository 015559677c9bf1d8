"""Layers files that cannot crash the reader: truncated or flipped bytes,
metadata with keys dropped, wrong types, huge and negative numbers, tensors
of the wrong dtype, shape or index range. Every input is read by
`read_layers` (what `qgc build F.safetensors` calls): it is a layers file, or
`error: 'F' is not a qgc layers file: ...` (status 2); never another
exception. A few whole `qgc build` runs check the CLI's side."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EXAMPLES, FUZZ_INPUTS, small_base_config
from qgc.cli import main
from qgc.diagnostics import QgcError
from qgc.runtime.layers_file import JSON_FIELDS, checked_layers, read_layers

FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
#: inputs tried, per kind (said at the end of the module: `pytest -s`)
TRIED: dict[str, int] = {}


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """dot's layers for the small base: the file's bytes, tensors and metadata."""
    from qgc.merged_model import compile_layers
    from qgc.runtime.model import load_text_config
    directory = tmp_path_factory.mktemp("fuzz")
    config = small_base_config(directory, hidden=1024)
    layers = compile_layers(str(EXAMPLES / "dot" / "dot.ptx"), load_text_config(config))
    path = directory / "dot.safetensors"
    layers.write(path)
    yield Valid((path, path.read_bytes(), layers.tensors, layers.meta, config))
    print(f"\nlayers-file fuzzer: {sum(TRIED.values())} inputs ({TRIED})")


class Valid(tuple):
    """The fixture's value, with a short repr (hypothesis prints its arguments)."""

    def __repr__(self) -> str:
        return "<dot's layers file>"


def outcome(read) -> str:
    """'ok', or the diagnostic; any other exception fails the test."""
    try:
        read()
        return "ok"
    except QgcError as err:
        assert err.status == 2 and str(err).startswith("error: "), err
        assert "is not a qgc layers file: " in str(err), err
        return str(err)


def header_length(data: bytes) -> int:
    return 8 + int.from_bytes(data[:8], "little")


@FUZZ
@given(cut=st.floats(0, 1, exclude_max=True), at_header=st.booleans())
def test_truncated_files(valid, tmp_path_factory, cut, at_header, record_property):
    path, data, *_ = valid
    end = header_length(data) if at_header else len(data)
    broken = tmp_path_factory.mktemp("cut") / "f.safetensors"
    broken.write_bytes(data[:int(cut * end)])
    TRIED["truncated"] = TRIED.get("truncated", 0) + 1
    record_property(FUZZ_INPUTS, TRIED["truncated"])    # the session summary counts the last
    assert outcome(lambda: read_layers(broken)) != "ok"


@FUZZ
@given(flips=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), min_size=1,
                      max_size=4))
def test_flipped_header_bytes(valid, tmp_path_factory, flips, record_property):
    """Flips in the header (the length, the JSON of names, dtypes, offsets, metadata)."""
    path, data, *_ = valid
    mutated = bytearray(data)
    for where, mask in flips:
        mutated[int(where * (header_length(data) - 1))] ^= mask
    broken = tmp_path_factory.mktemp("flip") / "f.safetensors"
    broken.write_bytes(bytes(mutated))
    TRIED["flipped"] = TRIED.get("flipped", 0) + 1
    record_property(FUZZ_INPUTS, TRIED["flipped"])    # the session summary counts the last
    outcome(lambda: read_layers(broken))


@FUZZ
@given(data=st.binary(max_size=256))
def test_random_bytes(tmp_path_factory, record_property, data):
    broken = tmp_path_factory.mktemp("random") / "f.safetensors"
    broken.write_bytes(data)
    TRIED["random"] = TRIED.get("random", 0) + 1
    record_property(FUZZ_INPUTS, TRIED["random"])    # the session summary counts the last
    assert outcome(lambda: read_layers(broken)) != "ok"


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=6)
NUMBERS = st.sampled_from([-1, 0, 1, 3, 1 << 31, 1 << 62, -(1 << 40)])


def mutated_field(value, draw):
    """`value` (decoded JSON) with one part replaced: a key dropped, a number
    made huge or negative, a value of another type."""
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        how = draw(st.sampled_from(["drop", "number", "any", "deeper"]))
        out = dict(value)
        if how == "drop":
            del out[key]
        elif how == "number":
            out[key] = draw(NUMBERS)
        elif how == "any":
            out[key] = draw(JSONISH)
        else:
            out[key] = mutated_field(value[key], draw)
        return out
    if isinstance(value, list) and value:
        at = draw(st.integers(0, len(value) - 1))
        return value[:at] + [draw(NUMBERS | JSONISH)] + value[at + 1:]
    return draw(NUMBERS | JSONISH)


@FUZZ
@given(st.data())
def test_mutated_metadata(valid, record_property, data):
    _, _, tensors, meta, _ = valid
    key = data.draw(st.sampled_from(sorted(meta)))
    changed = dict(meta)
    how = data.draw(st.sampled_from(["drop", "text", "json"]))
    if how == "drop":
        del changed[key]
    elif how == "text":
        changed[key] = data.draw(st.sampled_from(["", "-1", "999999999999", "x", "[]", "{}"]))
    elif key in JSON_FIELDS:
        changed[key] = json.dumps(mutated_field(json.loads(meta[key]), data.draw))
    else:
        changed[key] = str(data.draw(NUMBERS))
    TRIED["metadata"] = TRIED.get("metadata", 0) + 1
    record_property(FUZZ_INPUTS, TRIED["metadata"])    # the session summary counts the last
    outcome(lambda: _checked(tensors, changed))


@FUZZ
@given(st.data())
def test_mutated_encoding(valid, record_property, data):
    """The GPU rows' encoding (what the file holds instead of the rows): refused,
    or rows the merge can make, one per GPU token."""
    _, _, tensors, meta, _ = valid
    encoding = mutated_field(json.loads(meta["encoding"]), data.draw)
    changed = meta | {"encoding": json.dumps(encoding)}
    TRIED["encoding"] = TRIED.get("encoding", 0) + 1
    record_property(FUZZ_INPUTS, TRIED["encoding"])    # the session summary counts the last
    read = []
    if outcome(lambda: read.append(_checked(tensors, changed))) == "ok":
        (layers,) = read
        assert layers.gpu_rows.shape == (layers.vocabulary.size, layers.encoding.hidden)


@FUZZ
@given(st.data())
def test_mutated_tensors(valid, record_property, data):
    """A tensor dropped, added, of another dtype or shape, holding a NaN, or
    sparse indices out of range."""
    _, _, tensors, meta, _ = valid
    name = data.draw(st.sampled_from(sorted(tensors)))
    changed = dict(tensors)
    array = tensors[name]
    how = data.draw(st.sampled_from(["drop", "extra", "dtype", "shape", "nan", "index"]))
    if how == "drop":
        del changed[name]
    elif how == "extra":
        changed[name + ".x"] = np.zeros(3, np.float32)
    elif how == "dtype":
        other = [t for t in (np.float64, np.int32, np.int64, np.float16) if t != array.dtype]
        with np.errstate(over="ignore"):     # large weights as float16: inf, refused
            changed[name] = array.astype(data.draw(st.sampled_from(other)))
    elif how == "shape":
        cut = array.reshape(-1)[:max(0, array.size - data.draw(st.integers(1, 3)))]
        changed[name] = cut if array.size else np.zeros(1, array.dtype)
    elif how == "nan" and array.dtype == np.float32 and array.size:
        changed[name] = array.copy()
        changed[name].reshape(-1)[data.draw(st.integers(0, array.size - 1))] = np.nan
    elif how == "index" and name.endswith(".indices") and array.size:
        changed[name] = array.copy()
        changed[name].reshape(-1)[data.draw(st.integers(0, array.size - 1))] = \
            data.draw(st.sampled_from([-1, np.iinfo(array.dtype).max]))
    else:
        return
    TRIED["tensors"] = TRIED.get("tensors", 0) + 1
    record_property(FUZZ_INPUTS, TRIED["tensors"])    # the session summary counts the last
    assert outcome(lambda: _checked(changed, meta)) != "ok"


def _checked(tensors, meta):
    from qgc.runtime.layers_file import NotLayersFile
    try:
        return checked_layers(tensors, meta)
    except NotLayersFile as why:     # as read_layers says it
        raise QgcError(f"error: 'F' is not a qgc layers file: {why}", 2) from None


@pytest.mark.parametrize("content", [b"", b"\x00" * 7, b"not a safetensors file at all",
                                     (1 << 40).to_bytes(8, "little") + b"{}"])
def test_qgc_build_says_a_bad_layers_file_is_not_one(valid, tmp_path, capsys, content):
    *_, config = valid
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(content)
    status = main(["build", str(bad), "-o", str(tmp_path / "out"), "--base-config", str(config)])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith(f"qgc: error: '{bad}' is not a qgc layers file: ") or \
        err.startswith(f"error: '{bad}' is not a qgc layers file: "), err
    assert not (tmp_path / "out").exists()


def test_qgc_build_of_a_truncated_layers_file(valid, tmp_path, capsys):
    _, data, *_, config = valid
    bad = tmp_path / "cut.safetensors"
    bad.write_bytes(data[:len(data) // 2])
    assert main(["build", str(bad), "-o", str(tmp_path / "out"), "--base-config",
                 str(config)]) == 2
    assert "is not a qgc layers file: " in capsys.readouterr().err
