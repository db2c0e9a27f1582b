"""Interpretation of learned quantities: significance marks, site similarity, detection checks.

Everything here works on plain numpy arrays so the dashboard can use it without torch.
"""
