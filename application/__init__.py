"""The application layer: what runs the engine on data — the command line (`cli`), background jobs
(`jobs`), the runner that turns a spec into a trained run (`runner`), real federations over Flower
(`flower`), the check-up's jobs (`checkup_jobs`) and the dashboard's data services (`datasets`).

The only layer that imports both `data_adapters` and the engine (`fedcore`); the dashboard calls it
and reads the run store. `python -m fedcore` is its command line (fedcore/__main__.py, the entry
point: it hands the command line the dashboard's HTML reports).
"""
