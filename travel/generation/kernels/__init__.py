"""The decoder's optional weight layouts, kernels and step: loaded only when an option selects them.

- `decode_weights`, `fused_projections`, `skinny_matmul`, `triton_rotary`, `triton_prefill`:
  `hardware.decode_weights=copy|fused|folded` and `hardware.decode_matmul` (a copy of the weights to decode over,
  its fused or folded layers, their Triton matmul, rotary and prefill kernels);
- `jump_step`: `generation.jump_forced` (a row feeds a whole forced run in one forward);
- `prefix_kernels`: the shared prefix's attention kernels other than `auto`'s two picks (`hardware.prefix_attention`).

`travel/generation/decoder.py` imports them where its options ask for them, never at import time (tested).
"""
