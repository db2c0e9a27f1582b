# Two commands: `make run` (set up and start the product) and `make test` (set up and run every test).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_ARGS ?= --algorithm ifedavg --data demo --rounds 200
FLOWER_DEMO_ARGS ?= --sites 8 --rounds 5 --local-epochs 10

export FLWR_TELEMETRY_ENABLED := 0
export FLWR_DISABLE_UPDATE_CHECK := 1

.PHONY: run cli-demo flower-demo test test-browser test-states test-processes test-journeys test-deployment evidence clean

$(VENV)/.runtime: requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

$(VENV)/.dev: $(VENV)/.runtime requirements-dev.txt
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

# The dashboard on http://localhost:8501, opening on the synthetic demo federation.
run: $(VENV)/.runtime
	$(BIN)/python -m dashboard.serve

# The same demo without a browser: iFedAvg on the demo federation, scores and caught shifts.
cli-demo: $(VENV)/.runtime
	$(BIN)/python -m fedcore run $(RUN_ARGS)

# The demo as a real Flower federation on this machine: a SuperLink and one SuperNode per demo
# hospital (separate processes on 127.0.0.1), iFedAvg for a few rounds, then everything is stopped.
flower-demo: $(VENV)/.runtime
	$(BIN)/python -m application.flower demo $(FLOWER_DEMO_ARGS)

# Two worker processes on 2 cores (README, *Tests*: the suite is CPU-bound, so a third is slower).
# The 25 slowest tests are listed at the end: the suite must stay within 10 minutes on 2 cores.
test: $(VENV)/.dev
	$(BIN)/python -m pytest -n 2 --durations=25 -m "not deployment and not journey and not states and not processes and not browser"

# The pages driven in Debian's Chromium (tests/test_browser*.py, the journeys apart): signing in, the
# pages, reports, uploads and the server's guard, screenshots at 1280 and 1920 px; about 500 CPU-seconds,
# apart from `make test` to keep it within 10 minutes on 2 cores. CI runs it.
test-browser: $(VENV)/.dev
	$(BIN)/python -m pytest -n 2 --durations=10 -m "browser and not journey"

# Every page and report rendered for runs and check-ups in every state (tests/test_every_state.py):
# about 150 CPU-seconds, apart from `make test` to keep it within 10 minutes on 2 cores. CI runs it.
test-states: $(VENV)/.dev
	$(BIN)/python -m pytest -n 2 -m states

# The job queue's worker processes and the run store's faults with real writers (tests/test_jobs.py,
# tests/test_store_faults.py): about 110 CPU-seconds, apart from `make test` for its 10 minutes. CI runs it.
test-processes: $(VENV)/.dev
	$(BIN)/python -m pytest -n 2 -m processes

# The browser journeys that train (files uploaded, mapped, trained, the result read): about 3
# CPU-minutes, apart from `make test` to keep it within 10 minutes on 2 cores. CI runs them after it.
test-journeys: $(VENV)/.dev
	$(BIN)/python -m pytest -n 2 -m journey

# The real Flower deployment on this machine (a SuperLink and a SuperNode per site, each its own
# process; Flower starts a process per message): a minute or two, so apart from `make test`.
# CI runs it after `make test`.
test-deployment: $(VENV)/.dev
	$(BIN)/python -m pytest -m deployment

# Long (hours on 2 cores; not part of `make test`): reproduce the papers' tables and measure how
# well the lenses find injected problems; writes benchmarks/RESULTS.md. Cached runs are reused.
evidence: $(VENV)/.dev
	$(BIN)/python benchmarks/evidence/run.py $(EVIDENCE_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache
