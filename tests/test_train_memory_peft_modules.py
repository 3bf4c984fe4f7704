"""--modules-to-save, --dora and --padding-free: the tensors gpuwise adds, against the ops that make them.

DoRA: a pure-torch copy of peft 0.13.2's DoRA linear (peft/tuners/lora/layer.py Linear.forward and
peft/tuners/lora/dora.py DoraLinearLayer.forward, the version ms-swift 3.0 ran) is measured op by op with a
dispatch-mode byte counter, which, unlike MemTracker, hooks no module outputs (MemTracker's backward hooks on
every module output keep the x_eye graph alive, which a real step frees). Where peft itself is importable the
copy is checked against it (peft 0.13.2 and transformers 4.47.1, installed apart: the suite does not need them).
Run alone: .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_train_memory_peft_modules.py -s
.ci/run runs this file again in a venv of peft 0.13.2 and transformers 4.47.1 with GPUWISE_REQUIRE_PEFT=1,
under which a missing peft or another version fails instead of skipping.
"""

from __future__ import annotations

import importlib
import os
import weakref
from typing import Any

import pytest

from gpuwise.catalog.arch import ModelArch
from gpuwise.catalog.cards import resolve_card
from gpuwise.errors import InputError, UnknownNameError
from gpuwise.estimate.memory_train import train_memory
from gpuwise.estimate.peft_modules import dora_activations, dora_magnitude_params, saved_module_params
from gpuwise.estimate.workload import Deployment, Workload
from gpuwise.service import EstimateRequest, estimate_json

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional
REQUIRED = bool(os.environ.get("GPUWISE_REQUIRE_PEFT"))
PEFT_VERSION = "0.13.2"


def _need(name: str) -> Any:
    """peft / transformers: skipped where not installed, unless .ci/run's peft venv asks for them."""
    return importlib.import_module(name) if REQUIRED else pytest.importorskip(name)


def _need_peft_0_13_2() -> Any:
    peft = _need("peft")
    if peft.__version__ != PEFT_VERSION:
        assert not REQUIRED, peft.__version__
        pytest.skip(f"the DoRA tensors follow peft {PEFT_VERSION}, not {peft.__version__}")
    return peft

D_IN, D_OUT, RANK, SCALING = 1024, 256, 8, 4.0
CARD = resolve_card("a100-80gb-sxm").card
TINY = ModelArch(name="tiny-llama", model_type="llama", hidden_size=256, num_layers=2, num_heads=8, num_kv_heads=2,
                 head_dim=32, intermediate_size=688, vocab_size=4096, max_context=4096, tie_embeddings=True)


class Live(torch.utils._python_dispatch.TorchDispatchMode):  # type: ignore[misc]
    """Bytes of the storages made inside that are alive now, and their peak."""

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self.seen: set[int] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in torch.utils._pytree.tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key, size = storage._cdata, storage.nbytes()
                if key not in self.seen:
                    self.seen.add(key)
                    self.live += size
                    self.peak = max(self.peak, self.live)
                    weakref.finalize(storage, self._free, key, size)
        return out

    def _free(self, key: int, size: int) -> None:
        self.live -= size
        self.seen.discard(key)


class DoraLinear(nn.Module):
    """peft 0.13.2's LoRA Linear with use_dora, lora_dropout 0 and fp32 adapters over a bf16 weight."""

    def __init__(self, dora: bool) -> None:
        super().__init__()
        self.register_buffer("weight", torch.randn(D_OUT, D_IN, dtype=torch.bfloat16) * 0.02)
        self.lora_a = nn.Linear(D_IN, RANK, bias=False)
        self.lora_b = nn.Linear(RANK, D_OUT, bias=False)
        self.magnitude = nn.Parameter(torch.linalg.norm(self.weight.float(), dim=1)) if dora else None

    def forward(self, x: Any) -> Any:
        result = F.linear(x, self.weight)
        x = x.to(self.lora_a.weight.dtype)  # layer.py line 581
        if self.magnitude is None:
            return (result + self.lora_b(self.lora_a(x)) * SCALING).to(torch.bfloat16)
        lora_result = self.lora_b(self.lora_a(x))  # dora.py DoraLinearLayer.forward from here
        x_eye = torch.eye(D_IN, dtype=x.dtype)
        lora_weight = self.lora_b(self.lora_a(x_eye)).T
        weight = self.weight.to(x.dtype)
        weight_norm = torch.linalg.norm(weight + SCALING * lora_weight.detach(), dim=1).to(weight.dtype).detach()
        mag_norm_scale = (self.magnitude / weight_norm).view(1, -1)
        dora = (mag_norm_scale - 1) * F.linear(x, weight) + mag_norm_scale * lora_result * SCALING
        return (result + dora).to(torch.bfloat16)


