"""The preference machinery: collection and pairs, comparators and the central teacher, replay, DPO, the reward
model, policy checkpoints, and the MADPO trainers."""
