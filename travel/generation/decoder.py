"""StructuredDecoder: K candidate actions per role prompt from one prefill, with a forced JSON skeleton.

The decoder runs its own loop over the model's KV cache. Each prompt is prefilled once, the caches
are merged left-padded and expanded to K rows per prompt with room for the whole token budget
(travel/generation/kv_cache.py), and then every step runs one forward for all rows: a fixed-shape step
(travel/generation/static_step.py), replayed from a CUDA graph on CUDA, or with `jump_forced` a multi-token
step that feeds whole forced runs (travel/generation/kernels/jump_step.py). The loop and its per-row state machine
(value, forced and done modes; forced closes at the token cap or the budget, so `max_new_tokens` is never
exceeded and every row ends with `}]}`) are travel/generation/decode_loop.py.

A candidate's text is the assistant prefill plus its decoded tokens: the reward-facing action text,
identical to `format_action` of the values as written. Its value mask is 1 exactly for sampled
value tokens (a voluntary closing quote included) and 0 for forced tokens; with `return_logprobs`
the masked, length-normalised log-prob under the untempered, unmasked model distribution
(docs/algorithms.md "Value-token loss") is accumulated in the same pass.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from travel.agents.models import resolve_dtype
from travel.generation.compiled_forward import prompt_forward
from travel.generation.decode_loop import StreamDraws, decode_loop, jump_width
from travel.generation.kv_cache import merge_prompt_caches, supports_preallocation
from travel.generation.model_io import (
    EagerDecodeStep,
    cache_argument,
    compute_autocast,
    decode_attention,
    forward_last_logits,
    model_device,
    new_cache,
)
from travel.generation.phase_clock import PhaseClock
from travel.generation.requests import Candidate, DecodeRequest, as_request, decoded_candidates
from travel.generation.options import (
    PREFIX_KERNELS,
    PROMPT_CACHE_SHARING,
    STEP_BACKENDS,
    VALUE_MODES,
    check_choice,
    check_decode_matmul,
    check_decode_weights,
)
from travel.generation.prefix_attention import prefix_kernel
from travel.generation.sampling import validate_sampling
from travel.generation.shared_prefix import SharedPrefixDecodeStep, shared_prefix_supported
from travel.generation.skeleton import SlotPlan, build_slot_plan
from travel.generation.static_step import (
    StaticDecodeStep,
    aligned_capacity,
    causal_prompt_attention,
    supports_static_steps,
)
from travel.generation.value_trie import TrieCache, checked_slot_values

class StructuredDecoder:
    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        max_new_tokens: int = 1024,
        max_value_tokens: int = 32,
        temperature: float = 0.7,
        top_p: float = 0.8,
        fill_budget: bool = False,
        step_backend: str = "auto",
        share_prompt_cache: str = "auto",
        values: str = "free",
        compute_dtype: str | None = None,
        decode_weights: str = "master",
        jump_forced: bool = False,
        compile_decode: bool = False,
        compile_prefill: bool = False,
        prefix_attention: str = "auto",
        decode_matmul: str = "split_k",
    ) -> None:
        """`fill_budget` (benchmarks only): values never close voluntarily and have no token cap, and the
        loop runs all `max_new_tokens` steps, so every row does the full budget of decode steps.

        `step_backend`: how each decode step runs the model. `eager` grows the cache view step by step;
        `static` runs fixed-shape steps over the whole cache (travel/generation/static_step.py);
        `cuda_graph` replays those static steps from a CUDA graph; `auto` is `cuda_graph` on CUDA and `static`
        elsewhere (on the CPU as fast as eager steps or faster for every candidate count: docs/performance.md).
        Models whose cache or attention the static step does not support run eager.
        `share_prompt_cache`: whether static steps keep each prompt's keys once for all its candidates
        (travel/generation/shared_prefix.py) instead of once per candidate: `auto` where the model supports it
        (for any number of candidates: it is the faster step even for one), `always` (an error where it does not),
        or `never`.
        `values`: `free` text within the JSON string rules, or `catalog`: each value is one of the values its
        slot admits (the request's `slot_values`, travel/generation/value_trie.py), with no token cap.
        `compute_dtype`: forwards under autocast to this dtype (model_io.compute_autocast); None: the weights' dtype.
        `decode_weights`: `master` decodes over the model's own weights (under that autocast), `copy` over a copy
        in `compute_dtype` refreshed from them at every call (travel/generation/kernels/decode_weights.py), `fused` over
        such a copy (in the weights' dtype without `compute_dtype`) whose layers read their q/k/v and their gate/up
        projections as one matrix each (travel/generation/kernels/fused_projections.py), `folded` over the fused copy with
        each layer's norms and residual adds folded into its matmuls (Llama-family layers of transformers 4.54 or
        later).
        `decode_matmul`: with `decode_weights=fused` or `folded`, the kernel of those layers' matmuls of at most 32 rows (a
        decode step's, on a GPU in half precision): `split_k`, a Triton kernel that reads the small matrices nearer
        the bandwidth than cuBLAS (travel/generation/kernels/skinny_matmul.py), with the step's q/k norms, rotary embedding
        and cache writes in one Triton kernel (travel/generation/kernels/triton_rotary.py), or `cublas` (F.linear, and the
        model's own operations for the rest).
        `jump_forced`: a row feeds a whole forced run (and a closing quote with its suffix) in one forward
        (travel/generation/kernels/jump_step.py); static steps only (an explicit `eager` ignores it).
        `compile_decode`: static steps run the model's forward through torch.compile, which fuses its small
        kernels (travel/generation/compiled_forward.py), and so do the loop's token choice and state update
        (travel/generation/decode_loop.py); the eager loop ignores it.
        `compile_prefill`: with static steps, each prompt's prefill runs through torch.compile as well, for every
        prompt length at once (faster prefills for a longer first call: travel/generation/compiled_forward.py).
        `prefix_attention`: the kernel of the shared-prefix steps' attention over the prompt
        (travel/generation/prefix_attention.py): `auto` (on a GPU where FlashAttention runs, `split_triton` where
        triton imports, else `split_flash` for one prompt of several rows and `chunked_flash` for several prompts;
        the joint softmax otherwise: the faster ones measured), `joint_softmax`, `flex`, `chunked_flash`,
        `split_flash` (one prompt per call), `chunked_triton` or `split_triton`."""
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if max_value_tokens < 1:
            raise ValueError(f"max_value_tokens must be >= 1, got {max_value_tokens}")
        validate_sampling(temperature, top_p)
        check_choice("step_backend", step_backend, STEP_BACKENDS)
        check_choice("share_prompt_cache", share_prompt_cache, PROMPT_CACHE_SHARING)
        check_choice("generation.values", values, VALUE_MODES)
        check_decode_weights(decode_weights, compute_dtype)
        check_decode_matmul(decode_matmul)
        check_choice("prefix_attention", prefix_attention, PREFIX_KERNELS)
        if getattr(tokenizer, "pad_token_id", None) is None and getattr(tokenizer, "eos_token_id", None) is None:
            raise ValueError("the tokenizer needs a pad or eos token to pad prompts and finished rows")
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.max_value_tokens = max_value_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.fill_budget = fill_budget
        self.step_backend = step_backend
        self.share_prompt_cache = share_prompt_cache
        self.values = values
        self.compute_dtype = compute_dtype
        self.decode_weights = decode_weights
        self.jump_forced = bool(jump_forced)
        self.compile_decode = bool(compile_decode)
        self.compile_prefill = bool(compile_prefill)
        self.prefix_attention = prefix_attention
        self.decode_matmul = decode_matmul
        # the nucleus by a sort of the scores whatever the logits' dtype: the reference the tests hold the counted one to
        self.sort_nucleus = False
        self.last_decode_steps = 0  # decode steps (forwards after the prefill) of the last generate call
        self.last_phases: PhaseClock | None = None  # the seconds of its phases: weights, prefill, decode
        self._weights = None
        if decode_weights != "master":
            # deferred: the weight copies and their kernels (travel/generation/kernels/) load only where chosen
            from travel.generation.kernels.decode_weights import DecodeWeights
            from travel.generation.kernels.fused_projections import layers_to_fuse

            dtype = resolve_dtype(compute_dtype) if compute_dtype is not None else None
            self._weights = DecodeWeights(dtype, decode_weights, matmul=decode_matmul)
            if decode_weights in ("fused", "folded"):  # a model whose layers cannot be fused or folded fails here,
                layers_to_fuse(model, fold=decode_weights == "folded")  # not at its first decode
        self._tries = TrieCache(tokenizer)
        self._plans: dict[tuple[int, int], SlotPlan] = {}
        self._cache_name = cache_argument(model)

    def with_model(self, model: Any, max_new_tokens: int | None = None) -> "StructuredDecoder":
        """A decoder of `model` (a comparator's frozen weights) with this one's settings, `max_new_tokens` aside:
        every constructor parameter is kept as the attribute of its name."""
        parameters = list(inspect.signature(StructuredDecoder.__init__).parameters)[3:]  # after self, model, tokenizer
        settings = {name: getattr(self, name) for name in parameters}
        settings["max_new_tokens"] = self.max_new_tokens if max_new_tokens is None else max_new_tokens
        return StructuredDecoder(model, self.tokenizer, **settings)

    @property
    def pad_token_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)

    def plan(self, agent_id: int, days: int) -> SlotPlan:
        """The forced sequences of a role's action; raises if the all-`-` action exceeds the budget."""
        key = (agent_id, days)
        if key not in self._plans:
            plan = build_slot_plan(self.tokenizer, agent_id, days)
            if plan.minimum_tokens > self.max_new_tokens:
                raise ValueError(
                    f"max_new_tokens={self.max_new_tokens} cannot hold the all-'-' action of agent {agent_id} "
                    f"over {days} days, which needs {plan.minimum_tokens} tokens"
                )
            self._plans[key] = plan
        return self._plans[key]

    def generate(
        self,
        requests: Iterable[DecodeRequest | Sequence[Any]],
        num_candidates: int,
        greedy: bool = False,
        return_logprobs: bool = False,
        generator: torch.Generator | None = None,
        seeds: Sequence[int] | None = None,
        streams: Sequence[tuple[int, torch.Generator]] | None = None,
    ) -> list[list[Candidate]]:
        """`num_candidates` actions per request, in request order.

        Sampling randomness: `generator` (a torch.Generator on the model's device; the draws depend on
        the whole batch), or `seeds` (one int per request: candidate j of request i samples from the
        stream of seed seeds[i] + j, whatever else is in the batch), or `streams`: (count, generator) pairs
        whose counts sum to `num_candidates`, the next `count` candidates of every request drawn from that
        generator exactly as a call of `count` candidates with it alone would draw them (so two policies'
        candidates over the same weights and prompt share one call and one prompt fill). Neither: torch's
        global RNG.
        """
        requests = [as_request(request) for request in requests]
        if not requests:
            return []
        if num_candidates < 1:
            raise ValueError(f"num_candidates must be >= 1, got {num_candidates}")
        plans = [self.plan(request.agent_id, request.days) for request in requests]
        for index, (request, plan) in enumerate(zip(requests, plans)):
            if not request.prompt.endswith(plan.prefix):
                raise ValueError(
                    f"request {index} (agent {request.agent_id}): the prompt must end with the assistant prefill "
                    f"{plan.prefix!r}; render it with travel.generation.chat"
                )
        device = model_device(self.model)
        if generator is not None and not greedy and generator.device.type != device.type:
            raise ValueError(f"the generator is on {generator.device} but the model is on {device}")
        row_seeds, draws = None, None
        if streams is not None and not greedy:
            if generator is not None or seeds is not None:
                raise ValueError("pass one of a generator, per-request seeds or random streams")
            draws = StreamDraws(streams, num_candidates, len(requests), device)
        if seeds is not None:
            if generator is not None:
                raise ValueError("pass either a generator or per-request seeds, not both")
            if len(seeds) != len(requests):
                raise ValueError(f"got {len(seeds)} seeds for {len(requests)} requests")
            row_seeds = torch.tensor(
                [int(seed) + j for seed in seeds for j in range(num_candidates)], dtype=torch.long, device=device
            )
        slot_values = checked_slot_values(requests, plans) if self.values == "catalog" else None
        prompt_ids = [self._prompt_ids(request) for request in requests]
        was_training = getattr(self.model, "training", False)
        if hasattr(self.model, "eval"):
            self.model.eval()
        model, autocast_dtype = self.model, self.compute_dtype
        clock = self.last_phases = PhaseClock(device)
        if self._weights is not None:
            model, autocast_dtype = self._weights.refreshed(self.model), None
        clock.mark("weights")
        try:
            with torch.inference_mode(), decode_attention(device), compute_autocast(device, autocast_dtype):
                tokens, masks, lengths, logprobs = self._decode(
                    model, plans, prompt_ids, num_candidates, greedy, return_logprobs, generator, row_seeds, device,
                    clock, slot_values, draws,
                )
        finally:
            if was_training:
                self.model.train()
        prefixes = [plan.prefix for plan in plans]
        return decoded_candidates(self.tokenizer, prefixes, prompt_ids, num_candidates, tokens, masks, lengths, logprobs)

    def _prompt_ids(self, request: DecodeRequest) -> torch.Tensor:
        if request.prompt_ids is not None:
            return torch.tensor(request.prompt_ids, dtype=torch.long)
        return torch.tensor(self.tokenizer.encode(request.prompt, add_special_tokens=False), dtype=torch.long)

    # ---- the decode loop -------------------------------------------------------------------------

    def _static_backend(self, model: Any, device: torch.device, preallocated: bool) -> str | None:
        """'static' or 'cuda_graph' when decode steps run with fixed shapes, None for the eager loop."""
        backend = self.step_backend
        if backend == "auto":
            backend = "cuda_graph" if device.type == "cuda" else "static"
        if backend == "eager" or not preallocated or not supports_static_steps(model):
            return None
        return backend

    def _prefill(
        self,
        model: Any,
        prompt_ids: list[torch.Tensor],
        repeats: int,
        device: torch.device,
        preallocated: bool,
        shared: bool = False,
        spare: int = 0,
        compiled: bool = False,
    ) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run every prompt through the model once and expand to `repeats` rows per prompt.

        Returns (cache, last-position logits, attention mask, prompt lengths), rows grouped by prompt and
        left-padded to the longest prompt. A `preallocated` cache has room for the whole token budget,
        rounded up to the static steps' mask alignment; a `shared` one holds each prompt once, no room.
        Its prompts run one at a time, through torch.compile where `compiled`.
        """
        lengths = torch.tensor([len(ids) for ids in prompt_ids], dtype=torch.long)
        if int(lengths.min()) < 1:
            raise ValueError("a prompt tokenized to zero tokens")
        width = int(lengths.max())
        attention = torch.zeros((len(prompt_ids), width), dtype=torch.long)
        for row, ids in enumerate(prompt_ids):
            attention[row, width - len(ids) :] = 1
        attention = attention.repeat_interleave(repeats, dim=0).to(device)
        if preallocated:
            caches, last_logits, prefill = [], [], prompt_forward(compiled)
            with causal_prompt_attention(model):
                for ids in prompt_ids:  # one prompt at a time: causal attention without a padding mask
                    cache = new_cache(model)
                    positions = torch.arange(len(ids), device=device)[None, :]
                    last_logits.append(prefill(model, ids[None, :].to(device), positions, cache, self._cache_name))
                    caches.append(cache)
            extra = 0 if shared else aligned_capacity(width, self.max_new_tokens + spare) - width
            cache = merge_prompt_caches(caches, 1 if shared else repeats, extra)
            logits = torch.cat(last_logits, dim=0)
        else:
            input_ids = torch.full((len(prompt_ids), width), self.pad_token_id, dtype=torch.long)
            for row, ids in enumerate(prompt_ids):
                input_ids[row, width - len(ids) :] = ids
            prompt_attention = attention[::repeats]
            positions = (prompt_attention.cumsum(-1) - 1).clamp(min=0)
            cache = new_cache(model)
            logits = forward_last_logits(
                model, input_ids.to(device), prompt_attention, positions, cache, self._cache_name
            )
            if repeats > 1:
                cache.batch_repeat_interleave(repeats)
        return cache, logits.repeat_interleave(repeats, dim=0), attention, lengths.repeat_interleave(repeats).to(device)

    def _decode(
        self,
        model: Any,
        plans: list[SlotPlan],
        prompt_ids: list[torch.Tensor],
        num_candidates: int,
        greedy: bool,
        return_logprobs: bool,
        generator: torch.Generator | None,
        row_seeds: torch.Tensor | None,
        device: torch.device,
        clock: PhaseClock,
        slot_values: list[tuple[tuple[str, ...], ...]] | None = None,
        streams: StreamDraws | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        k = num_candidates
        preallocated = supports_preallocation(new_cache(model))
        static = self._static_backend(model, device, preallocated)
        # the shared-prefix step is faster for one candidate too (docs/performance.md, "SmolLM2-135M on one H200")
        sharing = self.share_prompt_cache != "never"
        shared = static is not None and sharing and shared_prefix_supported(model)
        if static is not None and self.share_prompt_cache == "always" and not shared:
            raise ValueError(
                f"share_prompt_cache=always: {type(model).__name__}'s attention modules do not say their layer_idx, "
                "which the shared-prefix step finds each layer's prefix by (use auto or never)"
            )
        jump = static is not None and self.jump_forced
        width = jump_width(plans) if jump else 1
        spare = width if jump else 0  # room for a jump step's padding positions
        compiled = static is not None and self.compile_decode
        cache, logits, attention, prompt_lengths = self._prefill(
            model, prompt_ids, k, device, preallocated, shared, spare, static is not None and self.compile_prefill
        )
        clock.mark("prefill")
        graph = static == "cuda_graph"
        kernel = prefix_kernel(
            self.prefix_attention, device, getattr(model, "dtype", None), rows=len(prompt_ids) * k, prompts=len(prompt_ids)
        )
        if jump:
            # deferred: the jump step (travel/generation/kernels/) loads only where generation.jump_forced asks for it
            from travel.generation.kernels.jump_step import JumpDecodeStep, SharedPrefixJumpStep
        if static is None:
            forward_step: Any = EagerDecodeStep(model, cache, self._cache_name, attention, prompt_lengths, self.max_new_tokens)
        elif shared and jump:
            forward_step = SharedPrefixJumpStep(
                model, cache, self._cache_name, attention[::k], prompt_lengths, k, self.max_new_tokens, width, graph, kernel
            )
        elif shared:
            forward_step = SharedPrefixDecodeStep(
                model, cache, self._cache_name, attention[::k], prompt_lengths, k, self.max_new_tokens, graph, kernel
            )
        elif jump:
            forward_step = JumpDecodeStep(model, cache, self._cache_name, attention, prompt_lengths, width, graph)
        else:
            forward_step = StaticDecodeStep(model, cache, self._cache_name, attention, prompt_lengths, graph)
        if compiled:
            forward_step.compile_forward()
        with forward_step.attention():
            *outputs, self.last_decode_steps = decode_loop(
                self, plans, logits, k, greedy, return_logprobs, generator, row_seeds, device, forward_step, slot_values,
                jump=jump, compiled=compiled, sort_nucleus=self.sort_nucleus, streams=streams,
            )
        clock.mark("decode")  # the steps, with the step's set-up and the first step's CUDA-graph capture
        return tuple(outputs)  # type: ignore[return-value]