def _forward_bytes(layer: Any, tokens: int) -> tuple[int, int]:
    """(bytes the forward leaves saved for backward, the forward's peak), the output excluded."""
    x = torch.randn(tokens, D_IN, dtype=torch.bfloat16, requires_grad=True)
    with Live() as live:
        y = layer(x)
        saved, peak = live.live - y.numel() * y.element_size(), live.peak
    y.float().sum().backward()
    return saved, peak


def _layer_shapes_arch() -> ModelArch:
    """One layer whose only target (q) is the DoRA linear above: d_in = hidden, d_out = q_dim."""
    return ModelArch(name="one-linear", model_type="llama", hidden_size=D_IN, num_layers=1, num_heads=8,
                     num_kv_heads=8, head_dim=D_OUT // 8, intermediate_size=0, vocab_size=4096, max_context=4096)


@pytest.mark.parametrize("tokens", [64, 512])
def test_dora_saves_the_fp32_weight_copy_and_two_results_per_token_as_peft_0_13_does(tokens: int) -> None:
    torch.manual_seed(0)
    lora_saved, lora_peak = _forward_bytes(DoraLinear(dora=False), tokens)
    dora_saved, dora_peak = _forward_bytes(DoraLinear(dora=True), tokens)
    w = Workload(task="lora", dora=True, seq_len=tokens, lora_targets=("q",), lora_rank=RANK,
                 framework="ms-swift-3")  # peft 0.13.2 with dropout 0.05: F.linear reruns the base
    model = dora_activations(_layer_shapes_arch(), w, adapter_bytes=4.0)
    assert model.saved == pytest.approx(dora_saved - lora_saved, rel=0.01)
    # the norm's transient (x_eye, lora_weight, scaled, sum) beside all DoRA saves: an upper bound, since the two
    # results are saved only after the norm is freed; over by at most those results (within 20 % here)
    assert dora_peak - lora_peak <= model.saved + model.transient
    assert dora_peak - lora_peak >= 0.8 * (model.saved + model.transient)


def test_the_torch_copy_of_the_dora_layer_matches_peft_itself() -> None:
    peft = _need_peft_0_13_2()

    class One(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = nn.Linear(D_IN, D_OUT, bias=False, dtype=torch.bfloat16)

        def forward(self, x: Any) -> Any:
            return self.q(x)

    def saved(dora: bool) -> int:
        torch.manual_seed(0)
        config = peft.LoraConfig(r=RANK, lora_alpha=RANK * SCALING, target_modules=["q"], use_dora=dora)
        return _forward_bytes(peft.get_peft_model(One(), config).train(), 512)[0]

    ours = _forward_bytes(DoraLinear(True), 512)[0] - _forward_bytes(DoraLinear(False), 512)[0]
    assert saved(True) - saved(False) == pytest.approx(ours, rel=0.01)


def test_dora_trains_one_magnitude_per_output_row_of_each_target() -> None:
    w = Workload(task="lora", dora=True)
    # q, k, v, o, gate, up, down write q_dim, kv_dim, kv_dim, hidden, inter, inter, hidden rows
    rows = TINY.q_dim + 2 * TINY.kv_dim + 2 * TINY.hidden_size + 2 * TINY.intermediate_size
    assert dora_magnitude_params(TINY, w) == TINY.num_layers * rows
    assert dora_magnitude_params(TINY, Workload(task="lora")) == 0


def _items(w: Workload, d: Deployment | None = None) -> dict[str, float]:
    return {i.key: i.bytes for i in train_memory(TINY, w, d or Deployment(card=CARD)).breakdown.items}


def test_each_module_to_save_is_a_bf16_copy_with_bf16_gradients_and_adamw_states() -> None:
    base = Workload(task="lora", framework="ms-swift-3", grad_ckpt="full", seq_len=256)
    both = Workload(task="lora", framework="ms-swift-3", grad_ckpt="full", seq_len=256,
                    modules_to_save=("embed_tokens", "lm_head"))
    copies = 2 * TINY.vocab_size * TINY.hidden_size  # tied in the checkpoint, two trained copies all the same
    assert saved_module_params(TINY, both) == copies
    before, after = _items(base), _items(both)
    assert after["adapters"] - before["adapters"] == pytest.approx(2.0 * copies)
    assert after["gradients"] - before["gradients"] == pytest.approx(2.0 * copies)
    # m and v in bf16, and foreach AdamW's sqrt of v (ms-swift-3: optimizer_foreach) during the step
    assert after["optimizer"] - before["optimizer"] == pytest.approx((4.0 + 2.0) * copies)


def test_deepspeed_zero2_keeps_an_fp32_master_and_fp32_states_of_the_copies_sharded() -> None:
    kw: dict[str, Any] = {"task": "lora", "framework": "ms-swift-3", "grad_ckpt": "full", "seq_len": 256}
    d = Deployment(card=CARD, gpus=4, zero=2)
    copies = TINY.vocab_size * TINY.hidden_size
    grown = {k: v - _items(Workload(**kw), d).get(k, 0.0)
             for k, v in _items(Workload(**kw, modules_to_save=("lm_head",)), d).items()}
    assert grown["adapters"] == pytest.approx(2.0 * copies)  # ZeRO-2 keeps the bf16 parameters whole
    assert grown["gradients"] == pytest.approx(2.0 * copies / 4)
    assert grown["optimizer"] == pytest.approx((4.0 + 8.0 + 4.0) * copies / 4)  # master, m + v, foreach sqrt


def test_peft_trains_separate_bf16_copies_even_of_tied_modules() -> None:
    peft = _need("peft")
    transformers = _need("transformers")

    config = transformers.LlamaConfig(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    model = peft.get_peft_model(transformers.LlamaForCausalLM(config).to(torch.bfloat16),
                                peft.LoraConfig(r=8, target_modules="all-linear",
                                                modules_to_save=["embed_tokens", "lm_head"]))
    copies = [p for n, p in model.named_parameters() if p.requires_grad and "modules_to_save" in n]
    assert [p.dtype for p in copies] == [torch.bfloat16] * 2
    assert copies[0].data_ptr() != copies[1].data_ptr()


def test_padding_free_holds_the_tensors_of_a_padded_batch_at_the_same_bound_and_says_so() -> None:
    kw: dict[str, Any] = {"model": "qwen2.5-7b", "card": "a100-80gb-sxm", "task": "lora", "framework": "ms-swift-3",
                              "micro_batch": 8, "seq_len": 1024}
    padded, free = estimate_json(EstimateRequest(**kw)), estimate_json(EstimateRequest(**kw, padding_free=True))
    assert free["memory"]["reserved_peak"] == padded["memory"]["reserved_peak"]
    assert any(n.startswith("--padding-free") for n in free["warnings"])
    assert not any(n.startswith("--padding-free") for n in padded["warnings"])
    assert free["framework"]["knobs"]["padding_free"] is True
    assert "padding_free" in padded["framework"]["defaults_applied"]


def test_the_new_flags_refuse_what_the_frameworks_refuse() -> None:
    with pytest.raises(InputError, match="--dora belongs to LoRA"):
        Workload(task="full", dora=True)
    with pytest.raises(InputError, match="--modules-to-save belongs to LoRA"):
        Workload(task="pretrain", modules_to_save=("lm_head",))
    with pytest.raises(UnknownNameError, match="Did you mean .embed_tokens."):
        Workload(task="lora", modules_to_save=("embed_tokns",))
    with pytest.raises(InputError, match="flash attention"):
        Workload(task="lora", padding_free=True, flash_attention=False)


def test_modules_to_save_reads_commas_or_spaces_as_ms_swift_writes_them() -> None:
    kw: dict[str, Any] = {"model": "qwen2.5-3b", "card": "a100-80gb-sxm", "task": "lora", "framework": "ms-swift-3"}
    commas = estimate_json(EstimateRequest(**kw, modules_to_save="embed_tokens,lm_head"))
    spaces = estimate_json(EstimateRequest(**kw, modules_to_save="embed_tokens lm_head"))
    assert commas["memory"]["reserved_peak"] == spaces["memory"]["reserved_peak"]
    assert commas["framework"]["knobs"]["modules_to_save"] == ["embed_tokens", "lm_head"]


def test_the_cli_and_its_fast_json_path_read_the_three_flags_alike() -> None:
    import json

    import typer
    from typer.testing import CliRunner

    from gpuwise.cli import estimate_cmd
    from gpuwise.cli.fast import parse

    args = ["estimate", "qwen2.5-7b", "--card", "a100-80gb-sxm", "--task", "lora", "--framework", "ms-swift-3",
            "--dora", "--padding-free", "--modules-to-save", "embed_tokens,lm_head", "--json"]
    fast = parse(args[1:])
    assert fast is not None
    assert (fast["dora"], fast["padding_free"], fast["modules_to_save"]) == (True, True, "embed_tokens,lm_head")
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @app.callback()
    def _root() -> None:
        """gpuwise (test shell)."""

    estimate_cmd.register(app)
    out = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    knobs = json.loads(out.output)["framework"]["knobs"]
    assert (knobs["dora"], knobs["padding_free"], knobs["modules_to_save"]) == (True, True, ["embed_tokens", "lm_head"])


def test_a_whole_peft_dora_step_grows_by_what_gpuwise_adds_with_and_without_checkpointing() -> None:
    """transformers 4.47.1 LlamaForCausalLM + peft 0.13.2 (all-linear, dropout 0.05, fp32 adapters), forward and
    backward, against the same step as plain LoRA."""
    peft = _need_peft_0_13_2()
    transformers = _need("transformers")
    hidden, layers, inter, vocab, tokens = 256, 4, 1536, 4096, 256
    arch = ModelArch(name="tiny", model_type="llama", hidden_size=hidden, num_layers=layers, num_heads=8,
                     num_kv_heads=2, head_dim=32, intermediate_size=inter, vocab_size=vocab, max_context=4096)

    def peak(dora: bool, ckpt: bool) -> int:
        torch.manual_seed(0)
        config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter,
                                          num_hidden_layers=layers, num_attention_heads=8, num_key_value_heads=2,
                                          attn_implementation="sdpa", use_cache=False)
        model = transformers.LlamaForCausalLM(config).to(torch.bfloat16)
        if ckpt:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            model.enable_input_require_grads()
        model = peft.get_peft_model(model, peft.LoraConfig(r=8, lora_alpha=32, target_modules="all-linear",
                                                           use_dora=dora, lora_dropout=0.05)).train()
        ids = torch.randint(0, vocab, (1, tokens))
        with Live() as live:
            model(input_ids=ids, labels=ids).loss.backward()
        return live.peak

    # ms-swift 3.0 ran peft 0.13.2 with lora_dropout 0.05, as this step does: the base GEMM is rerun on the
    # dropped input, so its fp32 weight copy is saved (frameworks.toml dora_reruns_base)
    extra = dora_activations(arch, Workload(task="lora", dora=True, seq_len=tokens, framework="ms-swift-3"),
                             adapter_bytes=4.0)
    # no checkpointing: every layer keeps its DoRA tensors; the norm runs in forward, below that
    assert peak(True, False) - peak(False, False) == pytest.approx(
        layers * extra.saved + max(0.0, extra.transient - extra.saved), rel=0.05)
    # checkpointing: one recomputed layer's, and the norm again beside it (an upper bound)
    grown = peak(True, True) - peak(False, True)
    assert 0.8 * (extra.saved + extra.transient) <= grown <= extra.saved + extra.transient


def test_dora_saves_no_weight_copy_where_the_framework_reuses_the_base_output() -> None:
    """peft 0.14+ with lora_dropout 0 (hf) computes no second F.linear, so no fp32 weight copy is saved;
    the same field (frameworks.toml dora_reruns_base) decides the speed side's second base GEMM."""
    def saved(framework: str) -> float:
        w = Workload(task="lora", dora=True, seq_len=64, lora_targets=("q",), lora_rank=RANK, framework=framework)
        return dora_activations(_layer_shapes_arch(), w, adapter_bytes=4.0).saved
    arch = _layer_shapes_arch()
    assert saved("ms-swift-3") - saved("hf") == pytest.approx(arch.hidden_size * arch.q_dim * 4.0)
