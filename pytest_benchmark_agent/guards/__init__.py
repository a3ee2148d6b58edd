"""Guardrails: memory cgroups, the memory guard and the GPU layer."""
