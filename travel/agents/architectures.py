"""The shape of each model option's network, as plain numbers: what the memory plan (travel/logging/memory_plan.py)
counts before any weights or model code load. tests/agents/test_architectures.py checks each entry against the
model its factory builds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer with RMSNorm, grouped-query attention and a SwiGLU MLP (Llama, Qwen2, Qwen3)."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    qk_norm: bool  # Qwen3 normalises each head's queries and keys
    tied_embeddings: bool
    # characters of this task's role and joint prompts per token of the model's tokenizer, the fewest over the real
    # train rows (so the most tokens): prompt lengths are known in characters before any tokenizer loads
    prompt_chars_per_token: float

    @property
    def parameters(self) -> int:
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        attention = self.hidden * (q + 2 * kv) + q * self.hidden + (2 * self.head_dim if self.qk_norm else 0)
        layer = attention + 3 * self.hidden * self.intermediate + 2 * self.hidden
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return embeddings + self.layers * layer + self.hidden

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """One token's keys and values over every layer."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


# Qwen3-4B-Instruct-2507's config.json; the byte-level offline tokenizer of the random models writes the real
# rows' prompts at 1.74 characters a token at the fewest, SmolLM2's at 2.87; Qwen's own tokenizer (not measured
# here: it comes from the hub) is taken as SmolLM2's.
QWEN3_4B = dict(layers=36, hidden=2560, intermediate=9728, heads=32, kv_heads=8, head_dim=128, vocab=151936, qk_norm=True, tied_embeddings=True)
ARCHITECTURES: dict[str, Architecture] = {
    "qwen3_4b_instruct": Architecture(**QWEN3_4B, prompt_chars_per_token=2.85),
    "random_qwen3_4b": Architecture(**QWEN3_4B, prompt_chars_per_token=1.7),
    "smollm2_135m": Architecture(
        layers=30, hidden=576, intermediate=1536, heads=9, kv_heads=3, head_dim=64, vocab=49152, qk_norm=False,
        tied_embeddings=True, prompt_chars_per_token=2.85,
    ),
    "tiny_random": Architecture(
        layers=2, hidden=64, intermediate=128, heads=4, kv_heads=2, head_dim=16, vocab=1408, qk_norm=True,
        tied_embeddings=True, prompt_chars_per_token=1.7,
    ),
}


def architecture_of(model_name: str) -> Optional[Architecture]:
    """The architecture of a model option (its `name`), or None for a model this table does not know."""
    return ARCHITECTURES.get(model_name)
