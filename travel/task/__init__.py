"""The task: roles and slot ownership, action schema and parser, merger, role prompts, budget contract."""
