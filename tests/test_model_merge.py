"""The merged model: compiled layers in front of a Qwen3.5 base, as one stock
`Qwen3_5ForCausalLM` that `from_pretrained` reloads without custom code."""

import pytest

torch = pytest.importorskip("torch")

from transformers import AutoModelForCausalLM  # noqa: E402
from transformers.models.qwen3_5 import Qwen3_5ForCausalLM, Qwen3_5TextConfig  # noqa: E402

from qgc.diagnostics import QgcError  # noqa: E402
from qgc.runtime.model import load_text_config, merge, merged_config, stand_in  # noqa: E402

VOCAB, HIDDEN = 1000, 256


@pytest.fixture(scope="module")
def small_config() -> Qwen3_5TextConfig:
    data = {k: v for k, v in load_text_config().to_dict().items() if k != "model_type"}
    data.update(hidden_size=HIDDEN, intermediate_size=512, num_hidden_layers=4,
                layer_types=["linear_attention"] * 3 + ["full_attention"], vocab_size=VOCAB,
                linear_num_key_heads=2, linear_num_value_heads=2, num_attention_heads=2,
                num_key_value_heads=1, head_dim=64, eos_token_id=None)
    return Qwen3_5TextConfig(**data)


def _zero_layer(config: Qwen3_5TextConfig) -> dict:
    one = Qwen3_5TextConfig(**{**config.to_dict(), "num_hidden_layers": 1,
                               "layer_types": ["linear_attention"]})
    layer = Qwen3_5ForCausalLM(one).model.layers[0]
    return {k: torch.zeros_like(v) for k, v in layer.state_dict().items()}


def test_the_2b_config_is_the_shared_one():
    config = load_text_config()
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (2048, 24, 248320)
    assert config.layer_types.count("full_attention") == 6


def test_merged_config_puts_compiled_layers_first(small_config):
    merged = merged_config(small_config, 2, 7)
    assert merged.layer_types[:2] == ["linear_attention"] * 2
    assert merged.layer_types[2:] == small_config.layer_types
    assert merged.vocab_size == VOCAB + 7


def test_inert_layers_leave_text_bit_identical_and_reload_stock(small_config, tmp_path):
    base = stand_in(small_config, seed=3)
    ids = torch.randint(0, VOCAB, (1, 10), generator=torch.Generator().manual_seed(0))
    base_tensors = {k: v.clone() for k, v in base.state_dict().items()}
    with torch.no_grad():
        reference = base(ids).logits
        reference_tokens = base.generate(ids, max_new_tokens=4, do_sample=False)
    merged = merge(base, [_zero_layer(small_config)] * 2, torch.zeros(5, HIDDEN))

    for name, value in base_tensors.items():  # every base tensor, unchanged in value
        merged_name = name
        if "model.layers." in name:
            index = int(name.split(".")[2])
            merged_name = name.replace(f"model.layers.{index}.", f"model.layers.{index + 2}.")
        merged_value = merged.state_dict()[merged_name]
        if name in ("model.embed_tokens.weight", "lm_head.weight"):
            merged_value = merged_value[:VOCAB]
        assert torch.equal(merged_value, value), name

    with torch.no_grad():
        logits = merged(ids).logits
        tokens = merged.generate(ids, max_new_tokens=4, do_sample=False)
    assert torch.equal(logits[..., :VOCAB], reference)
    assert torch.equal(tokens, reference_tokens)

    merged.save_pretrained(tmp_path)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert type(reloaded) is Qwen3_5ForCausalLM
    with torch.no_grad():
        assert torch.equal(reloaded(ids).logits, logits)


def test_rows_of_the_wrong_width_are_refused(small_config):
    base = stand_in(small_config, seed=0)
    with pytest.raises(QgcError, match="hidden size is 256"):
        merge(base, [], torch.zeros(3, HIDDEN + 1))
