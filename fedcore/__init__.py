"""fedcore: the federated-learning engine behind the interoperability dashboard.

Importing the package is cheap and torch-free: the run store (`fedcore.store`) and the
interpretation helpers that work on stored arrays can be used by the dashboard without
loading any training code.
"""

__version__ = "0.1.0"
