"""Real federations over Flower: each site runs its own ClientApp next to its data.

    eligibility.py which algorithms a real federation runs (from what each declares it needs);
                  the reference itself, `--data flower:HOST:PORT`, is data_adapters/references/flower_reference.py
    protocol.py   the messages between the server and the sites
    site.py       a site: its own rows, the simulation's local update (the per-site executor's `train_site`)
    server.py     the server: the simulation's server side of a round (`FederatedModels.aggregate`,
                  the algorithm's hooks), fed by the sites' replies, writing the run store
    apps.py       the Flower ServerApp and ClientApp (components of app/pyproject.toml)
    launch.py     `flwr run` against a SuperLink; a SuperLink and SuperNodes on this machine
    (application/flower_simulation.py: the same apps on Flower's simulation engine (Ray), for benchmarks)
    __main__.py   `python -m application.flower demo`
"""
