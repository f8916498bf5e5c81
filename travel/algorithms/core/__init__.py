"""The seams every trainer shares: registry, typed configs, rollout, losses, schedule, budgets, evaluation."""
