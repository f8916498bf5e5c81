"""The algorithms, by concept:

- `core/`: the seams every trainer shares: the registry (algorithms found by name), the typed configs, the
  rollout seam, the losses, schedules, budgets, evaluation and what a run returns;
- `online/`: the online trainers, MAGRPO and MARLHF (online MAGRPO on a fitted reward model);
- `preference/`: the preference machinery: collection and pair selection, comparators and the central teacher,
  replay, DPO, the reward model, policy checkpoints, and the MADPO trainers.
"""
