"""Token choice over the legal tokens: greedy argmax or temperature + top-p sampling.

Order of operations (as the earlier processor chain did): mask illegal tokens first, then divide by
the temperature, then keep the nucleus: every token whose more likely tokens hold less than top_p of the
probability, which is the smallest set of most likely tokens whose probability reaches top_p, with tokens of
equal score kept or dropped together (a sort alone would split them in whatever order it leaves them).
Greedy takes the argmax over legal tokens; torch.argmax returns the first maximum, so ties go to the
lowest token id.

Probability mass is counted in integers: each token's weight exp(score - top score), computed in float64, is
rounded to units of 2**-32 (`mass_units`), so every sum of weights is exact whatever the order of its additions.
The sort and the count, compiled or plain, on a GPU or on any CPU (AVX2 or AVX-512 kernels), then draw the same
threshold for the same scores; with float sums they could split the tokens whose mass above lay within rounding of
top_p (tests/generation/test_sampling.py).

The nucleus is found from a threshold score: by sorting the scores (`top_p_filter`), or, where every logit is a
16-bit float (a bfloat16 or float16 model's output head, `nucleus_bins`), from a count of the tokens at each of
the 65,536 values that float can hold (`half_top_p_filter`): the same rule without a sort of the vocabulary,
and faster (docs/performance.md). The count's scatter-add adds into counters spread over cache lines
(`spread_counters`), which was faster than counters in key order.

Randomness comes either from a torch.Generator (multinomial draws over the whole batch) or from
per-row seeds: a counter-based hash of (row seed, token index, token id) gives Gumbel noise, so a row's
samples depend only on its own seed, not on which other rows share the batch.
"""

from __future__ import annotations

import torch


