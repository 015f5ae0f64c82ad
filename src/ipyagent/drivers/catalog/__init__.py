"""The model catalogue: model listings, per-model rules, lifecycle (shutdown dates) and prices."""
