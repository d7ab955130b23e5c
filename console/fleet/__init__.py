"""The fleet screen: one row per member (k9s-style), fleet-wide keys, per-member results."""
