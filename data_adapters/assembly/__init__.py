"""From every site's full rows to a Federation (`assemble`): rows dealt out to simulated sites
(`partition`), known problems injected with their ground truth (`inject`), the paper's
preprocessing (`preprocessing`). Reads `tables`."""
