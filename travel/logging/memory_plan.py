"""The GPU memory plan: each phase's predicted peak on each device, before any weights load.

`mode=dry` writes it to dry_run.json and prints it as a table; a run refuses a plan that cannot fit the card
(`hardware.gpu_memory_gib`, and at train time the card it finds), naming options that would make it fit.

What a phase holds on a device (bytes; P parameters, w bytes per weight, c bytes per compute element):
- every resident policy: its weights (P w) and AdamW's two moments (2 P w), plus a decode copy of the weights
  where `hardware.decode_weights` is not `master`; a policy parked by `offload_inactive_actor` holds nothing
  while the other one updates;
- generation (rollouts, evaluation, preference collection): the largest decode call's key/value cache, each of
  its rows' prompt once plus K candidates of the whole output budget, and its sampling logits;
- an update: the updating policy's gradients (P w), then the activations of its largest forward (a prompt with
  the completions it scores: K for MAGRPO, a pair for DPO), kept per layer or, for checkpointed layers, as each
  layer's input plus one layer recomputed, and the LM head's logits at the value tokens; or AdamW's step (one
  more P w of temporaries), whichever is larger;
- comparator collection: a frozen comparator copy per role on its device (none where `current_copy` shares the
  actors' device);
- reward-model fitting: the reward model's weights, AdamW state and gradients (the head alone when its backbone
  is frozen), and the activations of one pair of joint texts.

Prompt lengths come from the rows' prompts in characters (tokens from each tokenizer's measured characters per
token, travel/agents/architectures.py). A generated action is counted at the whole output budget, and half of it
as value tokens (those the loss reads): an upper bound for the cache, an estimate for the update. CUDA's own
context (about 0.5 GiB) and the allocator's fragmentation are not counted; torch.cuda.max_memory_allocated is
what the plan predicts (docs/performance.md, "Memory plan").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Optional

from travel.agents.architectures import Architecture, architecture_of
from travel.agents.layouts import layout_class
from travel.algorithms.core.config import CollectionOptions, DPOOptions, OnlineOptions, RewardModelOptions
from travel.options import float_dtype_name
from travel.task.joint_prompt import build_joint_prompt
from travel.task.prompts import build_role_prompt

if TYPE_CHECKING:
    from travel.run import Run

GIB = 2**30
VALUE_TOKEN_SHARE = 0.5  # of a generated action's tokens, those the loss scores (the rest is forced JSON)
CHAT_TEMPLATE_TOKENS = 16  # the chat template's tokens around a prompt
DTYPE_BYTES = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2}
PHASES = ("generation", "update", "comparator collection", "reward-model fitting", "evaluation")


class MemoryPlanError(ValueError):
    """A plan that does not fit the card; the message names the options that would make it fit."""


@dataclass(frozen=True)
class Workload:
    """What the run's phases process, in tokens: the longest prompts and the output budget of one action."""

    train_prompts: tuple[int, ...]  # each train row's longest prompt (a role's, or the joint one), longest first
    eval_prompts: tuple[int, ...]
    joint_texts: int  # the longest text the reward model reads: both roles' prompts and actions
    action_tokens: int  # one policy's output budget


def layer_activation_bytes(arch: Architecture, c: int, compiled: bool = False) -> int:
    """What one decoder layer keeps for its backward pass, per token: two RMSNorms (eager: a float32 input and the
    normalised output; compiled, `hardware.compile_update`: the input alone, the rest recomputed), Qwen3's q/k
    norms alike, attention's queries, keys and values (repeated to every head) and output, and the SwiGLU MLP's
    gate, up, activation and product."""
    q, kv = arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    norm = c if compiled else 4 + c
    norms = 2 * norm * arch.hidden + (norm * (q + kv) if arch.qk_norm else 0)
    return norms + c * 4 * q + c * 4 * arch.intermediate


def forward_activation_bytes(arch: Architecture, c: int, tokens: int, scored: int, checkpointed: int, compiled: bool = False) -> int:
    """The peak of one forward and backward over `tokens` (a prompt and its packed completions) that scores
    `scored` positions, with the first `checkpointed` layers checkpointed, and the packed attention mask
    throughout. The backward starts with every kept activation (a checkpointed layer's input, the others' whole
    activations) and the LM head's logits (in c bytes and float32, with their float32 log-softmax and its
    gradient); it recomputes a checkpointed layer only once the layers after it are freed."""
    per_layer = tokens * layer_activation_bytes(arch, c, compiled)
    inputs = checkpointed * tokens * arch.hidden * c
    kept = inputs + (arch.layers - checkpointed) * per_layer
    head = scored * arch.vocab * (c + 12)
    recomputing = inputs + per_layer if checkpointed else 0
    return max(kept + head, recomputing) + tokens * tokens * c


