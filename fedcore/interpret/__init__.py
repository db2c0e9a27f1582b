"""Interpretation of learned quantities: significance marks, site similarity, detection checks, and
the site check-up's statistics — the sites' profiles (`profile`), the one registry of checks
(`checks`), the data lens (`data_checks`), the model lenses (`model_checks`), their calibration
(`calibration`) and the decision over their findings (`findings`).

Everything here works on plain numpy arrays so the dashboard can use it without torch.
"""