def masked_logits(logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    return logits.masked_fill(~legal, float("-inf"))


ARGMAX_BLOCK = 256  # tokens per block of the blocked argmax


def blocked_argmax(x: torch.Tensor, block: int = ARGMAX_BLOCK) -> torch.Tensor:
    """`x.argmax(-1)` of a (rows, width) tensor, the first maximum, as a maximum within blocks of `block` and an
    argmax over the blocks' maxima.

    TorchInductor reduces an argmax in one program per row, which over a vocabulary-wide row takes far longer than
    reading the row. The first block holding the maximum
    holds its first occurrence, so the two-level argmax is the same index, ties and all. A mask (bool or 8-bit)
    is reduced as int32: TorchInductor's AVX2 code for a maximum with its index over 8-bit integers returns
    indices out of range (torch 2.13; tests/generation/test_compiled_loop.py catches it under AVX2)."""
    if x.dtype in (torch.bool, torch.uint8, torch.int8):
        x = x.to(torch.int32)
    width = x.shape[-1]
    lowest = float("-inf") if x.is_floating_point() else torch.iinfo(x.dtype).min
    blocks = torch.nn.functional.pad(x, (0, -width % block), value=lowest).unflatten(-1, (-1, block))
    maxima, within = blocks.max(dim=-1)
    chosen = maxima.argmax(dim=-1)
    return chosen * block + within.gather(-1, chosen[:, None]).squeeze(-1)


def greedy_choice(logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """(rows,) argmax over legal tokens, lowest id among equal maxima."""
    return blocked_argmax(masked_logits(logits, legal))


SCAN_BLOCK = 128  # tokens per block of the nucleus's cumulative sum


def blocked_cumsum(x: torch.Tensor, block: int = SCAN_BLOCK) -> torch.Tensor:
    """`x.cumsum(-1)` up to float rounding, as a scan within blocks of `block` plus one over the block totals.

    One scan along a vocabulary-wide row runs as a slow single-pass kernel on GPUs and TorchInductor cannot
    generate a split one; two short scans are fast in both."""
    width = x.shape[-1]
    blocks = torch.nn.functional.pad(x, (0, -width % block)).unflatten(-1, (-1, block)).cumsum(dim=-1)
    totals = blocks[..., -1].cumsum(dim=-1)
    before = torch.nn.functional.pad(totals[..., :-1], (1, 0))
    return (blocks + before[..., None]).flatten(-2)[..., :width]


MASS_BITS = 32  # a weight of at most 1 in 2**-32 units: a row of 151,936 tokens sums to under 2**53 units


def mass_units(scores: torch.Tensor, top: torch.Tensor) -> torch.Tensor:
    """int64 exp(scores - top) in units of 2**-MASS_BITS, the exponential in float64; 0 where a score is -inf."""
    weights = torch.exp(scores.double() - top.double()) * float(1 << MASS_BITS)
    return torch.where(torch.isfinite(scores), torch.round(weights), 0.0).long()


def within_top_p(above: torch.Tensor, total: torch.Tensor, top_p: float) -> torch.Tensor:
    """Whether a mass `above` (int64 units) holds less than `top_p` of the row's `total`: exact integers compared
    in float64, so the test is the same wherever it runs."""
    return above.double() < top_p * total.double()


def top_p_filter(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """Set to -inf every token outside the nucleus (the module docstring's rule): the scores sorted, the mass
    above each in integer units, and the lowest score whose tokens above hold less than `top_p` as the threshold."""
    if top_p >= 1.0:
        return scores
    ordered = torch.sort(scores, dim=-1, descending=True).values
    units = mass_units(ordered, ordered[..., :1])
    above = torch.nn.functional.pad(blocked_cumsum(units)[..., :-1], (1, 0))  # the mass sorted before each
    kept = within_top_p(above, units.sum(dim=-1, keepdim=True), top_p).sum(dim=-1, keepdim=True).clamp(min=1)
    return scores.masked_fill(scores < ordered.gather(-1, kept - 1), float("-inf"))  # the first token always


HALF_VALUES = 1 << 16  # the bit patterns of a 16-bit float
COUNTER_GROUP_BITS = 5  # spread_counters: 32 groups of 2,048 counters, neighbouring keys in neighbouring groups


def half_keys(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """int64 keys in [0, 65536) of `values` as the 16-bit float `dtype` holds them, in the order of the values
    (negative patterns reversed below the positive ones; -0 takes +0's key, the equal score's)."""
    bits = (values.to(dtype) + 0.0).view(torch.int16).to(torch.int64) & 0xFFFF
    return torch.where(bits >= 0x8000, 0xFFFF - bits, bits + 0x8000)


def spread_counters(keys: torch.Tensor) -> torch.Tensor:
    """The counter of each key (int64 in [0, 65536)) in a layout where key k's counter is k // 32 + (k % 32) * 2048:
    neighbouring keys on different cache lines. A row's logits crowd into a few thousand neighbouring values, and the
    GPU serialises the atomic adds to one cache line, which in key order made the count about twice as slow.
    `key_order_counts` reads the counts back in key order."""
    groups = 1 << COUNTER_GROUP_BITS
    return ((keys & (groups - 1)) << (16 - COUNTER_GROUP_BITS)) | (keys >> COUNTER_GROUP_BITS)


def key_order_counts(spread: torch.Tensor) -> torch.Tensor:
    """(rows, 65536) counts in key order from counts in `spread_counters`' layout (a view)."""
    return spread.unflatten(-1, (1 << COUNTER_GROUP_BITS, -1)).transpose(-1, -2).flatten(-2)


def nucleus_bins(logits: torch.Tensor) -> torch.Tensor | None:
    """The (65536,) values of the keys of the first 16-bit float (bfloat16, float16) that holds every one of the
    (rows, vocab) `logits` exactly, in that dtype, or None (float32 logits: the nucleus sorts). One check of the
    logits, which waits for them."""
    for dtype in (torch.bfloat16, torch.float16):
        if torch.equal(logits.to(dtype).to(logits.dtype), logits):
            key = torch.arange(HALF_VALUES, dtype=torch.int64, device=logits.device)
            bits = torch.where(key >= 0x8000, key - 0x8000, 0xFFFF - key)
            return torch.where(bits >= 0x8000, bits - 0x10000, bits).to(torch.int16).view(dtype)
    return None


def half_top_p_filter(scores: torch.Tensor, logits: torch.Tensor, legal: torch.Tensor, temperature: float,
                      top_p: float, bins: torch.Tensor) -> torch.Tensor:
    """`top_p_filter(scores, top_p)` for `scores` = masked_logits(logits, legal) / temperature where `bins`
    (`nucleus_bins`) holds the logits: each row's count of legal tokens per key, the weight of every key from
    its count and its score, the mass above each key from the top, and the lowest key whose mass above is less
    than `top_p` of the row's as the threshold. Counts and masses are integers, so the threshold is the sort's
    and does not depend on the order in which the kernels add them."""
    if top_p >= 1.0:
        return scores
    keys = half_keys(logits, bins.dtype)
    counts = torch.zeros((logits.shape[0], HALF_VALUES), dtype=torch.int32, device=logits.device)
    counts = key_order_counts(counts.scatter_add(1, spread_counters(keys), legal.to(torch.int32)))
    present = counts > 0
    bin_scores = bins.float() / temperature  # each token's score, as `scores` computes it
    top = torch.where(present, bin_scores, float("-inf")).amax(dim=-1, keepdim=True)
    units = torch.where(present, counts.long() * mass_units(bin_scores, top), 0)
    from_top = blocked_cumsum(units.flip(-1))  # the mass at or above each key, the highest key first
    above = torch.nn.functional.pad(from_top[..., :-1], (1, 0)).flip(-1)
    # an empty key has the mass above of the next key up that holds tokens, so the lowest key below the mass holds some
    lowest = blocked_argmax(within_top_p(above, from_top[..., -1:], top_p))
    return scores.masked_fill(keys < lowest[:, None], float("-inf"))


def _signed(value: int) -> int:
    """A 64-bit unsigned constant as the int64 with the same bits."""
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN = _signed(0x9E3779B97F4A7C15)
_MIX1 = _signed(0xBF58476D1CE4E5B9)
_MIX2 = _signed(0x94D049BB133111EB)
_STEP = _signed(0xD1B54A32D192ED03)


def _shift_right(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 bit patterns (torch's >> is arithmetic)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def _splitmix(x: torch.Tensor) -> torch.Tensor:
    x = x ^ _shift_right(x, 30)
    x = x * _MIX1
    x = x ^ _shift_right(x, 27)
    x = x * _MIX2
    return x ^ _shift_right(x, 31)


def token_keys(vocab: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """(vocab,) the per-token half of the seeded hash's key. Computed outside a compiled graph: TorchInductor's
    CPU code for `arange * _GOLDEN` (torch 2.13) corrupts memory."""
    return torch.arange(vocab, device=device, dtype=torch.long) * _GOLDEN


def seeded_uniforms(
    row_seeds: torch.Tensor, step: int | torch.Tensor, vocab: int, keys: torch.Tensor | None = None
) -> torch.Tensor:
    """(rows, vocab) uniforms strictly inside (0, 1), a pure function of (row seed, step, token id); `step` is
    one int for every row or a (rows,) tensor (the decoder passes each row's generated-token count), `keys`
    `token_keys(vocab)` where the caller holds them.

    23 random bits: (k + 0.5) / 2**23 is exact in float32, so no draw rounds to 0 or 1 (which would
    make the Gumbel noise infinite and the argmax NaN).
    """
    steps = step.long() if isinstance(step, torch.Tensor) else torch.full_like(row_seeds, step, dtype=torch.long)
    keys = token_keys(vocab, row_seeds.device) if keys is None else keys
    row_keys = _splitmix(row_seeds.long() * _GOLDEN + steps * _STEP)
    bits = _splitmix(row_keys[:, None] ^ keys[None, :])
    return (_shift_right(bits, 41).float() + 0.5) / float(1 << 23)


def nucleus_scores(
    logits: torch.Tensor, legal: torch.Tensor, temperature: float, top_p: float, bins: torch.Tensor | None = None
) -> torch.Tensor:
    """The tempered scores of the legal tokens in the nucleus, -inf elsewhere: what a draw samples from. `bins`
    (`nucleus_bins` of the logits' 16-bit dtype) finds the nucleus without a sort."""
    scores = masked_logits(logits, legal) / temperature
    if bins is None:
        return top_p_filter(scores, top_p)
    return half_top_p_filter(scores, logits, legal, temperature, top_p, bins)


def gumbel_choice(scores: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """(rows,) the Gumbel-max draw from `scores` with the (rows, vocab) `uniforms`."""
    return blocked_argmax(scores - torch.log(-torch.log(uniforms)))


def sample_choice(
    logits: torch.Tensor,
    legal: torch.Tensor,
    temperature: float,
    top_p: float,
    generator: torch.Generator | None = None,
    uniforms: torch.Tensor | None = None,
) -> torch.Tensor:
    """(rows,) tokens sampled from the tempered, nucleus-filtered distribution over legal tokens.

    With `uniforms` (rows, vocab) the draw is the Gumbel-max trick on them instead of multinomial.
    """
    scores = nucleus_scores(logits, legal, temperature, top_p)
    if uniforms is not None:
        return gumbel_choice(scores, uniforms)
    probabilities = scores.softmax(dim=-1)
    return torch.multinomial(probabilities, 1, generator=generator).squeeze(-1)


def ensure_legal(chosen: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    """`chosen`, except that a row whose choice is not legal (NaN logits) takes its lowest legal id."""
    is_legal = legal.gather(1, chosen[:, None]).squeeze(1)
    return torch.where(is_legal, chosen, blocked_argmax(legal))


def validate_sampling(temperature: float, top_p: float) -> None:
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0 (use greedy=True for argmax decoding), got {temperature}")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