def decode_call_bytes(
    arch: Architecture, c: int, prompts: tuple[int, ...], candidates: int, action_tokens: int, shared: bool = True
) -> int:
    """One decode call over `prompts` (tokens, one per row) with `candidates` each: every row's prompt once in the
    key/value cache (once per candidate where the prompt cache is not `shared`) plus each candidate's whole output
    budget, the float32 logits of a step (three copies: logits, scores, noise), and the prefill of the longest prompt
    (its hidden states and one MLP's activations)."""
    copies = 1 if shared else candidates
    cache = sum(copies * prompt + candidates * action_tokens for prompt in prompts) * arch.kv_bytes_per_token(c)
    logits = 3 * len(prompts) * candidates * arch.vocab * 4
    prefill = max(prompts) * (4 * arch.hidden + 3 * arch.intermediate) * c
    return cache + logits + prefill


class MemoryPlan:
    """The plan of one run: `devices` {device: {phase: bytes}} and the components of each peak."""

    def __init__(self, run: "Run", hardware: Any = None, generation: Any = None, train_rows: Optional[list[Any]] = None):
        """`train_rows`: plan for these rows instead of the split's train rows (a benchmark's buffer)."""
        self.run = run
        self.train_rows = train_rows
        self.hardware = hardware or run.hardware
        self.generation = generation or run.generation
        self.arch = architecture_of(str(run.cfg.model.name))
        self.devices: dict[str, dict[str, float]] = {}
        self.parts: dict[tuple[str, str], dict[str, float]] = {}
        if self.arch is not None and self.hardware.num_gpus:
            self._plan()

    # ---- sizes ------------------------------------------------------------------------------------------
    @property
    def weight_bytes(self) -> int:
        return DTYPE_BYTES[float_dtype_name("model.dtype", self.run.cfg.model.dtype)]

    @property
    def compute_bytes(self) -> int:
        dtype = self.hardware.compute_dtype
        return DTYPE_BYTES[dtype] if dtype is not None else self.weight_bytes

    def tokens(self, chars: int) -> int:
        return math.ceil(chars / self.arch.prompt_chars_per_token) + CHAT_TEMPLATE_TOKENS

    def workload(self) -> Workload:
        layout = layout_class(str(self.run.cfg.actor.layout))
        split = self.run.data.split

        def longest(row: Any) -> int:
            prompts = [build_joint_prompt(row)] if layout.joint else [build_role_prompt(row, a) for a in (0, 1)]
            return max(self.tokens(len(p.system) + len(p.user)) for p in prompts)

        def joint_text(row: Any) -> int:
            roles = [build_role_prompt(row, a) for a in (0, 1)]
            return sum(self.tokens(len(p.system) + len(p.user)) for p in roles)

        role_budget = self.generation.max_new_tokens
        train = split.train if self.train_rows is None else self.train_rows
        held_out = [row for group in split.held_out.values() for row in group]  # curriculum.held_out_eval
        rows = [*train, *split.eval, *held_out]
        return Workload(
            train_prompts=tuple(sorted((longest(row) for row in train), reverse=True)),
            eval_prompts=tuple(sorted((longest(row) for row in (*split.eval, *held_out)), reverse=True)),
            joint_texts=max((joint_text(row) for row in rows), default=0) + 2 * role_budget,
            action_tokens=layout.output_budget(role_budget),
        )

    # ---- the plan -----------------------------------------------------------------------------------------
    def _plan(self) -> None:
        arch, hardware, algorithm = self.arch, self.hardware, self.run.algorithm
        w, c = self.weight_bytes, self.compute_bytes
        load = self.workload()
        policies = layout_class(str(self.run.cfg.actor.layout)).num_policies
        homes = [str(d) for d in hardware.agent_devices[:policies]]
        weights = arch.parameters * w
        resident = {"weights": weights, "optimizer state": 2 * weights}
        if hardware.decode_weights != "master":
            resident["decode copy"] = arch.parameters * (c if hardware.decode_weights == "copy" else w)
        checkpointed = 0 if not hardware.gradient_checkpointing else (
            arch.layers if hardware.checkpoint_layers is None else min(hardware.checkpoint_layers, arch.layers)
        )
        autocast = arch.parameters * c if hardware.compute_dtype and c != w else 0  # bf16 weight casts kept for backward
        # the prompt cache is shared by a prompt's candidates unless the options say otherwise (eager steps never share)
        shared = hardware.share_prompt_cache != "never" and hardware.step_backend != "eager"

        def base(device: str, parked: Optional[int] = None) -> dict[str, float]:
            """The policies resident on `device` (all but `parked`, when offloading)."""
            parts: dict[str, float] = {}
            for index, home in enumerate(homes):
                if home == device and not (hardware.offload_inactive_actor and parked is not None and index != parked):
                    for name, size in resident.items():
                        parts[f"policy {index} {name}"] = size
            return parts

        def record(phase: str, device: str, parts: dict[str, float]) -> None:
            if not device.startswith("cuda"):
                return
            total = sum(parts.values())
            if total >= self.devices.setdefault(device, {}).get(phase, -1):
                self.devices[device][phase] = total
                self.parts[(device, phase)] = parts

        def decode(phase: str, prompts: tuple[int, ...], candidates: int, extra: Callable[[str], dict[str, float]] = lambda d: {}):
            for device in sorted(set(homes)):
                call = decode_call_bytes(arch, c, prompts, candidates, load.action_tokens, shared)
                record(phase, device, {**base(device), **extra(device), "decode call": call})

        def update(unit_tokens: int, scored: int) -> None:
            for index, device in enumerate(homes):
                parts = base(device, parked=index)
                parts["gradients"] = weights
                backward = forward_activation_bytes(arch, c, unit_tokens, scored, checkpointed, hardware.compile_update) + autocast
                parts["activations" if backward > weights else "optimizer step"] = max(backward, weights)
                record("update", device, parts)

        if not load.train_prompts:  # nothing to train on: the budget check names that
            return
        longest = load.train_prompts[0]
        eval_rows = load.eval_prompts[: self.generation.eval_rows_per_call]
        decode("evaluation", eval_rows, 1)
        if isinstance(algorithm, OnlineOptions):
            k = algorithm.num_generations
            rows = self.generation.rows_per_call or algorithm.rollout_buffer_size
            decode("generation", load.train_prompts[:rows], k)
            update(longest + k * load.action_tokens, int(k * load.action_tokens * VALUE_TOKEN_SHARE))
        if isinstance(algorithm, CollectionOptions):
            batch = algorithm.preference_generation_batch_size
            copies = self._comparator_copies(homes, weights)
            # a comparator sampling in the target's calls adds its generation batch to theirs
            shared_calls = min(batch, algorithm.comparator_candidates) if self._comparator_shares_calls(homes) else 0
            decode("comparator collection", load.train_prompts[:1], batch + shared_calls, copies)
            for device in sorted({str(d) for d in self._comparator_devices()} - set(homes)):
                record("comparator collection", device, {
                    **copies(device),
                    "decode call": decode_call_bytes(arch, c, load.train_prompts[:1], batch, load.action_tokens, shared),
                })
        if isinstance(algorithm, DPOOptions):
            update(longest + 2 * load.action_tokens, int(2 * load.action_tokens * VALUE_TOKEN_SHARE))
        if isinstance(algorithm, RewardModelOptions):
            device = str(algorithm.reward_model_device)
            frozen = algorithm.reward_freeze_backbone
            tokens = min(load.joint_texts, algorithm.reward_max_length)
            parts = {**base(device), "reward model weights": weights}
            if not frozen:
                parts["reward model optimizer state and gradients"] = 3 * weights
                rm_checkpointed = arch.layers if hardware.gradient_checkpointing else 0
                parts["reward model activations"] = 2 * forward_activation_bytes(arch, c, tokens, 0, rm_checkpointed)
            else:
                parts["reward model activations"] = tokens * arch.hidden * 4 * c
            record("reward-model fitting", device, parts)

    def _comparator_devices(self) -> tuple[str, ...]:
        spec = self.run.comparator_spec
        return tuple(str(d) for d in spec.devices) if spec.active else ()

    def _comparator_shares_calls(self, homes: list[str]) -> bool:
        """A current_copy comparator on the actors' own devices samples in their decoder calls
        (algorithm.shared_comparator_calls; travel/algorithms/preference/collection.py)."""
        spec, algorithm = self.run.comparator_spec, self.run.algorithm
        devices = self._comparator_devices()
        return (
            bool(getattr(algorithm, "shared_comparator_calls", False)) and spec.active and spec.policy == "current_copy"
            and spec.generation_mode == "decentralized" and list(devices[: len(homes)]) == homes
        )

    def _comparator_copies(self, homes: list[str], weights: int) -> Callable[[str], dict[str, float]]:
        """The frozen comparator weights on a device: current_copy reuses the actors' weights on their own device
        and copies them elsewhere; history-k keeps one checkpoint per role, a frozen model one shared copy; a
        centralized teacher is one model."""
        spec = self.run.comparator_spec
        devices = self._comparator_devices()

        def copies(device: str) -> dict[str, float]:
            if not spec.active:
                return {}
            roles = [i for i, d in enumerate(devices) if d == device]
            if spec.generation_mode == "centralized":  # one teacher writes both roles
                roles = [i for i in roles if i == spec.teacher_agent_index]
            if spec.policy == "current_copy":
                roles = [i for i in roles if i >= len(homes) or homes[min(i, len(homes) - 1)] != device]
            if spec.policy == "model":
                roles = roles[:1]
            return {f"comparator copy {i}": weights for i in roles}

        return copies

    # ---- reading it -----------------------------------------------------------------------------------------
    def peaks(self) -> dict[str, float]:
        return {device: max(phases.values()) for device, phases in self.devices.items()}

    def to_report(self, card_gib: Optional[float]) -> dict[str, Any]:
        if self.arch is None:
            return {"model": str(self.run.cfg.model.name), "note": "no architecture known for this model: no plan"}
        return {
            "model": str(self.run.cfg.model.name),
            "parameters": self.arch.parameters,
            "card_gib": card_gib,
            "peak_gib": {device: round(peak / GIB, 2) for device, peak in self.peaks().items()},
            "phases_gib": {
                device: {phase: round(phases[phase] / GIB, 2) for phase in PHASES if phase in phases}
                for device, phases in sorted(self.devices.items())
            },
            "components_gib": {
                f"{device} {phase}": {name: round(size / GIB, 2) for name, size in parts.items()}
                for (device, phase), parts in sorted(self.parts.items())
            },
        }

    def too_large(self, card_gib: Optional[float]) -> dict[str, float]:
        """The devices whose peak exceeds `card_gib` (GiB), with their peaks in GiB."""
        if card_gib is None:
            return {}
        return {device: peak / GIB for device, peak in self.peaks().items() if peak > card_gib * GIB}


