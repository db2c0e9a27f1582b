"""The Flower ServerApp and ClientApp (the components named in application/flower/app/pyproject.toml).

    server_app   records the run whose folder the run config names (`run-dir`, made by
                 `python -m fedcore run --data flower:...`, which launches this app)
    client_app   one per site, reading the data its SuperNode's node config names

`make_server_app` / `make_client_app` build the same apps around a run and a data loader given in
Python: Flower's simulation engine runs them on a federation already in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flwr.app import Context, Error, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from fedcore.errors import FedcoreError
from fedcore.federation import Federation
from application.flower import protocol, site
from application.flower.server import GridSites, serve
from fedcore.store import Run

# (context, run seed, the server's pooled standardisation or None) -> that site's federation
SiteLoader = Callable[[Context, int, "dict[int, tuple[float, float]] | None"], Federation]
SITE_ERROR = 1  # Error code of a reply whose site refused the message (the reason says why)


def make_server_app(run_for: Callable[[Context], Run]) -> ServerApp:
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        serve(GridSites(grid), run_for(context), context.run_id)

    return app


def make_client_app(load: SiteLoader) -> ClientApp:
    app = ClientApp()

    def handle(message: Message, context: Context) -> Message:
        try:
            spec = protocol.read_json(message.content[protocol.SPEC])
            federation = load(context, int(spec["config"]["seed"]), protocol.read_pooled(message.content))
            content = site.answer(message.metadata.message_type, federation, dict(context.node_config),
                                  context.state, message.content)
            return Message(content, reply_to=message)
        except FedcoreError as error:  # a message for the server, not a stack trace
            return Message(Error(SITE_ERROR, str(error)), reply_to=message)

    app.query(protocol.DESCRIBE.partition(".")[2])(handle)
    app.query(protocol.PROFILE_QUERY.partition(".")[2])(handle)
    app.train()(handle)
    app.evaluate()(handle)
    return app


def _run_from_config(context: Context) -> Run:
    folder = str(context.run_config.get("run-dir") or "")
    if not folder or not (Path(folder) / "spec.json").is_file():
        raise FedcoreError(f"run-dir {folder!r} is not a run folder; launch Flower runs with "
                           "`python -m fedcore run --data flower:SUPERLINK ...`, which creates the run first.")
    return Run(Path(folder))


server_app = make_server_app(_run_from_config)
client_app = make_client_app(lambda context, seed, pooled: site.load_site(dict(context.node_config), seed, pooled))
