"""convert-tensor-to-weights and the weights level: the layers file written
from the weights level is the one written from the tensor level, stored in its
smallest form, its GPU rows made from their encoding as the per-token encoder
makes them, and the GPU vocabulary's two serialised forms (attribute, JSON)
round-trip."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.parser import Parser
from xdsl.printer import Printer

from qgc import protocol as P
from qgc.codegen import write_compiled
from qgc.context import make_context
from qgc.dialects import weights as W
from qgc.passes.convert_simt_to_tensor import ConvertSimtToTensorPass
from qgc.passes.convert_tensor_to_weights import ConvertTensorToWeightsPass
from qgc.passes.tensor_schedule_layers import TensorScheduleLayersPass
from qgc.runtime.gpu_rows import input_bits
from qgc.runtime.layers_file import DENSE_BYTES, SPARSE_BYTES, read_layers

KERNEL = """
builtin.module {
  simt.kernel @k(ptr a) lanes 4 mem_words 127 max_blocks 256 max_ops 16 regs 15 preds 8 {
    simt.ld r0, param[0]
    simt.ld r1, global[r0 + 0] buffer 0
    simt.st global[r0 + 1], r1 buffer 0
    simt.exit
  }
}
"""


@pytest.fixture(scope="module")
def tensor_level():
    ctx = make_context()
    module = Parser(ctx, KERNEL).parse_module()
    ConvertSimtToTensorPass().apply(ctx, module)
    TensorScheduleLayersPass().apply(ctx, module)
    return ctx, module


@pytest.fixture(scope="module")
def weights_level(tensor_level):
    """The weights level lowered from `tensor_level` (left as it is)."""
    ctx, module = tensor_level
    lowered = module.clone()
    ConvertTensorToWeightsPass().apply(ctx, lowered)
    return lowered


@pytest.fixture
def written(weights_level, tmp_path):
    """(the `weights.model`, the layers file `-o` writes of it, read back)."""
    (model,) = W.models_of(weights_level)
    write_compiled(weights_level, tmp_path / "layers.safetensors")
    return model, read_layers(tmp_path / "layers.safetensors")


def test_the_file_holds_the_weights_level(written):
    """The layers file, read back densely, holds exactly the weights of every
    `weights.layer` (every entry at its index, nothing else) and one GPU row
    per token of the vocabulary."""
    model, layers = written
    assert layers.count == len(model.layers())
    for layer in model.layers():
        state = layers.state(layer.layer_index)
        for name, table in layer.weights.tables().items():
            dense = state[name]
            assert all(dense[index] == value for index, value in table.items()), name
            assert np.count_nonzero(dense) == sum(v != 0 for v in table.values()), name
    vocab = P.Vocabulary.from_attr(model.vocabulary)
    rows = np.array([model.encoding.encode(vocab.inputs(t)) for t in vocab.tokens()],
                    dtype=np.float32)
    assert np.array_equal(layers.gpu_rows, rows)
    (_, _, fields) = model.encoding.data
    assert layers.code == list(dict(fields)["code"])


def test_the_file_stores_each_parameter_in_its_smaller_form(written):
    """Dense or (flat index, value) pairs, whichever is smaller, and no GPU
    rows: the stored bytes are exactly that sum."""
    model, layers = written
    smallest = 0
    for layer in model.layers():
        nonzeros = layer.weights.nnz()
        smallest += sum(min(nonzeros.get(name, 0) * SPARSE_BYTES, DENSE_BYTES * int(np.prod(s)))
                        for name, s in layers.shapes().items())
    assert sum(t.nbytes for t in layers.tensors.values()) == smallest


def test_the_same_layers_give_the_same_bytes(weights_level, tmp_path):
    """Two writes of one weights level are byte-identical: safetensors writes
    its metadata from a hash map, in an order of its own each time, and the
    header is put in sorted order (what a build cache or a checksum needs)."""
    blobs = []
    for index in range(3):
        write_compiled(weights_level, tmp_path / f"layers{index}.safetensors")
        blobs.append((tmp_path / f"layers{index}.safetensors").read_bytes())
    assert blobs[0] == blobs[1] == blobs[2]
    header = blobs[0][8:8 + int.from_bytes(blobs[0][:8], "little")]
    metadata = json.loads(header)["__metadata__"]
    assert list(metadata) == sorted(metadata) and len(metadata) > 3
    assert (8 + len(header)) % 8 == 0
    read_layers(tmp_path / "layers0.safetensors")      # still a valid layers file


VOCABULARIES = st.builds(
    P.Vocabulary, records=st.integers(0, 2), blocks=st.integers(1, 3),
    warps=st.integers(1, 9), sites=st.integers(0, 5))


@settings(max_examples=15, deadline=None)
@given(VOCABULARIES)
def test_input_bits_are_the_vocabularys_inputs(vocab):
    """`gpu_rows.input_bits` (all tokens at once) is `Vocabulary.inputs`, token by token."""
    table = input_bits(vocab)
    for token_id, token in enumerate(vocab.tokens()):
        inputs = vocab.inputs(token)
        assert inputs.keys() == table.keys()
        assert all(table[name][token_id].tolist() == bits for name, bits in inputs.items())


def test_the_weights_level_prints_a_line_per_layer(weights_level):
    lowered = weights_level
    out = io.StringIO()
    Printer(stream=out).print_op(lowered)
    layers = [line for line in out.getvalue().splitlines() if "weights.layer" in line]
    assert len(layers) == len(W.models_of(lowered)[0].layers())
    assert "readout" in layers[-1] and all(len(line) < 400 for line in layers)


def test_the_options_of_a_config_parse_back():
    from qgc.base_config import read_text_config
    from qgc.pipeline import parse_pipeline, pipeline_text, stage
    config = read_text_config()
    configured = stage("weights", schedule=config)
    (p,) = parse_pipeline(pipeline_text(configured[-1:])).passes
    assert p == configured[-1]
    assert vars(p.text_config()).items() <= config.to_dict().items()


def test_the_vocabulary_round_trips():
    vocab = P.Vocabulary(6, 3, 8, ports=((1, 2), ()), sites=2)
    assert P.Vocabulary.from_attr(vocab.to_attr()) == vocab
    assert P.Vocabulary.from_json(vocab.to_json()) == vocab
    assert list(vocab.to_json()) == ["records", "blocks", "warps", "sites", "ports", "size"]