# options that lower the peak, each tried alone on a plan that does not fit: (the override, hardware and generation
# changes)
REMEDIES: tuple[tuple[str, dict[str, Any], dict[str, Any]], ...] = (
    ("hardware.checkpoint_layers=null", {"gradient_checkpointing": True, "checkpoint_layers": None}, {}),
    ("hardware.offload_inactive_actor=true", {"offload_inactive_actor": True}, {}),
    ("hardware.decode_weights=master", {"decode_weights": "master"}, {}),
    ("generation.rows_per_call=2", {}, {"rows_per_call": 2}),
)


def card_memory_gib(hardware: Any, detect: bool) -> Optional[float]:
    """The card's memory in GiB: `hardware.gpu_memory_gib`, and with `detect` the smallest card this machine has
    (where CUDA is available), whichever is smaller."""
    declared = hardware.gpu_memory_gib
    if detect and hardware.num_gpus:
        import torch

        if torch.cuda.is_available():
            found = min(torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count())) / GIB
            return found if declared is None else min(found, float(declared))
    return None if declared is None else float(declared)


def check_memory_plan(run: "Run", detect: bool = False) -> dict[str, Any]:
    """The plan's report; a MemoryPlanError naming the options that would make it fit where it does not."""
    plan = MemoryPlan(run)
    card = card_memory_gib(run.hardware, detect)
    report = plan.to_report(card)
    over = plan.too_large(card)
    if over:
        fixes = []
        for override, hardware_changes, generation_changes in REMEDIES:
            changed = MemoryPlan(run, replace(run.hardware, **hardware_changes), replace(run.generation, **generation_changes))
            if changed.devices != plan.devices and not changed.too_large(card):
                fixes.append(override)
        worst = ", ".join(f"{device} {peak:.1f} GiB" for device, peak in sorted(over.items()))
        presets = (
            "hardware=1x80gb for an 80 GB card, hardware=1xb200 for 140 GB or more, hardware=2gpu_preference for "
            "the comparator and reward model on a second GPU"
        )
        raise MemoryPlanError(
            f"hardware={run.hardware.name}: the memory plan needs {worst} on a {card:.0f} GiB card "
            f"(hardware.gpu_memory_gib); "
            + (f"it fits with {' or '.join(fixes)}" if fixes else "no single option makes it fit")
            + f" (presets: {presets}; the plan: dry_run.json's memory_plan)"
        )
    return report


def format_memory_plan(report: dict[str, Any]) -> str:
    """The plan as a table: a row per device, a column per phase, in GiB."""
    if "phases_gib" not in report:
        return f"  memory      {report['note']}"
    if not report["phases_gib"]:
        return "  memory      no GPU in this layout"
    columns = [phase for phase in PHASES if any(phase in phases for phases in report["phases_gib"].values())]
    card = f"{report['card_gib']:.0f} GiB card" if report["card_gib"] else "no card size given"
    lines = [f"  memory      predicted peak GiB per phase ({card})", "    | device | " + " | ".join(columns) + " | peak |"]
    for device, phases in report["phases_gib"].items():
        cells = [f"{phases[phase]:.1f}" if phase in phases else "-" for phase in columns]
        lines.append(f"    | {device} | " + " | ".join(cells) + f" | {report['peak_gib'][device]:.1f} |")
    return "\n".join(lines)
